"""convoy's own trace and record formats read by pandas, as docs/TRACES.md
promises, from the example files the Rust tests also parse."""

import re
from pathlib import Path

import pytest

from convoy_lab.traces import TraceError, read_records, read_series

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "crates/convoy-link/tests/data/example_series.csv"


def test_example_series_reads_with_inline_comments():
    df = read_series(EXAMPLE)
    assert list(df.columns[:3]) == ["start_ms", "rate_kbps", "delay_ms"]
    assert df["start_ms"].tolist() == [0, 5000, 9000, 9800, 15000]
    assert df["up"].tolist() == [1, 1, 0, 1, 1]
    assert df["delay_ms"].iloc[3] == pytest.approx(60.5)
    assert df["ge_p_gb"].isna().sum() == 4


def test_every_csv_block_in_traces_md_reads(tmp_path):
    text = (REPO_ROOT / "docs/TRACES.md").read_text()
    blocks = re.findall(r"```csv\n(.*?)```", text, re.S)
    assert blocks, "docs/TRACES.md has csv examples"
    for i, block in enumerate(blocks):
        path = tmp_path / f"block_{i}.csv"
        path.write_text(block)
        assert len(read_series(path)) >= 2


def test_series_without_start_column_is_refused(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("rate_kbps,delay_ms\n100,5\n")
    with pytest.raises(TraceError, match="bad.csv:1: expected a start_"):
        read_series(path)


def test_records_read_as_documented(tmp_path):
    path = tmp_path / "records.csv"
    path.write_text(
        "t_ns,event,id,len,queue_delay_ns,reason\n"
        "1000000,enq,7,1500,,\n"
        "3400000,drop,8,1500,,loss\n"
        "22200000,dlv,7,1500,1200000,\n"
    )
    df = read_records(path)
    assert df["event"].tolist() == ["enq", "drop", "dlv"]
    assert df.loc[df.event == "dlv", "queue_delay_ns"].item() == 1200000

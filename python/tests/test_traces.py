import math
import re

import pytest

from convoy_lab.traces import TraceError, capacity_series, carry_time_s, read_mahimahi, summarize_mahimahi


def table_of_readme(traces_dir):
    """file -> (duration s, mean Mbit/s, rounding of that figure) as the shared
    traces' README states them."""
    rows = {}
    for line in (traces_dir / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*(\S+\.(?:up|down))\s*\|\s*(\d+) s\s*\|\s*([\d.]+) Mbit/s", line)
        if m:
            decimals = len(m.group(3).partition(".")[2])
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3)), 0.5 * 10**-decimals)
    return rows


def test_mean_capacity_matches_the_published_table(shared_traces):
    table = table_of_readme(shared_traces)
    assert len(table) == 6
    for name, (duration, mean, rounding) in table.items():
        summary = summarize_mahimahi(shared_traces / name)
        assert summary.duration_s == pytest.approx(duration, abs=0.5), name
        assert summary.mean_mbit_s == pytest.approx(mean, abs=rounding), name


def test_capacity_series_conserves_opportunities(shared_traces):
    path = shared_traces / "ATT-LTE-driving-2016.up"
    series = capacity_series(path, bin_ms=1000)
    total_bits = series["rate_mbit_s"].sum() * 1e6
    assert total_bits == pytest.approx(len(read_mahimahi(path)) * 1500 * 8)


@pytest.mark.parametrize(
    "content, expected",
    [
        ("", "expected at least one opportunity"),
        ("0\n0\n", "expected at least one opportunity"),
        ("1\nfive\n", ":2: expected a whole number"),
        ("5\n3\n", ":2: expected a time >= 5"),
    ],
)
def test_malformed_mahimahi_traces_name_file_and_line(tmp_path, content, expected):
    path = tmp_path / "bad.trace"
    path.write_text(content)
    with pytest.raises(TraceError, match=re.escape(expected)):
        read_mahimahi(path)


def test_carry_time_is_the_capacity_bound_around_an_outage(tmp_path):
    # One 1500-byte opportunity per ms (12 Mbit/s), repeating every second.
    trace = tmp_path / "flat"
    trace.write_text("".join(f"{ms}\n" for ms in range(1, 1001)))
    assert carry_time_s(trace, 0.0, 1_500_000) == pytest.approx(1.0, abs=0.002)
    # Starting half-way through the trace, across its repeat.
    assert carry_time_s(trace, 0.5, 3_000_000) == pytest.approx(2.0, abs=0.002)
    # An outage inside the span adds its length; one outside changes nothing.
    assert carry_time_s(trace, 0.0, 1_500_000, gap=(0.25, 0.75)) == pytest.approx(1.5, abs=0.002)
    assert carry_time_s(trace, 0.0, 1_500_000, gap=(5.0, 6.0)) == pytest.approx(1.0, abs=0.002)
    # More than the limit can carry: not a number, never a made-up bound.
    assert math.isnan(carry_time_s(trace, 0.0, 1e12, limit_s=10))

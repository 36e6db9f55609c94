import subprocess

import pytest

from convoy_lab import runner


def test_codec_benchmark_through_the_real_binary():
    try:
        runner.convoy_binary()
    except runner.ConvoyNotFound:
        pytest.fail("build convoy first: make test builds it before running pytest")
    report = runner.codec_benchmark(quick=True)
    assert {"machine", "kernels", "rlnc", "raptorq", "targets"} <= report.keys()
    assert len(report["rlnc"]) == 15


def test_errors_carry_convoys_message():
    with pytest.raises(subprocess.CalledProcessError) as err:
        runner.run_json("bench", "codec", "--budget-ms", "0")
    assert "budget" in err.value.stderr


def test_missing_binary_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("CONVOY_BIN", str(tmp_path / "nope"))
    with pytest.raises(runner.ConvoyNotFound):
        runner.convoy_binary()

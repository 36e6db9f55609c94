import os
import signal
import subprocess
import sys
import time

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(path, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    pytest.fail(f"{path} never written")


def test_emulator_run_past_its_time_is_ended(tmp_path):
    pidfile = tmp_path / "pid"
    run = runner.run_emulator(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"], timeout_s=0.5)
    assert run.timed_out and run.returncode is None
    assert not _alive(int(pidfile.read_text()))


def test_emulator_run_ends_with_its_caller(tmp_path):
    """A runner stopped by SIGINT or SIGTERM sent to it alone (not its
    process group) takes the emulator down with it instead of leaving it
    running beside the next run."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        pidfile = tmp_path / f"pid-{sig.name}"
        script = (
            "import signal, sys\n"
            "from convoy_lab import runner\n"
            # A shell's background job starts with SIGINT ignored, and
            # Python then installs no handler: `make test &` hung here.
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n"
            f"runner.run_emulator(['sh', '-c', 'echo $$ > {pidfile}; exec sleep 60'], timeout_s=60)\n"
        )
        caller = subprocess.Popen([sys.executable, "-c", script])
        child = int(_wait_for(pidfile))
        caller.send_signal(sig)
        assert caller.wait(timeout=20) != 0
        assert not _alive(child), f"the emulator outlived its caller's {sig.name}"

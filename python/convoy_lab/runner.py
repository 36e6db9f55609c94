"""Finding and running the `convoy` command.

Experiments call the real binary (never a Python re-implementation), so the
numbers they report are the ones users get.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


class ConvoyNotFound(RuntimeError):
    """No convoy binary: build it with `cargo build --release` or set CONVOY_BIN."""


def convoy_binary() -> Path:
    """The convoy command to run: $CONVOY_BIN, else this checkout's release
    build (in $CARGO_TARGET_DIR when that is set, as cargo puts it there),
    else the one on PATH."""
    env = os.environ.get("CONVOY_BIN")
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConvoyNotFound(f"CONVOY_BIN={env} is not a file")
        return path
    target_dir = os.environ.get("CARGO_TARGET_DIR")
    target = Path(target_dir) if target_dir else REPO_ROOT / "target"
    built = target / "release" / "convoy"
    if built.is_file():
        return built
    on_path = shutil.which("convoy")
    if on_path:
        return Path(on_path)
    raise ConvoyNotFound(
        "no convoy binary: run `cargo build --release -p convoy` or set CONVOY_BIN"
    )


def run_json(*args: str, timeout: float | None = None) -> dict:
    """Runs `convoy ARGS --json` and returns the parsed document; raises
    CalledProcessError with convoy's own error message on failure."""
    proc = subprocess.run(
        [str(convoy_binary()), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(
            proc.returncode, proc.args, proc.stdout, proc.stderr.strip()
        )
    return json.loads(proc.stdout)


@dataclass
class EmulatorRun:
    """How a `convoy emu` run ended: its exit status (None if it had to be
    killed), its stderr, and whether it ran past its time."""

    returncode: int | None
    stderr: str
    timed_out: bool


def run_emulator(command: list[str], timeout_s: float, env: dict | None = None) -> EmulatorRun:
    """Runs one `convoy emu` command to its end or `timeout_s`.

    On a timeout, and when this process is interrupted or killed by a signal
    Python sees (Ctrl-C sent to us alone, SIGTERM from a supervisor), the
    emulator gets SIGTERM, which ends both sides and removes its namespaces,
    and then SIGKILL if it has not ended in 10 s: a run stopped from outside
    must not leave a 300 s emulator running beside the next one."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
        return EmulatorRun(proc.returncode, stderr or "", timed_out=False)
    except subprocess.TimeoutExpired:
        return EmulatorRun(None, _stop(proc), timed_out=True)
    except BaseException:
        _stop(proc)
        raise


def _stop(proc: subprocess.Popen) -> str:
    """SIGTERM, then SIGKILL after 10 s; returns what the process wrote to stderr."""
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    return stderr or ""


def codec_benchmark(quick: bool = False) -> dict:
    """The table of `convoy bench codec` as a dict."""
    args = ["bench", "codec"] + (["--quick"] if quick else [])
    return run_json(*args)

"""Finding and running the `convoy` command.

Experiments call the real binary (never a Python re-implementation), so the
numbers they report are the ones users get.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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


def codec_benchmark(quick: bool = False) -> dict:
    """The table of `convoy bench codec` as a dict."""
    args = ["bench", "codec"] + (["--quick"] if quick else [])
    return run_json(*args)

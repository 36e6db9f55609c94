"""What a result was measured on: the date, the machine (CPU model, the
instruction-set flags convoy's speed depends on, cores, load) and the build
(`git describe --always --dirty`).

Written into every experiment's meta.json when it runs, so a figure carries
its own provenance, and printed at the top of docs/RESULTS.md. Figures from
a loaded, shared machine are not comparable with a quiet one's; the load
before and after each run is recorded for that reason."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from ..runner import REPO_ROOT

# The flags that pick convoy's code paths: the GF(2^8) kernels (SSSE3, AVX2,
# GFNI, AVX-512) and the AEAD (AES-GCM with AES-NI/VAES, else ChaCha20).
FLAGS = ["ssse3", "avx2", "avx512f", "gfni", "aes", "vaes", "neon", "asimd"]


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model") and model in ("", platform.machine(), platform.processor()):
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "model": model or "unknown",
        "flags": [f for f in FLAGS if f in flags],
        "missing_flags": [f for f in FLAGS if f not in flags and f not in ("neon", "asimd")],
        "cores": os.cpu_count(),
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def build(repo: Path = REPO_ROOT) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "describe", "--always", "--dirty"],
            capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def binary() -> dict | None:
    """The convoy binary the run used: `CONVOY_BIN` may point outside this
    checkout, so `build` alone would not say what ran."""
    from ..runner import ConvoyNotFound, convoy_binary

    try:
        path = convoy_binary()
    except ConvoyNotFound:
        return None
    try:
        version = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    built = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
    return {"path": str(path), "version": version, "built": built}


def stamp() -> dict:
    """Taken when a run starts; `finish` adds the load at its end."""
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "build": build(),
        "convoy": binary(),
        "cpu": cpu(),
        "load_start": load(),
    }


def finish(s: dict) -> dict:
    return {**s, "load_end": load()}


def describe(s: dict | None) -> str:
    """One line for a table's heading."""
    if not s:
        return "not recorded (these files predate stamps: run the command again)"
    c = s.get("cpu", {})
    flags = ", ".join(c.get("flags", [])) or "none of " + ", ".join(FLAGS)
    missing = ", ".join(c.get("missing_flags", []))
    loads = f"load {s['load_start'][0]:g}" + (f" → {s['load_end'][0]:g}" if s.get("load_end") else "")
    b = s.get("convoy") or {}
    binary_note = f" (convoy binary {b['path']}, built {b['built']})" if b.get("path") else ""
    return (
        f"{s.get('date', '?')}, build `{s.get('build', '?')}`{binary_note}, {c.get('model', '?')} "
        f"({c.get('cores', '?')} cores; {flags}{f'; no {missing}' if missing else ''}), {loads}"
    )


def short(s: dict | None) -> str:
    """The stamp in a few words, for a line under a table that links the full
    one. Without the build: README names no commit (docs/RESULTS.md does)."""
    if not s:
        return "unstamped"
    c = s.get("cpu", {})
    loads = f"load {s['load_start'][0]:g}" + (f" → {s['load_end'][0]:g}" if s.get("load_end") else "")
    return f"{s.get('date', '?')}, {c.get('model', '?')} × {c.get('cores', '?')}, {loads}"


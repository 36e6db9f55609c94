"""Finding and running SUMO's tools from the eclipse-sumo wheel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


class SumoError(RuntimeError):
    """A SUMO tool is missing or failed; the message says which and why."""


def sumo_home() -> Path:
    """SUMO_HOME of the installed eclipse-sumo wheel (or $SUMO_HOME)."""
    env = os.environ.get("SUMO_HOME")
    if env and (Path(env) / "bin").is_dir():
        return Path(env)
    try:
        import sumo  # the eclipse-sumo wheel
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise SumoError(
            "SUMO is not installed: run `make setup` (pip install eclipse-sumo libsumo)"
        ) from exc
    return Path(sumo.SUMO_HOME)


def _env() -> dict:
    env = dict(os.environ)
    # SUMO warns on every call when SUMO_HOME is unset and skips schema checks.
    env["SUMO_HOME"] = str(sumo_home())
    return env


def sumo_binary(name: str) -> Path:
    path = sumo_home() / "bin" / name
    if not path.is_file():
        raise SumoError(f"SUMO tool {name} not found in {path.parent}")
    return path


def sumo_tool(script: str) -> Path:
    path = sumo_home() / "tools" / script
    if not path.is_file():
        raise SumoError(f"SUMO script {script} not found in {path.parent}")
    return path


def run(args: list, what: str, cwd: Path | None = None) -> str:
    """Runs one SUMO program; raises SumoError with its last error line."""
    proc = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        check=False,
    )
    if proc.returncode != 0:
        lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
        errors = [l for l in lines if "rror" in l] or lines
        raise SumoError(f"{what} failed: {errors[-1] if errors else 'exit ' + str(proc.returncode)}")
    return proc.stdout


def run_tool(script: str, args: list, what: str, cwd: Path | None = None) -> str:
    return run([sys.executable, sumo_tool(script), *args], what, cwd)

"""Runs one command and writes what it cost: wall time and CPU time.

Every scheme's sender and receiver run under this wrapper inside `convoy
emu`'s namespaces, so CPU time is measured the same way for iperf-like TCP
senders and for the convoy binary, whatever each reports about itself.

    python -m convoy_lab.emu.measure --out FILE [--stdout FILE] [--wait-for FILE] -- CMD [ARGS]...

Standard library only: it starts inside the namespaces for every run, so it
must start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def write_atomically(path: Path, doc: dict) -> None:
    """Write then rename, so a reader polling for the file never sees half."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convoy_lab.emu.measure")
    parser.add_argument("--out", required=True, type=Path, help="JSON file for the cost")
    parser.add_argument("--stdout", type=Path, help="file for the command's standard output")
    parser.add_argument(
        "--wait-for",
        type=Path,
        help="after the command, wait (up to --wait-s) for this file: the other side's "
        "record, which convoy emu would otherwise cut short by ending it",
    )
    parser.add_argument("--wait-s", type=float, default=3.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("expected a command after --")

    start = time.monotonic()
    stdout = args.stdout.open("wb") if args.stdout else None
    try:
        proc = subprocess.run(command, stdout=stdout, check=False)
        status = proc.returncode
    except OSError as err:
        print(f"measure: cannot run {command[0]}: {err}", file=sys.stderr)
        status = 127
    finally:
        if stdout:
            stdout.close()
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    write_atomically(
        args.out,
        {
            "command": command,
            "exit": status,
            "wall_s": wall,
            "cpu_user_s": usage.ru_utime,
            "cpu_sys_s": usage.ru_stime,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "max_rss_kb": usage.ru_maxrss,
        },
    )
    if args.wait_for:
        deadline = time.monotonic() + args.wait_s
        while not args.wait_for.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return status


if __name__ == "__main__":
    sys.exit(main())

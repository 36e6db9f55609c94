"""`python -m convoy_lab.fleet demo | bench` (docs/SERVICE.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .demo import demo
from .bench import bench


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m convoy_lab.fleet", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="N vehicles from a SUMO drive through convoy agent into one server and its map")
    d.add_argument("--vehicles", type=int, default=5)
    d.add_argument("--seconds", type=int, default=60, help="how long the vehicles drive (real time)")
    d.add_argument("--out", type=Path, default=Path("results/fleet-demo"))
    d.add_argument("--keep-running", action="store_true", help="leave the server up after the screenshot until Ctrl-C")
    b = sub.add_parser("bench", help="measure the data service's targets with real processes")
    b.add_argument("--out", type=Path, default=Path("results/fleet-bench"))
    b.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "demo":
        return demo(a.vehicles, a.seconds, a.out, a.keep_running)
    return bench(a.out, a.json)


if __name__ == "__main__":
    sys.exit(main())

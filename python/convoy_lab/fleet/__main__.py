"""`python -m convoy_lab.fleet demo | bench | lte | scale` (docs/SERVICE.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .demo import demo
from .bench import bench
from . import lte, scale


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m convoy_lab.fleet", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="N vehicles from a SUMO drive through convoy agent into one server and its map")
    d.add_argument("--vehicles", type=int, default=5)
    d.add_argument("--seconds", type=int, default=60, help="how long the vehicles drive (real time)")
    d.add_argument("--out", type=Path, default=Path("results/fleet-demo"))
    d.add_argument("--keep-running", action="store_true",
                   help="leave the server up after the screenshot until Ctrl-C (with --loopback)")
    d.add_argument("--loopback", action="store_true",
                   help="agents and server on loopback instead of one emulated LTE link per vehicle "
                        "(the default, which needs root and the shared drive traces)")
    b = sub.add_parser("bench", help="measure the data service's targets with real processes")
    b.add_argument("--out", type=Path, default=Path("results/fleet-bench"))
    b.add_argument("--json", action="store_true")
    lte.add_parser(sub)
    scale.add_parser(sub)
    a = ap.parse_args(argv)
    if a.cmd == "demo":
        if not a.loopback and os.geteuid() != 0:
            print("fleet demo: the emulated LTE links need root (or use --loopback)", file=sys.stderr)
            return 2
        if a.keep_running and not a.loopback:
            print("fleet demo: --keep-running needs --loopback", file=sys.stderr)
            return 2
        return demo(a.vehicles, a.seconds, a.out, a.keep_running, lte=not a.loopback)
    if a.cmd == "lte":
        return lte.from_args(a)
    if a.cmd == "scale":
        return scale.from_args(a)
    return bench(a.out, a.json)


if __name__ == "__main__":
    sys.exit(main())

"""python -m convoy_lab.mobility: SUMO scenarios, VACaMobil runs and
VACaMobil's table from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from . import scenario
from ..report import stamp
from .sumo_tools import SumoError
from .table import render, vacamobil_table, write_results
from .vacamobil import VacaConfig, run_vacamobil, stderr_progress


def _vtypes(items: list) -> dict:
    out = {}
    for it in items or []:
        name, _, p = it.partition("=")
        try:
            out[name] = float(p)
        except ValueError:
            raise SumoError(f"--vtype expects TYPE=PROBABILITY, e.g. car=0.9, got {it!r}") from None
    return out


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m convoy_lab.mobility",
        description="Vehicle mobility on SUMO (eclipse-sumo/libsumo from PyPI): road networks, "
        "random route sets, VACaMobil's steady vehicle population, FCD output, and VACaMobil's table.",
        epilog="Typical flow: `grid -o g.net.xml`, `routes g.net.xml -o g.rou.xml`, "
        "`run g.net.xml g.rou.xml --mean 320 --sd 6 --fcd fcd.xml`, then "
        "`convoy trace from-mobility --fcd fcd.xml ...` for per-vehicle link traces.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("grid", help="Manhattan grid network (netgenerate)")
    g.add_argument("--number", type=int, default=25, help="junctions per side (default 25)")
    g.add_argument("--length", type=float, default=200.0, help="road length in metres (default 200)")
    g.add_argument("-o", "--output", type=Path, required=True)

    c = sub.add_parser("random-city", help="synthetic dense city (netgenerate --rand)")
    c.add_argument("--iterations", type=int, default=400, help="400 gives about 7 km2")
    c.add_argument("--seed", type=int, default=7)
    c.add_argument("-o", "--output", type=Path, required=True)

    o = sub.add_parser("osm", help="import an OpenStreetMap .osm file (netconvert, polyconvert)")
    o.add_argument("osm", type=Path)
    o.add_argument("-o", "--output", type=Path, required=True, help="network file to write")
    o.add_argument("--polys", type=Path, help="also write the buildings as SUMO polygons here")

    b = sub.add_parser("buildings", help="synthetic building blocks for a grid (SUMO polygons)")
    b.add_argument("--number", type=int, default=25)
    b.add_argument("--length", type=float, default=200.0)
    b.add_argument("--setback", type=float, default=12.0, help="metres from street centre to wall")
    b.add_argument("-o", "--output", type=Path, required=True)

    r = sub.add_parser("routes", help="random route set (randomTrips.py + duarouter)")
    r.add_argument("net", type=Path)
    r.add_argument("-o", "--output", type=Path, required=True)
    r.add_argument("--count", type=int, default=800)
    r.add_argument("--seed", type=int, default=1)

    v = sub.add_parser("run", help="one VACaMobil run, optionally writing FCD")
    v.add_argument("net", type=Path)
    v.add_argument("routes", type=Path, help="route set from `routes`")
    v.add_argument("--mean", type=float, required=True, help="target mean number of vehicles")
    v.add_argument("--sd", type=float, required=True, help="target standard deviation")
    v.add_argument("--duration", type=int, default=600, help="seconds of simulated time")
    v.add_argument("--warmup", type=int, default=0, help="seconds left out of the statistics")
    v.add_argument("--vtype", action="append", help="TYPE=PROBABILITY (car, bus, truck); repeatable")
    v.add_argument("--fcd", type=Path, help="write SUMO FCD (vehicle positions per second) here")
    v.add_argument("--seed", type=int, default=1)
    v.add_argument("--json", action="store_true")

    t = sub.add_parser(
        "vacamobil-table",
        help="reproduce VACaMobil's table (Manhattan 320±6 and a dense city 370±8, against duarouter)",
        description="Builds both networks, a random route set for each, and runs SUMO twice per "
        "scenario: under VACaMobil, and with duarouter's one-vehicle-a-second demand alone. "
        "Prints mean and sd of the vehicles on the map beside the paper's Table 6.2. The default "
        "(1500 s, 300 s warm-up) takes a few minutes on 2 cores; --full runs 3600 s.",
    )
    t.add_argument("--duration", type=int, default=1500, help="simulated seconds per run (default 1500)")
    t.add_argument("--warmup", type=int, default=300, help="seconds before measuring (default 300)")
    t.add_argument("--full", action="store_true", help="3600 s runs with 600 s warm-up")
    t.add_argument("--scenario", action="append", choices=["manhattan", "dense-city"])
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--workdir", type=Path, help="keep networks and routes here (default: a temporary directory)")
    t.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    t.add_argument("--out", type=Path, help="also write OUT/vacamobil/runs.csv and meta.json, where the "
                   "papers table (python -m convoy_lab.experiments results --out OUT) reads them")

    a = ap.parse_args(argv)
    try:
        if a.cmd == "grid":
            print(scenario.grid_network(a.output, a.number, a.length))
        elif a.cmd == "random-city":
            print(scenario.random_city_network(a.output, a.iterations, a.seed))
        elif a.cmd == "osm":
            net, polys = scenario.import_osm(a.osm, a.output, a.polys)
            print(net if polys is None else f"{net}\n{polys}")
        elif a.cmd == "buildings":
            print(scenario.grid_buildings(a.output, a.number, a.length, a.setback))
        elif a.cmd == "routes":
            if not a.net.is_file():
                raise SumoError(f"{a.net}: no such network file")
            print(scenario.random_routes(a.net, a.output, a.count, a.seed))
        elif a.cmd == "run":
            cfg = VacaConfig(a.mean, a.sd, _vtypes(a.vtype), a.seed)
            stats = run_vacamobil(a.net, a.routes, cfg, a.duration, a.warmup, a.fcd, stderr_progress)
            d = stats.as_dict()
            if a.json:
                print(json.dumps(d))
            else:
                print(f"vehicles on the map: mean {d['mean']:.2f}, sd {d['sd']:.2f} "
                      f"(target {a.mean:g} ± {a.sd:g}), {d['inserted']} inserted"
                      + (f", FCD in {a.fcd}" if a.fcd else ""))
        elif a.cmd == "vacamobil-table":
            duration, warmup = (3600, 600) if a.full else (a.duration, a.warmup)
            if warmup >= duration:
                raise SumoError(f"--warmup ({warmup}) must be shorter than --duration ({duration})")
            taken = stamp.stamp()
            with tempfile.TemporaryDirectory(prefix="vacamobil-") as tmp:
                table = vacamobil_table(
                    a.workdir or Path(tmp), duration, warmup, a.seed,
                    scenarios=a.scenario, progress=stderr_progress,
                )
            if a.out:
                command = "python -m convoy_lab.mobility " + " ".join(argv if argv is not None else sys.argv[1:])
                write_results(table, a.out, command, stamp.finish(taken))
            print(json.dumps(table, indent=2) if a.json else render(table))
    except SumoError as e:
        print(f"convoy_lab.mobility: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

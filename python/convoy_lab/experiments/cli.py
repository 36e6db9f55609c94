"""One command per experiment: convoy beside kernel TCP over `convoy emu`.

    python -m convoy_lab.experiments list
    python -m convoy_lab.experiments run NAME [NAME...] [--quick] [--seeds N] [--schemes A,B] [--out results]
    python -m convoy_lab.experiments run cellular [--trace FILE]... [--delay MS] [--loss P,P] [--queue PKTS]
                                                  [--duration S] [--offsets S,S,S]
    python -m convoy_lab.experiments demo        # the short default subset, then the report
    python -m convoy_lab.experiments reproduce [--only A,B] [--skip C]   # every experiment at full length
    python -m convoy_lab.experiments report      # rebuild results/report.html from the CSVs
    python -m convoy_lab.experiments results     # docs/RESULTS.md and README's headline table from them
    python -m convoy_lab.experiments run faults [--uploads 100] [--quick]   # the fault campaign (convoy_lab.experiments.faults)
    python -m convoy_lab.experiments run smart-ap|background [--quick] [--scale F] [--only KIND]
    python -m convoy_lab.experiments run mp-aggregate|mp-wifi-dies|mp-drive|mp-capprobe [--quick] [--schemes A,B]
    python -m convoy_lab.experiments run incumbents [--quick] [--trace FILE]... [--loss 0,2] [--schemes convoy,mqtt-s3,https-put]

Each run prints progress on stderr, then the paper's figures beside ours and
a goodput table on stdout (`--json`: one JSON document instead), and writes
OUT/NAME/runs.csv, OUT/NAME/meta.json and OUT/report.html.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from . import catalog, cellular, fleet_sim as fleet_experiments, incumbents, multipath as multipath_exp, reproduce, scheduled
from ..analysis import cellular as cellular_analysis
from ..report import html as report
from .catalog import DEMO, EXPERIMENTS, ExperimentError, get_experiment
from .parts import Part, run_fields
from ..emu.run import EmulatorUnavailable, check_emulator
from ..runner import REPO_ROOT, ConvoyNotFound, convoy_binary
from ..emu.schemes import SCHEMES, SchemeError, get_scheme
from ..emu.sweep import kept_runs, run_sweep
from ..report import stamp


def _clean(value):
    """NaN is not JSON: null instead."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def run_experiment(name: str, quick: bool, seeds: int, out: Path, schemes: list[str] | None, keep_records: bool,
                   resume: bool = False) -> dict:
    e = get_experiment(name)
    catalog.check_inputs(e, quick)
    chosen = [get_scheme(s) for s in (schemes or e.schemes)]
    transfer = e.quick_transfer if quick else e.transfer
    started, taken = time.time(), stamp.stamp()
    directory = out / e.name
    directory.mkdir(parents=True, exist_ok=True)
    part = Part(directory, resume, {"quick": quick, "transfer": transfer.describe()},
                kept_runs(directory / "runs.csv") if resume else 0)

    def meta_now(finished: bool, skipped: dict) -> dict:
        return {
            "experiment": e.name,
            "quick": quick,
            "seeds": list(range(1, seeds + 1)),
            "schemes": [s.name for s in chosen],
            "skipped": skipped,
            "transfer": transfer.describe(),
            "transfer_s": transfer.seconds,
            "transfer_bytes": transfer.bytes,
            **run_fields(out, started, taken, finished),
        }

    # Written before the first run too: a sweep stopped part way has its stamp.
    part.write(meta_now(False, {}))
    result = run_sweep(e.name, chosen, e.scenarios(quick), transfer, list(range(1, seeds + 1)), directory,
                       keep_records=keep_records, resume=resume)
    meta = part.finish(meta_now(True, result.skipped), result.ran)
    df = result.rows
    claims = e.claims(df) if not df.empty else []
    return {"experiment": e, "rows": df, "meta": meta, "claims": claims}


def all_names() -> list[str]:
    return [*EXPERIMENTS, cellular.NAME]


def check_name(name: str) -> None:
    if name != cellular.NAME and name not in EXPERIMENTS:
        raise ExperimentError(f"unknown experiment {name!r}; valid experiments: {', '.join(all_names())}")


def run_cellular(s: cellular.Settings, out: Path, keep_records: bool, resume: bool = False) -> dict:
    rows, meta = cellular.run(s, out, keep_records=keep_records, resume=resume)
    return {"experiment": None, "name": cellular.NAME, "rows": rows, "meta": meta,
            "checks": cellular_analysis.summary_checks(rows)}


def print_result(res: dict, stream=None) -> None:
    stream = stream or sys.stdout
    if res["experiment"] is None:  # the cellular grid
        print(f"\n== {cellular.NAME}: {cellular.TITLE}", file=stream)
        print(cellular_analysis.text_report(res["rows"], res["meta"], report.text_table), file=stream)
        return
    e, df, meta = res["experiment"], res["rows"], res["meta"]
    print(f"\n== {e.name}: {e.title}", file=stream)
    print(f"   {e.conditions}; {meta['transfer']} per run, seeds {meta['seeds']}", file=stream)
    for scheme, reason in meta["skipped"].items():
        print(f"   not run: {scheme}: {reason}", file=stream)
    if res["claims"]:
        print(f"\npaper ({e.source}) beside ours:\n", file=stream)
        print(report.claims_text(res["claims"]), file=stream)
    print("", file=stream)
    print(report.matrix_text(e, df), file=stream)


def as_json(results: list[dict], report_path: Path | None) -> dict:
    return {
        "report": str(report_path) if report_path else None,
        "experiments": [
            {
                "name": r["experiment"].name if r["experiment"] else r["name"],
                "meta": r["meta"],
                "claims": [c.__dict__ for c in r.get("claims", [])],
                **(
                    {
                        "targets": _clean_all(r["checks"]),
                        "target_points": _clean_all(cellular_analysis.point_checks(r["rows"]).to_dict("records")),
                    }
                    if "checks" in r
                    else {}
                ),
                "rows": [{k: _clean(v) for k, v in row.items()} for row in r["rows"].to_dict("records")],
            }
            for r in results
        ],
    }


def _clean_all(rows: list[dict]) -> list[dict]:
    return [{k: _clean(v) for k, v in row.items()} for row in rows]


def _numbers(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated experiment names")
    return names


def _seeds(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("--seeds must be at least 1")
    return n


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m convoy_lab.experiments", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, seeds_default=1):
        sp.add_argument("--out", type=Path, default=Path("results"), help="results directory (default: results)")
        sp.add_argument("--seeds", type=_seeds, default=seeds_default, help="runs per point, seeds 1..N")
        sp.add_argument("--json", action="store_true", help="one JSON document on stdout instead of tables")
        sp.add_argument("--keep-records", action="store_true", help="keep each run's per-packet link records")

    ls = sub.add_parser("list", help="the experiments and schemes")
    ls.add_argument("--json", action="store_true")
    run = sub.add_parser("run", help="run experiments by name")
    run.add_argument("names", nargs="+", metavar="NAME")
    run.add_argument("--quick", action="store_true", help="the demo's shorter settings")
    run.add_argument("--schemes", help=f"comma-separated subset of: {', '.join(SCHEMES)}; for the mp-* "
                     "experiments, of: mptcp-fullmesh, mptcp-backup, tcp-bbr-wifi, tcp-bbr-lte, convoy-wifi, "
                     "convoy-lte, convoy-mp, convoy-mp-backup")
    grid = run.add_argument_group(
        "cellular only", "override the cellular experiment's defaults (docs/EXPERIMENTS.md, `cellular`); "
        "incumbents takes --trace and --loss too"
    )
    grid.add_argument("--trace", type=Path, action="append", metavar="FILE",
                      help="a Mahimahi or convoy time-series (.csv) trace carrying the data, instead of the shared "
                      "ones; repeatable. Feedback rides its twin (X.up <-> X.down) if that exists, else the same trace")
    grid.add_argument("--delay", type=float, metavar="MS", help="one-way propagation delay each way (default 20)")
    grid.add_argument("--loss", type=_numbers, metavar="P,P", help="added Bernoulli loss settings on the data direction, "
                      "in %%, one grid each (default 0,2)")
    grid.add_argument("--queue", type=int, metavar="PKTS", help="drop-tail queue limit in packets (default 200)")
    grid.add_argument("--duration", type=float, metavar="S", help="seconds per run (default 60)")
    grid.add_argument("--offsets", type=_numbers, metavar="S,S",
                      help="seconds into the traces where runs start (default: 0, 1/3 and 2/3 of each trace)")
    run.add_argument("--uploads", type=_seeds, default=100, help="faults: how many uploads (default 100)")
    run.add_argument("--engine", choices=["local", "dask", "ray"], default="local",
                     help="fleet experiments: where their sweep runs (default: this machine's cores)")
    run.add_argument("--workers", type=int, help="fleet experiments: sweep workers")
    run.add_argument("--scale", type=_numbers, metavar="F[,F]",
                     help="cellular: run the grid on twins of the traces at these capacity factors (convoy trace "
                     "scale: 0.25,0.5,1 runs each trace at a quarter, half and full rate, bursts and gaps kept); "
                     "smart-ap, background: one factor multiplying the schedule's times (0.5: half length)")
    run.add_argument("--only", help="smart-ap, background: only the cells matching these comma-separated tokens; "
                     "mp-*: only these comma-separated cases (mp-drive --only drive-cross)")
    run.add_argument("--resume", action="store_true",
                     help="go on from where an earlier run into the same --out stopped: the runs its runs.csv "
                     "holds with status ok are kept, the rest run (the emulator's sweeps, cellular, smart-ap, "
                     "background); meta.json names each part's build")
    run.add_argument("--remeasure", action="store_true",
                     help="smart-ap, background, mp-*, incumbents: recompute the figures from the kept run "
                     "directories, run nothing")
    common(run)
    common(sub.add_parser("demo", help=f"the short default subset ({', '.join(DEMO)}), then the report"))
    rp = sub.add_parser("reproduce", help="every experiment at full length, one after another (several hours)",
                        description="Runs `run NAME --seeds N --out OUT` for every experiment `list` shows, the "
                        "fleet simulator's and VACaMobil's table included, so that the papers table of "
                        "`results` has every row measured. A failed experiment is reported and the rest go on.")
    rp.add_argument("--out", type=Path, default=Path("results"), help="results directory (default: results)")
    rp.add_argument("--seeds", type=_seeds, default=1, help="runs per point, seeds 1..N")
    rp.add_argument("--only", type=_names, metavar="NAME,NAME", help="run only these (in their usual order)")
    rp.add_argument("--skip", type=_names, metavar="NAME,NAME", help="run all but these")
    rp.add_argument("--keep", type=Path, metavar="DIR",
                    help="copy each finished experiment's runs.csv and meta.json into DIR/NAME (make reproduce: "
                    "the repository's reproduced/), so that runs in parts add up to one report: "
                    "`results --out DIR`")
    rp.add_argument("--resume", action="store_true",
                    help=f"the experiments that run in parts ({', '.join(reproduce.RESUMABLE)}) go on from "
                    "their earlier part (OUT's, else --keep's) and run only the runs it is missing; stop one "
                    "with Ctrl-C and its finished runs are kept")
    rep = sub.add_parser("report", help="rebuild OUT/report.html from the results")
    rep.add_argument("--out", type=Path, default=Path("results"))
    res = sub.add_parser("results", help="regenerate docs/RESULTS.md and README's headline table from OUT's files")
    res.add_argument("--out", type=Path, default=Path("results"), help="results directory (default: results)")
    res.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "RESULTS.md", help="default: docs/RESULTS.md")
    res.add_argument("--readme", type=Path, default=REPO_ROOT / "README.md",
                     help="whose generated block to replace (default: README.md)")
    res.add_argument("--no-readme", action="store_true", help="leave README alone")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list(args.json)
        if args.command == "report":
            path = report.write_report(args.out)
            print(f"report: {path.resolve()}")
            return 0
        if args.command == "results":
            from ..report import results

            try:
                path = results.write(args.out, args.doc, None if args.no_readme else args.readme)
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            print(f"results: {path.resolve()}" + ("" if args.no_readme else f"; headline table in {args.readme}"))
            return 0
        if args.command == "reproduce":
            from ..mobility.__main__ import main as mobility_main

            return reproduce.run(args.out, args.seeds, args.only, args.skip, main, mobility_main, args.keep,
                                 args.resume)
        overrides = {}
        if args.command == "run" and args.resume:
            whole = [n for n in args.names if n not in reproduce.RESUMABLE]
            if whole:
                raise ExperimentError(f"--resume: {', '.join(whole)} run whole, not in parts; resumable: "
                                      f"{', '.join(reproduce.RESUMABLE)}")
        if args.command == "run" and args.names == ["faults"]:
            return _faults(args)
        if args.command == "run" and args.names == [incumbents.NAME]:
            return _incumbents(args)
        if args.command == "run":
            names, quick = args.names, args.quick
            schemes = [s.strip() for s in args.schemes.split(",")] if args.schemes else None
            overrides = {k: getattr(args, k) for k in ("trace", "delay", "loss", "queue", "duration", "offsets")}
            given = [f"--{k}" for k, v in overrides.items() if v is not None]
            if given and cellular.NAME not in names:
                raise ExperimentError(f"{', '.join(given)}: only for the {cellular.NAME} experiment")
            # Fleet experiments (convoy sim, no emulator) run on their own.
            fleet = [n for n in names if n in fleet_experiments.FLEET]
            names = [n for n in names if n not in fleet_experiments.FLEET]
            if fleet:
                return _run_fleet(fleet, quick, args.seeds, args.out, args.json, args.engine, args.workers, names)
        else:
            names, quick, schemes = DEMO, True, None
        sched = [n for n in names if n in scheduled.names()] if args.command == "run" else []
        multi = [n for n in names if n in multipath_exp.TITLES] if args.command == "run" else []
        names = [n for n in names if n not in sched and n not in multi]
        if multi and [n for n in names if n != cellular.NAME] and schemes:
            raise ExperimentError("--schemes: the mp-* experiments have their own schemes; run them apart")
        scales = getattr(args, "scale", None) if args.command == "run" else None
        if scales is not None:
            if any(not 0 < f <= 10 for f in scales):
                raise ExperimentError("--scale: each factor must be in (0, 10]")
            if sched and len(scales) != 1:
                raise ExperimentError("--scale: smart-ap and background take one factor")
            if not sched and cellular.NAME not in names:
                raise ExperimentError("--scale: only for the cellular, smart-ap and background experiments")
        # Every name, scheme and trace is checked before the first run starts.
        for name in names:
            check_name(name)
            if name != cellular.NAME:
                catalog.check_inputs(get_experiment(name), quick)
        for s in schemes or []:
            if multi and not names:
                from ..emu.multipath import get as get_mp_scheme

                get_mp_scheme(s)
            else:
                get_scheme(s)
        grid = None
        if cellular.NAME in names:
            grid = cellular.settings_from(
                traces=overrides.get("trace"), quick=quick, schemes=schemes, delay_ms=overrides.get("delay"),
                losses_pct=overrides.get("loss"), queue_packets=overrides.get("queue"),
                duration_s=overrides.get("duration"), offsets_s=overrides.get("offsets"), seeds=args.seeds,
                scales=scales, scaled_dir=args.out / "cellular-traces",
            )
        convoy_binary()
        check_emulator()
        args.out.mkdir(parents=True, exist_ok=True)
        resume = getattr(args, "resume", False)
        results = [
            run_cellular(grid, args.out, args.keep_records, resume)
            if n == cellular.NAME
            else run_experiment(n, quick, args.seeds, args.out, schemes, args.keep_records, resume)
            for n in names
        ]
        if getattr(args, "remeasure", False):
            done = {n: scheduled.remeasure(n, args.out) for n in sched}
        else:
            done = {n: scheduled.run(n, quick, args.out, scales[0] if scales else None, args.only, resume=resume)
                    for n in sched}
        if getattr(args, "remeasure", False):
            mp_done = {n: multipath_exp.remeasure(n, args.out) for n in multi}
        else:
            mp_done = {n: multipath_exp.run(n, quick, args.out, schemes, list(range(1, args.seeds + 1)), args.only)
                       for n in multi}
        path = report.write_report(args.out)
    except (ExperimentError, SchemeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (ConvoyNotFound, EmulatorUnavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: runs finished so far are in their runs.csv", file=sys.stderr)
        return 130
    if args.json:
        doc = as_json(results, path.resolve())
        doc["experiments"] += [{"name": n, "rows": [{k: _clean(v) for k, v in r.items()} for r in df.to_dict("records")]}
                               for n, df in {**done, **mp_done}.items()]
        print(json.dumps(doc, indent=1))
    else:
        for res in results:
            print_result(res)
        for n, df in done.items():
            scheduled.print_result(n, df)
        from ..report import multipath as multipath_plots

        for n, df in mp_done.items():
            multipath_plots.print_result(n, df)
        print(f"\nreport: {path.resolve()}")
    return 0


def _faults(args) -> int:
    """The fault campaign (convoy_lab.experiments.faults): not a sweep of schemes."""
    from . import faults

    convoy_binary()
    check_emulator()
    args.out.mkdir(parents=True, exist_ok=True)
    result = faults.run_campaign(args.uploads, args.seeds, args.quick, args.out)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        faults.print_summary(result)
    s = result["summary"]
    return 0 if s["bytes_lost"] == 0 and s["bytes_corrupted"] == 0 and s["stored"] == s["uploads"] else 1


def _incumbents(args) -> int:
    """convoy beside MQTT + S3 and HTTPS PUT (convoy_lab.experiments.incumbents):
    stacks, not schemes of one sender, so a run of its own."""
    from ..report import incumbents as incumbents_report

    stacks = [s.strip() for s in args.schemes.split(",")] if args.schemes else None
    if args.remeasure:
        df, meta = incumbents.remeasure(args.out)
    else:
        s = incumbents.settings_from(args.trace, args.loss, stacks, args.quick)
        convoy_binary()
        check_emulator()
        args.out.mkdir(parents=True, exist_ok=True)
        df, meta = incumbents.run(s, args.out)
    path = report.write_report(args.out)
    if args.json:
        print(json.dumps({"report": str(path.resolve()), **incumbents_report.as_json(df, meta)}, indent=1))
    else:
        incumbents_report.print_result(df, meta)
        print(f"\nreport: {path.resolve()}")
    return 0 if (df["status"] == "ok").all() else 1


def _run_fleet(fleet: list[str], quick: bool, seeds: int, out: Path, as_json_doc: bool, engine: str,
               workers: int | None, rest: list[str]) -> int:
    """Fleet experiments: each a `convoy sim sweep`, then the thesis's figures beside ours."""
    from ..sim import SweepError
    from ..mobility import SumoError
    from . import channel_models

    if rest:
        print(f"error: run fleet experiments ({', '.join(fleet)}) apart from emulator ones ({', '.join(rest)})",
              file=sys.stderr)
        return 2
    try:
        convoy_binary()
        out.mkdir(parents=True, exist_ok=True)
        results = []
        for n in fleet:
            print(f"{n}: running (progress of the sweep on stderr)", file=sys.stderr)
            results.append(fleet_experiments.run(n, quick, seeds, out, engine, workers))
    except (SweepError, SumoError, ConvoyNotFound, channel_models.ModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished runs are under their experiment's runs/", file=sys.stderr)
        return 130
    if as_json_doc:
        doc = {"experiments": [{"name": r["experiment"].name, "meta": r["meta"],
                                "claims": [c.__dict__ for c in r["claims"]],
                                "rows": [{k: _clean(v) for k, v in row.items()} for row in r["df"].to_dict("records")]}
                               for r in results]}
        print(json.dumps(doc, indent=1, default=str))
    else:
        for r in results:
            fleet_experiments.print_result(r)
    return 0


def _list(as_json_doc: bool) -> int:
    if as_json_doc:
        doc = {
            "experiments": {
                n: {"title": e.title, "conditions": e.conditions, "schemes": e.schemes, "demo": n in DEMO}
                for n, e in EXPERIMENTS.items()
            }
            | {
                cellular.NAME: {
                    "title": cellular.TITLE,
                    "conditions": cellular.Settings(directions=[]).describe(),
                    "schemes": cellular.SCHEMES_DEFAULT,
                    "demo": cellular.NAME in DEMO,
                }
            }
            | {n: {"title": t, "demo": False} for n, t in scheduled.TITLES.items()}
            | {n: {"title": t, "demo": False} for n, t in multipath_exp.TITLES.items()}
            | {incumbents.NAME: {"title": incumbents.TITLE, "demo": False,
                                 "stacks": incumbents.STACK_ORDER}},
            "fleet_experiments": {n: {"title": e.title, "conditions": e.conditions} for n, e in fleet_experiments.FLEET.items()},
            "schemes": {n: s.description for n, s in SCHEMES.items()},
        }
        print(json.dumps(doc, indent=1))
        return 0
    print("experiments (run NAME; * = part of the demo):")
    for n, e in EXPERIMENTS.items():
        print(f"  {n:<15}{'*' if n in DEMO else ' '} {e.title}")
    print(f"  {cellular.NAME:<15}{'*' if cellular.NAME in DEMO else ' '} {cellular.TITLE}")
    for n, title in scheduled.TITLES.items():
        print(f"  {n:<15}  {title}")
    for n, title in multipath_exp.TITLES.items():
        print(f"  {n:<15}  {title}")
    print(f"  {'faults':<15}  uploads under seeded random faults (kill -9, outages, loss, reordering,")
    print(f"  {'':<15}  duplication, corruption, a full disk), re-run until complete, checked byte for byte")
    print(f"  {incumbents.NAME:<15}  convoy against MQTT + S3 multipart and HTTPS PUT per file (real mosquitto,")
    print(f"  {'':<15}  versitygw, paho-mqtt, boto3), one vehicle's workload over a drive trace and an outage")
    print("fleet experiments (convoy sim; run NAME [--quick] [--seeds N] [--engine local|dask|ray]):")
    for n, e in fleet_experiments.FLEET.items():
        print(f"  {n:<15}  {e.title}")
    print("schemes:")
    for n, s in SCHEMES.items():
        reason = s.unavailable()
        print(f"  {n:<16} {s.description}{f'  [unavailable: {reason}]' if reason else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

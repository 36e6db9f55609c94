"""Fleet sweeps: `convoy sim sweep` on this machine's cores, or the same
runs on an existing distributed engine (Dask, or Ray) when one machine is
not enough. We schedule nothing ourselves: `convoy sim sweep --list` names
every run (its `convoy sim fleet` arguments and output directory), the
engine runs them wherever it likes, and `convoy sim sweep --collect` builds
runs.csv from their summaries in (point, seed) order, so runs.csv is the
same bytes whichever engine ran the runs and with how many workers.

    python -m convoy_lab.sim SCENARIO --seeds 1-10 --param KEY=A,B --out DIR
        [--engine local|dask|ray] [--workers N] [--address ADDR]

`--address` joins an existing cluster (a Dask scheduler `tcp://host:8786`,
or a Ray address); without it a local cluster of `--workers` processes is
started for the sweep. For Slurm, run each line of `convoy sim sweep ...
--list` as one array task, then `--collect`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .runner import convoy_binary

ENGINES = ("local", "dask", "ray")


class SweepError(RuntimeError):
    """A run or the engine failed; the message says which."""


def _sweep_args(scenario: Path, seeds: str, params: list[str], sets: list[str], out: Path) -> list[str]:
    args = ["sim", "sweep", str(scenario), "--seeds", seeds, "--out", str(out)]
    for p in params:
        args += ["--param", p]
    for s in sets:
        args += ["--set", s]
    return args


def run_one(convoy: str, argv: list[str]) -> str:
    """One `convoy sim fleet` run (what an engine's worker executes)."""
    proc = subprocess.run([convoy, *argv], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SweepError(f"convoy {' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def list_runs(scenario: Path, seeds: str, params: list[str], sets: list[str], out: Path) -> list[dict]:
    convoy = str(convoy_binary())
    proc = subprocess.run([convoy, *_sweep_args(scenario, seeds, params, sets, out), "--list"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SweepError(proc.stderr.strip())
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def sweep(
    scenario: Path,
    seeds: str,
    params: list[str],
    out: Path,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    sets: list[str] | None = None,
) -> Path:
    """Runs the sweep on `engine`; returns OUT/runs.csv."""
    sets = sets or []
    convoy = str(convoy_binary())
    base = _sweep_args(scenario, seeds, params, sets, out)
    if engine == "local":
        cmd = [convoy, *base] + (["--jobs", str(workers)] if workers else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SweepError(proc.stderr.strip())
        return out / "runs.csv"
    runs = list_runs(scenario, seeds, params, sets, out)
    argvs = [r["argv"] for r in runs]
    if engine == "dask":
        _on_dask(convoy, argvs, workers or 2, address)
    elif engine == "ray":
        _on_ray(convoy, argvs, workers or 2, address)
    else:
        raise SweepError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    proc = subprocess.run([convoy, *base, "--collect"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SweepError(proc.stderr.strip())
    return out / "runs.csv"


def _on_dask(convoy: str, argvs: list[list[str]], workers: int, address: str | None) -> None:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise SweepError("Dask is not installed: pip install 'dask[distributed]'") from exc
    cluster = None
    if address:
        client = Client(address)
    else:
        # Processes, one thread each: every run is single-threaded.
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        futures = client.map(run_one, [convoy] * len(argvs), argvs, pure=False)
        client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _on_ray(convoy: str, argvs: list[list[str]], workers: int, address: str | None) -> None:  # pragma: no cover - optional
    try:
        import ray
    except ImportError as exc:
        raise SweepError("Ray is not installed: pip install ray") from exc
    ray.init(address=address) if address else ray.init(num_cpus=workers, include_dashboard=False)
    try:
        task = ray.remote(run_one)
        ray.get([task.remote(convoy, a) for a in argvs])
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m convoy_lab.sim", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", type=Path)
    p.add_argument("--seeds", default="1")
    p.add_argument("--param", action="append", default=[], metavar="KEY=V1,V2")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--engine", choices=ENGINES, default="local")
    p.add_argument("--workers", type=int)
    p.add_argument("--address", help="an existing cluster to join")
    a = p.parse_args(argv)
    try:
        path = sweep(a.scenario, a.seeds, a.param, a.out, a.engine, a.workers, a.address, a.set)
    except SweepError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

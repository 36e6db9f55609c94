"""VACaMobil's table (baguena-2017 Table 6.2): the number of vehicles on
the map under VACaMobil and under duarouter's demand alone, on the 25 × 25
Manhattan grid (target 320 ± 6) and on a denser city (target 370 ± 8)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .scenario import duarouter_demand, grid_network, random_city_network, random_routes
from .vacamobil import VacaConfig, run_duarouter, run_vacamobil

# Table 6.2 of the thesis: (mean, sd) per tool and scenario.
PAPER = {
    "manhattan": {"duarouter": (313.767, 58.8271), "vacamobil": (319.349, 6.14267)},
    "dense-city": {"duarouter": (880.546, 465.716), "vacamobil": (369.691, 7.84640)},
}


@dataclass
class TableScenario:
    name: str
    description: str
    target_mean: float
    target_sd: float
    build_net: Callable[[Path], Path]


SCENARIOS = [
    TableScenario(
        "manhattan",
        "25 x 25 grid, 200 m roads (23 km2)",
        320,
        6,
        lambda out: grid_network(out, 25, 200.0),
    ),
    TableScenario(
        "dense-city",
        "synthetic random city, 60-160 m streets (~7 km2; paper: Milan 7 km2 OSM)",
        370,
        8,
        lambda out: random_city_network(out, iterations=400, seed=7),
    ),
]


def vacamobil_table(
    workdir: Path,
    duration_s: int,
    warmup_s: int,
    seed: int = 1,
    route_count: int = 800,
    scenarios: list | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Runs both tools on every scenario and returns the table as a dict."""
    say = progress or (lambda _m: None)
    rows = []
    for sc in SCENARIOS:
        if scenarios and sc.name not in scenarios:
            continue
        d = workdir / sc.name
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        say(f"{sc.name}: building the network")
        net = sc.build_net(d / "net.xml")
        say(f"{sc.name}: {route_count} random routes (randomTrips + duarouter)")
        routes = random_routes(net, d / "routeset.rou.xml", count=route_count, seed=seed)
        say(f"{sc.name}: VACaMobil, target {sc.target_mean} ± {sc.target_sd}, {duration_s} s")
        vaca = run_vacamobil(
            net, routes, VacaConfig(sc.target_mean, sc.target_sd, seed=seed), duration_s, warmup_s, progress=say
        )
        say(f"{sc.name}: duarouter demand, one vehicle a second, {duration_s} s")
        demand = duarouter_demand(net, d / "duarouter.rou.xml", duration_s, seed=seed)
        dua = run_duarouter(net, demand, duration_s, warmup_s, seed=seed, progress=say)
        for stats in (dua, vaca):
            paper = PAPER[sc.name][stats.tool]
            rows.append(
                {
                    "scenario": sc.name,
                    "description": sc.description,
                    "target_mean": sc.target_mean,
                    "target_sd": sc.target_sd,
                    **stats.as_dict(),
                    "paper_mean": paper[0],
                    "paper_sd": paper[1],
                }
            )
        say(f"{sc.name}: done in {time.monotonic() - t0:.0f} s")
    return {"duration_s": duration_s, "warmup_s": warmup_s, "seed": seed, "rows": rows}


def render(table: dict) -> str:
    head = f"{'scenario':<11}  {'tool':<9}  {'target':>9}  {'mean':>7}  {'sd':>6}  {'min':>4}  {'max':>4}  {'paper mean':>10}  {'paper sd':>8}"
    lines = [
        f"VACaMobil table: vehicles on the map, {table['duration_s']} s runs, "
        f"measured after {table['warmup_s']} s of warm-up (seed {table['seed']})",
        "",
        head,
        "-" * len(head),
    ]
    for r in table["rows"]:
        target = f"{r['target_mean']:g}±{r['target_sd']:g}" if r["tool"] == "vacamobil" else "-"
        lines.append(
            f"{r['scenario']:<11}  {r['tool']:<9}  {target:>9}  {r['mean']:7.2f}  {r['sd']:6.2f}  "
            f"{r['min']:>4}  {r['max']:>4}  {r['paper_mean']:10.2f}  {r['paper_sd']:8.2f}"
        )
    lines.append("")
    lines.append("paper = baguena-2017 Table 6.2 (its urban scenario is a 7 km2 OSM extract of Milan)")
    return "\n".join(lines)


def write_results(table: dict, out: Path, command: str, stamped: dict) -> Path:
    """OUT/vacamobil/runs.csv (one row per scenario and tool) and meta.json,
    written whole or not at all, for the papers table (SPEC S6)."""
    import pandas as pd

    d = out / "vacamobil"
    d.mkdir(parents=True, exist_ok=True)
    meta = {k: table[k] for k in ("duration_s", "warmup_s", "seed")} | {"command": command, "stamp": stamped}
    for name, write in (("runs.csv", lambda f: pd.DataFrame(table["rows"]).to_csv(f, index=False)),
                        ("meta.json", lambda f: f.write_text(json.dumps(meta, indent=1, default=str) + "\n"))):
        part = d / f".{name}.part"
        write(part)
        part.replace(d / name)
    return d

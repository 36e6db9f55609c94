"""The thesis's channel-model figures (SPEC S5, baguena-2017 ch. 5) from the
models convoy's traces are made with, `run channel-models`:

* the 802.11p fits (modified free space + Nakagami-m) through `convoy trace
  pdr`: vehicles as obstacles (m = 0.7, α = 2.3) give a reliable range
  (PDR > 90 %) of about 100 m; line of sight (m = 1, α = 2.2) less than 5 %
  at 1,400 m;
* the city's obstacle coefficient through `convoy trace
  obstacle-coefficient` on the Helsinki extract the AVE runs use, with its
  OSM buildings and without: the thesis has 0.48–0.55 for Milan, Paris and
  Moscow with their buildings and 0.84 for Moscow's streets alone.

The PDR figures follow from the fit and the radio constants docs/MODELS.md
gives (20 dBm, −89 dBm threshold), not from a measurement; the obstacle
coefficient is our city, not the thesis's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from . import fleet_city
from .catalog import Claim
from ..report.html import text_table
from ..runner import run_json

# SPEC S5.
PAPER = {"obstructed_range_90_m": 100.0, "los_pdr_1400m_below": 0.05, "city_coefficient": (0.48, 0.55),
         "streets_only_coefficient": 0.84}
FITS = {"obstructed": ["--preset", "vehicles-as-obstacles"], "los": ["--preset", "los"]}


class ModelError(RuntimeError):
    """A model command failed; its message is the command's own."""


def _convoy_json(args: list[str]) -> dict:
    try:
        return run_json(*args, timeout=600)
    except subprocess.CalledProcessError as err:
        why = err.stderr.splitlines()[-1] if err.stderr else f"exit status {err.returncode}"
        raise ModelError(f"convoy {' '.join(args)}: {why}") from None


def measure(out: Path, rays: int) -> pd.DataFrame:
    """One row per fit and per city profile."""
    rows = []
    for name, preset in FITS.items():
        r = _convoy_json(["trace", "pdr", *preset, "--at", "100,1400"])
        at = {round(p["distance_m"]): p["pdr"] for p in r["at"]}
        rows.append({"model": name, "m": r["m"], "alpha": r["alpha"], "range_90_m": r["range_90_m"],
                     "range_50_m": r["range_50_m"], "pdr_100m": at[100], "pdr_1400m": at[1400]})
    city = fleet_city.helsinki(out / "helsinki")
    for name, poly in (("helsinki-buildings", ["--poly", str(city.polys)]), ("helsinki-streets", [])):
        r = _convoy_json(["trace", "obstacle-coefficient", "--net", str(city.net), *poly, "--rays", str(rays)])
        rows.append({"model": name, "obstacle_coefficient": r["obstacle_coefficient"], "std_error": r["std_error"],
                     "streets": r["streets"], "mean_street_m": r["mean_street_m"], "buildings": r["buildings"]})
    return pd.DataFrame(rows)


def run(quick: bool, seeds: int, out: Path, engine: str, workers: int | None) -> dict:
    """The fleet experiments' shape (see fleet_sim.FleetExperiment): the
    models are deterministic, so seeds, engine and workers do not apply."""
    d = out / "channel-models"
    d.mkdir(parents=True, exist_ok=True)
    rays = 5000 if quick else 20000
    df = measure(out, rays)
    part = d / ".runs.csv.part"
    df.to_csv(part, index=False)
    part.replace(d / "runs.csv")
    by = df.set_index("model")
    lo, hi = PAPER["city_coefficient"]
    claims = [
        Claim("802.11p, vehicles as obstacles (m 0.7, α 2.3): reliable range, PDR > 90 %",
              f"≈ {PAPER['obstructed_range_90_m']:.0f} m", f"{by.loc['obstructed', 'range_90_m']:.0f} m"),
        Claim("802.11p, line of sight (m 1, α 2.2): PDR at 1,400 m", f"< {PAPER['los_pdr_1400m_below'] * 100:.0f} %",
              f"{by.loc['los', 'pdr_1400m'] * 100:.2f} %"),
        Claim("obstacle coefficient, a real city with its buildings (thesis: Milan, Paris, Moscow; ours: Helsinki)",
              f"{lo:.2f}–{hi:.2f}", f"{by.loc['helsinki-buildings', 'obstacle_coefficient']:.2f}"),
        Claim("obstacle coefficient, the same city's streets alone (thesis: Moscow)",
              f"{PAPER['streets_only_coefficient']:.2f}", f"{by.loc['helsinki-streets', 'obstacle_coefficient']:.2f}"),
    ]
    rows = [[r["model"], *(f"{r[k]:.2f}" if pd.notna(r.get(k)) else "–"
                           for k in ("range_90_m", "pdr_100m", "pdr_1400m", "obstacle_coefficient"))]
            for r in df.to_dict("records")]
    table = text_table(["model", "range PDR>90 % m", "PDR 100 m", "PDR 1400 m", "obstacle coeff."], rows)
    return {"df": df, "claims": claims, "table": table, "meta": {"rays": rays}}

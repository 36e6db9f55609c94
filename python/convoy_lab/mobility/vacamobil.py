"""VACaMobil (baguena-2017 ch. 6, SPEC S6) on libsumo: keeps the number of
vehicles on the map near a target drawn from Normal(mean, sd).

Every mobility step the controller compares the vehicles on the map with
the target:

* above it, it waits for vehicles to arrive and leave, timing how long the
  count takes to fall back to the target;
* below it, it inserts vehicles, several per step, spread over as many steps
  as that last fall lasted (so refilling is as gradual as draining was, which
  is what keeps the mean from overshooting and avoids fast oscillation);
* each time the target is reached, the next target is drawn, clipped to
  mean ± 3 sd.

A new vehicle takes a type drawn from the user's probabilities (the first
defined type when none are given) and a route drawn uniformly from the
loaded route set; it goes on the first free lane of the route's first edge,
else the next route in the list is tried, until the first route comes round
again: the map is full.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean, pstdev
from typing import Callable

from .sumo_tools import SumoError, sumo_binary, sumo_home


@dataclass
class VacaConfig:
    mean: float
    sd: float
    # Vehicle type → probability; types missing here have probability 0.
    vtype_probs: dict = field(default_factory=dict)
    seed: int = 1


@dataclass
class RunStats:
    """Vehicles on the map at every step of one run."""

    tool: str
    counts: list
    warmup_s: float
    step_s: float = 1.0
    inserted: int = 0
    map_full: int = 0

    def window(self) -> list:
        first = int(round(self.warmup_s / self.step_s))
        return self.counts[first:]

    @property
    def mean(self) -> float:
        w = self.window()
        return fmean(w) if w else float("nan")

    @property
    def sd(self) -> float:
        w = self.window()
        return pstdev(w) if len(w) > 1 else float("nan")

    def as_dict(self) -> dict:
        return {
            "tool": self.tool,
            "mean": self.mean,
            "sd": self.sd,
            "min": min(self.window(), default=None),
            "max": max(self.window(), default=None),
            "steps_measured": len(self.window()),
            "warmup_s": self.warmup_s,
            "inserted": self.inserted,
            "map_full_events": self.map_full,
        }


class VacaMobil:
    """The controller; call `step()` once after every simulation step."""

    def __init__(self, sim, cfg: VacaConfig):
        if cfg.sd < 0 or cfg.mean <= 0:
            raise SumoError(f"VACaMobil needs mean > 0 and sd >= 0, got {cfg.mean} ± {cfg.sd}")
        self.sim = sim
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.routes = list(sim.route.getIDList())
        if not self.routes:
            raise SumoError("VACaMobil needs a route set: the route file defines no <route>")
        # Per route: first edge and its lanes, fixed for the run.
        self.first_lanes = {}
        for r in self.routes:
            edge = sim.route.getEdges(r)[0]
            self.first_lanes[r] = [f"{edge}_{i}" for i in range(sim.edge.getLaneNumber(edge))]
        defined = [t for t in sim.vehicletype.getIDList() if not t.startswith("DEFAULT_")]
        unknown = set(cfg.vtype_probs) - set(defined)
        if unknown:
            raise SumoError(f"vehicle types {sorted(unknown)} are not defined in the route file ({defined})")
        self.types = [t for t in defined if cfg.vtype_probs.get(t, 0) > 0]
        self.weights = [cfg.vtype_probs[t] for t in self.types]
        if not self.types:
            # No probabilities given: only the first defined type.
            self.types, self.weights = [defined[0] if defined else "DEFAULT_VEHTYPE"], [1.0]
        self.target = self._draw_target()
        self.last_fall_steps = 1
        self.fall_steps = 0
        self.insert_steps_left = 0
        self.inserting = False
        self.serial = 0
        self.inserted = 0
        self.map_full = 0

    def _draw_target(self) -> int:
        m, s = self.cfg.mean, self.cfg.sd
        return int(round(min(max(self.rng.gauss(m, s), m - 3 * s), m + 3 * s)))

    def _count(self) -> int:
        # Vehicles added but not yet on the road count too, or the controller
        # would add them again next step.
        return self.sim.vehicle.getIDCount() + len(self.sim.simulation.getPendingVehicles())

    def _lane_free(self, lane: str, need_m: float, used: set) -> bool:
        if lane in used:
            return False
        allowed = self.sim.lane.getAllowed(lane)
        if allowed and "passenger" not in allowed:
            return False
        for v in self.sim.lane.getLastStepVehicleIDs(lane):
            rear = self.sim.vehicle.getLanePosition(v) - self.sim.vehicle.getLength(v)
            if rear < need_m:
                return False
        return True

    def _insert_one(self, used: set) -> bool:
        vtype = self.rng.choices(self.types, self.weights)[0]
        need = self.sim.vehicletype.getLength(vtype) + self.sim.vehicletype.getMinGap(vtype) + 1.0
        n = len(self.routes)
        first = self.rng.randrange(n)
        for k in range(n):
            route = self.routes[(first + k) % n]
            for i, lane in enumerate(self.first_lanes[route]):
                if self._lane_free(lane, need, used):
                    used.add(lane)
                    self.sim.vehicle.add(
                        f"vaca{self.serial}",
                        route,
                        typeID=vtype,
                        depart="now",
                        departLane=str(i),
                        departPos="base",
                        departSpeed="max",
                    )
                    self.serial += 1
                    self.inserted += 1
                    return True
        self.map_full += 1
        return False

    def step(self) -> None:
        count = self._count()
        if count > self.target:
            self.inserting = False
            self.fall_steps += 1
            return
        if self.fall_steps:
            # The fall just ended: its length sets the next insertion period.
            self.last_fall_steps = self.fall_steps
            self.fall_steps = 0
        if count == self.target:
            self.inserting = False
            self.target = self._draw_target()
            return
        if not self.inserting:
            self.inserting = True
            self.insert_steps_left = max(1, self.last_fall_steps)
        k = math.ceil((self.target - count) / self.insert_steps_left)
        self.insert_steps_left = max(1, self.insert_steps_left - 1)
        used: set = set()
        for _ in range(k):
            if not self._insert_one(used):
                break
        if count + k >= self.target:
            self.inserting = False
            self.target = self._draw_target()


def _libsumo():
    try:
        import libsumo
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise SumoError("libsumo is not installed: run `make setup`") from exc
    return libsumo


def _run(
    tool: str,
    args: list,
    duration_s: int,
    warmup_s: float,
    controller_cfg: VacaConfig | None,
    progress: Callable[[str], None] | None,
) -> RunStats:
    import os

    os.environ.setdefault("SUMO_HOME", str(sumo_home()))
    sim = _libsumo()
    sim.start([str(sumo_binary("sumo")), *map(str, args), "--no-step-log", "--no-warnings", "--end", str(duration_s)])
    try:
        ctl = VacaMobil(sim, controller_cfg) if controller_cfg else None
        counts = []
        for t in range(duration_s):
            if ctl:
                ctl.step()
            sim.simulationStep()
            counts.append(sim.vehicle.getIDCount())
            if progress and (t + 1) % 250 == 0:
                progress(f"{tool}: {t + 1}/{duration_s} s, {counts[-1]} vehicles")
        return RunStats(
            tool,
            counts,
            warmup_s,
            inserted=ctl.inserted if ctl else 0,
            map_full=ctl.map_full if ctl else 0,
        )
    finally:
        sim.close()


def run_vacamobil(
    net: Path,
    route_set: Path,
    cfg: VacaConfig,
    duration_s: int,
    warmup_s: float = 0,
    fcd_out: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunStats:
    """One SUMO run under VACaMobil; writes FCD to `fcd_out` if given."""
    for p in (net, route_set):
        if not Path(p).is_file():
            raise SumoError(f"{p}: no such file")
    args = ["--net-file", net, "--route-files", route_set, "--seed", cfg.seed,
            "--max-depart-delay", 5, "--time-to-teleport", 120]
    if fcd_out:
        args += ["--fcd-output", fcd_out]
    return _run("vacamobil", args, duration_s, warmup_s, cfg, progress)


def run_duarouter(
    net: Path,
    demand: Path,
    duration_s: int,
    warmup_s: float = 0,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
) -> RunStats:
    """One SUMO run of duarouter's demand alone (no controller)."""
    args = ["--net-file", net, "--route-files", demand, "--seed", seed, "--time-to-teleport", 120]
    return _run("duarouter", args, duration_s, warmup_s, None, progress)


def stderr_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)

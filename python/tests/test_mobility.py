"""convoy_lab.mobility against real SUMO (eclipse-sumo/libsumo wheels) on a
small grid: seconds, not minutes."""

from __future__ import annotations

import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from convoy_lab.mobility import (
    SumoError,
    VacaConfig,
    VacaMobil,
    grid_buildings,
    grid_network,
    random_routes,
    run_duarouter,
    run_vacamobil,
)
from convoy_lab.mobility.scenario import duarouter_demand


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("grid")
    net = grid_network(d / "g.net.xml", number=5, length_m=200.0)
    routes = random_routes(net, d / "g.rou.xml", count=60, seed=3)
    return net, routes


def test_grid_and_route_set_are_real_sumo_files(small_grid):
    net, routes = small_grid
    edges = [e for e in ET.parse(net).getroot().iter("edge") if e.get("function") is None]
    # 5 × 5 junctions: 2 × 5 × 4 streets, each way.
    assert len(edges) == 80
    root = ET.parse(routes).getroot()
    assert len(root.findall("route")) > 30
    assert [t.get("id") for t in root.findall("vType")] == ["car", "bus", "truck"]
    assert not root.findall("vehicle")


def test_vacamobil_holds_the_target_and_writes_fcd(small_grid, tmp_path):
    net, routes = small_grid
    fcd = tmp_path / "fcd.xml"
    stats = run_vacamobil(net, routes, VacaConfig(25, 2, seed=5), duration_s=300, warmup_s=60, fcd_out=fcd)
    assert abs(stats.mean - 25) < 2.5, stats.as_dict()
    assert stats.sd < 4, stats.as_dict()
    assert 25 - 3 * 2 - 3 <= min(stats.window()) and max(stats.window()) <= 25 + 3 * 2 + 3
    steps = ET.parse(fcd).getroot().findall("timestep")
    assert len(steps) >= 299
    on_map = [len(s.findall("vehicle")) for s in steps]
    assert on_map[150] == stats.counts[150]


def test_vehicle_type_probabilities(small_grid, tmp_path):
    net, routes = small_grid
    fcd = tmp_path / "fcd.xml"
    run_vacamobil(net, routes, VacaConfig(15, 1, {"bus": 1.0}, seed=2), duration_s=60, fcd_out=fcd)
    types = {v.get("type") for v in ET.parse(fcd).getroot().iter("vehicle")}
    assert types == {"bus"}
    with pytest.raises(SumoError, match="not defined"):
        run_vacamobil(net, routes, VacaConfig(15, 1, {"tram": 1.0}), duration_s=5)


def test_duarouter_baseline_is_uncontrolled(small_grid, tmp_path):
    net, _ = small_grid
    demand = duarouter_demand(net, tmp_path / "d.rou.xml", 200, seed=1)
    stats = run_duarouter(net, demand, 200, warmup_s=0)
    # One vehicle a second from an empty map: the count climbs from 0.
    assert stats.counts[0] <= 1 and max(stats.counts) > 20


class FakeSim:
    """Just enough of libsumo for the controller's target logic."""

    class _R:
        def getIDList(self):
            return ["r0"]

        def getEdges(self, _r):
            return ["e"]

    class _E:
        def getLaneNumber(self, _e):
            return 1

    class _T:
        def getIDList(self):
            return ["DEFAULT_VEHTYPE", "car"]

    route, edge, vehicletype = _R(), _E(), _T()


def test_targets_are_clipped_to_three_sd():
    ctl = VacaMobil(FakeSim(), VacaConfig(100, 10, seed=1))
    ctl.rng = random.Random(0)
    draws = [ctl._draw_target() for _ in range(20000)]
    assert min(draws) >= 70 and max(draws) <= 130
    assert abs(sum(draws) / len(draws) - 100) < 0.5
    assert ctl.types == ["car"]


def test_grid_buildings_and_cli_errors(tmp_path):
    poly = grid_buildings(tmp_path / "b.poly.xml", number=3, length_m=100, setback_m=10)
    polys = ET.parse(poly).getroot().findall("poly")
    assert len(polys) == 4 and polys[0].get("type") == "building"
    proc = subprocess.run(
        [sys.executable, "-m", "convoy_lab.mobility", "routes", str(tmp_path / "missing.net.xml"), "-o", "x"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"convoy_lab.mobility: {tmp_path / 'missing.net.xml'}: no such network file"


def test_table_command_json(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "convoy_lab.mobility", "vacamobil-table", "--scenario", "manhattan",
         "--duration", "120", "--warmup", "60", "--json", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    import json

    rows = json.loads(proc.stdout)["rows"]
    assert [r["tool"] for r in rows] == ["duarouter", "vacamobil"]
    assert rows[1]["paper_mean"] == pytest.approx(319.349)


def test_fcd_to_link_traces_with_the_convoy_command(small_grid, tmp_path):
    from convoy_lab.runner import ConvoyNotFound, convoy_binary

    try:
        convoy = convoy_binary()
    except ConvoyNotFound:
        pytest.skip("no convoy binary built")
    net, routes = small_grid
    fcd = tmp_path / "fcd.xml"
    run_vacamobil(net, routes, VacaConfig(10, 1, seed=1), duration_s=30, fcd_out=fcd)
    out = tmp_path / "traces"
    proc = subprocess.run(
        [str(convoy), "trace", "from-mobility", "--fcd", str(fcd), "--rsu", "400,400",
         "--enb", "0,0", "-o", str(out), "--json"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 and "unrecognized subcommand" in proc.stderr:
        pytest.skip("this convoy binary predates `convoy trace`")
    assert proc.returncode == 0, proc.stderr
    import json

    summary = json.loads(proc.stdout)
    assert summary["vehicles"] >= 10 and summary["files"] == 2 * summary["vehicles"]
    import pandas as pd

    df = pd.read_csv(next(out.glob("*.80211p.csv")), comment="#")
    assert list(df.columns) == ["start_ms", "rate_kbps", "delay_ms", "loss_p", "up"]
    assert df["start_ms"].iloc[0] == 0

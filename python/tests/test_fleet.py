"""The fleet simulator from Python: a sweep on a local Dask cluster of two
workers gives the same runs.csv bytes as `convoy sim sweep` on one core,
the edge experiment prints the thesis beside ours, and the Helsinki
extract imports into SUMO with usable buildings."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from convoy_lab.experiments import cli as experiments, fleet_city
from convoy_lab.sim import SweepError, sweep

SCENARIO = """name = "py"
duration_s = 10
rsu = [{ x = 200, y = 200 }]
enodeb = [{ x = 200, y = 200 }]
[mobility]
grid = { blocks = 2, vehicles = 15 }
[sensing]
protocol = "ave"
mean_interval_s = 4
[edge]
workload = "ar"
edge_share = 0.5
placement = "enodeb"
capacity = 3
"""


def _scenario(tmp_path: Path) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SCENARIO)
    return p


def test_dask_two_workers_match_one_local_core(tmp_path):
    pytest.importorskip("dask.distributed")
    s = _scenario(tmp_path)
    params = ["sensing.protocol=ave,spray", "edge.edge_share=0,1"]
    local = sweep(s, "1-2", params, tmp_path / "local", engine="local", workers=1)
    dask = sweep(s, "1-2", params, tmp_path / "dask", engine="dask", workers=2)
    assert local.read_bytes() == dask.read_bytes()
    assert len(local.read_text().splitlines()) == 1 + 8


def test_sweep_errors_are_reported(tmp_path):
    s = _scenario(tmp_path)
    with pytest.raises(SweepError, match="olsr"):
        sweep(s, "1", ["sensing.protocol=olsr"], tmp_path / "o")
    with pytest.raises(SweepError, match="engine"):
        sweep(s, "1", [], tmp_path / "o", engine="slurm")


def test_edge_split_quick_prints_the_thesis_beside_ours(tmp_path, capsys):
    assert experiments.main(["run", "edge-split", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cloud-only mean latency" in out and "> 500 ms" in out
    assert (tmp_path / "edge-split" / "runs.csv").is_file()
    assert (tmp_path / "edge-split" / "meta.json").is_file()


def test_fleet_and_emulator_experiments_are_run_apart(tmp_path, capsys):
    assert experiments.main(["run", "edge-split", "rcdp-loss", "--out", str(tmp_path)]) == 2
    assert "apart" in capsys.readouterr().err


def test_helsinki_extract_imports_with_buildings(tmp_path):
    city = fleet_city.helsinki(tmp_path)
    assert 1.5 < city.area_km2 < 2.0
    polys = list(ET.parse(city.polys).getroot().iter("poly"))
    assert len(polys) > 300
    assert all(len(p.get("shape").split()) >= 3 for p in polys)
    x, y = fleet_city.junction_near(city, 0.5, 0.5)
    x0, y0, x1, y1 = city.bounds
    assert x0 <= x <= x1 and y0 <= y <= y1

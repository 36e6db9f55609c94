"""A SUMO drive for the fleet demo: a small grid city, random trips for
N vehicles, SUMO's FCD, and the roads as GeoJSON for the map (placed at
the same origin the agents' FCD replay uses)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..mobility.scenario import grid_network
from ..mobility.sumo_tools import run, run_tool, sumo_binary

ORIGIN = (45.0703, 7.6869)  # Turin; the agents' default FCD origin
M_PER_DEG = 6_378_137.0 * math.pi / 180.0


def to_lat_lon(x: float, y: float, origin=ORIGIN) -> tuple[float, float]:
    lat = origin[0] + y / M_PER_DEG
    lon = origin[1] + x / (M_PER_DEG * math.cos(math.radians(origin[0])))
    return lat, lon


def make_drive(work: Path, vehicles: int, seconds: int, seed: int = 1) -> tuple[Path, Path, list[str]]:
    """Returns (FCD file, network file, vehicle ids)."""
    work.mkdir(parents=True, exist_ok=True)
    net = grid_network(work / "grid.net.xml", number=6, length_m=200.0)
    trips = work / "trips.xml"
    routes = work / "routes.rou.xml"
    run_tool("randomTrips.py", ["-n", net, "-o", trips, "-r", routes, "-b", 0, "-e", vehicles,
                                "-p", 1, "--seed", seed, "--min-distance", 600,
                                "--validate"], "randomTrips")
    fcd = work / "fcd.xml"
    run([sumo_binary("sumo"), "-n", net, "-r", routes, "--fcd-output", fcd,
         "--end", seconds, "--no-warnings", "--no-step-log"], "sumo")
    ids = sorted({line.split('id="')[1].split('"')[0] for line in routes.read_text().splitlines()
                  if "<vehicle " in line})
    return fcd, net, ids[:vehicles]


def roads_geojson(net: Path, out: Path) -> Path:
    import sumolib

    n = sumolib.net.readNet(str(net))
    feats = []
    for e in n.getEdges():
        if e.getFunction() == "internal":
            continue
        coords = [list(reversed(to_lat_lon(x, y))) for x, y in e.getShape()]
        feats.append({"type": "Feature", "geometry": {"type": "LineString", "coordinates": coords},
                      "properties": {"id": e.getID()}})
    out.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return out

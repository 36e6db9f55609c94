"""Road networks and route sets: SUMO's netgenerate, netconvert, polyconvert,
randomTrips.py and duarouter, driven with the options each scenario needs."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .sumo_tools import SumoError, run, run_tool, sumo_binary, sumo_home


@dataclass
class Scenario:
    """A network with its VACaMobil route set and target population."""

    name: str
    net: Path
    routes: Path
    mean: float
    sd: float
    polys: Path | None = None


def grid_network(out: Path, number: int = 25, length_m: float = 200.0, lanes: int = 1) -> Path:
    """The Manhattan grid of VACaMobil's evaluation: number × number
    junctions joined by length_m roads (25 × 25 of 200 m there)."""
    if number < 2:
        raise SumoError(f"a grid needs at least 2 junctions a side, got {number}")
    out.parent.mkdir(parents=True, exist_ok=True)
    run(
        [
            sumo_binary("netgenerate"),
            "--grid",
            "--grid.number", number,
            "--grid.length", length_m,
            "--default.lanenumber", lanes,
            "--default.speed", 13.89,
            "--output-file", out,
            "--no-warnings",
        ],
        "netgenerate (grid)",
    )
    return out


def random_city_network(out: Path, iterations: int = 400, seed: int = 7) -> Path:
    """A synthetic dense city: netgenerate's random network with short
    streets (60–160 m; Milan's average is 111 m). 400 iterations give about
    7 km², the size of the paper's Milan extract."""
    out.parent.mkdir(parents=True, exist_ok=True)
    run(
        [
            sumo_binary("netgenerate"),
            "--rand",
            "--rand.iterations", iterations,
            "--rand.min-distance", 60,
            "--rand.max-distance", 160,
            "--rand.min-angle", 60,
            "--rand.connectivity", 0.95,
            "--default.speed", 13.89,
            "--seed", seed,
            "--output-file", out,
            "--no-warnings",
        ],
        "netgenerate (random city)",
    )
    return out


def import_osm(osm: Path, out_net: Path, out_polys: Path | None = None) -> tuple[Path, Path | None]:
    """An OpenStreetMap extract as a SUMO network (netconvert), and its
    buildings as polygons (polyconvert) when out_polys is given."""
    if not Path(osm).is_file():
        raise SumoError(f"{osm}: no such OSM file")
    out_net.parent.mkdir(parents=True, exist_ok=True)
    run(
        [
            sumo_binary("netconvert"),
            "--osm-files", osm,
            "--output-file", out_net,
            "--geometry.remove",
            "--roundabouts.guess",
            "--ramps.guess",
            "--junctions.join",
            "--tls.guess-signals",
            "--keep-edges.by-vclass", "passenger",
            "--no-warnings",
        ],
        "netconvert (OSM import)",
    )
    if out_polys is not None:
        run(
            [
                sumo_binary("polyconvert"),
                "--osm-files", osm,
                "--net-file", out_net,
                "--type-file", sumo_home() / "data" / "typemap" / "osmPolyconvert.typ.xml",
                "--output-file", out_polys,
                "--no-warnings",
            ],
            "polyconvert (OSM buildings)",
        )
    return out_net, out_polys


VTYPES = """  <vType id="car" vClass="passenger" length="4.5" minGap="2.5" maxSpeed="13.89" accel="2.6" decel="4.5" sigma="0.5"/>
  <vType id="bus" vClass="bus" length="12" minGap="3" maxSpeed="13.89" accel="1.2" decel="4" sigma="0.5"/>
  <vType id="truck" vClass="truck" length="10" minGap="3" maxSpeed="13.89" accel="1.3" decel="4" sigma="0.5"/>
"""


def random_routes(
    net: Path,
    out: Path,
    count: int = 500,
    seed: int = 1,
    random_factor: float = 2.0,
) -> Path:
    """A VACaMobil route set: `count` random trips (randomTrips.py) routed by
    duarouter with edge weights randomised by up to `random_factor`, written
    as named <route>s (no vehicles) next to the car, bus and truck types.

    The paper took its route set from duaIterate.py; randomised weights
    serve the same purpose at a fraction of the cost: on a grid, plain
    shortest paths send every vehicle down the same street (ch. 6.4.1)."""
    net, out = Path(net).resolve(), Path(out).resolve()
    work = out.parent
    work.mkdir(parents=True, exist_ok=True)
    trips = work / (out.name + ".trips.xml")
    routed = work / (out.name + ".routed.xml")
    run_tool(
        "randomTrips.py",
        [
            "--net-file", net,
            "--output-trip-file", trips,
            "--begin", 0,
            "--end", count,
            "--period", 1,
            "--seed", seed,
            "--min-distance", 300,
            "--fringe-factor", 1,
            "--validate",
        ],
        "randomTrips.py",
        cwd=work,
    )
    run(
        [
            sumo_binary("duarouter"),
            "--net-file", net,
            "--route-files", trips,
            "--output-file", routed,
            "--weights.random-factor", random_factor,
            "--seed", seed,
            "--ignore-errors",
            "--no-warnings",
            "--no-step-log",
        ],
        "duarouter (route set)",
    )
    edges = [v.find("route").get("edges") for v in ET.parse(routed).getroot().iter("vehicle")]
    edges = [e for e in edges if e]
    if not edges:
        raise SumoError(f"duarouter found no route in {net}")
    with open(out, "w") as f:
        f.write("<routes>\n" + VTYPES)
        for i, e in enumerate(edges):
            f.write(f'  <route id="r{i}" edges="{e}"/>\n')
        f.write("</routes>\n")
    trips.unlink(missing_ok=True)
    routed.unlink(missing_ok=True)
    return out


def duarouter_demand(net: Path, out: Path, duration_s: int, seed: int = 1) -> Path:
    """The baseline of VACaMobil's table: one random trip per second,
    routed by duarouter alone (shortest travel time, no randomisation)."""
    net, out = Path(net).resolve(), Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    trips = out.parent / (out.name + ".trips.xml")
    run_tool(
        "randomTrips.py",
        [
            "--net-file", net,
            "--output-trip-file", trips,
            "--begin", 0,
            "--end", duration_s,
            "--period", 1,
            "--seed", seed,
            "--min-distance", 300,
            "--fringe-factor", 1,
            "--validate",
        ],
        "randomTrips.py",
        cwd=out.parent,
    )
    run(
        [
            sumo_binary("duarouter"),
            "--net-file", net,
            "--route-files", trips,
            "--output-file", out,
            "--ignore-errors",
            "--no-warnings",
            "--no-step-log",
        ],
        "duarouter (baseline demand)",
    )
    trips.unlink(missing_ok=True)
    return out


def grid_buildings(out: Path, number: int = 25, length_m: float = 200.0, setback_m: float = 12.0) -> Path:
    """Synthetic buildings for the grid: one block per square between
    streets, set back `setback_m` from the street centre lines (a 24 m wide
    street corridor), so radio only travels along the streets. Written as a
    SUMO polygon file with type "building"."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write("<additional>\n")
        for i in range(number - 1):
            for j in range(number - 1):
                x0, y0 = i * length_m + setback_m, j * length_m + setback_m
                x1, y1 = (i + 1) * length_m - setback_m, (j + 1) * length_m - setback_m
                shape = f"{x0:.2f},{y0:.2f} {x1:.2f},{y0:.2f} {x1:.2f},{y1:.2f} {x0:.2f},{y1:.2f} {x0:.2f},{y0:.2f}"
                f.write(f'  <poly id="b{i}_{j}" type="building" color="grey" fill="1" layer="-1" shape="{shape}"/>\n')
        f.write("</additional>\n")
    return out


def random_positions(net: Path, count: int, seed: int = 1) -> list[tuple[float, float]]:
    """`count` points spread uniformly over the network's bounding box, for
    placing RSUs and eNodeBs in examples."""
    import sumolib

    b = sumolib.net.readNet(str(net)).getBoundary()
    rng = random.Random(seed)
    return [(rng.uniform(b[0], b[2]), rng.uniform(b[1], b[3])) for _ in range(count)]

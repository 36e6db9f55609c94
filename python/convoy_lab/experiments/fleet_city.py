"""The real city of the AVE experiments: the OpenStreetMap extract of
central Helsinki shipped in `data/` (data/README.md), imported with SUMO's
netconvert and polyconvert, driven by VACaMobil at a steady density, and
its FCD handed to `convoy sim fleet`. Everything is cached in a work
directory keyed by what made it, so a second experiment reuses the SUMO
runs of the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..mobility import VacaConfig, import_osm, random_routes, run_vacamobil

DATA = Path(__file__).resolve().parents[1] / "data"
HELSINKI = DATA / "helsinki.osm.gz"


@dataclass(frozen=True)
class City:
    net: Path
    polys: Path
    bounds: tuple  # (xmin, ymin, xmax, ymax), metres

    @property
    def area_km2(self) -> float:
        x0, y0, x1, y1 = self.bounds
        return (x1 - x0) * (y1 - y0) / 1e6


def helsinki(work: Path) -> City:
    """Network, buildings and route set of the Helsinki extract (cached)."""
    import sumolib

    work.mkdir(parents=True, exist_ok=True)
    net, polys = work / "helsinki.net.xml", work / "helsinki.buildings.xml"
    if not (net.is_file() and polys.is_file()):
        raw = work / "helsinki.poly.xml"
        import_osm(HELSINKI, net, raw)
        _buildings_only(raw, polys)
    routes = work / "helsinki.routes.xml"
    if not routes.is_file():
        random_routes(net, routes, count=400, seed=1)
    b = sumolib.net.readNet(str(net)).getBoundary()
    return City(net, polys, (b[0], b[1], b[2], b[3]))


def _buildings_only(src: Path, dst: Path) -> None:
    """Keeps the building polygons that enclose an area: OSM also maps some
    buildings as a single point, which polyconvert writes as a one-point
    shape that shadows nothing."""
    import xml.etree.ElementTree as ET

    out = ET.Element("additional")
    for poly in ET.parse(src).getroot().iter("poly"):
        if "building" in poly.get("type", "") and len(poly.get("shape", "").split()) >= 3:
            out.append(poly)
    ET.ElementTree(out).write(dst, encoding="unicode")


def junction_near(city: City, fx: float, fy: float) -> tuple[float, float]:
    """The junction nearest a point given as fractions of the map's extent
    (RSUs stand at junctions, where streets give line of sight)."""
    import sumolib

    x0, y0, x1, y1 = city.bounds
    px, py = x0 + fx * (x1 - x0), y0 + fy * (y1 - y0)
    nodes = sumolib.net.readNet(str(city.net)).getNodes()
    best = min(nodes, key=lambda n: (n.getCoord()[0] - px) ** 2 + (n.getCoord()[1] - py) ** 2)
    return best.getCoord()[0], best.getCoord()[1]


def fcd(city: City, work: Path, per_km2: float, duration_s: int, seed: int) -> tuple[Path, float]:
    """FCD of VACaMobil keeping `per_km2` vehicles per km² on the map
    (sd 5 % of the mean, at least 1); returns the file and the mean count."""
    mean = max(1.0, per_km2 * city.area_km2)
    out = work / f"fcd-{per_km2:g}perkm2-{duration_s}s-s{seed}.xml"
    stats_file = out.with_suffix(".mean")
    if not (out.is_file() and stats_file.is_file()):
        cfg = VacaConfig(mean=mean, sd=max(1.0, 0.05 * mean), seed=seed)
        routes = work / "helsinki.routes.xml"
        stats = run_vacamobil(city.net, routes, cfg, duration_s, warmup_s=0, fcd_out=out)
        stats_file.write_text(f"{stats.mean}\n")
    return out, float(stats_file.read_text())

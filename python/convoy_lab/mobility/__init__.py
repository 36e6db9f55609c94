"""Vehicle mobility on SUMO: networks, random route sets, VACaMobil, FCD.

SUMO comes from the `eclipse-sumo` and `libsumo` PyPI packages, so nothing
needs apt. Everything here drives the real SUMO binaries and libsumo; see
``python -m convoy_lab.mobility --help`` and docs/MODELS.md.
"""

from .sumo_tools import SumoError, sumo_home, sumo_binary
from .scenario import (
    Scenario,
    grid_network,
    random_city_network,
    import_osm,
    random_routes,
    grid_buildings,
)
from .vacamobil import VacaMobil, VacaConfig, RunStats, run_vacamobil, run_duarouter

__all__ = [
    "SumoError",
    "sumo_home",
    "sumo_binary",
    "Scenario",
    "grid_network",
    "random_city_network",
    "import_osm",
    "random_routes",
    "grid_buildings",
    "VacaMobil",
    "VacaConfig",
    "RunStats",
    "run_vacamobil",
    "run_duarouter",
]

"""The fleet data service as a whole: `python -m convoy_lab.fleet demo`
runs vehicles from a SUMO drive through `convoy agent` into `convoy serve`
and its web view; `python -m convoy_lab.fleet bench` measures the
service's targets with real processes (docs/SERVICE.md)."""

from .service import Service, drive_lines, free_port

__all__ = ["Service", "drive_lines", "free_port"]

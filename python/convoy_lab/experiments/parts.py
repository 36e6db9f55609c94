"""An experiment run in parts (`run NAME --resume`): the bookkeeping of
its meta.json, shared by the emulator's sweeps, the cellular grid and the
schedule experiments.

A part may go on from the one before only if both ran with the same
settings (a `--quick` part is no part of a full run). meta.json names the
build of every part whose rows are kept (`earlier_parts`), is marked
unfinished while a part runs, and is left as it was when a resumed part
found nothing left to run (so a finished experiment keeps its own stamp).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..report import stamp
from .catalog import ExperimentError


class Part:
    def __init__(self, directory: Path, resume: bool, settings: dict, kept: int):
        """`settings`: the meta.json keys that must match the earlier
        part's; `kept`: how many of its runs this part keeps."""
        self.meta_path = directory / "meta.json"
        self._earlier = self.meta_path.read_text() if resume and self.meta_path.is_file() else None
        if resume:
            why = stamp.resume_conflict(self.meta_path, settings)
            if why:
                raise ExperimentError(f"--resume: {why}")
        self.earlier_parts = stamp.earlier_parts(self.meta_path) if resume and kept else []

    def write(self, meta: dict) -> dict:
        """meta.json as the part stands (`finished` False while it runs)."""
        meta = {**meta, "earlier_parts": self.earlier_parts}
        self.meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        return meta

    def finish(self, meta: dict, ran: int) -> dict:
        """The part's last meta.json; a resumed part that ran nothing puts
        the earlier one back."""
        if ran == 0 and self._earlier is not None and self.earlier_parts:
            self.meta_path.write_text(self._earlier)
            return json.loads(self._earlier)
        return self.write({**meta, "finished": True})

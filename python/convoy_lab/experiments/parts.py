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
import time
from datetime import datetime, timezone
from pathlib import Path

from ..report import stamp
from ..runner import ConvoyNotFound, convoy_binary
from .catalog import ExperimentError


def _binary() -> str | None:
    try:
        return str(convoy_binary())
    except ConvoyNotFound:  # an experiment of kernel TCP alone runs without it
        return None


def run_fields(out: Path, started: float, taken: dict, finished: bool) -> dict:
    """The fields every experiment's meta.json has about the run itself:
    where it wrote, the binary, when it started, how long it took, whether
    it ran to its end, and its stamp (finished with the load at the end)."""
    return {
        "out": str(out),
        "convoy": _binary(),
        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "elapsed_s": round(time.time() - started, 1),
        "finished": finished,
        "stamp": stamp.finish(taken) if finished else taken,
    }


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

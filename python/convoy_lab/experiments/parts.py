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
    def __init__(self, directory: Path, resume: bool, settings: dict, kept: int, flag: str = "--resume"):
        """`resume`: whether this part builds on the rows already in
        `directory`; `settings`: the meta.json keys that must match the
        earlier part's; `kept`: how many of its runs this part keeps;
        `flag`: the option that asked for it, for the error."""
        self.meta_path = directory / "meta.json"
        self._earlier = self.meta_path.read_text() if resume and self.meta_path.is_file() else None
        try:
            old = json.loads(self._earlier) if self._earlier is not None else None
        except ValueError:
            old = None
        if old is not None:
            differ = [f"{k} {old[k]!r} there, {v!r} here" for k, v in settings.items() if k in old and old[k] != v]
            if differ:
                raise ExperimentError(f"{flag}: the part in {directory} ran with other settings "
                                      f"({'; '.join(differ)}): run without {flag}, or into another --out")
        # The parts whose rows are kept: the earlier meta.json's own run and
        # the parts that one built on.
        self.earlier_parts = []
        if old is not None and kept:
            this = {"started": old.get("started"), "stamp": old.get("stamp")}
            self.earlier_parts = [*old.get("earlier_parts", []), this]

    def write(self, meta: dict) -> dict:
        """meta.json as the part stands (`finished` False while it runs)."""
        meta = {**meta, "earlier_parts": self.earlier_parts}
        self.meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        return meta

    def finish(self, meta: dict, ran: int) -> dict:
        """The part's last meta.json; a resumed part that ran nothing puts
        the earlier one back."""
        if ran == 0 and self.earlier_parts:
            self.meta_path.write_text(self._earlier)
            return json.loads(self._earlier)
        return self.write({**meta, "finished": True})

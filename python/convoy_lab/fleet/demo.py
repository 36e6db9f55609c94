"""The fleet demo: vehicles of a SUMO drive, each a `convoy agent`
replaying its FCD (position, speed, heading) and dropping a log file
into its inbox every 10 s, upload to one `convoy serve --fleet --http`;
the page is screenshotted in headless Chromium."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from .browser import screenshot
from .drive import make_drive, roads_geojson
from .demo_lte import demo_lte
from .service import Service


def say(msg: str) -> None:
    print(f"fleet demo: {msg}", file=sys.stderr, flush=True)


def vehicle_sources(fcd: Path, vid: str, inbox: Path) -> str:
    """One vehicle's agent sources: its FCD replay and a log inbox."""
    return f'''
[segments]
max_seconds = 1.0
[[source]]
kind = "fcd"
path = "{fcd}"
vehicle = "{vid}"
[[source]]
kind = "directory"
path = "{inbox}"
class = "previews"
settle_seconds = 0.5
'''


def demo(vehicles: int, seconds: int, out: Path, keep_running: bool = False, lte: bool = True) -> int:
    out = out.resolve()
    if out.exists():
        shutil.rmtree(out)
    say(f"SUMO drive of {vehicles} vehicles, {seconds} s")
    fcd, net, ids = make_drive(out / "sumo", vehicles, seconds + 30)
    overlay = roads_geojson(net, out / "roads.geojson")
    names = [f"car-{i}" for i in ids]
    if lte:
        return demo_lte(ids, names, fcd, overlay, seconds, out, vehicle_sources)
    with Service(out / "fleet", names, extra=["--overlay", str(overlay)]) as s:
        say(f"server on UDP {s.port}, web view http://127.0.0.1:{s.http}/")
        inboxes = {}
        for vid, name in zip(ids, names):
            inbox = out / "fleet" / f"{name}.inbox"
            inboxes[name] = inbox
            cfg = s.agent_config(name, vehicle_sources(fcd, vid, inbox))
            s.start_agent(cfg)
        start = time.time()
        n = 0
        while time.time() - start < seconds:
            time.sleep(10)
            n += 1
            for name, inbox in inboxes.items():
                inbox.mkdir(parents=True, exist_ok=True)
                log = inbox / f"drive-{n:03}.log"
                log.write_bytes(os.urandom(64 * 1024))
            v = s.api("/api/vehicles")
            on_map = sum(1 for x in v["vehicles"] if x["last"])
            say(f"{int(time.time() - start)} s: {on_map} vehicles on the map")
        shot = out / "fleet-map.png"
        on_map = sum(1 for x in s.api("/api/vehicles")["vehicles"] if x["last"])
        info = screenshot(s.page_url("ops"), shot, wait_markers=max(1, on_map))
        uploads = s.api("/api/uploads?limit=5000")["uploads"]
        samples = sum(u["samples"] for u in uploads)
        files = sum(1 for u in uploads if u["kind"] == "file")
        print(f"vehicles on the map: {info['markers']} of {len(names)}")
        print(f"uploads: {len(uploads)} ({files} log files), telemetry samples indexed: {samples}")
        print(f"screenshot: {shot}")
        print(f"page: {s.page_url('ops')}")
        if keep_running:
            say("running until Ctrl-C")
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
    return 0

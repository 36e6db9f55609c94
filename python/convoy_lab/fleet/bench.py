"""`python -m convoy_lab.fleet bench`: the data service's targets,
measured with real processes on loopback (the load average is printed
beside the figures; compare within one run on a shared machine)."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ..runner import convoy_binary
from .service import Service, run


def say(msg: str) -> None:
    print(f"fleet bench: {msg}", file=sys.stderr, flush=True)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p))] if xs else float("nan")


def wait(cond, limit: float, what: str):
    end = time.time() + limit
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError(f"timed out: {what}")


def stored_times(store: Path, vehicle: str) -> list[int]:
    """The sample times of `vehicle`'s stored latitude fixes, one per
    stored sample (a duplicate shows twice)."""
    out = []
    files = [str(p) for p in (store / vehicle).rglob("*.jsonl.zst")]
    # Many files to one zstd (the fleet's runs store thousands of segments).
    for i in range(0, len(files), 500):
        raw = subprocess.run(["zstd", "-dcq", *files[i:i + 500]], capture_output=True, check=True).stdout
        for line in raw.decode().splitlines():
            d = json.loads(line)
            if d["path"] == "Vehicle.CurrentLocation.Latitude":
                out.append(d["t_ns"])
    return sorted(out)


def feeder(sock: Path):
    s = socket.socket(socket.AF_UNIX)
    wait(lambda: s.connect_ex(str(sock)) == 0, 20, "agent socket")
    return s


def fix(t_ns: int, lat: float) -> bytes:
    return (json.dumps({"t_ns": t_ns, "path": "Vehicle.CurrentLocation.Latitude", "value": lat}) + "\n"
            + json.dumps({"t_ns": t_ns, "path": "Vehicle.CurrentLocation.Longitude", "value": 7.68}) + "\n"
            + json.dumps({"t_ns": t_ns, "path": "Vehicle.Speed", "value": 40.0}) + "\n").encode()


def socket_agent(s: Service, name: str, sock: Path, max_seconds: float) -> Path:
    """Starts `name`'s agent reading JSON lines on `sock`; its config."""
    cfg = s.agent_config(name, f'[[source]]\nkind = "socket"\npath = "{sock}"\n',
                         f"[segments]\nmax_seconds = {max_seconds}\n")
    s.start_agent(cfg)
    return cfg


def freshness_in(seen: list[tuple[int, int]], sent: list[int], lo_ns: int, hi_ns: int) -> list[float]:
    """Seconds from each sample taken in [lo_ns, hi_ns) to the first poll
    of the map, `seen` as (poll time, newest sample time shown), that
    showed it or a newer one."""
    out = []
    j = 0
    for t in sorted(sent):
        if not lo_ns <= t < hi_ns:
            continue
        while j < len(seen) and seen[j][1] < t:
            j += 1
        if j == len(seen):
            break
        out.append((seen[j][0] - t) / 1e9)
    return out


def upload_throughput(root: Path) -> dict:
    names = [f"v{i}" for i in range(4)]
    size = 96 << 20
    with Service(root / "t2", names) as s:
        files = []
        for n in names:
            f = root / f"{n}.bin"
            f.write_bytes(os.urandom(size))
            files.append(f)
        start = time.time()
        procs = [subprocess.Popen([str(convoy_binary()), "send", str(f), f"127.0.0.1:{s.port}",
                                   "--server-key", f"{s.key}.pub", "--identity", str(s.key_of(n))],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for n, f in zip(names, files)]
        for p in procs:
            _, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(err.decode())
        wait(lambda: sum(u["state"] == "indexed" for u in s.api("/api/uploads")["uploads"]) == len(names),
             120, "indexed")
        secs = time.time() - start
        for f in files:
            f.unlink()
    mb = len(names) * size / 1e6
    return {"bytes": len(names) * size, "seconds": secs, "mb_per_s": mb / secs, "target_mb_per_s": 50}


def freshness(root: Path, seconds: float = 20) -> dict:
    with Service(root / "t4", ["live"]) as s:
        sock = root / "t4.sock"
        socket_agent(s, "live", sock, 0.5)
        conn = feeder(sock)
        token = s.token("ops")
        sent: list[int] = []
        seen: list[tuple[int, int]] = []
        end = time.time() + seconds
        next_send = time.time()
        while time.time() < end:
            now = time.time()
            if now >= next_send:
                t = time.time_ns()
                conn.sendall(fix(t, 45 + len(sent) * 1e-5))
                sent.append(t)
                next_send = now + 0.2
            v = s.api("/api/vehicles", token=token)["vehicles"]
            last = next((x["last"] for x in v if x["name"] == "live" and x["last"]), None)
            if last and (not seen or last["t_ns"] > seen[-1][1]):
                seen.append((time.time_ns(), last["t_ns"]))
            time.sleep(0.05)
        conn.close()
    lat = freshness_in(seen, sent, 0, sent[-1] + 1 if sent else 0)
    return {"samples": len(lat), "p50_s": pct(lat, 0.5), "p99_s": pct(lat, 0.99),
            "link": "loopback (no LTE emulation)", "target": "p50 < 2 s, p99 < 10 s"}


def budget(root: Path, seconds: float = 15) -> dict:
    with Service(root / "t6", ["metered"]) as s:
        sock = root / "t6.sock"
        inbox = root / "t6.inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        link = root / "t6.link"
        link.write_text("lte\n")
        budget_b = 60_000
        cfg = s.agent_config("metered", f'''
[[source]]
kind = "socket"
path = "{sock}"
[[source]]
kind = "directory"
path = "{inbox}"
class = "bulk"
settle_seconds = 0.2
[[link]]
name = "lte"
metered = true
classes = ["events", "telemetry"]
daily_budget = "{budget_b}"
[[link]]
name = "wifi"
''', f'link_file = "{link}"\n[segments]\nmax_seconds = 1.0\n')
        s.start_agent(cfg)
        (inbox / "cam.mcap").write_bytes(os.urandom(2 << 20))
        conn = feeder(sock)
        db = sqlite3.connect(s.root / "metered.spool" / "agent.db")

        def spent_on_lte() -> int:
            return db.execute("SELECT COALESCE(SUM(bytes),0) FROM link_bytes WHERE link='lte'").fetchone()[0]

        # Telemetry for `seconds`, and on until the budget is spent: a busy
        # machine segments and uploads it later, and the rule is only
        # tested at the budget's edge. Two minutes without reaching it is a
        # failure the caller sees (spent < budget).
        start = time.time()
        i = 0
        while time.time() < start + 120:
            conn.sendall(b"".join(fix(time.time_ns() + k, 45 + (i + k) * 1e-6) for k in range(50)))
            i += 50
            time.sleep(0.05)
            if time.time() >= start + seconds and spent_on_lte() >= budget_b:
                break
        time.sleep(2)
        bulk_on_lte = db.execute("SELECT COUNT(*) FROM items WHERE class=3 AND state='acked'").fetchone()[0]
        waiting = db.execute("SELECT COUNT(*) FROM items WHERE state='queued'").fetchone()[0]
        # Then the vehicle reaches Wi-Fi: the held bulk file and telemetry go.
        link.write_text("wifi\n")
        wait(lambda: db.execute("SELECT COUNT(*) FROM items WHERE class=3 AND state='acked'").fetchone()[0] == 1,
             60, "bulk over wifi")
        # Read last: an upload taken on LTE before the switch counts there
        # when it is acknowledged, however late.
        spent = spent_on_lte()
        biggest = db.execute("SELECT COALESCE(MAX(bytes),0) FROM items WHERE state='acked' AND class=1").fetchone()[0]
        conn.close()
    return {"budget_bytes": budget_b, "spent_bytes": spent, "over_by_bytes": max(0, spent - budget_b),
            "largest_segment_bytes": biggest, "within_one_segment": spent - budget_b <= biggest,
            "bulk_files_over_metered": bulk_on_lte, "segments_held_for_wifi": waiting}


def outage(root: Path, down_s: float = 30) -> dict:
    with Service(root / "t1", ["car"]) as s:
        sock = root / "t1.sock"
        cfg = socket_agent(s, "car", sock, 0.5)
        conn = feeder(sock)
        sent = []
        t_end = time.time() + down_s + 15
        killed_at = time.time() + 5
        restarted = False
        killed = False
        while time.time() < t_end:
            t = time.time_ns()
            conn.sendall(fix(t, 45.0))
            sent.append(t)
            if not killed and time.time() >= killed_at:
                s.kill()  # SIGKILL: the server vanishes mid-stream
                killed = True
            if killed and not restarted and time.time() >= killed_at + down_s:
                s.start()
                restarted = True
            time.sleep(0.1)
        conn.close()
        wait(lambda: s.agent_status(cfg)["spool_bytes"] == 0, 120, "drain")
        time.sleep(1)
        stored = stored_times(s.store, "car")
    lost = len(set(sent) - set(stored))
    dup = len(stored) - len(set(stored))
    return {"outage_s": down_s, "sent": len(sent), "stored": len(stored), "lost": lost, "duplicated": dup}


def noisy_fixes(t0_ns: int, first: int, n: int, rng) -> tuple[bytes, list[int]]:
    """`n` fixes 10 ms apart whose values compress like sensor noise, so a
    small disk fills in seconds."""
    out, times = [], []
    for i in range(first, first + n):
        t = t0_ns + i * 10_000_000
        out.append(f'{{"t_ns":{t},"path":"Vehicle.CurrentLocation.Latitude","value":{45 + rng.random()!r}}}\n'
                   f'{{"t_ns":{t},"path":"Vehicle.CurrentLocation.Longitude","value":{7 + rng.random()!r}}}\n'
                   f'{{"t_ns":{t},"path":"Vehicle.Speed","value":{100 * rng.random()!r}}}\n')
        times.append(t)
    return "".join(out).encode(), times


class NoisyStream:
    """Noisy fixes into an agent's socket (`noisy_fixes`), an hour in the
    past, and the times of all it sent."""

    def __init__(self, sock: Path, seed: int):
        self.conn = feeder(sock)
        self.rng = random.Random(seed)
        self.t0 = (time.time_ns() // 1_000_000_000 - 3600) * 1_000_000_000
        self.sent: list[int] = []

    def send(self, n: int) -> None:
        data, times = noisy_fixes(self.t0, len(self.sent), n, self.rng)
        self.conn.sendall(data)
        self.sent.extend(times)

    def wait_drained(self, s: Service, cfg: Path) -> None:
        """Until the agent's spool is empty and the last sample is stored."""
        wait(lambda: s.agent_status(cfg)["spool_bytes"] == 0 and self.sent[-1] in set(stored_times(s.store, "car")),
             120, "drain")


def mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def acked_names(spool: Path) -> list[str]:
    db = sqlite3.connect(f"file:{spool / 'agent.db'}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT name FROM items WHERE state = 'acked'")]
    finally:
        db.close()


def full_spool(root: Path) -> dict:
    """The agent's spool on a 2 MB tmpfs: telemetry keeps coming while the
    server is down until the disk is full, then 2 s more; the server comes
    back. Samples dropped by the overflow rule (oldest waiting first) are
    counted apart from acknowledged ones lost."""
    shutil.rmtree(root / "t7", ignore_errors=True)  # a previous run's store and keys
    spool = root / "t7" / "car.spool"
    if not mount_tmpfs(spool, "2m"):
        return {"skipped": "needs root (mounts a tmpfs)"}
    try:
        with Service(root / "t7", ["car"]) as s:
            cfg = socket_agent(s, "car", root / "t7.sock", 0.2)
            log = cfg.with_suffix(".log")
            stream = NoisyStream(root / "t7.sock", 7)
            send, sent = stream.send, stream.sent

            send(600)
            wait(lambda: len(stored_times(s.store, "car")) >= 600, 60, "stored before the outage")
            s.kill()
            end = time.time() + 60
            while "spool disk full" not in log.read_text(errors="replace"):
                if time.time() > end:
                    raise RuntimeError("the spool never filled")
                send(200)
                time.sleep(0.01)
            filled_at = len(sent)
            end = time.time() + 2
            while time.time() < end:
                send(200)
                time.sleep(0.01)
            running = s.agents[-1].poll() is None
            full_lines = [ln for ln in log.read_text(errors="replace").splitlines() if "spool disk full" in ln]
            s.start()
            back_at = len(sent)
            send(600)
            stream.wait_drained(s, cfg)
            st = s.agent_status(cfg)
            stored = stored_times(s.store, "car")
            acked = acked_names(spool)
            stream.conn.close()
    finally:
        umount(spool)
    have = set(stored)
    missing = [i for i, t in enumerate(sent) if t not in have]
    acked_missing = [n for n in acked if not (s.store / "car" / n).exists()]
    # The overflow rule may drop only what waited while the server was away.
    outside = [i for i in missing if not 600 <= i < back_at]
    return {"disk": "2 MB tmpfs", "sent": len(sent), "sent_before_full": filled_at, "stored": len(stored),
            "dropped_by_overflow_rule": len(missing) - len(outside),
            "segments_dropped": st["classes"][1]["dropped"], "samples_without_room": st["agent"]["samples_lost"],
            "lost_acknowledged": len(outside) + len(acked_missing),
            "duplicated": len(stored) - len(have), "agent_kept_running": running,
            "log_lines": full_lines}


def full_store(root: Path) -> dict:
    """The server's store (and catalog) on an 8 MB tmpfs that another
    program fills under a live stream for 3 s, then frees."""
    shutil.rmtree(root / "t8", ignore_errors=True)  # keys registered in a previous run's store
    store = root / "t8" / "store"
    if not mount_tmpfs(store, "8m"):
        return {"skipped": "needs root (mounts a tmpfs)"}
    try:
        with Service(root / "t8", ["car"]) as s:
            cfg = socket_agent(s, "car", root / "t8.sock", 0.2)
            stream = NoisyStream(root / "t8.sock", 8)
            send, sent = stream.send, stream.sent

            send(300)
            wait(lambda: len(stored_times(s.store, "car")) >= 300, 60, "stored before the disk fills")
            token = s.token("ops")
            wait(lambda: all(u["state"] == "indexed" for u in s.api("/api/uploads", token=token)["uploads"]),
                 60, "indexed before the disk fills")
            fd = os.open(store / ".filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            for chunk in (1 << 16, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\x5a" * chunk)
                except OSError:
                    pass
            os.close(fd)
            spool = s.root / "car.spool"
            acked_before = len(acked_names(spool))
            end = time.time() + 3
            while time.time() < end:
                send(50)
                time.sleep(0.05)
            wait(lambda: "No space left on device" in s.log(), 15, "the server's log line")
            acked_while_full = len(acked_names(spool)) - acked_before
            (store / ".filler").unlink()
            freed = time.time()
            stream.wait_drained(s, cfg)
            drain_s = time.time() - freed
            stored = stored_times(s.store, "car")
            line = next((ln for ln in s.log().splitlines() if "No space left on device" in ln), "")
            stream.conn.close()
    finally:
        umount(store)
    have = set(stored)
    return {"disk": "8 MB tmpfs", "sent": len(sent), "stored": len(stored), "lost": len(set(sent) - have),
            "duplicated": len(stored) - len(have), "acknowledged_while_full": acked_while_full,
            "drained_s_after_room": drain_s, "log_line": line}


def bench(out: Path, as_json: bool) -> int:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # A previous run's stores, spools and keys would carry over (a metered
    # link's spending adds up across runs of the same day).
    for old in out.glob("t[0-9]*"):
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    load = open("/proc/loadavg").read().split()[:3]
    say("server-side indexing and queries (convoy fleet bench)")
    server = json.loads(run("fleet", "bench", "--json").stdout)
    say("upload into fsynced storage, indexed, 4 vehicles at once")
    t2 = upload_throughput(out)
    say("live freshness on loopback, 20 s")
    t4 = freshness(out)
    say("metered link budget and bulk hold, then Wi-Fi")
    t6 = budget(out)
    say("a 30 s server outage (kill -9, restart) under a live stream")
    t1 = outage(out)
    say("full disks: the agent's spool on a 2 MB tmpfs, then the server's store on an 8 MB one")
    t7 = {"spool": full_spool(out), "store": full_store(out)}
    doc = {"load_average": " ".join(load), "index_and_queries": server, "upload": t2, "freshness": t4,
           "budget": t6, "outage_30s": t1, "full_disk": t7}
    (out / "bench.json").write_text(json.dumps(doc, indent=2))
    if as_json:
        print(json.dumps(doc))
        return 0
    ix, fq, tq = server["index"], server["fleet_query_ms"], server["track_query_ms"]
    sp, so = t7["spool"], t7["store"]
    if "skipped" in sp or "skipped" in so:
        full_row = ("0 acked samples lost/duplicated, full disk (spool, store)",
                    f"skipped: {sp.get('skipped') or so.get('skipped')}", None)
    else:
        full_row = ("0 acked samples lost/duplicated, full disk (spool, store)",
                    f"spool: {sp['lost_acknowledged']} lost, {sp['duplicated']} duplicated of {sp['sent']} "
                    f"({sp['dropped_by_overflow_rule']} dropped by the overflow rule); "
                    f"store: {so['lost']} lost, {so['duplicated']} duplicated of {so['sent']}",
                    sp["lost_acknowledged"] == 0 and sp["duplicated"] == 0 and sp["agent_kept_running"]
                    and so["lost"] == 0 and so["duplicated"] == 0 and so["acknowledged_while_full"] == 0)
    rows = [
        ("0 acked samples lost/duplicated, 30 s outage (server kill -9)",
         f"{t1['lost']} lost, {t1['duplicated']} duplicated of {t1['sent']}", t1["lost"] == 0 and t1["duplicated"] == 0),
        full_row,
        (">= 50 MB/s upload into fsynced storage incl. indexing",
         f"{t2['mb_per_s']:.1f} MB/s ({t2['bytes'] >> 20} MiB in {t2['seconds']:.1f} s)", t2["mb_per_s"] >= 50),
        (">= 250k telemetry samples/s indexed on one core",
         f"{ix['samples_per_s']:.0f} samples/s", ix["samples_per_s"] >= 250_000),
        ("live sample on the map p50 < 2 s, p99 < 10 s",
         f"p50 {t4['p50_s']:.2f} s, p99 {t4['p99_s']:.2f} s ({t4['link']})", t4["p50_s"] < 2 and t4["p99_s"] < 10),
        ("metered budget exceeded by <= 1 segment",
         f"{t6['spent_bytes']} B of {t6['budget_bytes']} B (segments <= {t6['largest_segment_bytes']} B)",
         t6["within_one_segment"]),
        ("0 bulk bytes over a metered link", f"{t6['bulk_files_over_metered']} bulk files", t6["bulk_files_over_metered"] == 0),
        ("fleet last positions, 1,000 vehicles < 100 ms",
         f"p50 {fq['p50']:.1f} ms, p99 {fq['p99']:.1f} ms", fq["p99"] < 100),
        ("one vehicle's 24 h track < 200 ms", f"p50 {tq['p50']:.1f} ms, p99 {tq['p99']:.1f} ms", tq["p99"] < 200),
    ]
    print(f"load average: {' '.join(load)} (start of run)")
    w = max(len(r[0]) for r in rows)
    for name, fig, ok in rows:
        print(f"{name:<{w}}  {'n/a ' if ok is None else 'met ' if ok else 'MISSED'}  {fig}")
    print("not measured here: kill -9 of the agent (tests/service.rs checks it); over an emulated LTE link, "
          "freshness, the 5 min and 1 h outages and the drain rate: `python -m convoy_lab.fleet lte` "
          "(root; docs/SERVICE.md)")
    return 0

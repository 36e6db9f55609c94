"""The fault campaign: uploads under seeded random faults, re-run until
complete, every stored file checked byte for byte.

    python -m convoy_lab.experiments run faults [--quick] [--uploads N] [--seeds 1] [--out results]

Each upload runs in its own `convoy emu` (a client and a server namespace
joined by one emulated link). On the server side a loop keeps `convoy
serve` running (restarting it when it is killed); on the client side a loop
re-runs `convoy send` until it reports the file stored, so every fault must
be survived by resuming. The faults of an upload are drawn from the seed:

* kill-client: `kill -9` of the running `convoy send` at a random moment;
* kill-server: `kill -9` of `convoy serve` at a random moment;
* outage: the link goes down (both ways, packets dropped) for 1-60 s;
* bursty-loss: Gilbert-Elliott loss;
* reorder, duplicate, corrupt: the emulator's fault keys (docs/EMU.md);
* disk-full: the server's store (a small tmpfs) is filled up, and freed a
  few seconds later.

Afterwards the stored file is compared with the source byte for byte: bytes
missing count as lost, bytes that differ as corrupted. The campaign prints
one line per upload and a summary (bytes lost, bytes corrupted, resumes,
time to completion), and writes OUT/faults/runs.csv and meta.json.
"""

from __future__ import annotations

import csv
import json
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..report import stamp
from ..runner import convoy_binary

FAULTS = ["kill-client", "kill-server", "outage", "bursty-loss", "reorder", "duplicate", "corrupt", "disk-full"]
STORE_MB = 96
SERVER = "10.7.0.2:4433"


@dataclass
class Upload:
    index: int
    size: int
    faults: list[str]
    link: str
    attempts: int = 0
    resumed: int = 0
    seconds: float = 0.0
    stored: bool = False
    bytes_lost: int = 0
    bytes_corrupted: int = 0
    notes: list[str] = field(default_factory=list)


def _kill_pid_file(path: Path) -> bool:
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, signal.SIGKILL)
        return True
    except (OSError, ValueError):
        return False


def plan(index: int, seed: int, quick: bool) -> tuple[int, list[str], str, dict]:
    """The upload's size, faults, link spec and fault timings, from the seed."""
    rng = random.Random(seed * 100_003 + index)
    size = rng.choice([256_000, 700_000, 1_000_000] if quick else [1_000_000, 3_000_000, 6_000_000])
    faults = sorted(rng.sample(FAULTS, rng.choice([1, 1, 2])))
    rate = rng.choice([20, 30, 50])
    delay = rng.choice([10, 20, 40])
    keys = [f"rate={rate}mbit", f"delay={delay}ms", f"seed={seed * 1000 + index}"]
    # Kills land when the server holds this share of the file (a random
    # moment of the transfer, not of the emulator's start-up).
    timing = {"kill_at_share": rng.uniform(0.1, 0.8), "free_disk_after": rng.uniform(2.0, 5.0)}
    if "outage" in faults:
        # Within the transfer: the link's clock starts about a second
        # before the client does, and the upload then takes size / rate.
        start = rng.uniform(1.0, 1.2 + size * 8 / (rate * 1e6))
        length = rng.uniform(1.0, 3.0) if quick else rng.uniform(1.0, 60.0)
        keys += [f"outage={start:.2f}s-{start + length:.2f}s", "outage-policy=drop"]
        timing["outage_s"] = length
    if "bursty-loss" in faults:
        keys.append("loss=ge:0.01/0.3")
    if "reorder" in faults:
        keys += ["reorder=5%", "reorder-delay=5ms"]
    if "duplicate" in faults:
        keys.append("duplicate=3%")
    if "corrupt" in faults:
        keys.append("corrupt=1%")
    return size, faults, "lte:" + ",".join(keys), timing


def _compare(src: Path, dst: Path) -> tuple[int, int]:
    """(bytes lost, bytes corrupted) of dst against src."""
    a = src.read_bytes()
    if not dst.exists():
        return len(a), 0
    b = dst.read_bytes()
    common = min(len(a), len(b))
    differing = sum(1 for x, y in zip(a[:common], b[:common]) if x != y) if a[:common] != b[:common] else 0
    return max(0, len(a) - len(b)), differing + max(0, len(b) - len(a))


class Store:
    """The server's store: a small tmpfs, so `disk-full` is a real ENOSPC."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STORE_MB}m", "tmpfs", str(path)], check=True)

    def fill(self, leave: int) -> Path:
        """Fills the store up to `leave` bytes free."""
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize
        filler = self.path / ".filler"
        with open(filler, "wb") as f:
            left = max(0, free - leave)
            chunk = b"\0" * (1 << 20)
            while left > 0:
                n = min(left, len(chunk))
                try:
                    f.write(chunk[:n])
                except OSError:
                    break
                left -= n
        return filler

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


def run_upload(u: Upload, timing: dict, work: Path, store: Store, key: Path, timeout: float) -> None:
    convoy = str(convoy_binary())
    src = work / "src" / f"upload-{u.index}.bin"
    run_dir = work / "runs" / str(u.index)
    run_dir.mkdir(parents=True, exist_ok=True)
    server_pid, client_pid = run_dir / "server.pid", run_dir / "client.pid"
    server_loop = (
        f"while true; do {shlex.quote(convoy)} serve --open --listen {SERVER} --dir {shlex.quote(str(store.path))} "
        f"--key {shlex.quote(str(key))} --idle-timeout 10 --json >> {shlex.quote(str(run_dir / 'server.log'))} 2>&1 & "
        f"echo $! > {shlex.quote(str(server_pid))}; wait $!; sleep 0.2; done"
    )
    client_loop = (
        f"n=0; until echo run >> {shlex.quote(str(run_dir / 'attempts'))}; {shlex.quote(convoy)} send {shlex.quote(str(src))} {SERVER} --server-key {shlex.quote(str(key))}.pub "
        f"--idle-timeout 8 --json >> {shlex.quote(str(run_dir / 'client.log'))} 2>> {shlex.quote(str(run_dir / 'client.err'))} & "
        f"echo $! > {shlex.quote(str(client_pid))}; wait $!; do n=$((n+1)); [ $n -ge 60 ] && exit 1; sleep 0.5; done"
    )
    filler = None
    if "disk-full" in u.faults:
        filler = store.fill(leave=u.size // 3)
    cmd = [convoy, "emu", "--link", u.link, "--server", server_loop, "--", "sh", "-c", client_loop]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(run_dir / "emu.err", "w"))

    def inject() -> None:
        if not {"kill-client", "kill-server"} & set(u.faults):
            return
        share = timing["kill_at_share"]
        partial_dir = store.path / ".convoy-partial"
        deadline = time.monotonic() + 60
        held = 0
        while time.monotonic() < deadline and proc.poll() is None:
            # One upload at a time, so any partial file is this one's (the
            # server names them after a hash of the upload's name; matching
            # the name itself found nothing, and no kill ever landed).
            held = sum(p.stat().st_size for p in partial_dir.glob("*.part")) if partial_dir.exists() else 0
            if held >= share * u.size:
                break
            time.sleep(0.02)
        else:
            return
        when = f"{time.monotonic() - started:.1f} s, server holding {held / u.size:.0%}"
        if "kill-client" in u.faults and _kill_pid_file(client_pid):
            u.notes.append(f"client killed at {when}")
        if "kill-server" in u.faults and _kill_pid_file(server_pid):
            u.notes.append(f"server killed at {when}")

    def free_disk() -> None:
        time.sleep(timing["free_disk_after"])
        if filler is not None:
            filler.unlink(missing_ok=True)
            u.notes.append(f"disk freed at {timing['free_disk_after']:.1f} s")

    threads = [threading.Thread(target=inject, daemon=True), threading.Thread(target=free_disk, daemon=True)]
    for t in threads:
        t.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        u.notes.append(f"not complete after {timeout:.0f} s")
    for t in threads:
        t.join(timeout=10)
    if filler is not None:
        filler.unlink(missing_ok=True)
    u.seconds = round(time.monotonic() - started, 2)
    reports = []
    for line in (run_dir / "client.log").read_text().splitlines() if (run_dir / "client.log").exists() else []:
        try:
            reports.append(json.loads(line))
        except ValueError:
            pass
    errors = (run_dir / "client.err").read_text().splitlines() if (run_dir / "client.err").exists() else []
    attempts = run_dir / "attempts"
    u.attempts = len(attempts.read_text().splitlines()) if attempts.exists() else 0
    if any("No space left" in e or "disk" in e.lower() for e in errors):
        u.notes.append("the server reported its disk full")
    files = [f for r in reports for f in r.get("files", [])]
    u.resumed = sum(1 for f in files if f.get("resumed_from", 0) > 0)
    u.bytes_lost, u.bytes_corrupted = _compare(src, store.path / src.name)
    u.stored = u.bytes_lost == 0 and u.bytes_corrupted == 0
    # The stored copy is checked; free the small store for the next upload.
    (store.path / src.name).unlink(missing_ok=True)


def run_campaign(uploads: int, seed: int, quick: bool, out: Path, stream=sys.stderr) -> dict:
    work = (out / "faults").resolve()
    (work / "src").mkdir(parents=True, exist_ok=True)
    key = work / "server.key"
    for p in (key, Path(f"{key}.pub")):
        p.unlink(missing_ok=True)
    subprocess.run([str(convoy_binary()), "keygen", "--out", str(key)], check=True, capture_output=True)
    store = Store(work / "store")
    rows: list[Upload] = []
    started, taken = time.time(), stamp.stamp()
    try:
        for i in range(uploads):
            size, faults, link, timing = plan(i, seed, quick)
            src = work / "src" / f"upload-{i}.bin"
            src.write_bytes(random.Random(seed * 7919 + i).randbytes(size))
            u = Upload(index=i, size=size, faults=faults, link=link)
            outage = timing.get("outage_s", 0.0)
            run_upload(u, timing, work, store, key, timeout=(120.0 if quick else 300.0) + outage * 2)
            rows.append(u)
            src.unlink(missing_ok=True)
            status = "ok" if u.stored else f"LOST {u.bytes_lost} CORRUPTED {u.bytes_corrupted}"
            print(
                f"[{i + 1}/{uploads}] {size / 1e6:.1f} MB {'+'.join(faults):<24} {u.attempts} runs, "
                f"{u.resumed} resumed, {u.seconds:.1f} s: {status}" + (f" ({'; '.join(u.notes)})" if u.notes else ""),
                file=stream,
                flush=True,
            )
    finally:
        store.close()
    times = [u.seconds for u in rows]
    summary = {
        "uploads": len(rows),
        "stored": sum(u.stored for u in rows),
        "bytes": sum(u.size for u in rows),
        "bytes_lost": sum(u.bytes_lost for u in rows),
        "bytes_corrupted": sum(u.bytes_corrupted for u in rows),
        "resumes": sum(u.resumed for u in rows),
        # Kills that landed mid-transfer (a small upload may finish first).
        "kills": sum(1 for u in rows for n in u.notes if "killed" in n),
        "outages": sum(1 for u in rows if "outage" in u.faults),
        "runs": sum(u.attempts for u in rows),
        "completion_s_median": round(statistics.median(times), 2) if times else 0.0,
        "completion_s_p95": round(sorted(times)[int(0.95 * (len(times) - 1))], 2) if times else 0.0,
        "completion_s_max": max(times, default=0.0),
        "elapsed_s": round(time.time() - started, 1),
        "seed": seed,
        "quick": quick,
        "stamp": stamp.finish(taken),
    }
    with open(work / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(asdict(rows[0]).keys()) if rows else ["index"])
        w.writeheader()
        for u in rows:
            d = asdict(u)
            d["faults"] = "+".join(u.faults)
            d["notes"] = "; ".join(u.notes)
            w.writerow(d)
    (work / "meta.json").write_text(json.dumps(summary, indent=1) + "\n")
    return {"summary": summary, "uploads": [asdict(u) for u in rows]}


def print_summary(result: dict, stream=None) -> None:
    stream = stream or sys.stdout
    s = result["summary"]
    print("\n== faults: uploads under seeded random faults, re-run until complete", file=stream)
    print(f"   {s['uploads']} uploads ({s['bytes'] / 1e6:.1f} MB), seed {s['seed']}, {s['runs']} runs of convoy send", file=stream)
    print(f"   stored intact:       {s['stored']} of {s['uploads']}", file=stream)
    print(f"   bytes lost:          {s['bytes_lost']}", file=stream)
    print(f"   bytes corrupted:     {s['bytes_corrupted']}", file=stream)
    print(f"   resumes:             {s['resumes']}", file=stream)
    print(f"   kills mid-transfer:  {s['kills']}; uploads with an outage: {s['outages']}", file=stream)
    print(
        f"   time to completion:  median {s['completion_s_median']} s, p95 {s['completion_s_p95']} s, max {s['completion_s_max']} s",
        file=stream,
    )
    target = s["bytes_lost"] == 0 and s["bytes_corrupted"] == 0 and s["stored"] == s["uploads"]
    print(f"   target 0 bytes lost or corrupted: {'met' if target else 'MISSED'}", file=stream)

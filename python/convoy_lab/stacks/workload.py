"""The vehicle's workload, the same for every stack, and the feeder that
makes it in the emulator's client namespace.

Timeline (link time, 0 = the emulator's start, which the outage counts
from):

    [0, start)                the servers and the vehicle's process start;
                              nothing is made yet, so every stack meets the
                              outage at the same point of its workload
    start + camera_at         one camera file (50 MB) lands in the camera inbox
    every sample_every_s      one telemetry sample (three JSON lines, as the
                              agent's socket source reads them) to the
                              vehicle's Unix socket
    every log_every_s         one log file (200 kB) lands in the log inbox
    outage_start_s            (start + before) the link drops everything both
                              ways for outage_s
    generate_s                (outage end + after) no more samples or logs;
                              the feeder waits until every file is
                              acknowledged (or drain_max_s)

Files are written beside the inbox and renamed into it, so a stack never
sees half a file. The vehicle process (the stack's client) reads the
socket and the inboxes; the feeder never talks to the network itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

LOG_INBOX = "inbox-logs"
CAMERA_INBOX = "inbox-camera"


@dataclass(frozen=True)
class Plan:
    start_s: float = 10.0  # set-up allowance: the slowest stack (versitygw) is up in a few seconds
    before_s: float = 20.0
    outage_s: float = 30.0
    after_s: float = 30.0  # samples and logs keep coming this long after the outage
    drain_max_s: float = 240.0  # then give up waiting for the files
    camera_bytes: int = 50_000_000
    camera_at_s: float = 1.0
    log_bytes: int = 200_000
    log_every_s: float = 2.0
    sample_every_s: float = 0.1

    @property
    def outage_start_s(self) -> float:
        return self.start_s + self.before_s

    @property
    def outage_end_s(self) -> float:
        return self.outage_start_s + self.outage_s

    @property
    def generate_s(self) -> float:
        return self.outage_end_s + self.after_s

    def save(self, root: Path) -> None:
        (root / "plan.json").write_text(json.dumps(asdict(self)))

    @staticmethod
    def load(root: Path) -> "Plan":
        return Plan(**json.loads((root / "plan.json").read_text()))


def socket_path(root: Path) -> Path:
    """The vehicle's Unix socket: in /tmp under a name derived from the run's
    directory, as a deep run directory (pytest's) would pass the 107 bytes
    an AF_UNIX path may have."""
    return Path(tempfile.gettempdir()) / f"convoy-stacks-{hashlib.sha1(str(root).encode()).hexdigest()[:12]}.sock"


def sample(t_ns: int, lat: float) -> bytes:
    """One telemetry sample: position and speed at `t_ns`, three JSON lines
    (Vehicle Signal Specification paths, as the agent ingests them)."""
    return (json.dumps({"t_ns": t_ns, "path": "Vehicle.CurrentLocation.Latitude", "value": lat}) + "\n"
            + json.dumps({"t_ns": t_ns, "path": "Vehicle.CurrentLocation.Longitude", "value": 7.68}) + "\n"
            + json.dumps({"t_ns": t_ns, "path": "Vehicle.Speed", "value": 40.0}) + "\n").encode()


def sample_times(payload: bytes) -> list[int]:
    """The sample times in JSON lines (one per Latitude line)."""
    out = []
    for line in payload.splitlines():
        if b"Latitude" in line:
            out.append(json.loads(line)["t_ns"])
    return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a live process and its reaped children, from
    /proc (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    # After the command: state is field 3; utime, stime, cutime, cstime are 14-17.
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def say(msg: str) -> None:
    print(f"stacks: {msg}", file=sys.stderr, flush=True)


def _drop(root: Path, inbox: str, name: str, data: bytes, files) -> None:
    tmp = root / f".{name}.tmp"
    tmp.write_bytes(data)
    created = time.time_ns()
    tmp.rename(root / inbox / name)
    files.write(json.dumps({"name": name, "bytes": len(data), "created_ns": created,
                            "sha256": hashlib.sha256(data).hexdigest(), "kind": inbox}) + "\n")


def _writer(s: socket.socket, outbox: queue.Queue) -> None:
    while (payload := outbox.get()) is not None:
        try:
            s.sendall(payload)
        except OSError:
            return
    s.close()


def feed(root: Path, vehicle: list[str], acked: Callable[[Path], set[str]], env: dict | None = None) -> int:
    """Runs the vehicle process and the workload until every file is
    acknowledged (`acked(root)`: the names the stack has confirmed durable)
    or the plan's drain limit; writes sent.txt (sample times), files.jsonl
    and client.json (link time 0, the vehicle's CPU seconds)."""
    plan = Plan.load(root)
    link0 = int(os.environ["CONVOY_EMU_EPOCH_NS"]) / 1e9
    for inbox in (LOG_INBOX, CAMERA_INBOX):
        (root / inbox).mkdir(exist_ok=True)
    # The servers first: a stack's client may give up on a server that is
    # not listening yet, which is not what is measured.
    deadline = time.time() + 60
    while not (root / "server-ready").exists():
        if time.time() > deadline:
            say("the server side never became ready")
            return 1
        time.sleep(0.05)
    log = open(root / "vehicle.log", "ab")
    proc = subprocess.Popen(vehicle, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    s = socket.socket(socket.AF_UNIX)
    while s.connect_ex(str(socket_path(root))) != 0:
        if time.time() > deadline or proc.poll() is not None:
            say("the vehicle's socket did not open")
            return 1
        time.sleep(0.05)
    camera = os.urandom(plan.camera_bytes)
    # A vehicle that stops reading its socket must not hold up the clock of
    # the workload: samples are stamped when made and written by a thread
    # of their own, so back-pressure shows as those samples' delay.
    outbox: queue.Queue = queue.Queue()
    threading.Thread(target=_writer, args=(s, outbox), daemon=True).start()
    sent = open(root / "sent.txt", "a", buffering=1)
    files = open(root / "files.jsonl", "a", buffering=1)
    names: list[str] = []
    n = 0
    # A stack still starting at `start` begins late, and the row says so.
    late = max(0.0, time.time() - (link0 + plan.start_s))
    time.sleep(max(0.0, link0 + plan.start_s - time.time()))
    next_sample = next_log = time.time()
    camera_due = link0 + plan.start_s + plan.camera_at_s
    end_gen = link0 + plan.generate_s
    cpu = 0.0
    while True:
        now = time.time()
        if now < end_gen:
            if now >= next_sample:
                t = time.time_ns()
                outbox.put(sample(t, 45.0 + n * 1e-6))
                sent.write(f"{t}\n")
                n += 1
                next_sample += plan.sample_every_s
            if now >= next_log:
                name = f"log-{len(names):04d}.bin"
                _drop(root, LOG_INBOX, name, os.urandom(plan.log_bytes), files)
                names.append(name)
                next_log += plan.log_every_s
        if camera is not None and now >= camera_due:
            _drop(root, CAMERA_INBOX, "camera-0.bin", camera, files)
            names.append("camera-0.bin")
            camera = None
        cpu = cpu_seconds(proc.pid) or cpu
        if now >= end_gen + 2 and camera is None:
            if set(names) <= acked(root):
                break
            if now >= link0 + plan.generate_s + plan.drain_max_s:
                say(f"files not acknowledged within {plan.drain_max_s:g} s after the workload")
                break
        if proc.poll() is not None:
            say(f"the vehicle process exited with {proc.returncode}")
            break
        time.sleep(max(0.0, min(next_sample, next_log) - time.time()) if now < end_gen else 0.1)
    # Let the last samples' segments or messages arrive before the end.
    time.sleep(2)
    cpu = cpu_seconds(proc.pid) or cpu
    outbox.put(None)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    (root / "client.json").write_text(json.dumps({"link0_ns": int(link0 * 1e9), "vehicle_cpu_s": cpu,
                                                  "ended_ns": time.time_ns(), "late_s": late}))
    return 0


def watch_inboxes(root: Path, seen: set[str]) -> list[tuple[Path, str]]:
    """New files in the inboxes, logs before camera files, oldest first:
    (path, kind)."""
    out = []
    for inbox in (LOG_INBOX, CAMERA_INBOX):
        for p in sorted((root / inbox).iterdir()):
            if p.name not in seen:
                seen.add(p.name)
                out.append((p, inbox))
    return out


def write_ack(root: Path, name: str) -> None:
    """An incumbent's record that the server confirmed `name` as stored."""
    with open(root / "acks.jsonl", "a") as f:
        f.write(json.dumps({"name": name, "ack_ns": time.time_ns()}) + "\n")


def incumbent_vehicle(files: Callable[[Path, str], None], telemetry: Callable[[Path, str], None],
                      root: Path, server_ip: str) -> int:
    """An incumbent's vehicle: its file uploader on a thread of its own,
    its telemetry on this one, until the emulator ends it."""
    threading.Thread(target=files, args=(root, server_ip), daemon=True).start()
    telemetry(root, server_ip)
    return 0


def incumbent_vehicle_command(name: str, root: Path, server_ip: str) -> list[str]:
    """How the emulator starts an incumbent's vehicle (`run.py vehicle`)."""
    return [sys.executable, "-m", "convoy_lab.stacks.run", "vehicle", name, str(root), server_ip]


def read_acked(root: Path) -> set[str]:
    """The files an incumbent confirmed (see `read_acks`)."""
    return set(read_acks(root))


def read_acks(root: Path) -> dict[str, int]:
    """First acknowledgement time of each file an incumbent confirmed."""
    out: dict[str, int] = {}
    try:
        text = (root / "acks.jsonl").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if line.endswith("}"):
            d = json.loads(line)
            out.setdefault(d["name"], d["ack_ns"])
    return out


def serve_socket(root: Path):
    """The vehicle's end of the feeder's socket: a listening Unix socket
    (as the agent's socket source is), one connection accepted."""
    path = socket_path(root)
    path.unlink(missing_ok=True)
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(str(path))
    ls.listen(1)
    conn, _ = ls.accept()
    ls.close()
    return conn


def read_samples(conn, on_sample: Callable[[int, bytes], None]) -> None:
    """Reads the feeder's JSON lines until it closes, calling `on_sample(t_ns,
    payload)` with each whole sample (the three lines of one time)."""
    buf = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while True:
            # A sample ends with its Speed line.
            end = buf.find(b"Vehicle.Speed")
            if end < 0:
                break
            nl = buf.find(b"\n", end)
            if nl < 0:
                break
            payload, buf = buf[:nl + 1], buf[nl + 1:]
            on_sample(sample_times(payload)[0], payload)


class CpuRecorder:
    """Writes the CPU seconds of the server side's processes to
    server-cpu.json every half second: the emulator ends them with SIGTERM,
    then SIGKILL, so the last figure written is the one read."""

    def __init__(self, root: Path, pids: list[int]):
        self.path, self.pids, self.next = root / "server-cpu.json", pids, 0.0
        self.last: dict[int, float] = {}

    def tick(self) -> None:
        if time.time() < self.next:
            return
        self.next = time.time() + 0.5
        for pid in self.pids:
            cpu = cpu_seconds(pid)
            if cpu is not None:
                self.last[pid] = cpu
        self.path.write_text(json.dumps({"cpu_s": sum(self.last.values())}))

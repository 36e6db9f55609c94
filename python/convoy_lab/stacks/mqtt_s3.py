"""MQTT + S3 multipart: the stack of AWS IoT FleetWise / Greengrass
deployments, built from the parts a fleet engineer would pick.

Server namespace: Debian's mosquitto (persistence on), versitygw (an
S3-compatible server) over TLS with a certificate made for the run, and an
ingest subscriber (paho-mqtt, QoS 1, persistent session) that stamps each
sample's arrival.

Vehicle namespace, one process:
* telemetry: paho-mqtt, QoS 1, a persistent session (clean_session off),
  keep-alive 5 s; every sample goes first to an on-disk queue (SQLite) and
  leaves it only on PUBACK, so samples made while offline wait on disk and
  go out oldest first when the connection is back;
* files: boto3 (path-style, TLS), two upload workers, logs before the
  camera file. A file under 8 MiB is one PutObject; a larger one a
  multipart upload of 8 MiB parts, 10 at once (boto3's TransferConfig
  defaults) that resumes: the upload id is kept on disk, and after any
  error the parts the server already has (ListParts) are not sent again.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .workload import (CpuRecorder, incumbent_vehicle, incumbent_vehicle_command, read_acked, read_acks,
                       read_samples, serve_socket, watch_inboxes, write_ack)

NAME = "mqtt-s3"
MQTT_PORT = 1883
S3_PORT = 7070
BUCKET = "fleet"
ACCESS, SECRET = "convoylab", "convoylabsecret"
TOPIC = "vehicles/car/telemetry"
PART = 8 * 1024 * 1024  # boto3's multipart threshold and chunk size
PART_CONCURRENCY = 10  # boto3's max_concurrency
KEEPALIVE_S = 5


def versitygw() -> str:
    """$CONVOY_VERSITYGW, the repository's .tools/bin (scripts/setup.sh), PATH."""
    from ..runner import REPO_ROOT

    for cand in (os.environ.get("CONVOY_VERSITYGW"), REPO_ROOT / ".tools" / "bin" / "versitygw",
                 shutil.which("versitygw")):
        if cand and Path(cand).is_file():
            return str(cand)
    raise RuntimeError("versitygw not found: scripts/setup.sh builds it into .tools/bin (or set CONVOY_VERSITYGW)")


def mosquitto() -> str | None:
    """Debian's broker: in /usr/sbin, which a non-root PATH may lack."""
    return shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").is_file() else None)


def unavailable() -> str | None:
    """Why this stack cannot run here, or None."""
    if not mosquitto():
        return "mosquitto not installed (scripts/setup.sh installs Debian's)"
    try:
        versitygw()
        import boto3  # noqa: F401
        import paho.mqtt.client  # noqa: F401
    except (RuntimeError, ImportError) as err:
        return str(err)
    return None


def prepare(root: Path, server_ip: str) -> None:
    (root / "mosquitto").mkdir()
    (root / "s3" / "root" / BUCKET).mkdir(parents=True)
    (root / "s3" / "meta").mkdir()
    (root / "mosquitto.conf").write_text(
        f"listener {MQTT_PORT}\nallow_anonymous true\npersistence true\n"
        f"persistence_location {root / 'mosquitto'}/\nmax_queued_messages 0\n"
        # As root the broker would switch to the mosquitto user, who cannot
        # write the run's directory.
        f"user root\nlog_dest file {root / 'mosquitto.log'}\n")


def _wait_port(host: str, port: int, limit: float) -> None:
    import socket

    end = time.time() + limit
    while True:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            if time.time() > end:
                raise RuntimeError(f"nothing listens on {host}:{port}")
            time.sleep(0.05)


def server_side(root: Path, server_ip: str) -> int:
    import paho.mqtt.client as mqtt

    log = open(root / "server.log", "ab")
    broker = subprocess.Popen([mosquitto() or "mosquitto", "-c", str(root / "mosquitto.conf")], stdout=log, stderr=log)
    s3 = subprocess.Popen(
        [versitygw(), "--access", ACCESS, "--secret", SECRET, "--port", f"{server_ip}:{S3_PORT}",
         "--cert", str(root / "cert.pem"), "--key", str(root / "key.pem"),
         "posix", "--sidecar", str(root / "s3" / "meta"), str(root / "s3" / "root")],
        stdout=log, stderr=log)
    _wait_port("127.0.0.1", MQTT_PORT, 20)
    _wait_port(server_ip, S3_PORT, 30)
    arrivals = open(root / "arrivals.jsonl", "a", buffering=1)
    subscribed = threading.Event()

    def on_message(client, userdata, msg):
        now = time.time_ns()
        for line in msg.payload.splitlines():
            if b"Latitude" in line:
                arrivals.write(json.dumps({"t_ns": json.loads(line)["t_ns"], "seen_ns": now}) + "\n")

    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="ingest", clean_session=False,
                      protocol=mqtt.MQTTv311)
    sub.on_message = on_message
    sub.on_connect = lambda c, u, f, rc, p: c.subscribe(TOPIC, qos=1)
    sub.on_subscribe = lambda c, u, mid, rcs, p: subscribed.set()
    sub.connect("127.0.0.1", MQTT_PORT, keepalive=30)
    sub.loop_start()
    if not subscribed.wait(20):
        raise RuntimeError("the ingest subscriber was not subscribed")
    (root / "server-ready").touch()
    cpu = CpuRecorder(root, [broker.pid, s3.pid, os.getpid()])
    while broker.poll() is None and s3.poll() is None:
        cpu.tick()
        time.sleep(0.1)
    return 1


# ----------------------------------------------------------------------------
# The vehicle.


class DiskQueue:
    """Samples waiting for their PUBACK, in SQLite: what a restart or a long
    outage would otherwise lose."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS q (id INTEGER PRIMARY KEY, payload BLOB, mid INTEGER)")
        self.lock = threading.Lock()

    def put(self, payload: bytes) -> None:
        with self.lock:
            self.db.execute("INSERT INTO q (payload) VALUES (?)", (payload,))

    def unsent(self, limit: int) -> list[tuple[int, bytes]]:
        with self.lock:
            return self.db.execute("SELECT id, payload FROM q WHERE mid IS NULL ORDER BY id LIMIT ?",
                                   (limit,)).fetchall()

    def sent(self, row: int, mid: int) -> None:
        with self.lock:
            self.db.execute("UPDATE q SET mid = ? WHERE id = ?", (mid, row))

    def acked(self, mid: int) -> None:
        with self.lock:
            self.db.execute("DELETE FROM q WHERE mid = ?", (mid,))


def _telemetry(root: Path, server_ip: str) -> None:
    import paho.mqtt.client as mqtt

    q = DiskQueue(root / "mqtt-queue.db")
    connected = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="car", clean_session=False,
                    protocol=mqtt.MQTTv311)
    c.connect_timeout = 5
    c.reconnect_delay_set(1, 4)
    c.on_connect = lambda *a: connected.set()
    c.on_disconnect = lambda *a: connected.clear()
    c.on_publish = lambda client, userdata, mid, rc, props: q.acked(mid)
    c.connect_async(server_ip, MQTT_PORT, keepalive=KEEPALIVE_S)
    c.loop_start()
    conn = serve_socket(root)
    threading.Thread(target=read_samples, args=(conn, lambda t, payload: q.put(payload)), daemon=True).start()
    while True:
        if not connected.wait(0.05):
            continue
        rows = q.unsent(200)
        if not rows:
            time.sleep(0.01)
            continue
        for row, payload in rows:
            # While connected paho sends it; if the connection just went,
            # paho keeps a QoS 1 message and resends it in the resumed
            # session, so the row is marked either way.
            info = c.publish(TOPIC, payload, qos=1)
            q.sent(row, info.mid)


def _s3_client(root: Path, server_ip: str):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=f"https://{server_ip}:{S3_PORT}", aws_access_key_id=ACCESS,
        aws_secret_access_key=SECRET, region_name="us-east-1", verify=str(root / "cert.pem"),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"},
                      connect_timeout=5, read_timeout=15, max_pool_connections=PART_CONCURRENCY + 2,
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))


def upload(s3, root: Path, path: Path) -> None:
    """One file to the bucket; a multipart upload resumes from the parts the
    server already holds. Raises on any failure (the caller retries)."""
    key, size = path.name, path.stat().st_size
    if size < PART:
        s3.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
        return
    state = root / "s3-state" / f"{key}.json"
    state.parent.mkdir(exist_ok=True)
    if state.exists():
        upload_id = json.loads(state.read_text())["upload_id"]
        listed = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id, MaxParts=1000)
        done = {p["PartNumber"]: p["ETag"] for p in listed.get("Parts", [])}
    else:
        upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        state.write_text(json.dumps({"upload_id": upload_id}))
        done = {}
    count = (size + PART - 1) // PART

    def part(n: int) -> tuple[int, str]:
        with path.open("rb") as f:
            f.seek((n - 1) * PART)
            body = f.read(PART)
        return n, s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=n, Body=body)["ETag"]

    with ThreadPoolExecutor(PART_CONCURRENCY) as ex:
        for n, etag in ex.map(part, [n for n in range(1, count + 1) if n not in done]):
            done[n] = etag
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": done[n]} for n in sorted(done)]})
    state.unlink()


def _files(root: Path, server_ip: str) -> None:
    s3 = _s3_client(root, server_ip)
    work: queue.PriorityQueue = queue.PriorityQueue()

    def worker():
        while True:
            _, _, path = work.get()
            while True:
                try:
                    upload(s3, root, path)
                    write_ack(root, path.name)
                    break
                except Exception as err:  # noqa: BLE001 -- any failure: wait, then resume
                    print(f"{path.name}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
                    time.sleep(1)

    for _ in range(2):
        threading.Thread(target=worker, daemon=True).start()
    seen: set[str] = set()
    seq = 0
    while True:
        for path, kind in watch_inboxes(root, seen):
            seq += 1
            work.put((0 if kind == "inbox-logs" else 1, seq, path))
        time.sleep(0.1)


def vehicle(root: Path, server_ip: str) -> int:
    return incumbent_vehicle(_files, _telemetry, root, server_ip)


def vehicle_command(root: Path, server_ip: str) -> list[str]:
    return incumbent_vehicle_command(NAME, root, server_ip)


# File name → when the server confirmed it stored (the vehicle's log).
acks = read_acks
acked = read_acked


def received(root: Path) -> dict:
    arrivals = [json.loads(x) for x in (root / "arrivals.jsonl").read_text().splitlines() if x.endswith("}")]
    store = root / "s3" / "root" / BUCKET
    return {"arrivals": [(a["seen_ns"], a["t_ns"]) for a in arrivals],
            "files": {p.name: p for p in store.iterdir() if p.is_file()}}

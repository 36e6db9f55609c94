"""One run: one stack, one drive trace, one loss setting, the workload of
convoy_lab.stacks.workload, under `convoy emu`; then its figures, read
from what each side wrote and from the link's per-packet records.

    python -m convoy_lab.stacks.run side-server|side-client|vehicle STACK ROOT SERVER_IP

are the entry points the emulator runs in its namespaces.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from ..fleet.bench import freshness_in, pct
from ..runner import convoy_binary
from ..traces import carry_time_s, twin, window_capacity_mbit
from . import convoy_stack, https_put, mqtt_s3
from .workload import Plan, feed, sample, say, sha256, socket_path

STACKS = {m.NAME: m for m in (convoy_stack, mqtt_s3, https_put)}
SERVER_IP = "10.7.0.2"  # the first link's server address (docs/EMU.md)
LINK = "lte"


def make_cert(root: Path, ip: str) -> None:
    """A self-signed certificate for `ip` (cert.pem, key.pem): what the
    incumbents' TLS servers present and their clients trust."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=convoy lab", "-addext", f"subjectAltName=IP:{ip}",
                    "-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem")],
                   check=True, capture_output=True)


def link_spec(trace: Path, loss_pct: float, plan: Plan, delay_ms: float = 20, queue: int = 200,
              seed: int = 1) -> str:
    keys = [f"up={trace}", f"down={twin(trace)}", f"delay={delay_ms:g}ms", f"queue={queue}"]
    if loss_pct:
        # On the data direction only, as in every other experiment (scenarios.py).
        keys.append(f"up-loss={loss_pct:g}%")
    if plan.outage_s:
        keys += [f"outage={plan.outage_start_s:g}s-{plan.outage_end_s:g}s", "outage-policy=drop"]
    keys.append(f"seed={seed}")
    return f"{LINK}:" + ",".join(keys)


def run_one(stack: str, trace: Path, loss_pct: float, plan: Plan, root: Path) -> dict:
    """Runs one stack through the plan and returns its row (status `ok`,
    or `error` with the reason and whatever could still be measured)."""
    mod = STACKS[stack]
    row = {"stack": stack, "trace": trace.name, "loss_pct": loss_pct, "outage_s": plan.outage_s,
           "status": "ok", "error": ""}
    reason = mod.unavailable() if hasattr(mod, "unavailable") else None
    if reason:
        return {**row, "status": "skipped", "error": reason}
    root = root.resolve()
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir(parents=True)
    plan.save(root)
    make_cert(root, SERVER_IP)
    mod.prepare(root, SERVER_IP)
    me = [sys.executable, "-m", "convoy_lab.stacks.run"]
    spec = link_spec(trace, loss_pct, plan)
    cmd = [str(convoy_binary()), "emu", "--link", spec, "--records", str(root / "records"),
           "--server", "exec " + shlex.join([*me, "side-server", stack, str(root), SERVER_IP]),
           "--", *me, "side-client", stack, str(root), SERVER_IP]
    (root / "command.txt").write_text(shlex.join(cmd) + "\n")
    say(f"{stack} over {spec}")
    started = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=open(root / "emu.stderr", "w"),
                           timeout=plan.generate_s + plan.drain_max_s + 120)
        if p.returncode != 0:
            row.update(status="error", error=f"convoy emu exited with {p.returncode}; see {root}")
    except subprocess.TimeoutExpired:
        row.update(status="error", error=f"timed out; see {root}")
    row["wall_s"] = time.time() - started
    socket_path(root).unlink(missing_ok=True)
    try:
        row.update(figures(stack, root, trace, plan))
    except (OSError, ValueError, KeyError) as err:
        row.update(status="error", error=f"{row['error']} figures: {type(err).__name__}: {err}".strip())
    return row


def _newest_shown(arrivals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(arrival, sample time) of each delivery → (time, newest sample the
    server had by then), as the map's poller records for convoy."""
    out, newest = [], 0
    for seen, t in sorted(arrivals):
        if t > newest:
            newest = t
            out.append((seen, t))
    return out


def air_bytes(records: Path) -> dict:
    """IP bytes that went on the air each way: delivered, plus lost on the
    air (loss after the queue: capacity used, nothing delivered). Queue and
    outage drops never left the sender's side of the link."""
    out = {}
    for direction in ("up", "down"):
        df = pd.read_csv(records / f"{LINK}.{direction}.csv", usecols=["event", "len", "reason"])
        on_air = (df["event"] == "dlv") | ((df["event"] == "drop") & (df["reason"] == "loss"))
        out[direction] = int(df.loc[on_air, "len"].sum())
    return out


def figures(stack: str, root: Path, trace: Path, plan: Plan) -> dict:
    mod = STACKS[stack]
    client = json.loads((root / "client.json").read_text())
    link0 = client["link0_ns"]
    sent = [int(x) for x in (root / "sent.txt").read_text().split()]
    rec = mod.received(root)
    if stack == convoy_stack.NAME:
        shown, stored = rec["seen"], rec["stored"]
    else:
        shown, stored = _newest_shown(rec["arrivals"]), [t for _, t in rec["arrivals"]]
    at = lambda s: link0 + int(s * 1e9)  # noqa: E731 -- link time (s) to host ns
    # Live samples: taken while the link is up, from two seconds into the
    # workload. Those of the last 2 s before the outage are left
    # out, as `fleet lte` does: a sample still in its segment, its socket
    # buffer or the link's queue when the link goes waits out the outage
    # whatever the stack, which is the outage's figure, not the stack's.
    steady = freshness_in(shown, sent, at(plan.start_s + 2), at(plan.outage_start_s - 2))
    live = steady + freshness_in(shown, sent, at(plan.outage_end_s), at(plan.generate_s))
    # How long after the link came back the server first had a sample
    # taken after it: reconnection (TCP's backed-off retransmission timer,
    # MQTT's keep-alive, the agent's idle timeout) plus delivery.
    back = next((seen for seen, t in shown if t >= at(plan.outage_end_s)), None)
    considered = set(sent)
    got = set(stored)
    sample_bytes = len(sample(sent[0], 45.000001)) if sent else 0
    files = [json.loads(x) for x in (root / "files.jsonl").read_text().splitlines()]
    acks = mod.acks(root)
    intact = {f["name"] for f in files
              if f["name"] in rec["files"] and rec["files"][f["name"]].stat().st_size == f["bytes"]
              and sha256(rec["files"][f["name"]]) == f["sha256"]}
    lost_files = [f for f in files if f["name"] not in intact]
    out = {
        "fresh_p50_s": pct(live, 0.5), "fresh_p99_s": pct(live, 0.99),
        "fresh_steady_p99_s": pct(steady, 0.99), "fresh_samples": len(live),
        "recover_s": (back - at(plan.outage_end_s)) / 1e9 if back is not None else math.nan,
        "samples_sent": len(sent), "samples_lost": len(considered - got),
        "samples_duplicated": len(stored) - len(got),
        "files_sent": len(files), "files_lost": len(lost_files),
        "bytes_lost": sum(f["bytes"] for f in lost_files),
        "vehicle_cpu_s": client["vehicle_cpu_s"], "late_start_s": client.get("late_s", math.nan),
    }
    if "puts" in rec:  # the HTTPS server sees each whole-file copy it stored
        counts: dict[str, int] = {}
        for p in rec["puts"]:
            counts[p["name"]] = counts.get(p["name"], 0) + 1
        size = {f["name"]: f["bytes"] for f in files}
        out["bytes_duplicated"] = sum((n - 1) * size.get(name, 0) for name, n in counts.items())
    try:
        out["server_cpu_s"] = json.loads((root / "server-cpu.json").read_text())["cpu_s"]
    except (OSError, ValueError):
        out["server_cpu_s"] = math.nan
    span_s = (client["ended_ns"] - link0) / 1e9
    out["run_s"] = span_s
    out["vehicle_cpu_pct"] = 100 * out["vehicle_cpu_s"] / span_s
    camera = next((f for f in files if f["kind"] == "inbox-camera"), None)
    out["camera_s"] = ((acks[camera["name"]] - camera["created_ns"]) / 1e9
                       if camera and camera["name"] in acks else math.nan)
    # The least time any stack could take: the uplink's whole capacity,
    # outside the outage, carrying the camera file's bytes and nothing else.
    out["camera_bound_s"] = (carry_time_s(trace, (camera["created_ns"] - link0) / 1e9, camera["bytes"],
                                          gap=(plan.outage_start_s, plan.outage_end_s))
                             if camera else math.nan)
    out.update(_drain(files, acks, link0, trace, plan))
    # Every log's wait from its creation to its acknowledgement: the drain
    # is one backlog's figure, this is what a log waits behind the camera
    # file (a log never acknowledged counts as waiting until the end).
    waits = [((acks.get(f["name"]) or client["ended_ns"]) - f["created_ns"]) / 1e9
             for f in files if f["kind"] == "inbox-logs"]
    out.update(log_wait_p50_s=pct(waits, 0.5), log_wait_p99_s=pct(waits, 0.99))
    air = air_bytes(root / "records")
    payload = sample_bytes * len(got & considered) + sum(f["bytes"] for f in files if f["name"] in intact)
    out.update(air_up_bytes=air["up"], air_down_bytes=air["down"], payload_bytes=payload,
               air_per_payload=(air["up"] + air["down"]) / payload if payload else math.nan,
               air_up_per_payload=air["up"] / payload if payload else math.nan)
    return out


def _drain(files: list[dict], acks: dict[str, int], link0: int, trace: Path, plan: Plan) -> dict:
    """How fast the logs made before the outage's end reached the server
    after it: their bytes acknowledged after the outage, over the time until
    the last of them was, beside the trace's capacity over that window."""
    end = link0 + int(plan.outage_end_s * 1e9)
    backlog = [f for f in files if f["kind"] == "inbox-logs" and f["created_ns"] < end]
    missing = [f for f in backlog if f["name"] not in acks]
    out = {"log_backlog": len(backlog), "log_backlog_unacked": len(missing), "drain_s": math.nan,
           "drain_mbit_s": math.nan, "capacity_mbit_s": math.nan, "drain_of_capacity": math.nan}
    if missing or not backlog:
        return out
    done = max(acks[f["name"]] for f in backlog)
    span = (done - end) / 1e9
    moved = sum(f["bytes"] for f in backlog if acks[f["name"]] > end)
    if span <= 0:
        return out
    cap = window_capacity_mbit(trace, plan.outage_end_s, span)
    out.update(drain_s=span, drain_mbit_s=moved * 8 / span / 1e6, capacity_mbit_s=cap,
               drain_of_capacity=moved * 8 / span / 1e6 / cap if cap else math.nan)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 4 or argv[0] not in ("side-server", "side-client", "vehicle") or argv[1] not in STACKS:
        print(__doc__, file=sys.stderr)
        return 2
    role, mod, root, ip = argv[0], STACKS[argv[1]], Path(argv[2]), argv[3]
    if role == "side-server":
        return mod.server_side(root, ip)
    if role == "vehicle":
        return mod.vehicle(root, ip)
    return feed(root, mod.vehicle_command(root, ip), mod.acked)


if __name__ == "__main__":
    sys.exit(main())

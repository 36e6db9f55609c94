"""One run: one scheme over one emulated link with one seed, as one tidy row.

The receiver runs on the emulator's server side, the sender on its client
side, both unmodified programs under `convoy emu` and both wrapped by
convoy_lab.emu.measure for CPU time. The link's per-packet records give the
one-way delay (convoy_lab.emu.linkstats).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from .linkstats import data_direction_stats, empty_stats
from ..runner import convoy_binary, run_emulator
from .scenarios import LINK_NAME, Scenario
from .schemes import Scheme, Transfer

SERVER_IP = "10.7.0.2"  # the first link's server address (docs/EMU.md)
LATENCY_PERCENTILES = (50, 95, 99)


class EmulatorUnavailable(RuntimeError):
    """`convoy emu` cannot run here (not root, no /dev/net/tun)."""


def check_emulator() -> None:
    if os.geteuid() != 0:
        raise EmulatorUnavailable("convoy emu needs root: run the experiments as root (sudo make demo)")
    if not Path("/dev/net/tun").exists():
        raise EmulatorUnavailable("convoy emu needs /dev/net/tun, which this machine lacks")


def _measured(out: Path, stdout: Path, command: list[str], wait_for: Path | None = None) -> list[str]:
    wrapper = [sys.executable, "-m", "convoy_lab.emu.measure", "--out", str(out), "--stdout", str(stdout)]
    if wait_for is not None:
        wrapper += ["--wait-for", str(wait_for)]
    return [*wrapper, "--", *command]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def latency_columns(latency) -> dict:
    """`{"p50": .., "p95": .., "p99": ..}` (ms) as lat_pNN_ms columns; an
    absent or malformed field gives no columns, never an error."""
    if not isinstance(latency, dict):
        return {}
    columns = {}
    for p in LATENCY_PERCENTILES:
        value = latency.get(f"p{p}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            columns[f"lat_p{p}_ms"] = float(value)
    return columns


def default_timeout(scenario: Scenario, transfer: Transfer) -> float:
    """Generous: a seconds-transfer may drain a full socket buffer after its
    time; a bytes-transfer may run at a tenth of the link's ideal rate."""
    if transfer.seconds is not None:
        return transfer.seconds * 3 + 30
    ideal = scenario.capacity_mbit() * (1 - scenario.loss_pct / 100) * 1e6 / 8
    return transfer.bytes / max(ideal, 1e4) * 10 + 30


def run_once(
    scheme: Scheme,
    scenario: Scenario,
    transfer: Transfer,
    seed: int,
    workdir: Path,
    timeout_s: float | None = None,
    keep_records: bool = False,
) -> dict:
    """Runs the transfer and returns its row; a failed run is a row too, with
    status and error set and NaN measurements, so a sweep goes on."""
    workdir.mkdir(parents=True, exist_ok=True)
    records = workdir / "records"
    shutil.rmtree(records, ignore_errors=True)
    records.mkdir()
    for stale in [*workdir.glob("*.json"), workdir / "delivered.csv"]:
        stale.unlink(missing_ok=True)
    row = {
        "scheme": scheme.name,
        **scenario.columns(),
        "seed": seed,
        "transfer_bytes": transfer.bytes if transfer.bytes is not None else math.nan,
        "transfer_s": transfer.seconds if transfer.seconds is not None else math.nan,
        "bytes": math.nan,
        "duration_s": math.nan,
        "goodput_mbit_s": math.nan,
        "capacity_mbit_s": math.nan,
        "ideal_mbit_s": math.nan,
        **empty_stats(),
        "rtt_ms": math.nan,
        # Write-to-read latency, where the scheme reports it (convoy perf's
        # "latency_ms"); NaN otherwise.
        **{f"lat_p{p}_ms": math.nan for p in LATENCY_PERCENTILES},
        "cpu_client_s": math.nan,
        "cpu_server_s": math.nan,
        "wall_s": math.nan,
        "status": "ok",
        "error": "",
    }
    reason = scheme.unavailable()
    if reason:
        row.update(status="skipped", error=reason)
        return row

    server_json, client_json = workdir / "server.json", workdir / "client.json"
    server_out, client_out = workdir / "server.out", workdir / "client.out"
    try:
        scheme.prepare(workdir)
    except RuntimeError as err:
        row.update(status="error", error=str(err))
        return row
    server = _measured(server_json, server_out, scheme.server_command(SERVER_IP, transfer, workdir))
    client = _measured(
        client_json, client_out, scheme.client_command(SERVER_IP, transfer, workdir), wait_for=server_json
    )
    command = [
        str(convoy_binary()), "emu",
        "--link", scenario.link_spec(seed),
        "--records", str(records),
        "--server", "exec " + shlex.join(server),
        "--", *client,
    ]
    (workdir / "command.txt").write_text(shlex.join(command) + "\n")
    timeout_s = timeout_s or default_timeout(scenario, transfer)
    start = time.monotonic()
    emu = run_emulator(command, timeout_s)
    stderr = emu.stderr
    if emu.timed_out:
        row.update(status="timeout", error=f"no result within {timeout_s:.0f} s")
    wall = time.monotonic() - start
    (workdir / "emu.stderr").write_text(stderr)

    client_cost, server_cost = _read_json(client_json), _read_json(server_json)
    row.update(
        wall_s=wall,
        cpu_client_s=client_cost.get("cpu_s", math.nan),
        cpu_server_s=server_cost.get("cpu_s", math.nan),
    )
    if row["status"] == "ok":
        try:
            outcome = scheme.outcome(client_out.read_text() if client_out.exists() else "")
        except (ValueError, KeyError, TypeError) as err:
            last = (stderr or "").strip().splitlines()
            detail = last[-1] if last else f"exit status {emu.returncode}"
            row.update(status="error", error=f"{err}; emu: {detail}")
        else:
            row.update(
                bytes=outcome.bytes,
                duration_s=outcome.seconds,
                goodput_mbit_s=outcome.goodput_mbit_s,
                rtt_ms=outcome.extra.get("rtt_ms") if outcome.extra.get("rtt_ms") is not None else math.nan,
                **latency_columns(outcome.extra.get("latency_ms")),
            )
            if transfer.bytes is not None and outcome.bytes != transfer.bytes:
                row.update(status="short", error=f"received {outcome.bytes} of {transfer.bytes} bytes")
    row.update(
        data_direction_stats(
            records / f"{LINK_NAME}.up.csv", propagation_ms=scenario.delay_ms, per_second=workdir / "delivered.csv"
        )
    )
    # The capacity the run had: a trace's mean over the stretch of link time
    # from the first data packet, for as long as the transfer took.
    span = row["duration_s"] if not math.isnan(row["duration_s"]) else transfer.seconds
    start = row["first_data_s"] if not math.isnan(row["first_data_s"]) else 0.0
    # With an offset, link time 0 is that far into the trace (capacity_mbit).
    capacity = scenario.capacity_mbit(span, start) if span else math.nan
    row.update(capacity_mbit_s=capacity, ideal_mbit_s=capacity * (1 - scenario.loss_pct / 100))
    if not keep_records:
        shutil.rmtree(records, ignore_errors=True)
    return row

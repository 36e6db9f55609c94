"""The transports compared, behind one interface: how to start a receiver
(server side) and a sender (client side) for a transfer of N bytes or T
seconds, and how to read what the transfer achieved.

* `convoy`: `convoy perf` in its default mode (no --mode: whatever mode
  convoy makes its default, so the name never goes stale).
* `convoy-rcdp`, `convoy-rlnc-bbr`: the real `convoy perf` client and server
  (RaptorQ with RCDP's packet-train rate control; RLNC over BBR, ScalaNC's
  design).
* `tcp-cubic`, `tcp-bbr`, `tcp-reno`: real kernel TCP with that congestion
  control, through convoy_lab.emu.tcpxfer, an exact-bytes sender (module
  docstring there says why not `iperf3 -n`).

Each scheme's programs are wrapped by convoy_lab.emu.measure (CPU time) by the
runner, not here.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from ..runner import ConvoyNotFound, convoy_binary

TCP_PORT = 5201
CONVOY_PORT = 4433


class SchemeError(ValueError):
    """An unknown scheme name; the message lists the valid ones."""


@dataclass(frozen=True)
class Transfer:
    """Exactly `bytes`, or as much as fits in `seconds` of sending."""

    bytes: int | None = None
    seconds: float | None = None

    def __post_init__(self):
        if (self.bytes is None) == (self.seconds is None):
            raise ValueError("a transfer is either bytes or seconds")
        if (self.bytes is not None and self.bytes <= 0) or (
            self.seconds is not None and self.seconds <= 0
        ):
            raise ValueError("a transfer needs a positive size or duration")

    def describe(self) -> str:
        return f"{self.bytes} bytes" if self.bytes is not None else f"{self.seconds:g} s"


@dataclass
class Outcome:
    """What the receiving application got: bytes, over seconds."""

    bytes: int
    seconds: float
    extra: dict

    @property
    def goodput_mbit_s(self) -> float:
        return self.bytes * 8 / self.seconds / 1e6 if self.seconds > 0 else float("nan")


class Scheme(ABC):
    name: str
    description: str

    def unavailable(self) -> str | None:
        """Why this scheme cannot run on this machine now, or None."""
        return None

    def prepare(self, workdir: Path) -> None:
        """Anything made before the emulator starts (keys)."""

    @abstractmethod
    def server_command(self, server_ip: str, transfer: Transfer, workdir: Path) -> list[str]: ...

    @abstractmethod
    def client_command(self, server_ip: str, transfer: Transfer, workdir: Path) -> list[str]: ...

    @abstractmethod
    def outcome(self, client_stdout: str) -> Outcome: ...


def _last_json(text: str, who: str) -> dict:
    """The last JSON document a tool printed (one per line, or pretty-printed)."""
    text = text.strip()
    if not text:
        raise ValueError(f"{who} printed nothing")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise ValueError(f"{who} printed no JSON document: {text[:200]!r}")


class KernelTcp(Scheme):
    def __init__(self, cc: str):
        self.cc = cc
        self.name = f"tcp-{cc}"
        self.description = f"kernel TCP, {cc} congestion control"

    def unavailable(self) -> str | None:
        available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
        try:
            names = available.read_text().split()
        except OSError:
            return None  # not Linux procfs: let the sender say
        if self.cc not in names:
            # Not loaded yet: setting it on a socket loads the module as root.
            try:
                subprocess.run(["modprobe", f"tcp_{self.cc}"], capture_output=True, check=False)
            except OSError:
                pass
            if self.cc not in available.read_text().split():
                return f"the kernel has no tcp_{self.cc} (available: {' '.join(names)})"
        return None

    def server_command(self, server_ip: str, transfer: Transfer, workdir: Path) -> list[str]:
        command = [sys.executable, "-m", "convoy_lab.emu.tcpxfer", "recv", "--listen", f"{server_ip}:{TCP_PORT}"]
        if transfer.seconds is not None:
            command += ["--time", f"{transfer.seconds:g}"]
        return command

    def client_command(self, server_ip: str, transfer: Transfer, workdir: Path) -> list[str]:
        amount = ["--bytes", str(transfer.bytes)] if transfer.bytes is not None else ["--time", f"{transfer.seconds:g}"]
        return [
            sys.executable, "-m", "convoy_lab.emu.tcpxfer", "send",
            "--to", f"{server_ip}:{TCP_PORT}", "--cc", self.cc, *amount,
        ]

    def outcome(self, client_stdout: str) -> Outcome:
        doc = _last_json(client_stdout, f"{self.name} sender")
        extra = {"rtt_ms": doc.get("srtt_ms"), "retransmits": doc.get("total_retrans")}
        return Outcome(int(doc["bytes"]), float(doc["seconds"]), extra)


@functools.lru_cache(maxsize=None)
def _convoy_has_perf(binary: str) -> str | None:
    try:
        proc = subprocess.run([binary, "perf", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"cannot run {binary}: {err}"
    if proc.returncode != 0:
        return f"{binary} has no `perf` subcommand yet (convoy-net's perf client and server)"
    return None


class ConvoyPerf(Scheme):
    """`convoy perf`: the contract is `convoy keygen --out FILE` (FILE and
    FILE.pub), `convoy perf --server --listen ADDR --key FILE --once --json`,
    and `convoy perf ADDR --server-key PUB (--bytes N | --time S) --mode M
    --json`, which prints one document with bytes, seconds, goodput_mbps,
    rtt_ms, packets_sent, packets_lost, cpu_seconds."""

    def __init__(self, mode: str | None, description: str):
        """`mode` None: convoy's default mode, whichever it is (no --mode)."""
        self.mode = mode
        self.name = f"convoy-{mode}" if mode else "convoy"
        self.description = description

    def unavailable(self) -> str | None:
        try:
            binary = convoy_binary()
        except ConvoyNotFound as err:
            return str(err)
        return _convoy_has_perf(str(binary))

    def prepare(self, workdir: Path) -> None:
        key = workdir / "server.key"
        if not key.exists():
            proc = subprocess.run(
                [str(convoy_binary()), "keygen", "--out", str(key)],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"convoy keygen failed: {proc.stderr.strip()}")

    def server_command(self, server_ip: str, transfer: Transfer, workdir: Path) -> list[str]:
        return [
            str(convoy_binary()), "perf", "--server",
            "--listen", f"{server_ip}:{CONVOY_PORT}",
            "--key", str(workdir / "server.key"), "--once", "--json",
        ]

    def client_command(self, server_ip: str, transfer: Transfer, workdir: Path) -> list[str]:
        amount = ["--bytes", str(transfer.bytes)] if transfer.bytes is not None else ["--time", f"{transfer.seconds:g}"]
        return [
            str(convoy_binary()), "perf", f"{server_ip}:{CONVOY_PORT}",
            "--server-key", str(workdir / "server.key.pub"),
            *amount, *(["--mode", self.mode] if self.mode else []), "--json",
        ]

    def outcome(self, client_stdout: str) -> Outcome:
        doc = _last_json(client_stdout, f"{self.name} client")
        seconds = float(doc["seconds"])
        rtt = doc.get("rtt_ms")
        if isinstance(rtt, dict):  # {"mean": ..., "min": ...}
            rtt = rtt.get("mean")
        extra = {
            "rtt_ms": rtt,
            "packets_sent": doc.get("packets_sent"),
            "packets_lost": doc.get("packets_lost"),
            "self_reported_cpu_s": doc.get("cpu_seconds"),
            "latency_ms": doc.get("latency_ms"),
        }
        return Outcome(int(doc["bytes"]), seconds, extra)


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in [
        ConvoyPerf(None, "convoy in its default mode (`convoy perf` without --mode)"),
        ConvoyPerf("rcdp", "convoy, RaptorQ blocks with RCDP packet-train rate control"),
        ConvoyPerf("rlnc-bbr", "convoy, RLNC generations paced by BBR (ScalaNC's design)"),
        KernelTcp("cubic"),
        KernelTcp("bbr"),
        KernelTcp("reno"),
    ]
}


def get_scheme(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise SchemeError(f"unknown scheme {name!r}; valid schemes: {', '.join(SCHEMES)}") from None

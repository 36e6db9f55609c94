"""The transports of the multipath experiments over two emulated links,
`wifi` (link 0: 10.7.0.1 ↔ 10.7.0.2) and `lte` (link 1: 10.7.1.1 ↔
10.7.1.2), the client (the vehicle) sending to the server:

* `mptcp-fullmesh`, `mptcp-backup`: kernel MPTCP, the unmodified receiver
  (convoy_lab.emu.mpxfer) and sender (convoy_lab.emu.tcpxfer) run through
  `mptcpize`, with the kernel's default scheduler and Cubic (the kernel's
  stock congestion control); the in-kernel path manager gets both client
  addresses as `subflow` endpoints, LTE's flagged `backup` in backup mode;
* `tcp-bbr-wifi`, `tcp-bbr-lte`: single-path kernel TCP BBR on one link;
* `convoy-wifi`, `convoy-lte`: single-path `convoy perf` on one link;
* `convoy-mp`, `convoy-mp-backup`: `convoy perf --path wifi --path lte`,
  and `--path wifi --backup lte` (needs a convoy with multipath).

Each scheme gives a shell script per side; the server side writes what
the application received to `server.json` (bytes, duration_s, stalls,
timeline: convoy perf's server document, or mpxfer's in the same shape),
the client side its own document to `client.json`.
"""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..runner import ConvoyNotFound, convoy_binary

WIFI, LTE = "wifi", "lte"
LINKS = (WIFI, LTE)  # the order of --link: wifi is link 0
ADDR = {WIFI: ("10.7.0.1", "10.7.0.2"), LTE: ("10.7.1.1", "10.7.1.2")}  # (client, server)
TCP_PORT, CONVOY_PORT = 5201, 4433
MPTCP_LIMITS = "ip mptcp limits set subflows 2 add_addr_accepted 2"
DELIVERY_FIELDS = ("bytes", "duration_s", "stalls", "timeline")


class DeliveryError(ValueError):
    """A receiver's document lacks what the experiment measures."""


@dataclass
class Delivery:
    """What the receiving application got: times in seconds from its first
    byte; `timeline` is bytes per `bin_s`."""

    bytes: int
    duration_s: float
    stalls: list[tuple[float, float]]  # (start_s, length_s)
    timeline: list[int]
    bin_s: float = 0.1
    extra: dict = field(default_factory=dict)

    @property
    def goodput_mbit_s(self) -> float:
        return self.bytes * 8 / self.duration_s / 1e6 if self.duration_s > 0 else float("nan")


def parse_delivery(doc: dict, who: str) -> Delivery:
    """The receiver's document as a Delivery; a missing or malformed field
    is one clear error naming it."""
    if not isinstance(doc, dict):
        raise DeliveryError(f"{who}: expected a JSON object, got {type(doc).__name__}")
    missing = [k for k in DELIVERY_FIELDS if k not in doc]
    if missing:
        raise DeliveryError(f"{who}: its JSON lacks {', '.join(missing)} (convoy needs `convoy perf --server --json` "
                            "with stalls and timeline, from convoy-net's multipath work)")
    try:
        stalls = [(float(s) / 1000, float(n) / 1000) for s, n in doc["stalls"]]
        timeline = [int(b) for b in doc["timeline"]]
        nbytes, duration = int(doc["bytes"]), float(doc["duration_s"])
        # Runs kept from before the field binned by 100 ms.
        bin_s = float(doc.get("timeline_bin_s", 0.1))
    except (TypeError, ValueError) as err:
        raise DeliveryError(f"{who}: malformed bytes/duration_s/stalls/timeline ({err})") from None
    if nbytes < 0 or duration < 0 or any(n < 0 for _, n in stalls) or any(b < 0 for b in timeline):
        raise DeliveryError(f"{who}: negative bytes, duration or stall length")
    if not bin_s > 0:
        raise DeliveryError(f"{who}: timeline_bin_s must be positive, got {bin_s}")
    extra = {k: v for k, v in doc.items() if k not in (*DELIVERY_FIELDS, "timeline_bin_s")}
    return Delivery(nbytes, duration, stalls, timeline, bin_s, extra)


def last_json(text: str, who: str, having: str | None = None) -> dict:
    """The last line of `text` that is a JSON object (tools print one), or
    the last one holding the key `having` (`convoy perf --server` prints
    event lines around its report); else the last object of any kind."""
    docs = []
    for line in text.strip().splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict):
                docs.append(doc)
    if docs:
        keyed = [d for d in docs if having is not None and having in d]
        return (keyed or docs)[-1]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise DeliveryError(f"{who} printed no JSON document: {text.strip()[:200]!r}") from None


def wait_for(path: Path, seconds: float = 5.0) -> str:
    """Shell that waits until the receiver has written its document: the
    emulator ends the server side as soon as the client side ends, and the
    receiver writes only after answering the sender."""
    tries = int(seconds / 0.05)
    return f"i=0; while [ ! -s {shlex.quote(str(path))} ] && [ $i -lt {tries} ]; do sleep 0.05; i=$((i+1)); done"


@functools.lru_cache(maxsize=None)
def _perf_help(binary: str) -> str:
    try:
        proc = subprocess.run([binary, "perf", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


class Scheme:
    name: str
    description: str
    multipath = False
    backup = False

    def unavailable(self) -> str | None:
        return None

    def prepare(self, work: Path) -> None:
        """Anything made before the emulator starts."""

    def server_script(self, work: Path, seconds: float) -> str:
        raise NotImplementedError

    def client_script(self, work: Path, seconds: float) -> str:
        raise NotImplementedError

    def delivery(self, work: Path) -> Delivery:
        path = work / "server.json"
        if not path.is_file() or not path.read_text().strip():
            raise DeliveryError(f"{self.name}: the receiver wrote no document (see {work}/server.err)")
        who = f"{self.name} receiver"
        return parse_delivery(last_json(path.read_text(), who, having="stalls"), who)

    def client_doc(self, work: Path) -> dict:
        path = work / "client.json"
        try:
            return last_json(path.read_text(), f"{self.name} sender")
        except (OSError, DeliveryError):
            return {}


class KernelTcp(Scheme):
    """Kernel TCP on one link, or MPTCP over both (`mptcp`: None, "fullmesh"
    or "backup")."""

    def __init__(self, name: str, cc: str, link: str = WIFI, mptcp: str | None = None):
        self.name, self.cc, self.link, self.mptcp = name, cc, link, mptcp
        self.multipath = mptcp is not None
        self.backup = mptcp == "backup"
        self.description = (
            f"kernel MPTCP ({mptcp}: both client addresses as subflow endpoints"
            f"{', LTE flagged backup' if self.backup else ''}), default scheduler, {cc}, via mptcpize"
            if mptcp else f"single-path kernel TCP {cc.upper()} on {link}"
        )

    def unavailable(self) -> str | None:
        from .coexist import tcp_available

        why = tcp_available(self.cc)
        if why:
            return why
        if self.mptcp:
            import shutil

            if shutil.which("mptcpize") is None:
                return "mptcpize is not installed (Debian package mptcpd; scripts/setup.sh installs it)"
        return None

    def _wrap(self, command: list[str]) -> str:
        return ("mptcpize run " if self.mptcp else "") + shlex.join(command)

    def server_script(self, work: Path, seconds: float) -> str:
        recv = [sys.executable, "-m", "convoy_lab.emu.mpxfer", "recv", "--listen", f"0.0.0.0:{TCP_PORT}",
                "--time", f"{seconds:g}", "--out", str(work / "server.json")]
        limits = f"{MPTCP_LIMITS}; " if self.mptcp else ""
        return f"{limits}exec {self._wrap(recv)} > {work}/server.out 2> {work}/server.err"

    def client_script(self, work: Path, seconds: float) -> str:
        server = ADDR[WIFI if self.mptcp else self.link][1]
        send = [sys.executable, "-m", "convoy_lab.emu.tcpxfer", "send", "--to", f"{server}:{TCP_PORT}",
                "--cc", self.cc, "--time", f"{seconds:g}"]
        setup = ""
        if self.mptcp:
            # The Wi-Fi endpoint too, so the path manager may bring that
            # subflow back after Wi-Fi returns (the initial one's address
            # is never opened twice).
            flag = " backup" if self.backup else ""
            setup = (f"{MPTCP_LIMITS} && ip mptcp endpoint add {ADDR[WIFI][0]} dev {WIFI} subflow && "
                     f"ip mptcp endpoint add {ADDR[LTE][0]} dev {LTE} subflow{flag} && ")
        return f"{setup}{self._wrap(send)} > {work}/client.json 2> {work}/client.err; {wait_for(work / 'server.json')}"


class ConvoyPerf(Scheme):
    """`convoy perf` single-path toward one link's server address, or
    multipath with --path/--backup (the server listens on every address)."""

    def __init__(self, name: str, link: str = WIFI, paths: tuple[str, ...] = (), backups: tuple[str, ...] = ()):
        self.name, self.link, self.paths, self.backups = name, link, paths, backups
        self.multipath = bool(paths)
        self.backup = bool(backups)
        self.description = (
            f"convoy multipath: {' '.join(f'--path {p}' for p in paths)}"
            f"{''.join(f' --backup {b}' for b in backups)}" if paths else f"single-path convoy on {link}"
        )

    def unavailable(self) -> str | None:
        try:
            binary = str(convoy_binary())
        except ConvoyNotFound as err:
            return str(err)
        text = _perf_help(binary)
        if not text:
            return f"{binary} has no `perf` subcommand"
        if self.multipath and "--path" not in text:
            return f"{binary} has no `convoy perf --path` yet (multipath convoy-net, branch mp-net)"
        return None

    def prepare(self, work: Path) -> None:
        key = work / "server.key"
        if not key.exists():
            proc = subprocess.run([str(convoy_binary()), "keygen", "--out", str(key)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"convoy keygen failed: {proc.stderr.strip()}")

    def server_script(self, work: Path, seconds: float) -> str:
        cmd = [str(convoy_binary()), "perf", "--server", "--once", "--listen", f"0.0.0.0:{CONVOY_PORT}",
               "--key", str(work / "server.key"), "--json"]
        return f"exec {shlex.join(cmd)} > {work}/server.json 2> {work}/server.err"

    def client_script(self, work: Path, seconds: float) -> str:
        cmd = [str(convoy_binary()), "perf", f"{ADDR[self.link][1]}:{CONVOY_PORT}",
               "--server-key", str(work / "server.key.pub"), "--time", f"{seconds:g}", "--json"]
        if not self.paths and "--single-path" in _perf_help(str(convoy_binary())):
            # A multipath convoy uses every usable interface by default; the
            # single-path baseline is its one kernel-routed socket.
            cmd.append("--single-path")
        for p in self.paths:
            cmd += ["--path", p]
        for b in self.backups:
            cmd += ["--backup", b]
        return f"{shlex.join(cmd)} > {work}/client.json 2> {work}/client.err; {wait_for(work / 'server.json')}"


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in [
        KernelTcp("mptcp-fullmesh", "cubic", mptcp="fullmesh"),
        KernelTcp("mptcp-backup", "cubic", mptcp="backup"),
        KernelTcp("tcp-bbr-wifi", "bbr", WIFI),
        KernelTcp("tcp-bbr-lte", "bbr", LTE),
        ConvoyPerf("convoy-wifi", WIFI),
        ConvoyPerf("convoy-lte", LTE),
        ConvoyPerf("convoy-mp", WIFI, paths=(WIFI, LTE)),
        ConvoyPerf("convoy-mp-backup", WIFI, paths=(WIFI,), backups=(LTE,)),
    ]
}


def get(name: str) -> Scheme:
    from ..experiments.catalog import ExperimentError

    try:
        return SCHEMES[name]
    except KeyError:
        raise ExperimentError(f"unknown multipath scheme {name!r}; valid: {', '.join(SCHEMES)}") from None

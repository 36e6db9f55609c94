"""The kernel TCP / MPTCP receiver of the multipath experiments: what the
application got, read by read, in the same shape as `convoy perf --server
--json` prints for convoy, so both are measured the same way.

    python -m convoy_lab.emu.mpxfer recv --listen 0.0.0.0:5201 --time T --out FILE.json
    mptcpize run python -m convoy_lab.emu.mpxfer recv ...     # kernel MPTCP, unmodified

The sender is convoy_lab.emu.tcpxfer's (`send --time T`): it writes as fast as
the socket takes data until this receiver answers at the end of its window.

The document (also the answer the sender reads) holds `bytes`,
`duration_s`, `goodput_bps`, `stalls` ([[start_ms, len_ms], ...]: every
interval of at least STALL_MS with no read, from the first byte; the
interval from the last read to the end of the window counts too, since a
connection that died is the longest stall of all), `timeline` (bytes read
per bin from the first byte), `timeline_bin_s` (the bin: 10 ms, fine enough
to time a recovery against a bound of tenths of a second), `first_byte_wall_ns` (CLOCK_REALTIME
of the first read) and `protocol` ("mptcp" when the sockets this process
opens are IPPROTO_MPTCP, as under mptcpize; else "tcp"). Standard library
only: it runs inside the emulator's namespaces.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

from . import tcpxfer

STALL_MS = 20.0
BIN_MS = 10
IPPROTO_MPTCP = 262


class Deliveries:
    """Reads as they happen (monotonic ns, bytes), folded at once into
    stalls and 10 ms bins: a five-minute run at 40 Mbit/s makes millions of
    reads, none of which needs keeping."""

    def __init__(self, stall_ms: float = STALL_MS, bin_ms: int = BIN_MS):
        self.stall_ns = int(stall_ms * 1e6)
        self.bin_ns = bin_ms * 1_000_000
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.first_wall_ns: int | None = None
        self.bytes = 0
        self.stalls: list[list[float]] = []
        self.timeline: list[int] = []

    def read(self, t_ns: int, n: int) -> None:
        if n <= 0:
            return
        if self.first_ns is None:
            self.first_ns = t_ns
            self.first_wall_ns = time.time_ns() - (time.monotonic_ns() - t_ns)
        elif t_ns - self.last_ns >= self.stall_ns:
            self._stall(self.last_ns, t_ns)
        self.last_ns = t_ns
        self.bytes += n
        b = (t_ns - self.first_ns) // self.bin_ns
        if b >= len(self.timeline):
            self.timeline.extend([0] * (b + 1 - len(self.timeline)))
        self.timeline[b] += n

    def _stall(self, start_ns: int, end_ns: int) -> None:
        self.stalls.append([round((start_ns - self.first_ns) / 1e6, 3), round((end_ns - start_ns) / 1e6, 3)])

    def finish(self, end_ns: int) -> dict:
        """The document, with the window ending at `end_ns` (a trailing
        interval without reads is a stall, and empty bins up to the end)."""
        if self.first_ns is None:
            return {"bytes": 0, "duration_s": 0.0, "goodput_bps": 0.0, "stalls": [], "timeline": [],
                    "timeline_bin_s": self.bin_ns / 1e9, "first_byte_wall_ns": None}
        if end_ns - self.last_ns >= self.stall_ns:
            self._stall(self.last_ns, end_ns)
        bins = max(len(self.timeline), -(-(end_ns - self.first_ns) // self.bin_ns))
        self.timeline.extend([0] * (bins - len(self.timeline)))
        duration = max(end_ns - self.first_ns, 1) / 1e9
        return {
            "bytes": self.bytes,
            "duration_s": duration,
            "goodput_bps": self.bytes * 8 / duration,
            "stalls": self.stalls,
            "timeline": self.timeline,
            "timeline_bin_s": self.bin_ns / 1e9,
            "first_byte_wall_ns": self.first_wall_ns,
        }


def socket_protocol() -> str:
    """"mptcp" if a plain TCP socket opened here is really MPTCP (mptcpize's
    LD_PRELOAD rewrites socket()); the run checks it, so an MPTCP row
    is never plain TCP by mistake."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            proto = s.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL)
        except OSError:
            return "tcp"
    return "mptcp" if proto == IPPROTO_MPTCP else "tcp"


def receive(listen: str, seconds: float) -> dict:
    d = Deliveries()
    accepted = []

    def on_recv(t_ns: int, n: int) -> None:
        if n == 0:
            accepted.append(t_ns)  # tcpxfer calls once with 0 at accepting
        d.read(t_ns, n)

    answer = tcpxfer.receive(listen, seconds, on_recv=on_recv)
    # The window runs `seconds` from accepting (tcpxfer's); stalls count from
    # the first byte up to the window's end.
    end_ns = accepted[0] + int(answer["seconds"] * 1e9) if accepted else 0
    doc = d.finish(max(end_ns, d.last_ns or 0))
    doc["window_s"] = answer["seconds"]
    doc["peer"] = answer.get("peer")
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m convoy_lab.emu.mpxfer", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv", help="receive one timed transfer and write what the application got")
    r.add_argument("--listen", default="0.0.0.0:5201", help="address:port to listen on")
    r.add_argument("--time", type=float, required=True, help="seconds to receive for, from accepting")
    r.add_argument("--out", type=Path, required=True, help="where to write the JSON document")
    args = p.parse_args(argv)
    if args.time <= 0:
        print("mpxfer: --time must be more than 0 s", file=sys.stderr)
        return 2
    protocol = socket_protocol()
    doc = receive(args.listen, args.time)
    doc["protocol"] = protocol
    args.out.write_text(json.dumps(doc) + "\n")
    print(json.dumps({k: doc[k] for k in ("bytes", "duration_s", "protocol")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

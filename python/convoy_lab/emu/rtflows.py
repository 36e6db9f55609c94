"""Real-time traffic of our own for the coexistence experiments: the game,
movie and video-chat patterns of Palazzi's scenario (SPEC S4), which no
Debian package generates (the VoIP flow is the real `irtt`).

Each datagram carries its flow's sequence number and its send time
(CLOCK_REALTIME, ns). Both emulator namespaces share the host's clock, so
the receiver's kernel receive timestamp (SO_TIMESTAMPNS) minus the send
time is the packet's exact one-way delay, whatever the sender's own timing
jitter. The receiver writes one CSV row per packet:
`seq,send_ns,recv_ns,len` (figures come from these, never from averages).

    python -m convoy_lab.emu.rtflows send --to 10.7.0.2:7001 --pattern game --at T0_NS --start 45 --duration 135
    python -m convoy_lab.emu.rtflows recv --listen 10.7.0.2:7001 --out game.csv --until T_NS

Patterns (payload bytes every interval):

* `game`: 100 B every 20 ms (40 kbit/s; classic online games send
  10–200 kbit/s, research notes B.3);
* `game-ut`: 947 B every 1.2 ms (Unreal Tournament as VoAP measured it,
  6.3 Mbit/s; the stress case);
* `movie`: 1316 B (7 MPEG-TS cells) every 2.5 ms, 4.2 Mbit/s;
* `chat`: 1000 B every 10 ms, 0.8 Mbit/s each way (a video call);
* `voip`: 172 B every 20 ms (G.711 with 20 ms frames; irtt's pattern).

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

HEADER = struct.Struct("!IQ")  # seq, send time ns
PATTERNS = {
    "game": (100, 0.020),
    "game-ut": (947, 0.0012),
    "movie": (1316, 0.0025),
    "chat": (1000, 0.010),
    "voip": (172, 0.020),
}
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
IP_UDP_OVERHEAD = 28


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def ip_bps(pattern: str) -> float:
    """The pattern's rate in IP bytes, bit/s."""
    size, interval = PATTERNS[pattern]
    return (size + IP_UDP_OVERHEAD) * 8 / interval


def sleep_until(t_ns: int) -> None:
    """Sleeps to `t_ns` (CLOCK_REALTIME), spinning the last 0.3 ms."""
    while True:
        left = t_ns - time.time_ns()
        if left <= 0:
            return
        if left > 300_000:
            time.sleep((left - 250_000) / 1e9)


def send(to: str, pattern: str, at_ns: int, start_s: float, duration_s: float) -> dict:
    """Sends the pattern from at_ns + start_s for duration_s, on schedule:
    a late wake-up sends what fell due at once (the network sees bursts
    from the host, as from a real application, but the schedule holds)."""
    size, interval = PATTERNS[pattern]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(address(to))
    payload = bytearray(size)
    first = at_ns + int(start_s * 1e9)
    end = first + int(duration_s * 1e9)
    step = int(interval * 1e9)
    seq = sent = errors = 0
    due = first
    while due < end:
        sleep_until(due)
        HEADER.pack_into(payload, 0, seq, time.time_ns())
        try:
            sock.send(payload)
            sent += 1
        except OSError:
            errors += 1  # a full socket buffer: counted as lost by the receiver
        seq += 1
        due = first + seq * step
    return {"pattern": pattern, "sent": sent, "errors": errors, "size": size, "interval_s": interval}


def recv(listen: str, out: str, until_ns: int) -> dict:
    """Writes one row per datagram until until_ns (CLOCK_REALTIME)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(address(listen))
    count = 0
    with open(out, "w") as f:
        f.write("seq,send_ns,recv_ns,len\n")
        while True:
            left = (until_ns - time.time_ns()) / 1e9
            if left <= 0:
                break
            sock.settimeout(min(left, 1.0))
            try:
                data, anc, _, _ = sock.recvmsg(65536, 64)
            except socket.timeout:
                continue
            recv_ns = time.time_ns()
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                    sec, nsec = struct.unpack("qq", value[:16])
                    recv_ns = sec * 1_000_000_000 + nsec
            if len(data) < HEADER.size:
                continue
            seq, send_ns = HEADER.unpack_from(data)
            f.write(f"{seq},{send_ns},{recv_ns},{len(data) + IP_UDP_OVERHEAD}\n")
            count += 1
    return {"received": count, "out": out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m convoy_lab.emu.rtflows", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--pattern", choices=sorted(PATTERNS), required=True)
    s.add_argument("--at", type=int, required=True, help="schedule origin, CLOCK_REALTIME ns")
    s.add_argument("--start", type=float, default=0.0, help="seconds after --at")
    s.add_argument("--duration", type=float, required=True)
    r = sub.add_parser("recv")
    r.add_argument("--listen", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--until", type=int, required=True, help="CLOCK_REALTIME ns")
    args = p.parse_args(argv)
    if args.command == "send":
        if args.duration <= 0:
            p.error("--duration must be positive")
        doc = send(args.to, args.pattern, args.at, args.start, args.duration)
    else:
        doc = recv(args.listen, args.out, args.until)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An exact-bytes kernel TCP transfer: the kernel TCP baselines' sender and
receiver.

Why not `iperf3 -n`: iperf3 ends the test when the sender has *written* the
last byte into its socket buffer and then tears the data connection down, so
over a slow lossy link the receiver counts fewer bytes than asked (954,232
of 1,048,576 at 2 Mbit/s, 5 % loss) and the duration excludes the drain.
Here, for N bytes, the sender writes exactly N bytes and half-closes, and the
receiver times from accepting the connection to reading end-of-stream, then
answers with what it counted. For T seconds, the receiver counts what
arrives in the first T seconds after accepting, answers, and the sender then
resets the connection: a sender-side timer would also count seconds of data
still sitting in a socket buffer that autotuning grew to megabytes. The
congestion control is the kernel's own, chosen per socket with
TCP_CONGESTION (what `iperf3 -C` does).

    python -m convoy_lab.emu.tcpxfer recv --listen 10.7.0.2:5201 [--time T]
    python -m convoy_lab.emu.tcpxfer send --to 10.7.0.2:5201 --cc cubic (--bytes N | --time T)

Both print one JSON document on stdout. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time

CHUNK = 64 * 1024
DEFAULT_PORT = 5201


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host:
        return text, DEFAULT_PORT
    return host, int(port)


def tcp_info(sock: socket.socket) -> dict:
    """Smoothed RTT and total retransmissions from Linux's struct tcp_info
    (8 one-byte fields, then 32-bit fields: rtt is the 16th, total_retrans
    the 24th)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except OSError:
        return {}
    if len(raw) < 104:
        return {}
    fields = struct.unpack_from("24I", raw, 8)
    return {"srtt_ms": fields[15] / 1000.0, "total_retrans": fields[23]}


def receive(listen: str, seconds: float | None = None, on_recv=None) -> dict:
    """Receives one transfer: to end-of-stream, or for `seconds` after accepting.
    `on_recv(monotonic_ns, nbytes)`, if given, sees every read, and once with
    0 bytes at accepting, where the window starts (the multipath experiments'
    delivery gaps, convoy_lab.emu.mpxfer)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(address(listen))
    server.listen(1)
    conn, peer = server.accept()
    start = time.monotonic()
    if on_recv is not None:
        on_recv(int(start * 1e9), 0)
    deadline = start + seconds if seconds is not None else None
    buf = bytearray(256 * 1024)
    view = memoryview(buf)
    received = 0
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            conn.settimeout(left)
        try:
            n = conn.recv_into(view)
        except (socket.timeout, ConnectionResetError):
            break
        if n == 0:
            break
        if on_recv is not None:
            on_recv(time.monotonic_ns(), n)
        received += n
    elapsed = time.monotonic() - start
    took = min(elapsed, seconds) if seconds is not None else elapsed
    doc = {"bytes": received, "seconds": took, "peer": f"{peer[0]}:{peer[1]}"}
    conn.settimeout(10)
    try:
        conn.sendall((json.dumps(doc) + "\n").encode())
        # Drain briefly (the sender resets once it has the answer), so that
        # closing with unread data, which sends a RST at once, does not
        # overtake the answer; the sender's RST itself may queue for seconds
        # behind data on a slow link, so do not wait for it long.
        conn.settimeout(1.0)
        while conn.recv_into(view):
            pass
    except (OSError, socket.timeout):
        pass
    conn.close()
    server.close()
    return doc


def _read_answer(sock: socket.socket, answer: list, done: threading.Event, stop_sending: bool) -> None:
    data = b""
    try:
        while not data.endswith(b"\n"):
            part = sock.recv(4096)
            if not part:
                break
            data += part
    except OSError:
        pass
    answer.append(data)
    done.set()
    if stop_sending:
        # Wakes the sender blocked in send() with EPIPE.
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def send(to: str, cc: str, nbytes: int | None, seconds: float | None) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    except OSError as err:
        raise SystemExit(
            f"tcpxfer: congestion control {cc!r} is not available here ({err}); "
            "see /proc/sys/net/ipv4/tcp_available_congestion_control"
        ) from None
    chosen = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    chosen = chosen.split(b"\0", 1)[0].decode()
    sock.connect(address(to))
    answer: list[bytes] = []
    done = threading.Event()
    reader = threading.Thread(target=_read_answer, args=(sock, answer, done, nbytes is None), daemon=True)
    reader.start()
    payload = memoryview(bytes(CHUNK))
    sent = 0
    start = time.monotonic()
    if nbytes is not None:
        while sent < nbytes:
            sock.sendall(payload[: min(CHUNK, nbytes - sent)])
            sent += min(CHUNK, nbytes - sent)
        info = tcp_info(sock)
        sock.shutdown(socket.SHUT_WR)
        done.wait()
    else:
        # Keep the pipe full until the receiver's answer says time is up.
        # Blocking sends: with a socket timeout, Python polls for POLLOUT and
        # retries on EAGAIN, which spins when the two disagree (seen as
        # seconds of CPU time); the answer's reader ends a blocked send.
        while not done.is_set():
            try:
                sock.sendall(payload)
            except OSError:
                break
            sent += CHUNK
        info = tcp_info(sock)
        done.wait(10)
        # Reset rather than drain what is still buffered.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    elapsed = time.monotonic() - start
    sock.close()
    reply = answer[0] if answer else b""
    receiver = json.loads(reply.decode()) if reply.strip() else {}
    got = receiver.get("bytes", 0)
    took = receiver.get("seconds") or float("nan")
    return {
        "cc": chosen,
        "bytes_sent": sent,
        "bytes": got,
        "seconds": took,
        "goodput_mbit_s": got * 8 / took / 1e6 if got else 0.0,
        "sender_seconds": elapsed,
        **info,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convoy_lab.emu.tcpxfer")
    sub = parser.add_subparsers(dest="role", required=True)
    recv = sub.add_parser("recv", help="receive one transfer, then answer with its count")
    recv.add_argument("--listen", default=f"0.0.0.0:{DEFAULT_PORT}")
    recv.add_argument("--time", type=float, help="count only the first T seconds, then answer")
    snd = sub.add_parser("send", help="send N bytes or for T seconds")
    snd.add_argument("--to", required=True)
    snd.add_argument("--cc", default="cubic")
    amount = snd.add_mutually_exclusive_group(required=True)
    amount.add_argument("--bytes", type=int)
    amount.add_argument("--time", type=float)
    args = parser.parse_args(argv)
    if args.role == "recv":
        doc = receive(args.listen, args.time)
    else:
        doc = send(args.to, args.cc, args.bytes, args.time)
    print(json.dumps(doc), flush=True)
    if args.role == "send" and args.bytes is not None and doc["bytes"] != args.bytes:
        print(f"tcpxfer: receiver counted {doc['bytes']} of {args.bytes} bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

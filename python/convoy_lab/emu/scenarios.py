"""Link scenarios: what `convoy emu --link` is given for one run.

A scenario is either a constant-rate link (the RCDP papers' `tc` set-ups) or
an uplink replayed from a Mahimahi drive trace (ScalaNC's car-to-cloud
upload). Data always flows client → server, the emulator's `up` direction,
as a car uploads.

Choices the papers leave open, made once here:

* Random loss is applied to the data direction only (`up-loss`), as `tc
  netem loss` on the sender's egress; feedback and ACKs are not lost, for
  every scheme alike.
* The bottleneck queue is drop-tail, max(100 packets, 2 × BDP): deep
  enough that a loss-free TCP can fill the pipe, as `tc`'s default
  1000-packet queue let it, without seconds of standing queue at 2 Mbit/s.
  Trace links get 200 packets (about a second of the ATT uplink's mean).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..traces import trace_length_s, twin, window_capacity_mbit

MTU_BYTES = 1500
TRACE_QUEUE_PACKETS = 200
LINK_NAME = "link"


def default_queue_packets(rate_mbit: float, delay_ms: float) -> int:
    rtt_s = 2 * delay_ms / 1000.0
    bdp_packets = rate_mbit * 1e6 * rtt_s / 8 / MTU_BYTES
    return max(100, math.ceil(2 * bdp_packets))


@dataclass(frozen=True)
class Scenario:
    """One emulated link. `rate_mbit` for a constant link, or `trace` (a
    Mahimahi or convoy time-series trace carrying the data; `feedback`
    carries the other direction, by default the trace's twin: `X.down` for
    `X.up` and back when it exists, else the same trace). `offset_s` replays
    both directions' traces from that far into them."""

    delay_ms: float
    loss_pct: float = 0.0
    rate_mbit: float | None = None
    trace: Path | None = None
    queue_packets: int | None = None
    feedback: Path | None = None
    offset_s: float = 0.0
    label: str = field(default="", compare=False)

    def __post_init__(self):
        if (self.rate_mbit is None) == (self.trace is None):
            raise ValueError("a scenario has either rate_mbit or trace")
        if not 0 <= self.loss_pct < 100:
            raise ValueError(f"loss must be in [0, 100) %, got {self.loss_pct}")
        if self.offset_s < 0 or (self.offset_s and self.trace is None):
            raise ValueError("an offset needs a trace and is at least 0 s")

    @property
    def queue(self) -> int:
        if self.queue_packets is not None:
            return self.queue_packets
        if self.trace is not None:
            return TRACE_QUEUE_PACKETS
        return default_queue_packets(self.rate_mbit, self.delay_ms)

    @property
    def trace_name(self) -> str:
        return self.trace.name if self.trace else ""

    def describe(self) -> str:
        """Short, human: `2 Mbit/s 10 ms 5 % loss` or `ATT-LTE-driving-2016.up 20 ms`."""
        link = f"{self.rate_mbit:g} Mbit/s" if self.trace is None else self.trace_name
        loss = f" {self.loss_pct:g} % loss" if self.loss_pct else ""
        offset = f" from {self.offset_s:g} s" if self.offset_s else ""
        return f"{link}{offset} {self.delay_ms:g} ms{loss}"

    @property
    def feedback_trace(self) -> Path | None:
        if self.trace is None:
            return None
        return self.feedback if self.feedback is not None else twin(self.trace)

    def link_spec(self, seed: int) -> str:
        """The `--link` argument: NAME:KEY=VALUE,..."""
        keys = []
        if self.trace is not None:
            keys.append(f"up={self.trace}")
            keys.append(f"down={self.feedback_trace}")
            if self.offset_s:
                # Both directions start at the same moment of the drive.
                keys.append(f"offset={round(self.offset_s * 1000)}ms")
        else:
            keys.append(f"rate={self.rate_mbit:g}mbit")
        keys.append(f"delay={self.delay_ms:g}ms")
        if self.loss_pct:
            keys.append(f"up-loss={self.loss_pct:g}%")
        keys.append(f"queue={self.queue}")
        keys.append(f"seed={seed}")
        return f"{LINK_NAME}:" + ",".join(keys)

    def capacity_mbit(self, seconds: float | None = None, start_s: float = 0.0) -> float:
        """What the data direction can carry (IP bytes, Mbit/s): the constant
        rate, or a trace's mean over [start_s, start_s + seconds) of link time
        (one whole pass of the trace if seconds is None). Link time 0 is the
        trace's `offset_s`; the trace is replayed as the emulator does
        (traces.window_capacity_mbit)."""
        if self.trace is None:
            return self.rate_mbit
        if seconds is None:
            return window_capacity_mbit(self.trace, 0.0, trace_length_s(self.trace) or 1.0)
        if seconds <= 0:
            return math.nan
        return window_capacity_mbit(self.trace, self.offset_s + start_s, seconds)

    def columns(self) -> dict:
        """The scenario's parameters as CSV columns."""
        return {
            "rate_mbit": self.rate_mbit if self.rate_mbit is not None else float("nan"),
            "trace": self.trace_name,
            "delay_ms": self.delay_ms,
            "loss_pct": self.loss_pct,
            "queue_pkts": self.queue,
            "feedback_trace": self.feedback_trace.name if self.feedback_trace else "",
            "offset_s": self.offset_s,
        }

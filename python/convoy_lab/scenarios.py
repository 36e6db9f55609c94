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

from .traces import read_mahimahi

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
    Mahimahi uplink; its `.down` twin, when present, carries the feedback)."""

    delay_ms: float
    loss_pct: float = 0.0
    rate_mbit: float | None = None
    trace: Path | None = None
    queue_packets: int | None = None
    label: str = field(default="", compare=False)

    def __post_init__(self):
        if (self.rate_mbit is None) == (self.trace is None):
            raise ValueError("a scenario has either rate_mbit or trace")
        if not 0 <= self.loss_pct < 100:
            raise ValueError(f"loss must be in [0, 100) %, got {self.loss_pct}")

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
        return f"{link} {self.delay_ms:g} ms{loss}"

    def link_spec(self, seed: int) -> str:
        """The `--link` argument: NAME:KEY=VALUE,..."""
        keys = []
        if self.trace is not None:
            keys.append(f"up={self.trace}")
            down = self.trace.with_suffix(".down")
            keys.append(f"down={down}" if down.is_file() else f"down={self.trace}")
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
        (the whole trace if seconds is None). The trace repeats, as the
        emulator replays it."""
        if self.trace is None:
            return self.rate_mbit
        times = read_mahimahi(self.trace).to_numpy()
        period_ms = int(times[-1])
        if seconds is None:
            return len(times) * MTU_BYTES * 8 / (period_ms / 1000) / 1e6
        if seconds <= 0:
            return math.nan

        def before(t_ms: float) -> int:
            """Opportunities strictly before t_ms from the link's time 0."""
            periods, rest = divmod(t_ms, period_ms)
            return int(periods) * len(times) + int((times < rest).sum())

        count = before((start_s + seconds) * 1000) - before(start_s * 1000)
        return count * MTU_BYTES * 8 / seconds / 1e6

    def columns(self) -> dict:
        """The scenario's parameters as CSV columns."""
        return {
            "rate_mbit": self.rate_mbit if self.rate_mbit is not None else float("nan"),
            "trace": self.trace_name,
            "delay_ms": self.delay_ms,
            "loss_pct": self.loss_pct,
            "queue_pkts": self.queue,
        }

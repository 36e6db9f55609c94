"""802.11 retries on the emulated Wi-Fi links of the schedule experiments.

`convoy emu`'s `mac=` key puts the DCF at the link's transmitter
(docs/MODELS.md, "802.11 MAC retries"): the link's `rate=` is then the PHY
rate and its `loss=` the loss of each attempt. What that leaves for
full-size packets, the capacity the figures compare with, is asked of
`convoy trace mac`, so the Python never re-implements the model.
"""

from __future__ import annotations

from functools import lru_cache

from ..runner import run_json


def keys(retries: int) -> str:
    """The `--link` keys of an 802.11 (OFDM, 20 MHz) transmitter."""
    return f"mac=80211:retries={retries}"


@lru_cache(maxsize=None)
def capacity_bps(rate_mbit: float, attempt_loss: float, retries: int) -> float:
    """Bit/s that 1500-byte packets get from a `rate_mbit` PHY with
    `retries` retries when `attempt_loss` of the attempts are lost."""
    doc = run_json("trace", "mac", "--rate-mbps", f"{rate_mbit:g}", "--loss", f"{attempt_loss:g}",
                   "--mac", f"80211:retries={retries}")
    return float(doc["capacity_mbps"]) * 1e6

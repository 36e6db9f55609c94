"""The papers' headline figures, as constants copied from ../shared/SPEC.md.

These are the *papers'* numbers, measured on the papers' own set-ups (Linux
`tc` links for RCDP, a hardware-in-the-loop LTE replay for ScalaNC); nothing
here is computed or measured by convoy. Every table and plot that shows them
labels them "paper".
"""

from __future__ import annotations

# SPEC S1, RCDP (rcdp-2013; baguena-2017 ch. 3-4), emulated link with tc.
RCDP_SOURCE = "SPEC S1: RCDP (rcdp-2013; baguena-2017 ch. 3-4), emulated link with tc"
RCDP_LOSS = {
    # 2 Mbit/s, 10 ms, loss 0-10 %
    "rcdp_over_tcp_below_3pct": 0.85,  # "RCDP ≈ 85 % of TCP below 3 % loss"
    "rcdp_gain_at_10pct": 1.22,  # "+122 % over HTTP/TCP at 10 % loss"
    "tcp_worst_drop": 0.71,  # "TCP loses up to 71 % of its lossless throughput"
    "rcdp_worst_drop": 0.12,  # "RCDP at most 12 %"
}
RCDP_DELAY = {
    # 2 Mbit/s, 2 % loss, delay 0-100 ms
    "rcdp_best_gain_above_20ms": 0.64,  # "above 20 ms RCDP up to +64 %"
    "rcdp_spread": 0.08,  # "RCDP varies 8 % over the range"
    "tcp_spread": 0.50,  # "TCP 50 %"
}
RCDP_BANDWIDTH = {
    # 10 ms, 2 % loss, 0.5-30 Mbit/s
    "tcp_saturation_mbit": 5.44,  # "TCP saturates at 5.44 Mbit/s"
    "rcdp_gain_at_30mbit": 2.07,  # "RCDP +207 % at 30 Mbit/s"
}
RCDP_50MBIT = {
    # 50 Mbit/s, 10 ms, loss 0-10 %
    "rcdp_worst_drop": 0.15,  # "RCDP loses at most 15 %"
    "tcp_worst_drop": 0.95,  # "TCP Reno, Vegas, SACK, FACK, Westwood up to 95 %"
}

# SPEC S2, ScalaNC with BBR (pillmann-2018): uplink over a replayed LTE drive.
SCALANC_SOURCE = "SPEC S2: ScalaNC (pillmann-2018), hardware-in-the-loop LTE drive replay, uplink"
SCALANC_GOODPUT_MBIT = {
    "convoy-rlnc-bbr": 3.0,  # ScalaNC + BBR
    "tcp-bbr": 2.4,
    "tcp-cubic": 1.9,
}
SCALANC_GAIN_OVER_CUBIC = 0.579  # "+57.9 % over Cubic"

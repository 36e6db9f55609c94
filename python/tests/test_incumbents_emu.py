"""The incumbents experiment's short form, for real: convoy agent → serve,
mosquitto + paho-mqtt + versitygw + boto3, and the HTTPS PUT uploader, each
started over `convoy emu` on one drive trace with 2 % loss and a 3 s
outage. Needs root and /dev/net/tun (skipped otherwise, with the reason);
mosquitto and versitygw are scripts/setup.sh's, and their absence is a
failure, not a skip. About two minutes."""

from __future__ import annotations

import json
import math

import pytest

from convoy_lab.analysis.incumbents import checks
from convoy_lab.experiments import incumbents

pytestmark = pytest.mark.emu

MEASURES = ["fresh_p50_s", "fresh_p99_s", "drain_mbit_s", "capacity_mbit_s", "camera_s", "camera_bound_s",
            "air_per_payload", "vehicle_cpu_s", "server_cpu_s"]


def test_three_stacks_over_one_trace_are_measured_and_convoy_loses_nothing(tmp_path, emulator, shared_traces):
    s = incumbents.settings_from([shared_traces / incumbents.QUICK_TRACES[0]], [2.0], None, quick=True)
    df, meta = incumbents.run(s, tmp_path)
    by = {r["stack"]: r for r in df.to_dict("records")}
    assert sorted(by) == sorted(incumbents.STACK_ORDER)
    for stack, r in by.items():
        assert r["status"] == "ok", f"{stack}: {r['error']}"
        for m in MEASURES:
            assert not math.isnan(r[m]), f"{stack}: no {m}"
        # Headers and acknowledgements cost something on the air.
        assert r["air_per_payload"] > 1.0, stack
        assert r["fresh_samples"] > 10 and r["files_sent"] >= 4, stack
        assert r["vehicle_cpu_s"] > 0 and r["server_cpu_s"] > 0, stack
        # No stack moves the camera file faster than the link's capacity.
        assert r["camera_bound_s"] < r["camera_s"], stack
    c = by["convoy"]
    assert (c["samples_lost"], c["samples_duplicated"], c["files_lost"], c["bytes_lost"]) == (0, 0, 0, 0)
    # The camera file crossed the outage and was checked byte for byte.
    assert c["camera_s"] > 0 and c["log_backlog_unacked"] == 0
    assert (tmp_path / "incumbents" / "runs.csv").is_file() and (tmp_path / "incumbents" / "incumbents.png").is_file()
    assert json.loads((tmp_path / "incumbents" / "meta.json").read_text())["quick"] is True
    assert len(checks(df)) == 5

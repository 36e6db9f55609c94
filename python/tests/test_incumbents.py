"""The incumbents experiment's arithmetic, without the emulator: which
bytes count as on the air, how deliveries become "newest shown", and how
rows become the issue's target checks."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from convoy_lab.analysis.incumbents import checks
from convoy_lab.report.incumbents import table_rows
from convoy_lab.stacks import run as stacks_run
from convoy_lab.stacks.workload import Plan, sample, sample_times


def test_air_bytes_count_delivered_and_lost_on_the_air_but_not_queue_or_outage_drops(tmp_path):
    rows = "t_ns,event,id,len,queue_delay_ns,reason\n"
    rows += "1,enq,0,1500,,\n2,dlv,0,1500,1,\n"  # delivered: on the air
    rows += "3,enq,1,1500,,\n4,drop,1,1500,,loss\n"  # lost after the queue: used the air
    rows += "5,enq,2,1500,,\n6,drop,2,1500,,queue_full\n"  # never left the sender's side
    rows += "7,drop,3,1500,,link_down\n"  # the outage
    (tmp_path / "lte.up.csv").write_text(rows)
    (tmp_path / "lte.down.csv").write_text("t_ns,event,id,len,queue_delay_ns,reason\n1,enq,0,52,,\n2,dlv,0,52,1,\n")
    assert stacks_run.air_bytes(tmp_path) == {"up": 3000, "down": 52}


def test_newest_shown_keeps_only_arrivals_that_advance_the_newest_sample():
    arrivals = [(10, 1), (12, 3), (11, 2), (13, 2), (14, 5)]  # (arrival, sample time), a duplicate of 2
    assert stacks_run._newest_shown(arrivals) == [(10, 1), (11, 2), (12, 3), (14, 5)]


def test_a_sample_is_three_lines_of_one_time():
    payload = sample(123, 45.0) + sample(124, 45.1)
    assert sample_times(payload) == [123, 124]
    assert payload.count(b"\n") == 6


def test_link_spec_has_the_outage_and_the_loss_on_the_data_direction(tmp_path):
    trace = tmp_path / "X.up"
    trace.write_text("1\n")
    (tmp_path / "X.down").write_text("1\n")
    # The outage counts from the emulator's start: set-up time, then the workload's first 20 s.
    spec = stacks_run.link_spec(trace, 2, Plan(start_s=10, before_s=20, outage_s=30))
    assert spec.startswith(f"lte:up={trace},down={tmp_path / 'X.down'},")
    assert "up-loss=2%" in spec and "outage=30s-60s,outage-policy=drop" in spec
    assert "loss" not in stacks_run.link_spec(trace, 0, Plan())


def _row(stack, loss, **kw):
    base = {"stack": stack, "trace": "T.up", "loss_pct": loss, "status": "ok", "error": "", "fresh_p50_s": 0.1,
            "fresh_p99_s": 1.0, "drain_mbit_s": 1.0, "camera_s": 60.0, "camera_bound_s": 30.0, "air_per_payload": 1.04,
            "samples_lost": 0, "samples_duplicated": 0, "files_lost": 0, "samples_sent": 100,
            "drain_of_capacity": 0.5, "bytes_lost": 0, "vehicle_cpu_s": 1.0, "vehicle_cpu_pct": 1.0,
            "server_cpu_s": 1.0, "log_backlog_unacked": 0}
    return {**base, **kw}


def test_checks_compare_convoy_with_each_incumbent_by_the_issue_limits():
    df = pd.DataFrame([
        _row("convoy", 2, fresh_p99_s=0.4, drain_mbit_s=3.0, camera_s=40.0),
        _row("mqtt-s3", 2, fresh_p99_s=1.0, drain_mbit_s=2.0),
        _row("https-put", 2, camera_s=60.0),
    ])
    got = {c["target"].split(":")[0]: c for c in checks(df)}
    assert got["freshness p99"]["value"] == pytest.approx(0.4) and got["freshness p99"]["met"]
    assert got["log drain"]["value"] == pytest.approx(1.5) and got["log drain"]["met"]
    assert got["camera file"]["value"] == pytest.approx(1.5) and got["camera file"]["met"]
    # Beside it, how much faster than HTTPS PUT the link's capacity allows.
    assert "alone takes 30.0 s, so at most 2.00x" in got["camera file"]["detail"]
    assert got["bytes on the air"]["met"]
    # One duplicated sample is a miss, and a missing incumbent row is n/a, not a pass.
    df.loc[0, "samples_duplicated"] = 1
    df = df[df["stack"] != "https-put"]
    got = {c["target"].split(":")[0]: c for c in checks(df)}
    assert got["convoy"]["met"] is False
    assert got["camera file"]["met"] is None and math.isnan(got["camera file"]["value"])


def test_the_table_says_why_a_run_measured_nothing():
    df = pd.DataFrame([_row("convoy", 0), {"stack": "mqtt-s3", "trace": "T.up", "loss_pct": 0.0,
                                           "status": "skipped", "error": "mosquitto not installed"}])
    headers, rows = table_rows(df)
    assert len(rows) == 2 and len(rows[0]) == len(headers)
    assert rows[1][3] == "skipped" and "mosquitto" in rows[1][4]

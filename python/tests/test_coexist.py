"""The coexistence experiments' parts that need no emulator: the real-time
generator and sink on loopback, reading irtt's JSON, the figures from
per-packet tables, the schedules and the scripts they become."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from convoy_lab.experiments import background as background_exp, scheduled, smart_ap as smartap_exp
from convoy_lab.experiments.catalog import ExperimentError
from convoy_lab.emu import coexist, rtflows
from convoy_lab.emu.coexist import Bulk, RtFlow, Schedule


def test_generator_and_sink_measure_one_way_delay_on_loopback(tmp_path):
    out = tmp_path / "game.csv"
    t0 = time.time_ns() + 200_000_000
    port = 47000 + (time.time_ns() // 1000) % 1000
    sink = threading.Thread(target=rtflows.recv, args=(f"127.0.0.1:{port}", str(out), t0 + 1_500_000_000))
    sink.start()
    doc = rtflows.send(f"127.0.0.1:{port}", "game", t0, 0.1, 1.0)
    sink.join()
    assert doc["sent"] == 50  # 1 s at one per 20 ms
    df = coexist.rt_packets(tmp_path, "game", t0)
    assert len(df) == 50 and list(df["seq"]) == list(range(50))
    assert (df["owd_ms"] >= 0).all() and df["owd_ms"].median() < 20
    # No packet leaves before its slot (late ones, on a loaded host, go
    # as soon as the sender runs: the schedule is kept, not shifted).
    slots = [0.1 + 0.020 * k for k in range(50)]
    assert all(t >= slot - 1e-3 for t, slot in zip(df["t"], slots))


def test_pattern_rates():
    assert rtflows.ip_bps("voip") == pytest.approx(80_000)
    assert rtflows.ip_bps("game") == pytest.approx(51_200)
    assert rtflows.ip_bps("game-ut") == pytest.approx((947 + 28) * 8 / 0.0012)


def test_irtt_json_is_read_per_packet(tmp_path):
    t0 = 1_000_000_000_000
    trips = []
    for i in range(4):
        trips.append({
            "seqno": i, "lost": "true_up" if i == 2 else "false",
            "timestamps": {"client": {"send": {"wall": t0 + i * 20_000_000}}},
            "delay": {"send": 30_000_000 + i * 1_000_000} if i != 2 else {},
        })
    (tmp_path / "voip.json").write_text(json.dumps({"round_trips": trips}))
    df = coexist.voip_packets(tmp_path, "voip", t0)
    assert list(df["t"]) == [0.0, 0.02, 0.04, 0.06]
    assert df["owd_ms"].iloc[1] == 31.0 and math.isnan(df["owd_ms"].iloc[2])
    assert list(df["lost"]) == [False, False, True, False]
    # IPDV of consecutive received packets: |31 − 30|, |33 − 31|.
    assert list(coexist.ipdv(df["owd_ms"])) == [1.0, 2.0]


def test_missing_outputs_are_empty_not_errors(tmp_path):
    assert coexist.voip_packets(tmp_path, "voip", 0).empty
    assert coexist.rt_packets(tmp_path, "x", 0).empty
    assert math.isnan(coexist.bulk_result(tmp_path)["goodput_mbit_s"])
    assert coexist.queue_series(tmp_path, "up").empty


def test_scripts_schedule_every_flow(tmp_path):
    s = Schedule([RtFlow("voip", "voip", "up", 0, 10), RtFlow("game-down", "game", "down", 2, 10, 7002)],
                 [Bulk("tcp-cubic", "up", 3, 8)], 10, "rate=10mbit")
    server, client = coexist.scripts(s.scaled(0.5), 123, tmp_path)
    assert "irtt server" in server and "convoy_lab.emu.tcpxfer recv" in server
    assert "irtt client" in client and "-d 5.000s" in client
    assert "rtflows send --to 10.7.0.1:7002" in server and "rtflows recv --listen 10.7.0.1:7002" in client
    assert "--cc cubic --time 2.5" in client
    with pytest.raises(ValueError):
        coexist.scripts(Schedule([], [Bulk("convoy", "down", 0, 1)], 1, ""), 0, tmp_path)


def test_experiment_cells_and_links(tmp_path):
    full = background_exp.cells(quick=False)
    assert len({c.bulk for c in full}) >= 5 and {"loss2", "lte"} <= {c.impairment for c in full}
    cell = background_exp.Cell(10, 250, "loss2", "phases", "convoy-background")
    assert background_exp.link_keys(cell, tmp_path) == "rate=10mbit,delay=30ms,queue=250,up-loss=2%"
    wifi = background_exp.Cell(10, 250, "none", "phases", "convoy-background")
    assert background_exp.link_keys(wifi, tmp_path) == "rate=10mbit,mac=80211:retries=7,delay=30ms,queue=250"
    tuned = smartap_exp.schedule(smartap_exp.Cell("palazzi", "fifo-50")).link
    assert "rate=36mbit" in tuned and "loss=10%,mac=80211:retries=3,queue=50" in tuned
    lte = background_exp.Cell(None, 250, "lte", "phases", "tcp-cubic")
    assert background_exp.link_keys(lte, tmp_path).startswith(f"up={tmp_path}/TMobile-LTE-short.up,")
    assert [c.policy for c in smartap_exp.cells(quick=False) if c.kind == "palazzi"] == list(smartap_exp.POLICIES)
    target = scheduled._cells("background", False, "target,phases,none")[1]
    assert {c.bulk for c in target} == set(background_exp.BULKS) and all(c.rate == 10 for c in target)
    # Tokens must all match one cell: a list that matches none is an error
    # before anything runs, not an empty results file.
    with pytest.raises(ExperimentError, match="no background cell matches"):
        scheduled._cells("background", False, "compete,lte")


def test_yield_time_from_voip_delays():
    # 30 ms floor; 60 ms until 61 s, then 32 ms.
    t = [60 + i * 0.02 for i in range(200)]
    owd = [60.0 if x < 61 else 32.0 for x in t]
    df = pd.DataFrame({"t": t, "owd_ms": owd})
    assert background_exp.yield_time(df, 60, 30.0) == pytest.approx(1.0, abs=0.021)
    assert background_exp.yield_time(df.assign(owd_ms=90.0), 60, 30.0) == math.inf


def test_tables_and_targets_from_rows():
    rows = [{"rate_mbit": 10, "queue_pkts": 250, "impairment": "none", "kind": "phases", "bulk": "convoy-background",
             "status": "ok", "voip_added_p50_ms": 2.0, "voip_added_p95_ms": 20.0, "voip_added_p99_ms": 9.0,
             "voip_ipdv_mean_ms": 1.0, "voip_ipdv_max_ms": 10.0, "game_over_10ms_pct": 0.5, "bulk_mbit_s": 9.0,
             "bulk_share_of_free": 0.95, "bulk_share_of_ideal": 0.95}]
    df = pd.DataFrame(rows)
    checks = {r[0]: r[3] for r in scheduled.targets_check(df)}
    assert checks["VoIP added one-way delay p50 (ms)"] == "met"
    assert checks["VoIP added one-way delay p95 (ms)"] == "missed"
    assert checks["LTE trace: VoIP added p95 (ms)"] == "n/a"
    text = "\n".join(t for t, _, _ in scheduled.tables("background", df))
    assert "VoIP" in text


def test_the_emulator_s_own_lateness_is_read_from_its_summary(tmp_path):
    (tmp_path / "emu.stderr").write_text(
        "convoy emu: ap:up: offered 44449 packets / 11525111 bytes, delivered 44443 packets / 11524799 bytes, "
        "dropped 6 (loss 6); late p50 1 us, p99 3 us, max 5147 us\n"
        "convoy emu: ap:down: offered 141793 packets / 187872624 bytes, delivered 141619 packets / 187624344 bytes, "
        "dropped 174 (queue_full 156, loss 18); late p50 0 us, p99 2 us, max 91486 us\n"
        "some other line with max 7 in it\n")
    assert coexist.emu_late_max_ms(tmp_path) == 91.486
    # A run killed before its summary, or none at all: unknown, not zero.
    (tmp_path / "emu.stderr").write_text("convoy emu: ap:down: late p50 0 us, p99 2 us, max")
    assert math.isnan(coexist.emu_late_max_ms(tmp_path))
    assert math.isnan(coexist.emu_late_max_ms(tmp_path / "missing"))

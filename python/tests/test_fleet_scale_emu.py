"""`fleet scale`'s short form, for real: 8 `convoy agent`s behind 2 shared
emulated cells (drive traces both ways) into one `convoy serve --fleet
--http`, 15 s of 1 Hz telemetry and log files. Needs root and
/dev/net/tun (skipped otherwise, with the reason). About 30 s."""

from __future__ import annotations

import json

import pytest

from convoy_lab.fleet import scale, scale_links

pytestmark = pytest.mark.emu


def test_eight_agents_behind_two_cells_lose_nothing_and_stay_fresh(tmp_path, emulator, shared_traces, capsys):
    doc = scale.run(tmp_path / "scale", vehicles=8, cells=2, seconds=15, warmup=5, records=True)
    assert json.loads((tmp_path / "scale" / "scale.json").read_text()) == json.loads(json.dumps(doc))
    t = doc["total"]
    assert t["vehicles"] == 8 and t["agents_alive_at_end"] == 8
    # Both cells carried their vehicles: each dialled its own cell's address,
    # from its own address in that cell (the per-UE queues' key).
    assert sorted(v["cell"] for v in doc["vehicles"].values()) == [0] * 4 + [1] * 4
    log = (tmp_path / "scale" / "fleet" / "server.log").read_text()
    for i in range(8):
        assert f'connected vehicle="car-{i}" peer=10.7.{i % 2}.{scale.UE_FIRST + i // 2}:' in log, i
    assert doc["total"]["queue"] == scale.QUEUE == "per-ue:200"
    for name, v in doc["vehicles"].items():
        assert v["sent"] >= 14, name
        assert v["lost"] == 0 and v["duplicated"] == 0 and v["unexpected"] == 0, (name, v)
        assert v["logs"] >= 1 and v["logs_stored"] == v["logs"], (name, v)
        assert v["drain_s"] is not None, f"{name}: its spool did not empty"
        assert v["fresh_samples"] >= 5, (name, v)
    # The full run's target is p99 < 2 s for 100 agents; a few agents on a
    # loaded 2-core machine get looser bounds, still far below what a
    # stalled ingest or indexer (tens of seconds) shows.
    assert t["fresh_p50_s"] < 3, t
    assert t["fresh_p99_s"] < 6, t
    assert t["met"]["none_lost"]
    # /proc of the server: it worked and grew with its vehicles.
    assert t["server_cpu_s"] > 0 and t["server_peak_rss_mb"] > t["server_idle_rss_mb"]
    # The link records account for every stored sample: each split at a
    # data packet of its own vehicle, the same samples as the store's
    # freshness (so the same quantiles), the agent's part within the 1 s
    # segment and its upload. (No lower bound: at 1 Hz a vehicle's samples
    # keep one phase against its segment cuts, anywhere in the second; a
    # loaded run's median waited 44 ms.)
    links = scale_links.analyse(tmp_path / "scale")
    assert links["samples_unmatched"] == 0
    for row, cell in zip(links["cells"], doc["cells"]):
        assert row["total"]["n"] > 0 and row["queue_live_s"]["n"] > 0, row
        assert row["total"]["p99"] == pytest.approx(cell["stored_p99_s"]), (row, cell)
        assert 0 <= row["agent"]["p50"] < 2.5, row
        assert 0.02 <= row["cell"]["p50"] < 2, row
    scale.print_table(doc)
    out = capsys.readouterr().out
    assert "car-7" in out and "0 samples or log files lost or duplicated" in out


def test_the_trace_floor_is_the_wait_for_the_next_uplink_opportunity(tmp_path):
    up = tmp_path / "t.up"
    up.write_text("100\n400\n1000\n")  # 0.1, 0.4 and 1.0 s, which is the repeat's 0
    spec = f"cell0:up={up},down={up},offset=1s,delay=20ms"
    # From 1.0 s into the trace (the offset) in 100 ms steps: 1.0 and
    # 1.1 are opportunities, then 1.4 is the next.
    waits = scale_links.uplink_waits(spec, 0, 0.5, step_ms=100)
    assert waits == [0.0, 0.0, 0.2, 0.1, 0.0]


def test_a_sample_is_charged_to_the_first_packet_of_its_burst_sent_after_it():
    # (delivered, entered, bytes), delivery order: a lone packet at 1 s,
    # then a burst delivered at 5 s of packets that entered at 2, 3 and 4 s
    # (a slow spell: the 2 s segment waited there with the next ones).
    data = [(1_000, 900, 300), (5_000, 2_000, 300), (5_000, 3_000, 300), (5_000, 4_000, 300)]
    arrived = [d for d, _, _ in data]
    # A segment written after the burst: its sample of 1.95 s left in the
    # packet of 2 s, which waited 3 s in the cell, not in the one of 4 s.
    assert scale_links.carrier(data, arrived, 3, 1_950) == (5_000, 2_000, 300)
    assert scale_links.carrier(data, arrived, 3, 2_950) == (5_000, 3_000, 300)
    # A sample after every packet of the burst: the last one, as before.
    assert scale_links.carrier(data, arrived, 3, 4_500) == (5_000, 4_000, 300)
    # A packet alone is its own burst.
    assert scale_links.carrier(data, arrived, 0, 800) == (1_000, 900, 300)

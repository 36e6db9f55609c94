"""Real runs over `convoy emu`: kernel TCP through the exact-bytes sender, and
convoy's own modes through `convoy perf`. Need root and /dev/net/tun (CI has
both) and the convoy binary; otherwise they are skipped with the reason.
About 15 s."""

from __future__ import annotations

import math

import pytest

from convoy_lab.report import html as report
from convoy_lab.experiments.catalog import get_experiment
from convoy_lab.emu.run import run_once
from convoy_lab.emu.scenarios import Scenario
from convoy_lab.emu.schemes import Transfer, get_scheme
from convoy_lab.emu.sweep import run_sweep


pytestmark = [pytest.mark.emu, pytest.mark.usefixtures("emulator")]


def test_kernel_tcp_over_the_emulator_is_one_tidy_row(tmp_path):
    scenario = Scenario(rate_mbit=20, delay_ms=10, loss_pct=1)
    row = run_once(get_scheme("tcp-cubic"), scenario, Transfer(seconds=1.5), 1, tmp_path / "run")
    assert row["status"] == "ok", row["error"]
    assert row["duration_s"] == pytest.approx(1.5, abs=0.01)
    assert 0.5 < row["goodput_mbit_s"] < 20
    # Data packets cross 10 ms of propagation plus their 0.6 ms serialization.
    assert 10.5 < row["owd_p50_ms"] <= row["owd_p95_ms"] <= row["owd_p99_ms"]
    assert row["link_loss_drops"] > 0 and row["link_data_pkts"] > 500
    assert row["cpu_client_s"] > 0 and row["cpu_server_s"] > 0
    assert row["ideal_mbit_s"] == pytest.approx(19.8)
    assert not (tmp_path / "run" / "records").exists()  # dropped unless asked for
    assert "convoy emu --link link:rate=20mbit,delay=10ms,up-loss=1%" in (tmp_path / "run" / "command.txt").read_text()


def test_exact_bytes_with_bbr_over_a_drive_trace(tmp_path, shared_traces):
    scenario = Scenario(trace=shared_traces / "ATT-LTE-driving-2016.up", delay_ms=20)
    row = run_once(get_scheme("tcp-bbr"), scenario, Transfer(bytes=300_000), 2, tmp_path / "run")
    assert row["status"] == "ok", row["error"]
    assert row["bytes"] == 300_000
    assert row["trace"] == "ATT-LTE-driving-2016.up" and row["queue_pkts"] == 200
    assert row["owd_p50_ms"] > 20


def test_sweep_and_report_end_to_end(tmp_path):
    """Two loss points of the 50 Mbit/s sweep with kernel TCP, short, then
    the report: the path `make demo` takes, at a fraction of its length."""
    e = get_experiment("loss-50mbit")
    scenarios = [e.scenario(0), e.scenario(5)]
    result = run_sweep(e.name, [get_scheme("tcp-reno")], scenarios, Transfer(seconds=1), [1], tmp_path / e.name)
    assert list(result.rows["status"]) == ["ok", "ok"], list(result.rows["error"])
    lossless, lossy = result.rows["goodput_mbit_s"]
    assert lossless > 2 * lossy  # Reno backs off on random loss: the papers' point
    (tmp_path / e.name / "meta.json").write_text('{"quick": true, "seeds": [1], "transfer": "1 s", "transfer_s": 1}')
    page = report.write_report(tmp_path).read_text()
    assert "tcp-reno" in page and "data:image/png;base64," in page


@pytest.mark.parametrize("scheme", ["convoy-rcdp", "convoy-rlnc-bbr"])
def test_convoy_modes_over_the_emulator(tmp_path, scheme):
    s = get_scheme(scheme)
    reason = s.unavailable()
    if reason:
        pytest.skip(reason)
    row = run_once(s, Scenario(rate_mbit=20, delay_ms=10, loss_pct=5), Transfer(bytes=1_000_000), 1, tmp_path / "run")
    assert row["status"] == "ok", row["error"]
    assert row["bytes"] == 1_000_000
    assert 1 < row["goodput_mbit_s"] < 20
    assert row["cpu_client_s"] > 0


def test_cellular_grid_over_a_drive_trace_from_an_offset(tmp_path, shared_traces):
    """The cellular experiment's path at a fraction of its length: one trace
    direction (the ATT downlink on the data direction), from 40 s into the
    drive, convoy's default mode and kernel Cubic, 3 s each."""
    from convoy_lab.experiments import cellular
    from convoy_lab.analysis import cellular as ca
    from convoy_lab.traces import window_capacity_mbit

    data = shared_traces / "ATT-LTE-driving-2016.down"
    s = cellular.settings_from(traces=[data], schemes=["convoy", "tcp-cubic"], duration_s=3, offsets_s=[40],
                               losses_pct=[0])
    if get_scheme("convoy").unavailable():
        s.schemes = ["tcp-cubic"]
    rows, meta = cellular.run(s, tmp_path)
    assert list(rows["status"]) == ["ok"] * len(s.schemes), list(rows["error"])
    for _, row in rows.iterrows():
        command = (tmp_path / "cellular" / row["run_dir"] / "command.txt").read_text()
        assert f"up={data.resolve()},down={data.resolve().with_suffix('.up')},offset=40000ms" in command
        # The capacity beside it is the trace's from 40 s on, over the run's own window.
        window = window_capacity_mbit(data, 40 + row["first_data_s"], row["duration_s"])
        assert row["capacity_mbit_s"] == pytest.approx(window)
        assert 0 < row["goodput_mbit_s"] <= 1.05 * row["capacity_mbit_s"] + 0.5
        assert row["owd_p95_ms"] - row["qdelay_p95_ms"] == pytest.approx(20)
        assert (tmp_path / "cellular" / row["run_dir"] / "delivered.csv").is_file()
    if "convoy" in s.schemes:
        checks = ca.point_checks(rows)
        assert not math.isnan(checks["over_cubic"].iloc[0])
    page = report.write_report(tmp_path).read_text()
    assert 'id="cellular"' in page and page.count("data:image/png;base64,") == 2

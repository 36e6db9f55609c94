"""The cellular experiment without the emulator: its grid, trace windows
with offsets, queueing delay, the issue's target checks on synthetic rows,
the command line's checks, and a whole run with a stand-in runner. Fast;
the real run over convoy emu is in test_experiments_emu.py."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from convoy_lab.experiments import cellular, cli as experiments
from convoy_lab.report import html as report
from convoy_lab.analysis import cellular as ca
from convoy_lab.experiments.catalog import ExperimentError
from convoy_lab.emu.run import latency_columns
from convoy_lab.emu.linkstats import data_direction_stats
from convoy_lab.emu.scenarios import Scenario
from convoy_lab.traces import window_capacity_mbit

ATT, TMO, VZ = "ATT-LTE-driving-2016", "TMobile-LTE-short", "Verizon-LTE-short"


# ---- the grid ----------------------------------------------------------------


def test_default_grid_is_every_direction_offset_and_loss(shared_traces):
    s = cellular.settings_from()
    assert [(d.name, d.feedback.name) for d in s.directions] == [
        (f"{ATT}.up", f"{ATT}.down"), (f"{TMO}.up", f"{TMO}.down"), (f"{VZ}.up", f"{VZ}.down"),
        (f"{ATT}.down", f"{ATT}.up"), (f"{TMO}.down", f"{TMO}.up"), (f"{VZ}.down", f"{VZ}.up"),
    ]
    assert [d.kind for d in s.directions] == ["uplink"] * 3 + ["downlink"] * 3
    # 0, 1/3, 2/3 of each data trace's period (ATT 120 s, the others 140 s).
    assert s.offsets_for(s.directions[0]) == [0, 40, 80]
    assert s.offsets_for(s.directions[4]) == [0, 47, 93]
    assert (s.duration_s, s.delay_ms, s.queue_packets, s.losses_pct) == (60, 20, 200, [0, 2])
    assert s.schemes == ["convoy", "convoy-rcdp", "convoy-rlnc-bbr", "tcp-cubic", "tcp-bbr"]
    points = s.scenarios()
    assert len(points) == 36 and s.runs() == 180
    # Loss outermost: a cut-short run has whole loss-free comparisons first.
    assert [p.loss_pct for p in points] == [0] * 18 + [2] * 18
    down = points[13]  # TMobile downlink from 47 s, no loss
    assert (down.trace.name, down.offset_s) == (f"{TMO}.down", 47)
    spec = down.link_spec(1)
    traces = shared_traces.resolve()
    assert f"up={traces / (TMO + '.down')}," in spec and f"down={traces / (TMO + '.up')}," in spec
    assert "offset=47000ms" in spec and "delay=20ms" in spec and "queue=200" in spec and "loss" not in spec
    assert "up-loss=2%" in points[-1].link_spec(1)
    assert points[0].describe() == f"{ATT}.up 20 ms" and points[1].describe() == f"{ATT}.up from 40 s 20 ms"


def test_quick_form_is_short_and_overrides_apply(shared_traces):
    q = cellular.settings_from(quick=True)
    assert [d.name for d in q.directions] == [f"{ATT}.up", f"{TMO}.down"]
    assert (q.duration_s, q.losses_pct, q.offsets_s, q.runs()) == (15, [0], [0], 10)
    s = cellular.settings_from(quick=True, schemes=["tcp-cubic"], delay_ms=5, losses_pct=[1, 3], queue_packets=50,
                               duration_s=8, offsets_s=[10, 20], seeds=2)
    assert (s.delay_ms, s.losses_pct, s.queue_packets, s.duration_s, s.offsets_s) == (5, [1, 3], 50, 8, [10, 20])
    assert s.runs() == 1 * 2 * 2 * 2 * 2
    command = cellular.command_line(s, "results")
    assert command.startswith(".venv/bin/python -m convoy_lab.experiments run cellular --quick --schemes tcp-cubic")
    assert "--delay 5 --loss 1,3 --queue 50 --duration 8 --offsets 10,20 --seeds 2 --out results" in command


def test_scaled_grid_runs_twins_of_every_direction_at_each_factor(shared_traces, tmp_path):
    s = cellular.settings_from(quick=True, scales=[0.25, 1], scaled_dir=tmp_path)
    names = [(d.name, d.feedback.name, d.kind) for d in s.directions]
    assert names[:2] == [(f"{ATT}-x0.25.up", f"{ATT}-x0.25.down", "uplink"),
                         (f"{TMO}-x0.25.down", f"{TMO}-x0.25.up", "downlink")]
    assert [n[0] for n in names[2:]] == [f"{ATT}.up", f"{TMO}.down"]  # factor 1: the trace itself
    assert ("--scale", "0.25,1") in s.given
    # The twin keeps the period and carries a quarter of the opportunities.
    lines = lambda p: [int(x) for x in p.read_text().split()]
    full, quarter = lines(shared_traces / f"{ATT}.up"), lines(s.directions[0].data)
    assert quarter[-1] == full[-1] and abs(len(quarter) - len(full) / 4) <= 1
    with pytest.raises(ExperimentError, match="--scale"):
        cellular.settings_from(quick=True, scales=[0], scaled_dir=tmp_path)


def test_user_traces_take_their_twin_or_themselves(tmp_path):
    (tmp_path / "drive.up").write_text("0\n5\n10\n")
    (tmp_path / "drive.down").write_text("1\n2\n10\n")
    (tmp_path / "solo.trace").write_text("0\n3\n20\n")
    s = cellular.settings_from(traces=[tmp_path / "drive.down", tmp_path / "solo.trace"])
    assert [(d.name, d.feedback.name) for d in s.directions] == [("drive.down", "drive.up"), ("solo.trace", "solo.trace")]
    assert s.offsets_for(s.directions[1]) == [0]  # thirds of a 20 ms trace, in whole seconds


def test_series_trace_offsets_keep_a_whole_run_inside_it(tmp_path):
    series = tmp_path / "drive.csv"
    series.write_text("start_s,rate_mbps,up\n0,10,1\n100,0,0\n160,5,1\n")
    assert cellular.default_offsets(series, 60) == [0, 50, 100]
    short = tmp_path / "short.csv"
    short.write_text("start_s,rate_mbps\n0,10\n30,5\n")
    assert cellular.default_offsets(short, 60) == [0]


@pytest.mark.parametrize("kwargs, message", [
    ({"traces": ["/nonexistent.up"]}, "--trace /nonexistent.up: no such file"),
    ({"delay_ms": -1}, "--delay: expected at least 0 ms, got -1"),
    ({"losses_pct": [0, 100]}, "--loss: expected in [0, 100) %, got 100"),
    ({"queue_packets": 0}, "--queue: expected at least 1 packet"),
    ({"duration_s": 0}, "--duration: expected more than 0 s"),
    ({"offsets_s": [-5]}, "--offsets: expected at least 0 s"),
])
def test_bad_settings_are_refused_before_any_run(kwargs, message, shared_traces):
    with pytest.raises(ExperimentError, match=message.replace("[", r"\[").replace(")", r"\)")):
        cellular.settings_from(**kwargs)


def test_bad_traces_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.up"
    bad.write_text("0\n7\nseven\n")
    with pytest.raises(ExperimentError, match=r"bad.up:3: expected a whole number"):
        cellular.settings_from(traces=[bad])
    norate = tmp_path / "norate.csv"
    norate.write_text("start_ms,delay_ms\n0,5\n")
    with pytest.raises(ExperimentError, match="rate_"):
        cellular.settings_from(traces=[norate])
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.up").write_text("0\n10\n")
    (tmp_path / "x.up").write_text("0\n10\n")
    with pytest.raises(ExperimentError, match="two traces named x.up"):
        cellular.settings_from(traces=[tmp_path / "a" / "x.up", tmp_path / "x.up"])


def test_command_line_errors_are_one_line(capsys, tmp_path):
    assert experiments.main(["run", "cellular", "--trace", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"error: --trace {tmp_path / 'none'}: no such file\n"
    assert experiments.main(["run", "loss-50mbit", "--offsets", "10"]) == 2
    assert "--offsets: only for the cellular experiment" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        experiments.main(["run", "cellular", "--loss", "two"])
    assert "expected comma-separated numbers" in capsys.readouterr().err


# ---- capacity windows with offsets -----------------------------------------


def test_capacity_window_starts_at_the_offset_and_wraps(tmp_path):
    # One 1500-byte opportunity per ms for the first 4 s of a 10 s period
    # (12 Mbit/s), none for the other 6.
    trace = tmp_path / "t.up"
    trace.write_text("\n".join(str(ms) for ms in range(1, 4001)) + "\n10000\n")
    s = Scenario(trace=trace, delay_ms=20, offset_s=3)
    # The trace's [3, 5): opportunities at 3000 .. 4000 ms, then none.
    assert s.capacity_mbit(2) == pytest.approx(1001 * 12000 / 2 / 1e6)
    # From 1 s of link time on, the trace's [4, 6): the one at 4000 ms.
    assert s.capacity_mbit(2, start_s=1) == pytest.approx(12000 / 2 / 1e6)
    # [9, 13) wraps: the line at 10000 ms, then the next period's 1 .. 2999 ms.
    late = Scenario(trace=trace, delay_ms=20, offset_s=9)
    assert late.capacity_mbit(4) == pytest.approx(3000 * 12000 / 4 / 1e6)
    # An offset of a whole period is no offset.
    start = Scenario(trace=trace, delay_ms=20)
    assert Scenario(trace=trace, delay_ms=20, offset_s=10).capacity_mbit(4) == pytest.approx(start.capacity_mbit(4))


def test_capacity_of_the_shared_drive_from_an_offset(shared_traces):
    up = shared_traces / f"{ATT}.up"
    s = Scenario(trace=up, delay_ms=20, offset_s=110)
    # 60 s from 110 s into a 120.002 s trace: its last 10 s, then its first 50.
    expected = (window_capacity_mbit(up, 110, 10.002) * 10.002 + window_capacity_mbit(up, 0, 49.998) * 49.998) / 60
    assert s.capacity_mbit(60) == pytest.approx(expected, rel=1e-3)
    assert Scenario(trace=up, delay_ms=20).capacity_mbit(10) == pytest.approx(4.10, abs=0.01)


def test_series_capacity_holds_the_last_row_and_counts_outages(tmp_path):
    trace = tmp_path / "drive.csv"
    trace.write_text("start_ms,rate_kbps,up\n0,8000,1\n1000,4000,0\n2000,2000,1\n")
    assert window_capacity_mbit(trace, 0, 1) == pytest.approx(8.0)
    assert window_capacity_mbit(trace, 1, 1) == 0  # down: carries nothing
    assert window_capacity_mbit(trace, 0.5, 2) == pytest.approx((0.5 * 8 + 0.5 * 2) / 2)
    assert window_capacity_mbit(trace, 50, 10) == pytest.approx(2.0)  # the last row holds
    assert Scenario(trace=trace, delay_ms=0, offset_s=1.5).capacity_mbit(1) == pytest.approx(1.0)


# ---- queueing delay ----------------------------------------------------------


def test_queueing_delay_is_one_way_delay_less_propagation(tmp_path):
    path = tmp_path / "link.up.csv"
    lines = ["t_ns,event,id,len,queue_delay_ns,reason"]
    for i, waited_ms in enumerate([1, 2, 3, 4, 100]):
        enq = i * 1_000_000_000
        lines += [f"{enq},enq,{i},1400,,", f"{enq + (20 + waited_ms) * 1_000_000},dlv,{i},1400,,"]
    path.write_text("\n".join(lines) + "\n")
    per_second = tmp_path / "delivered.csv"
    stats = data_direction_stats(path, propagation_ms=20, per_second=per_second)
    assert stats["qdelay_p50_ms"] == pytest.approx(3)
    assert stats["owd_p95_ms"] - stats["qdelay_p95_ms"] == pytest.approx(20)
    assert stats["qdelay_p95_ms"] == pytest.approx(4 + 0.8 * 96)  # pandas' linear interpolation
    seconds = pd.read_csv(per_second)
    assert seconds["second"].tolist() == [0, 1, 2, 3, 4]
    assert seconds["delivered_mbit_s"].tolist() == pytest.approx([1400 * 8 / 1e6] * 5)


def test_latency_field_becomes_columns_only_when_present():
    assert latency_columns({"p50": 12.5, "p95": 40, "p99": 80.0}) == {"lat_p50_ms": 12.5, "lat_p95_ms": 40.0, "lat_p99_ms": 80.0}
    assert latency_columns(None) == {} and latency_columns({"p50": "x"}) == {} and latency_columns([1]) == {}


# ---- target checks on synthetic rows -----------------------------------------


def _row(scheme, loss, offset, goodput, qdelay, trace=f"{ATT}.up", **extra):
    return {"scheme": scheme, "loss_pct": loss, "trace": trace, "offset_s": offset, "seed": 1, "status": "ok",
            "error": "", "goodput_mbit_s": goodput, "capacity_mbit_s": 4.0, "owd_p50_ms": qdelay / 2 + 20,
            "owd_p95_ms": qdelay + 20, "qdelay_p95_ms": qdelay, "lat_p50_ms": math.nan, "lat_p95_ms": math.nan,
            "lat_p99_ms": math.nan, "transfer_s": 60, "duration_s": 60, "first_data_s": 0.1, **extra}


def _grid_rows() -> pd.DataFrame:
    rows = []
    for offset, convoy, q in [(0, 3.0, 100), (40, 2.0, 300)]:
        rows += [_row("convoy", 0, offset, convoy, q), _row("tcp-cubic", 0, offset, 2.5, 400),
                 _row("tcp-bbr", 0, offset, 2.0, 150)]
    # 2 % loss: convoy 1.7× Cubic, 1.3× BBR, a third of Cubic's delay; two seeds of Cubic averaged.
    rows += [_row("convoy", 2, 0, 1.7, 100), _row("tcp-cubic", 2, 0, 0.9, 300),
             {**_row("tcp-cubic", 2, 0, 1.1, 300), "seed": 2}, _row("tcp-bbr", 2, 0, 1.3, 200)]
    return pd.DataFrame(rows)


def test_checks_per_offset_and_at_worst():
    checks = ca.point_checks(_grid_rows()).set_index(["loss_pct", "offset_s"])
    first = checks.loc[(0, 0)]
    assert (first["over_cubic"], first["over_bbr"], first["delay_over_cubic"]) == pytest.approx((1.2, 1.5, 0.25))
    assert bool(first["met"])
    second = checks.loc[(0, 40)]
    assert [bool(second[k]) for k in ("over_cubic_met", "over_bbr_met", "delay_met", "met")] == [False, True, False, False]
    lossy = checks.loc[(2, 0)]
    assert lossy["over_cubic"] == pytest.approx(1.7) and bool(lossy["met"])
    summary = {(c["loss_pct"], c["scope"]): c for c in ca.summary_checks(_grid_rows())}
    worst = summary[(0, "all")]
    assert (worst["over_cubic"], worst["delay_over_cubic"]) == pytest.approx((0.8, 0.75))
    assert (worst["met"], worst["points_met"], worst["points_judged"]) == (False, 1, 2)
    assert summary[(2, f"{ATT}.up")]["met"] == True  # noqa: E712


def test_checks_without_a_baseline_or_a_target_give_no_verdict():
    df = _grid_rows()
    no_bbr = ca.point_checks(df[df["scheme"] != "tcp-bbr"])
    assert math.isnan(no_bbr["over_bbr"].iloc[0]) and no_bbr["over_bbr_met"].iloc[0] is None
    assert no_bbr["met"].iloc[0] is None and no_bbr["met"].iloc[1] is False  # one miss is a miss
    five = df.assign(loss_pct=df["loss_pct"].replace(2, 5))
    assert ca.point_checks(five).set_index("loss_pct").loc[5, "met"] is None


def test_printed_ratios_never_round_onto_the_bound():
    assert ca.verdict(0.999, False) == "0.99 MISSED"
    assert ca.verdict(0.5004, False, at_least=False) == "0.51 MISSED"
    assert ca.verdict(1.25, True) == "1.25 met" and ca.verdict(math.nan, None) == "n/a"


def test_text_report_has_tables_checks_and_latency_only_when_reported():
    df = _grid_rows()
    meta = {"conditions": "60 s per run", "schemes": cellular.SCHEMES_DEFAULT, "seeds": [1, 2]}
    text = ca.text_report(df, meta, report.text_table)
    assert f"-- {ATT}.up, no added loss" in text and f"-- {ATT}.up, 2 % added loss" in text
    assert "queue p95 ms" in text and "w→r p95 ms" not in text
    assert "goodput ≥ 1.60× tcp-cubic and ≥ 1.25× tcp-bbr" in text
    assert "all directions            worst" in text and "(1 of 2 points)" in text
    df.loc[df["scheme"] == "convoy", ["lat_p50_ms", "lat_p95_ms", "lat_p99_ms"]] = [30.0, 90.0, 150.0]
    assert "w→r p95 ms" in ca.text_report(df, meta, report.text_table)
    assert "note:" not in text
    df.loc[df["scheme"] == "convoy", "duration_s"] = 95.0
    assert "note: convoy: runs lasted up to 35 s past their 60 s" in ca.text_report(df, meta, report.text_table)
    no_convoy = ca.text_report(df[df["scheme"] != "convoy"], meta, report.text_table)
    assert "n/a: convoy was not run" in no_convoy


# ---- a whole run, with a stand-in for the emulator -----------------------------


def test_run_writes_rows_meta_and_a_report_section(tmp_path, shared_traces, capsys):
    s = cellular.settings_from(quick=True, schemes=["convoy", "tcp-cubic", "tcp-bbr"], losses_pct=[0, 2])
    seen = []

    def fake_run(scheme, scenario, transfer, seed, workdir, keep_records=False):
        seen.append((scheme.name, scenario.trace.name, scenario.loss_pct))
        # meta.json is there before the first run ends
        assert json.loads((tmp_path / "cellular" / "meta.json").read_text())["finished"] is False
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "command.txt").write_text(f"convoy emu --link {scenario.link_spec(seed)} -- x\n")
        pd.DataFrame({"second": range(16), "delivered_mbit_s": [1.0] * 16}).to_csv(workdir / "delivered.csv", index=False)
        good = {"convoy": 3.0, "tcp-cubic": 2.0, "tcp-bbr": 2.5}[scheme.name]
        return {**_row(scheme.name, scenario.loss_pct, scenario.offset_s, good, 50.0, trace=scenario.trace.name),
                **scenario.columns(), "wall_s": 0.1}

    rows, meta = cellular.run(s, tmp_path, runner=fake_run)
    assert len(rows) == 12 and len(pd.read_csv(tmp_path / "cellular" / "runs.csv")) == 12
    assert seen[:3] == [("convoy", f"{ATT}.up", 0), ("tcp-cubic", f"{ATT}.up", 0), ("tcp-bbr", f"{ATT}.up", 0)]
    assert meta["finished"] is True and meta["offsets_s"] == {f"{ATT}.up": [0], f"{TMO}.down": [0]}
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("cellular: 12 runs (3 schemes × 4 points × 1 seeds), one at a time: about")
    assert err[-1].startswith("[ 12/12] cellular: tcp-bbr") and "left)" in err[-1]
    page = report.write_report(tmp_path).read_text()
    assert 'id="cellular"' in page and meta["command"] in page
    assert page.count("data:image/png;base64,") == 4  # scatter and over-time, per loss setting
    assert "Targets for convoy, 2 % added loss" in page and "1.50 met" in page


def test_over_time_legend_comes_from_any_panel_that_drew(tmp_path, shared_traces):
    """A part resumed on another machine keeps its rows but not their run
    directories: the first direction's panel draws nothing, the legend
    still names the schemes the others drew (it took the first panel's
    alone, and a legend of none raised)."""
    from convoy_lab.report import cellular as plots
    df = pd.concat([_row_frame(s, ATT + ".up") for s in ("convoy", "tcp-cubic")]
                   + [_row_frame(s, TMO + ".down") for s in ("convoy", "tcp-cubic")], ignore_index=True)
    for _, r in df[df["trace"] == TMO + ".down"].iterrows():
        d = tmp_path / r["run_dir"]
        d.mkdir(parents=True)
        pd.DataFrame({"second": range(5), "delivered_mbit_s": [1.0] * 5}).to_csv(d / "delivered.csv", index=False)
    path = plots.over_time(df, 0, ["convoy", "tcp-cubic"], tmp_path, tmp_path / "over.png")
    assert path is not None and path.stat().st_size > 0
    nothing = plots.over_time(df[df["trace"] == ATT + ".up"], 0, ["convoy"], tmp_path, tmp_path / "none.png")
    assert nothing is None


def _row_frame(scheme: str, trace: str) -> pd.DataFrame:
    row = {**_row(scheme, 0, 0, 2.0, 50.0, trace=trace), "run_dir": f"runs/{trace}-{scheme}",
           "duration_s": 5.0, "first_data_s": 0.0}
    return pd.DataFrame([row])


def test_json_document_has_rows_and_targets(tmp_path):
    df = _grid_rows()
    res = {"experiment": None, "name": "cellular", "rows": df, "meta": {"schemes": ["convoy"]},
           "checks": ca.summary_checks(df)}
    doc = json.loads(json.dumps(experiments.as_json([res], tmp_path / "report.html")))
    cell = doc["experiments"][0]
    assert cell["name"] == "cellular" and len(cell["rows"]) == len(df)
    assert {t["scope"] for t in cell["targets"]} == {f"{ATT}.up", "all"}
    assert len(cell["target_points"]) == 3 and cell["rows"][0]["lat_p50_ms"] is None


def test_a_failed_convoy_run_misses_its_targets():
    df = _grid_rows()
    stalled = (df["scheme"] == "convoy") & (df["offset_s"] == 0) & (df["loss_pct"] == 0)
    df.loc[stalled, ["status", "error"]] = ["timeout", "no result within 210 s"]
    checks = ca.point_checks(df).set_index(["loss_pct", "offset_s"])
    assert checks.loc[(0, 0), "convoy_failed"] == "timeout" and checks.loc[(0, 0), "met"] == False  # noqa: E712
    worst = {(c["loss_pct"], c["scope"]): c for c in ca.summary_checks(df)}[(0, "all")]
    assert worst["convoy_failed"] == "1 failed" and worst["over_cubic_met"] == False  # noqa: E712
    text = ca.text_report(df, {"schemes": cellular.SCHEMES_DEFAULT}, report.text_table)
    assert "convoy timeout: MISSED" in text and "0.80 MISSED, convoy 1 failed" in text
    assert "no result: convoy ATT-LTE-driving-2016.up from 0 s, no added loss: timeout" in text

"""The experiment framework without the emulator: scenarios, names, link
statistics, the papers' figures, sweeps, the report, and the kernel-TCP
sender on loopback. Seconds in all; the emulator's own runs are in
test_experiments_emu.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from convoy_lab.experiments import catalog, cli as experiments, multipath as multipath_exp, scheduled
from convoy_lab.report import html as report
from convoy_lab.experiments.catalog import ExperimentError, get_experiment
from convoy_lab.emu.linkstats import data_direction_stats
from convoy_lab.emu.scenarios import Scenario, default_queue_packets
from convoy_lab.emu.schemes import SCHEMES, SchemeError, Transfer, get_scheme
from convoy_lab.emu.sweep import run_sweep
from convoy_lab.traces import summarize_mahimahi


def test_constant_link_spec_has_the_papers_conditions():
    s = Scenario(rate_mbit=2, delay_ms=10, loss_pct=5)
    assert s.link_spec(seed=3) == "link:rate=2mbit,delay=10ms,up-loss=5%,queue=100,seed=3"
    assert s.describe() == "2 Mbit/s 10 ms 5 % loss"
    # 50 Mbit/s, 20 ms RTT: BDP 83 packets, queue twice that.
    assert default_queue_packets(50, 10) == 167
    assert "loss" not in Scenario(rate_mbit=50, delay_ms=10).link_spec(1)


def test_trace_link_uses_the_down_twin_for_feedback(shared_traces):
    s = Scenario(trace=shared_traces / "ATT-LTE-driving-2016.up", delay_ms=20)
    spec = s.link_spec(1)
    assert f"up={shared_traces / 'ATT-LTE-driving-2016.up'}" in spec
    assert f"down={shared_traces / 'ATT-LTE-driving-2016.down'}" in spec
    assert "queue=200" in spec
    whole = summarize_mahimahi(shared_traces / "ATT-LTE-driving-2016.up").mean_mbit_s
    assert s.capacity_mbit() == pytest.approx(whole)
    # The drive starts well above its mean (4.1 Mbit/s over the first 10 s).
    assert s.capacity_mbit(10) == pytest.approx(4.10, abs=0.01)


def test_bad_scenarios_and_transfers_are_refused():
    with pytest.raises(ValueError, match="either rate_mbit or trace"):
        Scenario(delay_ms=10)
    with pytest.raises(ValueError, match="loss"):
        Scenario(rate_mbit=1, delay_ms=0, loss_pct=100)
    with pytest.raises(ValueError, match="either bytes or seconds"):
        Transfer(bytes=10, seconds=1)


def test_unknown_names_list_the_valid_ones(capsys):
    with pytest.raises(SchemeError, match="valid schemes: convoy, convoy-rcdp, convoy-rlnc-bbr, tcp-cubic, tcp-bbr, tcp-reno"):
        get_scheme("tcp-vegas")
    with pytest.raises(ExperimentError, match="valid experiments: rcdp-loss, rcdp-delay"):
        get_experiment("loss")
    assert experiments.main(["run", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown experiment 'nope'; valid experiments: ")
    assert all(name in err for name in [*catalog.EXPERIMENTS, "cellular"])
    assert experiments.main(["run", "loss-50mbit", "--schemes", "quic"]) == 2
    assert "valid schemes: " in capsys.readouterr().err


def test_list_names_every_experiment_and_scheme(capsys):
    assert experiments.main(["list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["experiments"]) == {*catalog.EXPERIMENTS, "cellular", *scheduled.TITLES, *multipath_exp.TITLES,
                                       "incumbents"}
    assert set(doc["schemes"]) == set(SCHEMES)
    assert [n for n, e in doc["experiments"].items() if e["demo"]] == ["loss-50mbit", "cellular"]


def test_the_papers_conditions_are_the_specs():
    loss = get_experiment("rcdp-loss")
    assert {(s.rate_mbit, s.delay_ms) for s in loss.scenarios(False)} == {(2, 10)}
    assert [s.loss_pct for s in loss.scenarios(False)][0::8] == [0, 10]
    delay = get_experiment("rcdp-delay").scenarios(False)
    assert {(s.rate_mbit, s.loss_pct) for s in delay} == {(2, 2)}
    assert (delay[0].delay_ms, delay[-1].delay_ms) == (0, 100)
    bw = get_experiment("rcdp-bandwidth").scenarios(False)
    assert (bw[0].rate_mbit, bw[-1].rate_mbit) == (0.5, 30)
    assert {(s.delay_ms, s.loss_pct) for s in bw} == {(10, 2)}
    fifty = get_experiment("loss-50mbit")
    assert "tcp-reno" in fifty.schemes and fifty.ideal_line
    lte = get_experiment("lte-upload")
    assert [s.trace.suffix for s in lte.scenarios(False)] == [".up"] * 3


def test_link_stats_from_records(tmp_path):
    path = tmp_path / "link.up.csv"
    path.write_text(
        "t_ns,event,id,len,queue_delay_ns,reason\n"
        "0,enq,0,60,,\n"  # handshake: not data
        "10000000,dlv,0,60,0,\n"
        "1000000,enq,1,1500,,\n"
        "2000000,enq,2,1500,,\n"
        "2000000,drop,2,1500,,loss\n"
        "3000000,enq,3,1500,,\n"
        "3000000,drop,3,1500,,queue_full\n"
        "13000000,dlv,1,1500,1000000,\n"
        "4000000,enq,4,1500,,\n"
        "34000000,dlv,4,1500,1000000,\n"
    )
    stats = data_direction_stats(path)
    assert stats["link_data_pkts"] == 4
    assert (stats["link_loss_drops"], stats["link_queue_drops"]) == (1, 1)
    assert stats["owd_p50_ms"] == pytest.approx(21.0)  # 12 and 30 ms
    assert stats["link_ip_bytes"] == 3000
    assert math.isnan(data_direction_stats(tmp_path / "none.csv")["owd_p95_ms"])


def _rows(experiment: str, x: str, table: dict[str, dict], extra: dict | None = None) -> pd.DataFrame:
    rows = []
    for scheme, points in table.items():
        for value, goodput in points.items():
            row = {"experiment": experiment, "scheme": scheme, x: value, "goodput_mbit_s": goodput,
                   "status": "ok", "error": "", "ideal_mbit_s": 50 * (1 - value / 100) if x == "loss_pct" else 2.0,
                   "capacity_mbit_s": 2.0, "owd_p50_ms": 11.0, "owd_p95_ms": 15.0, "owd_p99_ms": 20.0,
                   "cpu_client_s": 0.1, "cpu_server_s": 0.1, "duration_s": 3.0, "seed": 1, "trace": ""}
            row.update(extra or {})
            rows.append(row)
    return pd.DataFrame(rows)


def test_loss_sweep_figures_beside_the_paper():
    df = _rows("rcdp-loss", "loss_pct", {
        "convoy-rcdp": {0: 1.8, 2: 1.7, 10: 1.6},
        "tcp-cubic": {0: 2.0, 2: 1.8, 10: 0.5},
    })
    claims = {c.metric: c for c in get_experiment("rcdp-loss").claims(df)}
    below = claims["convoy-rcdp / tcp-cubic goodput, loss < 3 %"]
    assert (below.paper, below.ours) == ("0.85", f"{(0.9 + 1.7 / 1.8) / 2:.2f}")
    gain = claims["convoy-rcdp over tcp-cubic at the highest loss (10 %; paper: 10 %)"]
    assert (gain.paper, gain.ours) == ("+122 %", "+220 %")
    assert claims["tcp-cubic: worst loss of its loss-free goodput"].ours == "75 %"
    assert claims["convoy-rcdp: worst loss of its loss-free goodput"].paper == "12 %"


def test_missing_scheme_gives_na_not_a_crash():
    df = _rows("loss-50mbit", "loss_pct", {"tcp-cubic": {0: 47.0, 5: 3.0}, "tcp-bbr": {0: 47.0, 5: 44.0}})
    claims = get_experiment("loss-50mbit").claims(df)
    assert claims[0].ours == "n/a"
    assert claims[1].ours == "94 % (tcp-cubic)"


def test_the_default_mode_is_in_every_sweep_and_in_the_50mbit_figures():
    from convoy_lab.experiments.catalog import DEMO, EXPERIMENTS

    assert all(e.schemes[0] == "convoy" for e in EXPERIMENTS.values())
    assert "loss-50mbit" in DEMO
    df = _rows("loss-50mbit", "loss_pct", {
        "convoy": {0: 48.0, 5: 45.6, 10: 43.2},
        "convoy-rcdp": {0: 40.0, 5: 38.0, 10: 36.0},
        "tcp-cubic": {0: 47.0, 5: 3.0, 10: 1.0},
    })
    claims = {c.metric: c for c in get_experiment("loss-50mbit").claims(df)}
    assert claims["convoy (default mode): worst loss of its loss-free goodput"].ours == "10 %"
    # 43.2 of an ideal 45.0 at 10 % loss
    assert claims["convoy (default mode): lowest share of capacity × (1 − loss)"].ours == "96 %"


def test_lte_figures_are_the_scalanc_constants():
    trace = "ATT-LTE-driving-2016.up"
    df = _rows("lte-upload", "trace", {"tcp-cubic": {trace: 1.5}, "tcp-bbr": {trace: 2.0}}, extra={})
    df["trace"] = trace
    claims = get_experiment("lte-upload").claims(df)
    papers = {c.metric.split(": ")[1].split(" goodput")[0]: c.paper for c in claims}
    assert papers["convoy-rlnc-bbr"] == "3.00 Mbit/s"
    assert papers["tcp-bbr"] == "2.40 Mbit/s"
    assert papers["tcp-cubic"] == "1.90 Mbit/s"
    assert any(c.paper == "+58 %" and c.ours == "n/a" for c in claims)


def test_sweep_writes_rows_as_it_goes_and_reports_progress(tmp_path, capsys):
    calls = []

    def fake_run(scheme, scenario, transfer, seed, workdir, keep_records=False):
        calls.append((scheme.name, scenario.loss_pct, seed))
        return {"scheme": scheme.name, **scenario.columns(), "seed": seed, "goodput_mbit_s": 10 - scenario.loss_pct,
                "owd_p95_ms": 12.0, "wall_s": 0.1, "status": "ok", "error": "", "ideal_mbit_s": 50.0,
                "capacity_mbit_s": 50.0, "owd_p50_ms": 11.0, "owd_p99_ms": 13.0, "cpu_client_s": 0.1,
                "cpu_server_s": 0.1, "duration_s": 3.0}

    e = get_experiment("loss-50mbit")
    schemes = [get_scheme("tcp-cubic"), get_scheme("tcp-bbr")]
    result = run_sweep(e.name, schemes, e.scenarios(True)[:2], e.quick_transfer, [1, 2], tmp_path / e.name, run=fake_run)
    assert calls[:3] == [("tcp-cubic", 0, 1), ("tcp-bbr", 0, 1), ("tcp-cubic", 2, 1)]
    assert len(result.rows) == 8
    on_disk = pd.read_csv(tmp_path / e.name / "runs.csv")
    assert len(on_disk) == 8 and set(on_disk["experiment"]) == {"loss-50mbit"}
    progress = capsys.readouterr().err.splitlines()
    assert progress[0].startswith("[  1/8] loss-50mbit: tcp-cubic 50 Mbit/s 10 ms seed 1: 10.00 Mbit/s")
    assert "left)" in progress[-1]

    (tmp_path / e.name / "meta.json").write_text(json.dumps({"quick": True, "seeds": [1, 2], "transfer": "3 s",
                                                              "transfer_s": 3, "out": str(tmp_path),
                                                              "skipped": {"convoy-rcdp": "not built"}}))
    path = report.write_report(tmp_path)
    page = path.read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "python -m convoy_lab.experiments run loss-50mbit --quick --seeds 2" in page
    assert "Not run: convoy-rcdp: not built" in page
    assert "up to 95 %" in page  # the paper's figure, beside ours
    assert (tmp_path / e.name / "goodput.png").stat().st_size > 10_000


def _fake_sweep_run(calls: list, fail=()):
    def run(scheme, scenario, transfer, seed, workdir, keep_records=False):
        calls.append((scheme.name, scenario.loss_pct, seed))
        status = "failed" if (scheme.name, scenario.loss_pct) in fail else "ok"
        return {"scheme": scheme.name, **scenario.columns(), "seed": seed, "goodput_mbit_s": 10 - scenario.loss_pct,
                "owd_p95_ms": 12.0, "wall_s": 0.1, "status": status, "error": "" if status == "ok" else "boom"}

    return run


def test_a_resumed_sweep_runs_only_what_the_earlier_part_did_not_finish(tmp_path, capsys):
    """A sweep stopped part way (or with a failed run) goes on with --resume:
    the finished runs are kept as they were, the missing and failed ones run,
    and the CSV holds each point once; rows of the earlier part this grid
    does not hold (another scheme) stay."""
    calls = []
    e = get_experiment("loss-50mbit")
    cubic, bbr, reno = get_scheme("tcp-cubic"), get_scheme("tcp-bbr"), get_scheme("tcp-reno")
    scenarios, out = e.scenarios(True)[:3], tmp_path / e.name
    # The first part: all three points for reno, and for cubic and bbr the
    # first and last, bbr's first failed.
    run_sweep(e.name, [reno], scenarios, e.quick_transfer, [1], out, run=_fake_sweep_run(calls))
    run_sweep(e.name, [cubic, bbr], [scenarios[0], scenarios[2]], e.quick_transfer, [1], out,
              run=_fake_sweep_run(calls, fail={("tcp-bbr", scenarios[0].loss_pct)}), resume=True)
    first = pd.read_csv(out / "runs.csv")
    assert len(first) == 7 and list(first["status"]).count("failed") == 1
    calls.clear()

    result = run_sweep(e.name, [cubic, bbr], scenarios, e.quick_transfer, [1], out, run=_fake_sweep_run(calls),
                       resume=True)
    assert calls == [("tcp-bbr", scenarios[0].loss_pct, 1), ("tcp-cubic", scenarios[1].loss_pct, 1),
                     ("tcp-bbr", scenarios[1].loss_pct, 1)]
    assert result.ran == 3
    on_disk = pd.read_csv(out / "runs.csv")
    assert len(on_disk) == 9 and on_disk["run_dir"].is_unique and set(on_disk["status"]) == {"ok"}
    assert sorted(on_disk["scheme"]) == ["tcp-bbr"] * 3 + ["tcp-cubic"] * 3 + ["tcp-reno"] * 3
    assert len(result.rows) == 9
    assert "resuming: 3 of 6 runs already in" in capsys.readouterr().err
    assert not list(out.glob(".*.part"))

    # Nothing left to run: the CSV stays as it was; without --resume all run again.
    calls.clear()
    assert run_sweep(e.name, [cubic, bbr], scenarios, e.quick_transfer, [1], out, run=_fake_sweep_run(calls),
                     resume=True).ran == 0
    assert calls == [] and pd.read_csv(out / "runs.csv").equals(on_disk)
    run_sweep(e.name, [cubic, bbr], scenarios, e.quick_transfer, [1], out, run=_fake_sweep_run(calls))
    assert len(calls) == 6 and len(pd.read_csv(out / "runs.csv")) == 6


def test_a_sweep_stopped_mid_run_keeps_every_earlier_row(tmp_path):
    """Ctrl-C during a resumed part: the earlier part's rows after the point
    being run are still in the CSV."""
    e = get_experiment("loss-50mbit")
    cubic = get_scheme("tcp-cubic")
    scenarios, out = e.scenarios(True)[:3], tmp_path / e.name
    run_sweep(e.name, [cubic], scenarios, e.quick_transfer, [1], out,
              run=_fake_sweep_run([], fail={("tcp-cubic", scenarios[0].loss_pct),
                                            ("tcp-cubic", scenarios[1].loss_pct)}))
    calls = []

    def second_stops(*a, **k):
        if calls:
            raise KeyboardInterrupt
        return _fake_sweep_run(calls)(*a, **k)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(e.name, [cubic], scenarios, e.quick_transfer, [1], out, run=second_stops, resume=True)
    assert list(pd.read_csv(out / "runs.csv")["status"]) == ["ok", "failed", "ok"]


def test_resume_refuses_a_part_run_with_other_settings(tmp_path, capsys, monkeypatch):
    """A --quick part is no part of a full run: --resume says so in one line
    and runs nothing."""
    d = tmp_path / "loss-50mbit"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"quick": True, "transfer": "3 s"}))
    (d / "runs.csv").write_text("run_dir,status\nruns/x,ok\n")
    monkeypatch.setattr(experiments, "check_emulator", lambda: None)
    monkeypatch.setattr(experiments, "convoy_binary", lambda: Path("/bin/true"))
    assert experiments.main(["run", "loss-50mbit", "--resume", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran with other settings (quick True there, False here" in err[0]
    assert (d / "runs.csv").read_text() == "run_dir,status\nruns/x,ok\n"


def test_resume_is_refused_for_experiments_that_run_whole(tmp_path, capsys):
    assert experiments.main(["run", "faults", "--resume", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --resume: faults run whole")


def test_tcp_sender_counts_exact_bytes_on_loopback(tmp_path):
    """The kernel-TCP baseline's own sender and receiver, over loopback."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for amount, recv_extra in [(["--bytes", "3000001"], []), (["--time", "0.3"], ["--time", "0.3"])]:
        server = subprocess.Popen(
            [sys.executable, "-m", "convoy_lab.emu.measure", "--out", str(tmp_path / "server.json"), "--",
             sys.executable, "-m", "convoy_lab.emu.tcpxfer", "recv", "--listen", f"127.0.0.1:{port}", *recv_extra],
            stdout=subprocess.PIPE, text=True,
        )
        for _ in range(100):  # until the receiver listens
            sender = subprocess.run(
                [sys.executable, "-m", "convoy_lab.emu.tcpxfer", "send", "--to", f"127.0.0.1:{port}", "--cc", "reno", *amount],
                capture_output=True, text=True, timeout=30,
            )
            if "ConnectionRefused" not in sender.stderr:
                break
            time.sleep(0.05)
        server.wait(timeout=30)
        doc = json.loads(sender.stdout)
        assert doc["cc"] == "reno"
        if amount[0] == "--bytes":
            assert doc["bytes"] == doc["bytes_sent"] == 3000001
        else:
            assert doc["seconds"] == pytest.approx(0.3, abs=0.05)
            assert 0 < doc["bytes"] <= doc["bytes_sent"]
        cost = json.loads((tmp_path / "server.json").read_text())
        assert cost["exit"] == 0 and cost["cpu_s"] > 0


def test_shared_traces_dir_follows_convoy_shared(monkeypatch, tmp_path):
    monkeypatch.setenv("CONVOY_SHARED", str(tmp_path))
    assert catalog.shared_traces_dir() == tmp_path.resolve() / "traces"
    with pytest.raises(ExperimentError, match="CONVOY_SHARED"):
        catalog.check_inputs(get_experiment("lte-upload"), quick=True)
    assert Path(catalog.shared_traces_dir()).name == "traces"


def test_a_resumed_schedule_experiment_keeps_its_finished_cells(tmp_path, monkeypatch):
    """background --resume: a cell runs.csv holds with status ok is kept (a
    rate of 10 written as 10.0 and read back still matches its cell); a
    failed one runs again; runs.csv is rewritten after each cell, so a stop
    keeps the cells before it."""
    ran = []

    class Sched:
        length = 1.0

        def scaled(self, _):
            return self

    def fake_run(sched, work, seed):
        ran.append(work.name)
        if len(ran) == 2 and fail_second:
            raise KeyboardInterrupt
        return {"status": "ok"}

    def measure(mod, cell, sched, res):
        return {"rate_mbit": float(cell.rate), "queue_pkts": cell.queue, "impairment": cell.impairment,
                "kind": cell.kind, "bulk": cell.bulk, "status": "ok", "bulk_mbit_s": 5.0}

    monkeypatch.setattr(scheduled, "_schedule", lambda name, cell: Sched())
    monkeypatch.setattr(scheduled, "_unavailable", lambda name, cell: None)
    monkeypatch.setattr(scheduled, "_measure", measure)
    monkeypatch.setattr(scheduled, "plot_run", lambda *a: None)
    monkeypatch.setattr(scheduled.coexist, "run", fake_run)

    fail_second = True
    with pytest.raises(KeyboardInterrupt):
        scheduled.run("background", True, tmp_path, None, None)
    assert len(pd.read_csv(tmp_path / "background" / "runs.csv")) == 1  # the first cell, kept at the stop

    fail_second, ran[:] = False, []
    df = scheduled.run("background", True, tmp_path, None, None, resume=True)
    assert ran == ["10_250_none_phases_convoy-background"]
    assert sorted(df["bulk"]) == ["convoy-background", "tcp-cubic"] and list(df["status"]) == ["ok", "ok"]
    meta = json.loads((tmp_path / "background" / "meta.json").read_text())
    assert len(meta["earlier_parts"]) == 1 and meta["finished"] is True

    # Nothing left: the finished run's meta.json stays as it was.
    before = (tmp_path / "background" / "meta.json").read_text()
    scheduled.run("background", True, tmp_path, None, None, resume=True)
    assert (tmp_path / "background" / "meta.json").read_text() == before

    # A cell whose run could not be measured is replaced when it runs again,
    # not left beside its new row.
    def broken(mod, cell, sched, res):
        raise ValueError("unreadable")

    monkeypatch.setattr(scheduled, "_measure", broken)
    scheduled.run("background", True, tmp_path / "b", None, None)
    monkeypatch.setattr(scheduled, "_measure", measure)
    df = scheduled.run("background", True, tmp_path / "b", None, None, resume=True)
    assert len(df) == 2 and list(df["status"]) == ["ok", "ok"]
    assert len(pd.read_csv(tmp_path / "b" / "background" / "runs.csv")) == 2

    # --only re-runs its cells and keeps the others' rows; meta.json names
    # the part those rows came from, and a part with other settings is
    # not merged into.
    ran[:] = []
    df = scheduled.run("background", True, tmp_path / "b", None, "convoy-background")
    assert ran == ["10_250_none_phases_convoy-background"]
    assert sorted(df["bulk"]) == ["convoy-background", "tcp-cubic"]
    meta = json.loads((tmp_path / "b" / "background" / "meta.json").read_text())
    assert meta["only"] == "convoy-background" and len(meta["earlier_parts"]) == 1
    with pytest.raises(ExperimentError, match="--only: .*scale"):
        scheduled.run("background", True, tmp_path / "b", 0.5, "convoy-background")

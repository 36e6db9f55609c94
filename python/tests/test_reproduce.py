"""`reproduce` runs every experiment, so that no row of the papers table is
left unmeasured; a failure does not stop the rest, Ctrl-C does."""

from __future__ import annotations

from pathlib import Path

import pytest

from convoy_lab.experiments import reproduce
from convoy_lab.experiments.catalog import ExperimentError
from convoy_lab.experiments.cli import main
from convoy_lab.report import seeds


def test_every_judged_figure_comes_from_an_experiment_reproduce_runs():
    assert set(seeds.READERS) <= set(reproduce.names())


def _recorder(codes: dict[str, int] | None = None):
    calls: list[list[str]] = []

    def run(args: list[str]) -> int:
        calls.append(args)
        name = args[1] if args[0] == "run" else reproduce.VACAMOBIL
        return (codes or {}).get(name, 0)

    return calls, run


def test_a_failed_experiment_is_reported_and_the_rest_still_run(tmp_path, capsys):
    calls, run = _recorder({"rcdp-delay": 1})
    rc = reproduce.run(tmp_path, 2, ["rcdp-loss", "rcdp-delay", "vacamobil", "edge-split"], None, run, run)
    assert rc == 1
    assert calls == [["run", "rcdp-loss", "--out", str(tmp_path), "--seeds", "2"],
                     ["run", "rcdp-delay", "--out", str(tmp_path), "--seeds", "2"],
                     ["run", "edge-split", "--out", str(tmp_path), "--seeds", "2"],
                     ["vacamobil-table", "--out", str(tmp_path)]]
    err = capsys.readouterr().err
    assert "3 of 4 experiments ran to the end" in err and "failed: rcdp-delay (1)" in err


def test_an_experiment_that_raises_is_a_failure_and_the_rest_still_run(tmp_path, capsys):
    """The cellular part's report once raised after its last run: the
    whole reproduce ended there, and nothing after it ran."""
    calls, recorded = _recorder()

    def run(args: list[str]) -> int:
        if args[1] == "rcdp-delay":
            raise ValueError("number sections must be larger than 0.")
        return recorded(args)

    rc = reproduce.run(tmp_path, 1, ["rcdp-delay", "edge-split"], None, run, run)
    assert rc == 1 and [c[1] for c in calls] == ["edge-split"]
    err = capsys.readouterr().err
    assert "ValueError: number sections" in err and "failed: rcdp-delay (1)" in err


def test_ctrl_c_stops_the_whole_run(tmp_path):
    calls, run = _recorder({"rcdp-loss": reproduce.INTERRUPTED})
    assert reproduce.run(tmp_path, 1, None, None, run, run) == reproduce.INTERRUPTED
    assert len(calls) == 1


def test_skip_leaves_out_and_unknown_names_are_refused(tmp_path):
    calls, run = _recorder()
    assert reproduce.run(tmp_path, 1, None, ["cellular", "smart-ap"], run, run) == 0
    ran = [c[1] if c[0] == "run" else "vacamobil" for c in calls]
    assert ran == [n for n in reproduce.names() if n not in ("cellular", "smart-ap")]
    with pytest.raises(ExperimentError, match="unknown experiment nope"):
        reproduce.run(tmp_path, 1, ["nope"], None, run, run)


def test_the_command_refuses_an_unknown_name_in_one_line(capsys):
    assert main(["reproduce", "--only", "rcdp-loss,nope", "--out", str(Path("/nonexistent"))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown experiment nope")


def test_keep_copies_each_finished_experiments_summary_and_nothing_else(tmp_path):
    out, keep = tmp_path / "out", tmp_path / "kept"

    def run(args: list[str]) -> int:
        name = args[1] if args[0] == "run" else reproduce.VACAMOBIL
        d = out / name
        (d / "run-1").mkdir(parents=True)
        (d / "run-1" / "emu.log").write_text("a run's own files stay behind\n")
        (d / "runs.csv").write_text(f"name,goodput\n{name},1.0\n")
        (d / "meta.json").write_text("{}\n")
        return 1 if name == "rcdp-delay" else 0

    rc = reproduce.run(out, 1, ["rcdp-loss", "rcdp-delay", "vacamobil"], None, run, run, keep)
    assert rc == 1
    assert sorted(p.relative_to(keep).as_posix() for p in keep.rglob("*")) == [
        "rcdp-loss", "rcdp-loss/meta.json", "rcdp-loss/runs.csv",
        "vacamobil", "vacamobil/meta.json", "vacamobil/runs.csv"]
    assert (keep / "rcdp-loss" / "runs.csv").read_text() == "name,goodput\nrcdp-loss,1.0\n"
    # A later part replaces an experiment's summary whole.
    (out / "rcdp-loss" / "runs.csv").write_text("name,goodput\nrcdp-loss,2.0\n")
    assert reproduce.keep_summary(out, "rcdp-loss", keep) == [keep / "rcdp-loss" / "runs.csv",
                                                               keep / "rcdp-loss" / "meta.json"]
    assert (keep / "rcdp-loss" / "runs.csv").read_text().endswith("2.0\n")
    assert not list(keep.rglob(".*.part"))


def test_an_experiment_that_wrote_no_summary_is_named(tmp_path, capsys):
    keep = tmp_path / "kept"
    _, run = _recorder()
    assert reproduce.run(tmp_path / "out", 1, ["rcdp-loss"], None, run, run, keep) == 0
    assert not keep.exists()
    assert "rcdp-loss left no runs.csv or meta.json" in capsys.readouterr().err


def test_a_stopped_resumable_experiment_keeps_its_finished_runs_and_resume_goes_on(tmp_path, capsys):
    """cellular stopped with Ctrl-C under --resume: the rows it finished are
    kept all the same; without --resume, or when the part wrote nothing,
    nothing is (a partial table would replace a whole earlier run's). On a
    fresh machine (nothing in OUT) `--resume` starts from the kept part and
    passes --resume; an experiment that runs whole does not get it."""
    out, keep = tmp_path / "out", tmp_path / "kept"

    def stopped(args: list[str]) -> int:
        d = out / args[1]
        d.mkdir(parents=True, exist_ok=True)
        (d / "runs.csv").write_text("run_dir,status\nruns/a,ok\n")
        (d / "meta.json").write_text('{"finished": false}\n')
        return reproduce.INTERRUPTED

    assert reproduce.run(out, 1, ["cellular"], None, stopped, stopped, keep) == reproduce.INTERRUPTED
    assert not keep.exists()
    assert reproduce.run(out, 1, ["cellular"], None, stopped, stopped, keep, resume=True) == reproduce.INTERRUPTED
    assert (keep / "cellular" / "runs.csv").read_text() == "run_dir,status\nruns/a,ok\n"
    assert "`--resume` goes on from them" in capsys.readouterr().err
    # A part stopped before it wrote a row keeps nothing: the file in OUT is older.
    (keep / "cellular" / "runs.csv").write_text("run_dir,status\nruns/a,ok\nruns/b,ok\n")
    _, idle = _recorder({"cellular": reproduce.INTERRUPTED})
    assert reproduce.run(out, 1, ["cellular"], None, idle, idle, keep, resume=True) == reproduce.INTERRUPTED
    assert (keep / "cellular" / "runs.csv").read_text().count("ok") == 2

    fresh = tmp_path / "fresh"
    _, ok = _recorder()
    seen = []

    def resumed(args: list[str]) -> int:
        seen.append((args, (fresh / args[1] / "runs.csv").is_file()))
        return ok(args)

    assert reproduce.run(fresh, 1, ["cellular", "faults"], None, resumed, resumed, keep, resume=True) == 0
    assert seen == [(["run", "cellular", "--out", str(fresh), "--seeds", "1", "--resume"], True),
                    (["run", "faults", "--out", str(fresh), "--seeds", "1"], False)]
    assert "cellular goes on from the part kept in" in capsys.readouterr().err

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

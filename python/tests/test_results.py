"""docs/RESULTS.md and README's headline table come from the results files,
with each table's command and stamp; nothing is quoted that no file holds."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from convoy_lab.experiments import catalog, cli
from convoy_lab.report import results, stamp


def _loss_50mbit(out, with_stamp=True):
    d = out / "loss-50mbit"
    d.mkdir(parents=True)
    rows = []
    for scheme, by_loss in {
        "convoy": {0: 47.5, 2: 46.2, 10: 42.2},
        "tcp-cubic": {0: 47.9, 2: 30.1, 10: 4.0},
        "tcp-bbr": {0: 48.0, 2: 46.8, 10: 40.1},
    }.items():
        for loss, goodput in by_loss.items():
            rows.append({"experiment": "loss-50mbit", "scheme": scheme, "loss_pct": loss, "seed": 1,
                         "goodput_mbit_s": goodput, "ideal_mbit_s": 50 * (1 - loss / 100), "status": "ok",
                         "error": "", "owd_p50_ms": 11.0, "owd_p95_ms": 40.0 if scheme == "convoy" else 15.0,
                         "owd_p99_ms": 50.0, "cpu_client_s": 0.1, "cpu_server_s": 0.1, "duration_s": 3.0,
                         "capacity_mbit_s": 50.0, "trace": ""})
    pd.DataFrame(rows).to_csv(d / "runs.csv", index=False)
    meta = {"experiment": "loss-50mbit", "quick": True, "seeds": [1], "out": str(out), "elapsed_s": 60.0}
    if with_stamp:
        meta["stamp"] = {"date": "2026-11-27T08:00:00+00:00", "build": "v0-1-gabc", "load_start": [1.0, 1, 1],
                         "load_end": [2.0, 1, 1], "cpu": {"model": "Test CPU", "flags": ["avx2"],
                                                          "missing_flags": ["gfni"], "cores": 2}}
    (d / "meta.json").write_text(json.dumps(meta))


def test_results_doc_has_each_table_with_its_command_and_stamp(tmp_path):
    _loss_50mbit(tmp_path)
    text = results.render(tmp_path, shown_out="results")
    assert "## loss-50mbit:" in text
    assert "Command: `.venv/bin/python -m convoy_lab.experiments run loss-50mbit --quick --out results`" in text
    assert "Run: 2026-11-27T08:00:00+00:00, build `v0-1-gabc`, Test CPU (2 cores; avx2; no gfni), load 1 → 2" in text
    assert "p95 one-way delay ms" in text
    # The document's own stamp, and what has no files is listed, not quoted.
    assert "Put together: " in text and "build `" in text
    assert "| `cellular` |" in text and "| `rcdp-loss` |" in text


def test_old_results_say_their_stamp_is_missing(tmp_path):
    _loss_50mbit(tmp_path, with_stamp=False)
    assert "Run: not recorded (these files predate stamps" in results.render(tmp_path)


def test_a_table_run_in_parts_names_each_part_and_says_if_it_stopped(tmp_path):
    _loss_50mbit(tmp_path)
    meta_path = tmp_path / "loss-50mbit" / "meta.json"
    meta = json.loads(meta_path.read_text())
    earlier = {**meta["stamp"], "date": "2026-11-26T08:00:00+00:00", "build": "v0-0-gdef"}
    meta_path.write_text(json.dumps({**meta, "finished": False, "earlier_parts": [{"stamp": earlier}]}))
    text = results.render(tmp_path)
    assert "stopped part way: the rows below are the runs it finished" in text
    assert "- earlier part, its rows kept: 2026-11-26T08:00:00+00:00, build `v0-0-gdef`" in text


def test_readme_block_is_replaced_and_the_rest_kept(tmp_path):
    _loss_50mbit(tmp_path / "res")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n\n{results.BEGIN}\nold figures\n{results.END}\n\nafter\n")
    assert cli.main(["results", "--out", str(tmp_path / "res"), "--doc", str(tmp_path / "RESULTS.md"),
                     "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n") and "old figures" not in text
    assert "| 50 Mbit/s, 10 ms, 10 % loss: goodput, Mbit/s (ideal 45.0) | 42.2 | 4.0 | 40.1 |" in text
    assert "| 50 Mbit/s, 10 ms, 2 % loss: p95 one-way delay, ms | 40 | 15 | 15 |" in text
    lines = [line for line in text.splitlines() if line.startswith("| 50 Mbit/s")]
    assert len(lines) == 4 and all("run loss-50mbit --quick" in line for line in lines)
    # README names no commit: the build is in docs/RESULTS.md's stamps only.
    assert "v0-1-gabc" not in text and "v0-1-gabc" in (tmp_path / "RESULTS.md").read_text()
    # Without the markers README is not touched, and the command says why.
    readme.write_text("no block\n")
    assert cli.main(["results", "--out", str(tmp_path / "res"), "--doc", str(tmp_path / "R.md"),
                     "--readme", str(readme)]) == 2
    assert readme.read_text() == "no block\n"


def test_a_full_length_row_is_regenerated_by_make_reproduce(tmp_path):
    # A full-length run's summary is what `make reproduce` keeps and
    # `make results` reads: its row names that, not a run into some
    # other directory.
    _loss_50mbit(tmp_path)
    meta_path = tmp_path / "loss-50mbit" / "meta.json"
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "quick": False}))
    rows = [line for line in results.headline(tmp_path).splitlines() if line.startswith("| 50 Mbit/s")]
    assert len(rows) == 4 and all(line.endswith("| `make reproduce ONLY=loss-50mbit` |") for line in rows)


def test_empty_results_give_no_figures(tmp_path):
    assert "Not yet measured" in results.headline(tmp_path)


def test_stamp_reads_the_cpu_and_the_build(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu ssse3 avx2 aes\n\n"
                    "processor\t: 1\nmodel name\t: Some CPU\nflags\t\t: fpu ssse3 avx2 aes\n")
    c = stamp.cpu(info)
    assert c["model"] == "Some CPU" and c["flags"] == ["ssse3", "avx2", "aes"]
    assert "gfni" in c["missing_flags"] and "avx512f" in c["missing_flags"]
    assert stamp.build() != ""


def test_a_subset_of_cells_names_its_cells_in_the_command():
    meta = {"experiment": "background", "quick": False, "scale": 1.0, "only": "target,compete"}
    assert results._command("background", meta, Path("results")) == \
        ".venv/bin/python -m convoy_lab.experiments run background --only target,compete"
    assert "--only" not in results._command("background", {**meta, "only": None}, Path("results"))
    # A part run with --only beside earlier parts: the table holds every
    # part's rows, so the command is the whole experiment's.
    merged = {**meta, "earlier_parts": [{"stamp": None}]}
    assert "--only" not in results._command("background", merged, Path("results"))


def test_a_subset_of_schemes_and_several_seeds_are_in_the_command():
    meta = {"experiment": "rcdp-loss", "quick": False, "seeds": [1], "schemes": ["convoy-rcdp", "tcp-cubic"]}
    assert results._command("rcdp-loss", meta, Path("results")) == \
        ".venv/bin/python -m convoy_lab.experiments run rcdp-loss --schemes convoy-rcdp,tcp-cubic --out results"
    every = {**meta, "schemes": list(catalog.EXPERIMENTS["rcdp-loss"].schemes)}
    assert "--schemes" not in results._command("rcdp-loss", every, Path("results"))
    mp = {"experiment": "mp-capprobe", "quick": False, "seeds": [1, 2, 3], "schemes": None}
    assert results._command("mp-capprobe", mp, Path("results")) == \
        ".venv/bin/python -m convoy_lab.experiments run mp-capprobe --seeds 3"

"""The `dlcluster` command: evaluate writes its files and is worker-count independent; reproduce
writes its JSON; bad names list the valid ones."""

from __future__ import annotations

import csv
import json

import pytest

from dlclusterenv.cli import main


def _runs(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_evaluate_writes_csvs_plot_and_is_independent_of_workers(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo,random", "--seeds", "2",
                 "--out", str(a), "--workers", "1"]) == 0
    board = capsys.readouterr().out
    assert "fifo" in board and "random" in board and "rank" in board
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo,random", "--seeds", "2",
                 "--out", str(b), "--workers", "2"]) == 0
    assert (a / "jct.png").stat().st_size > 0
    assert (a / "runs.csv").read_bytes() == (b / "runs.csv").read_bytes()
    assert len(_runs(a / "runs.csv")) == 4
    assert (a / "jobs.csv").read_text() == (b / "jobs.csv").read_text()


def test_evaluate_resume_keeps_saved_runs(tmp_path):
    out = tmp_path / "a"
    args = ["evaluate", "--scenario", "tiny", "--policies", "fifo", "--seeds", "2", "--out",
            str(out), "--workers", "1"]
    assert main(args) == 0
    first = (out / "jobs.csv").read_bytes()
    (out / "per_run" / "fifo.seed1.json").unlink()
    (out / "jobs.csv").unlink()
    saved = (out / "per_run" / "fifo.seed0.json").stat().st_mtime_ns
    assert main(args + ["--resume"]) == 0
    assert (out / "jobs.csv").read_bytes() == first
    assert (out / "per_run" / "fifo.seed0.json").stat().st_mtime_ns == saved  # not rerun
    assert (out / "per_run" / "fifo.seed1.json").exists()


def test_unknown_policy_lists_the_valid_ones():
    with pytest.raises(SystemExit, match="valid: .*fifo"):
        main(["evaluate", "--scenario", "tiny", "--policies", "nope"])


def test_bad_evaluate_arguments_exit_2_naming_them(capsys):
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo", "--seeds", "0"]) == 2
    assert "--seeds must be at least 1, got 0" in capsys.readouterr().err


def test_reproduce_drf_json(tmp_path):
    out = tmp_path / "drf.json"
    assert main(["reproduce", "drf", "--seeds", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    keys = {"claim", "paper", "simulated", "direction_ok", "paper_value", "sim_value", "upper", "kind",
            "magnitude_ok", "status"}
    assert rows and all(set(r) == keys for r in rows)
    assert all(r["direction_ok"] and r["status"] == "ok" for r in rows)

"""The `dlcluster` command: evaluate writes its files and is worker-count independent; reproduce
writes its JSON; bad names list the valid ones."""

from __future__ import annotations

import csv
import json
import os
import sys

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


def test_unknown_policy_lists_the_valid_ones(capsys):
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifoo"]) == 2
    assert "unknown policy 'fifoo'; did you mean 'fifo'? valid: " in capsys.readouterr().err


def test_out_at_a_file_fails_before_any_run(tmp_path, monkeypatch, capsys):
    from dlclusterenv import evaluate

    def no_runs(*a, **k):
        raise AssertionError("a run started")

    monkeypatch.setattr(evaluate, "sweep", no_runs)
    monkeypatch.setattr(evaluate, "run_one", no_runs)
    f = tmp_path / "file"
    f.write_text("keep")
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo", "--out", str(f)]) == 2
    assert f"evaluate --out {f}: exists and is a file, not a directory" in capsys.readouterr().err
    assert f.read_text() == "keep"


def test_train_out_at_a_file_suggests_config(tmp_path, capsys):
    f = tmp_path / "smoke.yaml"
    f.write_text("x: 1")
    assert main(["train", "--out", str(f)]) == 2
    assert f"did you mean --config {f}?" in capsys.readouterr().err


def test_reproduce_typo_suggests_the_name(capsys):
    assert main(["reproduce", "dlta"]) == 2
    assert "unknown experiment 'dlta'; did you mean 'dltap'? valid: dltap, d2s" in capsys.readouterr().err


def test_run_with_two_policies_runs_both(capsys):
    from dlclusterenv import evaluate

    assert main(["run", "--scenario", "tiny", "--policy", "fifo,dltap"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["fifo", "dltap"]
    jct = next(ln for ln in out if ln.strip().startswith("avg_jct_s:")).split()[1:]
    assert jct == [f"{evaluate.run_one('tiny', p, 0).summary['avg_jct_s']:,.4g}" for p in ("fifo", "dltap")]


def test_list_and_help_show_valid_values_defaults_and_the_exit_rule(capsys, monkeypatch):
    from dlclusterenv import ENV_IDS

    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps help at the terminal's width

    for what, expect in (("policies", "tiresias-gittins"), ("scenarios", "tiny"), ("envs", ENV_IDS[0])):
        assert main(["list", what]) == 0
        assert expect in capsys.readouterr().out.splitlines()
    with pytest.raises(SystemExit) as e:
        main(["evaluate", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: runs/latest)" in text and "tiresias-gittins" in text and "dltap_fcn4" in text
    assert "2 usage or configuration error" in text and "1 a run failed" in text


def test_a_run_failure_exits_1_a_usage_error_2(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "boom.py").write_text(
        "from dlclusterenv.api import Scheduler\n\n"
        "class Boom(Scheduler):\n"
        "    def decide(self, view):\n"
        "        raise RuntimeError('boom')\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}

    def rc(*args):
        return subprocess.run([sys.executable, "-m", "dlclusterenv.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True)

    failed = rc("run", "--scenario", "tiny", "--policy", "boom.py:Boom")
    assert failed.returncode == 1 and "RuntimeError: boom" in failed.stderr
    assert rc("run", "--scenario", "tiny", "--policy", "boom.py:Nope").returncode == 2
    assert rc("run", "--nope").returncode == 2  # argparse's own usage errors


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


def test_list_into_a_closed_pipe_ends_without_traceback():
    """`dlcluster list policies | head -0`: the reader is gone before the first line; no traceback."""
    import subprocess

    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run([sys.executable, "-m", "dlclusterenv.cli", "list", "policies"], stdout=w,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(w)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 1


# --------------------------------------------------------------------------- bad arguments (badin16)
def _no_runs(*a, **k):
    raise AssertionError("a run started")


def test_run_with_a_negative_seed_exits_2_naming_it(capsys):
    """`run --seed -1` ended in numpy's traceback ("expected non-negative integer"), exit 1."""
    assert main(["run", "--scenario", "tiny", "--policy", "fifo", "--seed", "-1"]) == 2
    assert "--seed must be 0 or more, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("seeds", ["0", "-2"])
def test_reproduce_without_seeds_exits_2_before_any_run(seeds, monkeypatch, capsys):
    """`reproduce d2s --seeds 0` ended in a traceback (IndexError; dltap, gandiva, flowcon alike)
    and `drf` / `optimus` quietly ran one seed."""
    from baselines import reproduce

    monkeypatch.setattr(reproduce, "run", _no_runs)
    assert main(["reproduce", "d2s", "--seeds", seeds]) == 2
    assert f"--seeds must be at least 1, got {seeds}" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [["reproduce", "drf", "--seeds", "1"], ["fidelity"]])
@pytest.mark.parametrize("where, why", [("folder", "is a directory"), ("nodir/x.json", "folder"),
                                        ("afile/x.json", "folder")])
def test_a_json_out_that_cannot_be_written_exits_2_before_the_work(cmd, where, why, tmp_path, monkeypatch,
                                                                   capsys):
    """--json at a directory or in a missing folder: the experiment (or the fidelity scoring) ran in
    full, then the write ended in a traceback (IsADirectoryError, FileNotFoundError), the results
    lost and a temp file left in the working directory."""
    from baselines import reproduce
    from dlclusterenv import fidelity

    monkeypatch.setattr(reproduce, "run", _no_runs)
    monkeypatch.setattr(fidelity, "cli", _no_runs)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("keep")
    assert main([*cmd, "--json", where]) == 2
    err = capsys.readouterr().err
    assert f"--json {where}: {why}" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "folder"]


def test_reproduce_json_leaves_no_temp_file_when_the_write_fails(tmp_path, monkeypatch):
    """The atomic write's temp file is removed when its rename fails (a folder created at the
    path while the experiment ran)."""
    from baselines import reproduce

    def make_folder_then_claims(name, seeds):
        (tmp_path / "out.json").mkdir()
        return _real_run(name, seeds)

    _real_run = reproduce.run
    monkeypatch.setattr(reproduce, "run", make_folder_then_claims)
    with pytest.raises(IsADirectoryError):
        main(["reproduce", "drf", "--seeds", "1", "--json", str(tmp_path / "out.json")])
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("bad", [["--seeds", "0"], ["--first-seed", "-1"], ["--workers", "-2"],
                                 ["--ray-address", "auto"]])
def test_bad_evaluate_arguments_keep_the_runs_saved_in_out(bad, tmp_path, capsys):
    """A second evaluate into the same --out with a bad argument deleted the runs the first saved
    (per_run/*.json), then refused the argument; --ray-address without --backend ray was ignored."""
    out = tmp_path / "ev"
    args = ["evaluate", "--scenario", "tiny", "--policies", "fifo", "--out", str(out), "--workers", "1"]
    assert main([*args, "--seeds", "1"]) == 0
    saved = {p.name: p.read_bytes() for p in (out / "per_run").iterdir()}
    capsys.readouterr()
    assert main([*args, *bad]) == 2
    assert bad[0] in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (out / "per_run").iterdir()} == saved


def test_benchmark_validate_of_a_missing_path_is_a_usage_error(tmp_path, capsys):
    """A mistyped --validate path was replayed as a log: "MISMATCH ...: not a readable decision
    log", exit 1, as if a run's metrics had changed."""
    missing = tmp_path / "runs.jsonl"
    assert main(["benchmark", "--validate", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"--validate {missing}: no such file or folder" in err and "MISMATCH" not in err


def test_run_with_an_empty_policy_list_names_its_own_flag(capsys):
    """`run --policy ""` was told "--policies '' names no policy": run has no --policies."""
    assert main(["run", "--scenario", "tiny", "--policy", " , "]) == 2
    assert "error: --policy ' , ' names no policy; valid: all, " in capsys.readouterr().err


@pytest.mark.parametrize("args, named", [(["--params", "1e6"], "--params"),
                                         (["gavel-pairs", "x.json", "--comm", "ps"], "--comm"),
                                         (["--gpu-type", "V100", "--step1", "s.csv"], "--step1, --gpu-type")])
def test_fidelity_options_of_pollux_elsewhere_are_a_usage_error(args, named, monkeypatch, capsys):
    """--params, --step1, --gpu-type and --comm describe one Pollux file; without `pollux FILE`
    they were ignored and every file was scored with its own."""
    from dlclusterenv import fidelity

    monkeypatch.setattr(fidelity, "cli", _no_runs)
    assert main(["fidelity", *args]) == 2
    assert f"error: {named}: only for `fidelity pollux FILE`" in capsys.readouterr().err


def test_benchmark_validate_with_suite_options_is_a_usage_error(tmp_path, capsys):
    """`benchmark --validate LOG --policies X --resume` replayed LOG and ignored the rest."""
    log = tmp_path / "a.jsonl"
    log.write_text("{}\n")
    assert main(["benchmark", "--validate", str(log), "--policies", "m.py:M", "--resume"]) == 2
    assert "--policies, --resume would run a suite" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [["evaluate", "--scenario", "tiny", "--policies", "fifo"], ["train"],
                                 ["benchmark", "tiny"]])
def test_an_out_under_a_file_is_a_usage_error(cmd, tmp_path, monkeypatch, capsys):
    """--out afile/sub ended in mkdir's NotADirectoryError traceback (evaluate and benchmark once
    the scenario or suite was loaded, train once its config was)."""
    from dlclusterenv import benchmark, evaluate

    monkeypatch.setattr(evaluate, "evaluate", _no_runs)
    monkeypatch.setattr(benchmark, "run_suite", _no_runs)
    (tmp_path / "afile").write_text("keep")
    out = tmp_path / "afile" / "sub"
    assert main([*cmd, "--out", str(out)]) == 2
    assert f"--out {out}: {tmp_path / 'afile'} is a file, not a directory" in capsys.readouterr().err
    assert (tmp_path / "afile").read_text() == "keep"

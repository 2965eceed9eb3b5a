"""dlclusterenv.evaluate: fair and reproducible sweeps, complete CSVs, atomic files, the leaderboard,
learned-policy dispatch and the Ray backend matching the local one."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import types

import numpy as np
import pytest

from dlclusterenv import make_sim
from dlclusterenv.evaluate import (
    EvaluateError,
    PolicyError,
    RunResult,
    COLUMNS,
    atomic_write,
    ci95,
    evaluate,
    leaderboard,
    print_leaderboard,
    resolve_columns,
    resolve_policies,
    sweep,
    write_csv,
)
from dlclusterenv.workload import build
from helpers import needs_philly

# Policies that decide differently: arrival order, random placement, resizing and preemption, GPU sharing.
POLICIES = ["fifo", "random", "optimus", "gandiva"]
SEEDS = 2


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("ev")
    evaluate("tiny", POLICIES, SEEDS, out, workers=1, progress=False)
    return out


def test_same_command_same_bytes(out, tmp_path):
    evaluate("tiny", POLICIES, SEEDS, tmp_path, workers=2, progress=False)
    for name in ("runs.csv", "jobs.csv"):
        assert (out / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_runs_csv_has_every_metric_and_no_wall_clock(out):
    runs = _rows(out / "runs.csv")
    assert [(r["policy"], int(r["seed"])) for r in runs] == [(p, s) for p in POLICIES for s in range(SEEDS)]
    want = {"avg_jct_s", "median_jct_s", "p95_jct_s", "makespan_s", "avg_queue_s", "cross_node_gb",
            "cross_rack_gb", "data_local_frac", "rack_local_frac", "off_switch_frac", "gpu_util", "cpu_util",
            "jain_index"}
    assert want <= set(runs[0])
    assert "decision_latency_ms" not in runs[0] and "wall_s" not in runs[0]
    timing = _rows(out / "timing.csv")
    assert [(r["policy"], r["seed"]) for r in timing] == [(r["policy"], r["seed"]) for r in runs]
    assert all(float(r["wall_s"]) > 0 and float(r["decision_latency_ms"]) >= 0 for r in timing)


def test_jobs_csv_one_row_per_job_per_run_and_identical_arrivals(out):
    jobs = _rows(out / "jobs.csv")
    for s in range(SEEDS):
        specs = {j.job_id: j.arrival_s for j in build("tiny", s)[3]}
        for p in POLICIES:
            got = {r["job_id"]: float(r["arrival_s"]) for r in jobs if r["policy"] == p and int(r["seed"]) == s}
            assert len([r for r in jobs if r["policy"] == p and int(r["seed"]) == s]) == len(specs)
            assert got == specs, (p, s)
    # and the seeds really differ, so the check above is not vacuous
    assert {j.arrival_s for j in build("tiny", 0)[3]} != {j.arrival_s for j in build("tiny", 1)[3]}


@needs_philly
def test_jobs_csv_names_synthetic_fields_of_a_trace_replay(tmp_path):
    sc = {"name": "philly-slice", "cluster": "philly", "workload": {
        "kind": "trace", "models": {"ResNet-50": 1.0},
        "trace": {"path": "../shared/traces/philly_jobs.csv", "first_n": 5}}}
    evaluate(sc, ["fifo"], 1, tmp_path, workers=1, progress=False)
    jobs = _rows(tmp_path / "jobs.csv")
    assert len(jobs) == 5
    assert all(set(r["synthetic"].split(";")) >= {"model", "num_ps", "work_steps", "steps_per_epoch"}
               for r in jobs)


def test_write_interrupted_by_an_error_keeps_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "runs.csv"
    write_csv(path, [{"a": 1, "b": 2.5}])
    old = path.read_bytes()
    with pytest.raises(ValueError, match=r"runs.csv: row 3 has columns \['a'\]"):
        write_csv(path, [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5}])

    def killed_halfway(tmp):
        tmp.write_text("policy,se")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, killed_halfway)
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_policy_names_are_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.zip").write_bytes(b"")
    assert resolve_policies("all")[:3] == ["d2s", "dltap", "drf"]
    assert resolve_policies(" fifo, maskableppo:p.zip ") == ["fifo", "maskableppo:p.zip"]
    with pytest.raises(PolicyError, match="unknown policy 'nope'; valid: .*fifo.*tiresias"):
        resolve_policies("fifo,nope")
    with pytest.raises(PolicyError, match="must be KIND:PATH"):
        resolve_policies("ppo:")
    with pytest.raises(PolicyError, match="model file 'missing.zip' not found"):
        resolve_policies("fifo,ppo:missing.zip")
    with pytest.raises(PolicyError, match="listed twice: fifo"):
        resolve_policies("fifo,drf,fifo")
    with pytest.raises(EvaluateError, match="--seeds must be at least 1, got 0"):
        sweep("tiny", ["fifo"], 0)
    with pytest.raises(EvaluateError, match="--backend 'dask'"):
        sweep("tiny", ["fifo"], 1, backend="dask")


def test_learned_spec_goes_to_agents_learned(fifo_as_learned):
    res = sweep("tiny", ["ppo:model.zip", "fifo"], 1, workers=1, progress=False)
    assert fifo_as_learned == [("ppo:model.zip", "tiny", 0)]
    assert res[0].policy == "ppo:model.zip" and res[0].summary == res[1].summary


def test_a_failed_run_stops_the_sweep_keeping_only_the_finished_runs(monkeypatch, tmp_path):
    def run_learned(spec, scenario, seed):
        raise FileNotFoundError(spec.partition(":")[2])

    monkeypatch.setitem(sys.modules, "agents.learned", types.SimpleNamespace(run_learned=run_learned))
    with pytest.raises(FileNotFoundError, match="missing.zip"):
        evaluate("tiny", ["fifo", "ppo:missing.zip"], 1, tmp_path / "ev", workers=1, progress=False)
    assert sorted(p.name for p in (tmp_path / "ev").rglob("*")) == ["fifo.seed0.json", "per_run"]
    with pytest.raises(FileNotFoundError, match="missing.zip"):  # nothing saved: nothing left
        evaluate("tiny", ["ppo:missing.zip"], 1, tmp_path / "ev2", workers=1, progress=False)
    assert not (tmp_path / "ev2").exists()


def test_resume_reruns_only_missing_runs_and_gives_the_same_bytes(out, monkeypatch, tmp_path):
    """An evaluation stopped part way (here: per-run files and CSVs deleted after the fact, and a
    sweep that fails at its third run) is completed by --resume into CSVs byte-identical to an
    uninterrupted evaluation's, running only the runs that were missing."""
    import dlclusterenv.evaluate as ev

    ran = []
    real = ev.run_one

    def counting(scenario, policy, seed):
        if len(ran) == 2:
            raise KeyboardInterrupt  # the user stops the sweep after two runs
        ran.append((policy, seed))
        return real(scenario, policy, seed)

    monkeypatch.setattr(ev, "run_one", counting)
    with pytest.raises(KeyboardInterrupt):
        evaluate("tiny", POLICIES, SEEDS, tmp_path, workers=1, progress=False)
    assert sorted(p.name for p in (tmp_path / "per_run").iterdir()) == [
        "fifo.seed0.json", "fifo.seed1.json"]
    assert not (tmp_path / "runs.csv").exists()
    ran.clear()
    monkeypatch.setattr(ev, "run_one", lambda *a: (ran.append(a[1:]), real(*a))[1])
    evaluate("tiny", POLICIES, SEEDS, tmp_path, workers=1, progress=False, resume=True)
    assert ran == [(p, s) for p in POLICIES[1:] for s in range(SEEDS)]
    for name in ("runs.csv", "jobs.csv"):
        assert (out / name).read_bytes() == (tmp_path / name).read_bytes(), name
    # delete some finished runs and the CSVs: resume reruns exactly those
    for name in ("random.seed1.json", "gandiva.seed0.json"):
        (tmp_path / "per_run" / name).unlink()
    for name in ("runs.csv", "jobs.csv", "timing.csv"):
        (tmp_path / name).unlink()
    ran.clear()
    evaluate("tiny", POLICIES, SEEDS, tmp_path, workers=1, progress=False, resume=True)
    assert ran == [("random", 1), ("gandiva", 0)]
    for name in ("runs.csv", "jobs.csv"):
        assert (out / name).read_bytes() == (tmp_path / name).read_bytes(), name
    # without --resume every run is done again
    ran.clear()
    evaluate("tiny", ["fifo"], 1, tmp_path, workers=1, progress=False)
    assert ran == [("fifo", 0)]


def test_resume_refuses_runs_saved_for_another_scenario(tmp_path):
    evaluate("tiny", ["fifo"], 1, tmp_path, workers=1, progress=False)
    with pytest.raises(EvaluateError, match=r"--resume: .*fifo.seed0.json was run on another "
                       "scenario"):
        evaluate("default", ["fifo"], 1, tmp_path, workers=1, progress=False, resume=True)
    (tmp_path / "per_run" / "fifo.seed0.json").write_text("{not json")
    with pytest.raises(EvaluateError, match=r"fifo.seed0.json: not a saved run"):
        evaluate("tiny", ["fifo"], 1, tmp_path, workers=1, progress=False, resume=True)


def test_resume_refuses_runs_saved_before_the_trace_file_changed(tmp_path):
    """The saved-run check covers the content of the trace a scenario replays: a file edited
    between run and resume is refused, naming it; an untouched one resumes, and so does one
    written again with the same bytes (a data folder re-created: new mtime)."""
    import os
    import shutil
    from pathlib import Path

    trace = tmp_path / "trace.json"
    shutil.copy(Path(__file__).parent / "data" / "philly_cluster_job_log.json", trace)
    sc = {"name": "replay", "cluster": "tiny",
          "workload": {"kind": "trace", "models": {"ResNet-50": 1},
                       "trace": {"path": str(trace), "format": "philly_json"}}}
    out = tmp_path / "out"
    evaluate(sc, ["fifo"], 1, out, workers=1, progress=False)
    evaluate(sc, ["fifo"], 1, out, workers=1, progress=False, resume=True)  # unchanged: resumes
    st, data = trace.stat(), trace.read_bytes()
    trace.unlink()
    trace.write_bytes(data)  # re-created with the same bytes: another mtime (and inode)
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    saved = (out / "per_run" / "fifo.seed0.json").read_text()
    evaluate(sc, ["fifo"], 1, out, workers=1, progress=False, resume=True)  # resumes, not rerun
    assert (out / "per_run" / "fifo.seed0.json").read_text() == saved
    st = trace.stat()
    trace.write_bytes(data[:-1] + b" ")  # its last newline a space: same size, other bytes
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(EvaluateError, match=r"fifo.seed0.json was run on another version of the "
                       r"trace file \(now: trace file .*trace.json: sha256 [0-9a-f]{64}\)"):
        evaluate(sc, ["fifo"], 1, out, workers=1, progress=False, resume=True)
    evaluate(sc, ["fifo"], 1, out, workers=1, progress=False)  # without --resume: run again
    trace.write_text(trace.read_text() + " ")  # one byte more
    with pytest.raises(EvaluateError, match="another version of the trace file"):
        evaluate(sc, ["fifo"], 1, out, workers=1, progress=False, resume=True)
    data = json.loads(saved)  # as saved by an older version, which keyed the trace by size and mtime
    data["scenario"] = re.sub(r"\ntrace file (.*): sha256 \w+", r"\ntrace file \1: 1234 bytes, mtime_ns 5678",
                              data["scenario"])
    (out / "per_run" / "fifo.seed0.json").write_text(json.dumps(data))
    with pytest.raises(EvaluateError, match="fifo.seed0.json was saved by an older version, which keyed the "
                       "trace file by its size and mtime, not its content: stale; remove it"):
        evaluate(sc, ["fifo"], 1, out, workers=1, progress=False, resume=True)


def test_resume_refuses_runs_of_a_swapped_model_file(tmp_path, fifo_as_learned):
    """A learned policy's saved run is keyed on its model file's and config's content: the same
    bytes written again (new mtime) resume; other bytes in model.zip or config.yaml are refused,
    naming the file; a baseline's saved run is not affected by either."""
    import os

    model = tmp_path / "m" / "model.zip"
    model.parent.mkdir()
    model.write_bytes(b"weights A")
    (model.parent / "config.yaml").write_text("algo: ppo\n")
    spec, out = f"ppo:{model}", tmp_path / "out"
    evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False)
    model.write_bytes(b"weights A")  # rewritten with the same bytes
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False, resume=True)
    model.write_bytes(b"weights B")  # same size, another model
    with pytest.raises(EvaluateError, match=r"ppo%3A.*model.zip.seed0.json was run on another version of "
                       r"the model file \(now: model file .*model.zip: sha256 [0-9a-f]{64}\)"):
        evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False, resume=True)
    evaluate("tiny", ["fifo"], 1, out, workers=1, progress=False, resume=True)  # fifo's run is kept
    evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False)  # rerun without --resume
    (model.parent / "config.yaml").write_text("algo: ppo\nenv: {id: Other-v0}\n")
    with pytest.raises(EvaluateError, match="another version of the model config"):
        evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False, resume=True)
    saved = next((out / "per_run").glob("ppo*.json"))  # as saved before runs were keyed by their model
    data = json.loads(saved.read_text())
    data["scenario"] = data["scenario"].partition("\nmodel file")[0]
    saved.write_text(json.dumps(data))
    with pytest.raises(EvaluateError, match=r"was saved with no record of its model file \(by an older version"):
        evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False, resume=True)


def test_resume_key_names_the_trace_file_not_the_checkout_path(tmp_path, monkeypatch):
    """A relative trace path resolves against the repository root; two checkouts beside the same
    data (`/work/a/../shared/x`, `/work/b/../shared/x`) must give one key, or `--resume` from a
    second checkout would rerun every trace run."""
    import shutil
    from pathlib import Path

    from dlclusterenv import config, traces
    from dlclusterenv.evaluate import run_key
    from dlclusterenv.workload import load_scenario

    (tmp_path / "shared").mkdir()
    shutil.copy(Path(__file__).parent / "data" / "philly_cluster_job_log.json", tmp_path / "shared" / "t.json")
    sc, _ = load_scenario({"name": "replay", "cluster": "tiny",
                        "workload": {"kind": "trace", "models": {"ResNet-50": 1},
                                     "trace": {"path": "../shared/t.json", "format": "philly_json"}}})
    keys = []
    for checkout in ("a", "b"):
        (tmp_path / checkout / "configs").mkdir(parents=True)
        for module in (config, traces):  # config's: shared_dir(), where ../shared/ paths go
            monkeypatch.setattr(module, "CONFIG_DIR", tmp_path / checkout / "configs")
        keys.append(run_key(sc))
    assert keys[0] == keys[1] and str(tmp_path / "shared" / "t.json") in keys[0]
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(tmp_path / "shared" / "t.json", tmp_path / "elsewhere")
    monkeypatch.setenv("DLCLUSTER_SHARED", str(tmp_path / "elsewhere"))  # the data moved: a new key
    assert str(tmp_path / "elsewhere" / "t.json") in run_key(sc)


def test_small_gpu_utilisation_is_not_printed_as_zero():
    from rich.console import Console

    from dlclusterenv.evaluate import _fmt

    assert _fmt(0.000412, 0.00001, "gpu_util") == "0.0412% ± 0.0010%"
    assert _fmt(0.0066, 0.0002, "gpu_util") == "0.660% ± 0.020%"
    assert _fmt(0.734, 0.01, "gpu_util") == "73.4% ± 1.0%"
    assert _fmt(0.000412, 0.00001) == "0.000 ± 0.000"  # other metrics keep their format
    row = {"policy": "fifo", "unfinished": 0, **{k: (1.0, 0.0) for k in
                                                 ("avg_jct_s", "p95_jct_s", "makespan_s",
                                                  "avg_queue_s", "cross_node_gb", "jain_index",
                                                  "decision_latency_ms")}}
    pipe = io.StringIO()
    print_leaderboard([{**row, "gpu_util": (0.000412, 0.0)}], console=Console(file=pipe, width=250))
    assert "0.0412% ± 0.0000%" in pipe.getvalue()


def test_ci95_is_student_t():
    assert ci95(np.array([1.0, 2.0, 3.0])) == pytest.approx(4.302653 / np.sqrt(3), rel=1e-6)
    assert ci95(np.array([5.0])) == 0.0


def test_leaderboard_ranks_by_avg_jct_and_bolds_only_on_a_terminal(out):
    res = sweep("tiny", POLICIES, SEEDS, workers=1, progress=False)
    board = leaderboard(res, POLICIES)
    means = [r["avg_jct_s"][0] for r in board]
    assert means == sorted(means)
    runs = _rows(out / "runs.csv")
    fifo = [float(r["avg_jct_s"]) for r in runs if r["policy"] == "fifo"]
    assert next(r for r in board if r["policy"] == "fifo")["avg_jct_s"][0] == pytest.approx(np.mean(fifo))

    from rich.console import Console

    tty = io.StringIO()
    print_leaderboard(board, console=Console(file=tty, force_terminal=True, width=250))
    pipe = io.StringIO()
    print_leaderboard(board, console=Console(file=pipe, width=250))
    assert "\x1b[1m" in tty.getvalue() and "\x1b" not in pipe.getvalue()
    lines = [ln for ln in pipe.getvalue().splitlines() if any(p in ln for p in POLICIES)]
    assert [next(p for p in POLICIES if f" {p} " in ln) for ln in lines] == [r["policy"] for r in board]
    # the best avg JCT is the bold cell in the first row
    first = next(ln for ln in tty.getvalue().splitlines() if board[0]["policy"] in ln)
    assert "\x1b[1m" in first


def test_policies_leaving_jobs_unfinished_rank_last():
    res = sweep("tiny", ["fifo", "random"], 1, workers=1, progress=False)
    quick = RunResult("quitter", 0, {**res[0].summary, "avg_jct_s": 1.0, "jobs_unfinished": 3}, [], (), 0.0, 0.0)
    assert [r["policy"] for r in leaderboard([*res, quick], ["fifo", "random", "quitter"])][-1] == "quitter"


def test_ray_backend_matches_local(out, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        evaluate("tiny", POLICIES[:2], SEEDS, tmp_path, backend="ray", progress=False)
    finally:
        ray.shutdown()
    local = tmp_path / "local"
    local.mkdir()
    evaluate("tiny", POLICIES[:2], SEEDS, local, workers=1, progress=False)
    for name in ("runs.csv", "jobs.csv"):
        assert (tmp_path / name).read_bytes() == (local / name).read_bytes(), name


def test_first_seed_moves_the_seed_range():
    runs = sweep("tiny", ["fifo"], 2, workers=1, progress=False, first_seed=1000)
    assert [r.seed for r in runs] == [1000, 1001]
    assert runs[0].summary == make_sim("tiny", 1000).run(__import__("baselines").make("fifo")).summary()
    with pytest.raises(EvaluateError, match="--first-seed"):
        sweep("tiny", ["fifo"], 1, workers=1, progress=False, first_seed=-1)


def _board(names, unfinished=0, mean=123_456.7, half=987_654.3):
    return [{"policy": n, **{k: (mean, half) for k in COLUMNS}, "gpu_util": (0.987, 0.123),
             "unfinished": unfinished} for n in names]


def _render(board, **kw) -> str:
    from rich.console import Console

    buf = io.StringIO()
    print_leaderboard(board, console=Console(file=buf, width=1000), **kw)
    return buf.getvalue()


def test_default_leaderboard_fits_132_columns_with_numbers_whole():
    import baselines

    text = _render(_board(baselines.names(), unfinished=12345))
    assert max(len(ln) for ln in text.splitlines()) <= 132
    assert "rank" in text and "unfinished" in text and "12345" in text
    assert "123,457 ± 987,654" in text and "…" not in text
    # every column is wider than a terminal; --columns all is for a wide one or the CSVs
    assert max(len(ln) for ln in _render(_board(["fifo"]), columns=COLUMNS).splitlines()) > 132


def test_columns_option_picks_the_printed_metrics():
    assert resolve_columns("all") == COLUMNS and "decision_latency_ms" not in resolve_columns("default")
    text = _render(_board(["fifo"]), columns=resolve_columns("jain_index, decision_latency_ms"))
    assert "Jain" in text and "decision ms" in text and "avg JCT" not in text
    assert "rank" in text and "unfinished" in text
    with pytest.raises(EvaluateError, match="unknown column jct; valid: default, all, avg_jct_s"):
        resolve_columns("avg_jct_s,jct")


def test_a_policy_with_unfinished_jobs_gets_no_best_mark():
    from rich.console import Console

    # the quitter has the lowest mean everywhere (it started nothing) but leaves a job unfinished
    board = _board(["fifo", "random"], mean=500.0) + _board(["quitter"], unfinished=1, mean=1.0)
    board[0]["avg_jct_s"] = (400.0, 1.0)
    tty = io.StringIO()
    print_leaderboard(board, console=Console(file=tty, force_terminal=True, width=200))
    lines = {n: next(ln for ln in tty.getvalue().splitlines() if n in ln) for n in ("fifo", "quitter")}
    assert "\x1b[1m" in lines["fifo"] and "\x1b[1m" not in lines["quitter"]


def test_resume_refuses_runs_of_changed_policy_or_engine_code(tmp_path, monkeypatch):
    """A saved run is keyed by the source that decides it: the scheduler's module with the modules
    of its package it imports, and every file of the dlclusterenv package. A run resumes on the
    same code; another version of either is refused, naming it; another scheduler's code leaves a
    baseline's run alone."""
    import os
    import shutil
    from pathlib import Path

    import dlclusterenv.evaluate as ev

    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rule.py").write_text("LIMIT = 1\n")
    (pkg / "sched.py").write_text("from baselines.fifo import FIFO\n\nfrom .rule import LIMIT\n\n\n"
                                  "class Mine(FIFO):\n    name = 'mine'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec, out = "mypkg.sched:Mine", tmp_path / "out"
    evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False)
    evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False, resume=True)  # same code: resumes
    st = (pkg / "rule.py").stat()
    (pkg / "rule.py").write_text("LIMIT = 2\n")  # a module it imports, not the scheduler's own file
    os.utime(pkg / "rule.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(EvaluateError, match=r"mypkg.sched%3AMine.seed0.json was run on another version of the "
                       r"policy code \(now: policy code mypkg/rule.py, mypkg/sched.py: sha256 [0-9a-f]{64}\)"):
        evaluate("tiny", ["fifo", spec], 1, out, workers=1, progress=False, resume=True)
    evaluate("tiny", ["fifo"], 1, out, workers=1, progress=False, resume=True)  # fifo's run is kept
    engine = tmp_path / "engine" / "dlclusterenv"
    shutil.copytree(Path(ev.__file__).parent, engine, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ev, "ENGINE", engine)
    evaluate("tiny", ["fifo"], 1, out, workers=1, progress=False, resume=True)  # a copy: the same code
    with open(engine / "sim.py", "a") as f:
        f.write("# edited\n")
    with pytest.raises(EvaluateError, match=r"fifo.seed0.json was run on another version of the engine code "
                       r"\(now: engine code dlclusterenv: sha256 [0-9a-f]{64}\)"):
        evaluate("tiny", ["fifo"], 1, out, workers=1, progress=False, resume=True)
    saved = out / "per_run" / "fifo.seed0.json"  # as saved before runs were keyed by their code
    data = json.loads(saved.read_text())
    data["scenario"] = data["scenario"].partition("\npolicy code")[0]
    saved.write_text(json.dumps(data))
    with pytest.raises(EvaluateError, match=r"was saved with no record of its policy code \(by an older version"):
        evaluate("tiny", ["fifo"], 1, out, workers=1, progress=False, resume=True)


def test_policy_code_follows_a_baselines_imports():
    """A baseline's key holds its own file and the baselines it builds on (fair on fifo, dltap on
    k8s_default), not the whole of baselines/; a constant's is baselines/fixed.py."""
    from dlclusterenv.evaluate import _package_imports, _policy_module

    def names(p):
        return [n for n, _ in _package_imports(_policy_module(p))]

    assert names("fair") == ["baselines/fair.py", "baselines/fifo.py"]
    assert names("dltap") == ["baselines/dltap.py", "baselines/k8s_default.py"]
    assert names("optimus") == ["baselines/optimus.py"]
    assert names("fixed-8x8-consolidate") == ["baselines/fixed.py"]

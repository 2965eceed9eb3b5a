"""benchmarks/learned_suite.py: --instances, --extra-seeds and --compare change what is evaluated
(the plan only; no model is trained or run here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import learned_suite as ls  # noqa: E402

from dlclusterenv.benchmark import load_suite, plan  # noqa: E402
from dlclusterenv.config import ConfigError  # noqa: E402

SPEC = "maskableppo:/nowhere/model.zip"  # planned, never loaded


def chosen(*argv):
    a = ls.parse_args(["--model", "m.zip", *argv])
    return a, ls.select(*load_suite(a.suite), a.instances, a.compare, a.skip)


def test_instances_option_picks_what_is_evaluated():
    assert ls.parse_args(["--model", "m.zip"]).instances == "philly-6c71a0-nov@7x"  # the trained one
    _, (_, insts) = chosen("--instances", "default@2x,default@0.5x")
    assert [(i.key, i.load) for i in insts] == [("default@2x", 2.0), ("default@0.5x", 0.5)]
    tasks = plan(load_suite("v2")[0], insts, Path("out"), [SPEC])
    learned = [(t.instance, t.split, t.seed) for t in tasks if t.policy == SPEC]
    assert learned == [("default@2x", "test", 1000), ("default@2x", "test", 1001),
                       ("default@0.5x", "test", 1000), ("default@0.5x", "test", 1001)]  # test split only
    assert {t.scenario.workload.load for t in tasks} == {2.0, 0.5}


def test_an_unknown_instance_is_named():
    with pytest.raises(ConfigError, match="default@9x"):
        chosen("--instances", "default@1x,default@9x")
    with pytest.raises(SystemExit):
        ls.parse_args(["--model", "m", "--extra-seeds", "-1"])


def test_extra_seeds_change_the_extended_runs():
    _, (_, [inst]) = chosen("--instances", "default@1x")
    five = ls.extended_tasks(inst, [SPEC, "optimus"], 5, Path("out"))
    assert sorted({t.seed for t in five}) == [1002, 1003, 1004, 1005, 1006]  # after test seeds 1000-1001
    assert len(five) == 10 and {t.split for t in five} == {"test"}
    assert [t.log for t in five if t.policy == SPEC] == [None] * 5  # learned runs log nothing
    assert ls.extended_tasks(inst, [SPEC], 0, Path("out")) == []


def test_compare_adds_a_heuristic_planned_on_test_only():
    _, (plain, [inst]) = chosen("--instances", "default@1x")
    _, (suite, _) = chosen("--instances", "default@1x", "--compare", "pollux,optimus")
    assert "pollux" not in plain.heuristics and suite.heuristics == [*plain.heuristics, "pollux"]
    splits = {t.split for t in plan(suite, [inst], Path("out")) if t.policy == "pollux"}
    assert splits == {"test"} and not [t for t in plan(plain, [inst], Path("out")) if t.policy == "pollux"]


def test_skip_leaves_a_heuristic_out_of_the_plan():
    _, (suite, [inst]) = chosen("--instances", "default@1x", "--skip", "optimus")
    assert "optimus" not in suite.heuristics and "fifo" in suite.heuristics
    assert not [t for t in plan(suite, [inst], Path("out")) if t.policy == "optimus"]
    with pytest.raises(ConfigError, match="nonesuch"):
        chosen("--instances", "default@1x", "--skip", "nonesuch")


def _fake_runs(monkeypatch):
    """run_task replaced by a stand-in row (avg JCT 1 s); (the policies it ran, the stand-in)."""
    ran = []

    def fake(task):
        ran.append(task.policy)
        return {"instance": task.instance, "split": task.split, "window": task.window, "policy": task.policy,
                "seed": task.seed, "avg_jct_s": 1.0, "fingerprint": ls.fingerprint(task.scenario, task.policy)}

    monkeypatch.setattr(ls, "run_task", fake)
    return ran, fake


def test_runs_are_cached_by_task_and_model_file(tmp_path, monkeypatch):
    """A scheduler run is reused by a later call; a learned run too, until its model file changes."""
    _, (suite, [inst]) = chosen("--instances", "default@1x")
    k, sc, seed = inst.runs("test")[0]
    calls, fake = _fake_runs(monkeypatch)
    monkeypatch.setattr(ls, "learned_episode", lambda t: (fake(t), [{"shape": 0}]))
    (tmp_path / "m").mkdir()
    model = tmp_path / "m" / "model.zip"
    model.write_bytes(b"x")
    (tmp_path / "m" / "config.yaml").write_text(Path("configs/agents/suite_6c71a0.yaml").read_text())
    spec = f"maskableppo:{model}"
    tasks = [ls.Task(inst.key, "test", k, p, sc, seed, str(tmp_path / f"{p}.jsonl")) for p in ("fifo", spec)]
    for _ in range(2):
        rows, recs = ls.run_all(tasks, tmp_path / "scheduler_runs.jsonl")
    assert calls == [spec, "fifo"] and [r["policy"] for r in rows] == ["fifo", spec] and recs == [{"shape": 0}]
    model.write_bytes(b"xy")  # another model file: its runs are not reused, the scheduler's are
    ls.run_all(tasks, tmp_path / "scheduler_runs.jsonl")
    assert calls == [spec, "fifo", spec]
    st = model.stat()
    model.write_bytes(b"xz")  # same size and mtime, other bytes: another model too
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    ls.run_all(tasks, tmp_path / "scheduler_runs.jsonl")
    assert calls == [spec, "fifo", spec, spec]
    model.write_bytes(b"xz")  # the same bytes again (new mtime): the same model, reused
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    ls.run_all(tasks, tmp_path / "scheduler_runs.jsonl")
    assert calls == [spec, "fifo", spec, spec]


def test_a_compared_module_scheduler_runs_as_a_scheduler(tmp_path, monkeypatch):
    """--compare may name a scheduler `module:Class`: it has a colon like a learned KIND:PATH, but
    runs (and is cached) as a scheduler, with its log named as `dlcluster benchmark` names it. The
    module must exist: a run's key holds its source (`evaluate.policy_key`)."""
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "sched.py").write_text("from baselines.fifo import FIFO\n\n\nclass Mine(FIFO):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _, (suite, [inst]) = chosen("--instances", "default@1x")
    k, sc, seed = inst.runs("test")[0]
    _fake_runs(monkeypatch)
    monkeypatch.setattr(ls, "learned_episode", lambda t: pytest.fail(f"{t.policy} run as a learned policy"))
    own = "my_pkg.sched:Mine"
    rows, recs = ls.run_all([ls.Task(inst.key, "test", k, own, sc, seed, str(tmp_path / "own.jsonl"))],
                            tmp_path / "scheduler_runs.jsonl")
    assert [r["policy"] for r in rows] == [own] and recs == []
    [task] = ls.extended_tasks(inst, [own], 1, tmp_path)
    assert task.log is not None and Path(task.log).name.startswith("my_pkg.sched%3AMine-s")


def test_a_torn_cache_line_is_run_again_not_a_crash(tmp_path, monkeypatch):
    """A call killed while appending to a cache leaves a torn last line: the next call skips it,
    reruns that run and appends it on a line of its own; the whole lines before it are reused."""
    _, (suite, [inst]) = chosen("--instances", "default@1x")
    k, sc, seed = inst.runs("test")[0]
    ran, _ = _fake_runs(monkeypatch)
    tasks = [ls.Task(inst.key, "test", k, p, sc, seed, str(tmp_path / f"{p}.jsonl")) for p in ("fifo", "drf")]
    cache = tmp_path / "scheduler_runs.jsonl"
    ls.run_all(tasks, cache)
    whole = cache.read_text().splitlines(keepends=True)
    cache.write_text(whole[0] + whole[1][: len(whole[1]) // 2])  # killed while writing drf's line
    rows, _ = ls.run_all(tasks, cache)
    assert ran == ["fifo", "drf", "drf"] and [r["policy"] for r in rows] == ["fifo", "drf"]
    ls.run_all(tasks, cache)
    assert ran == ["fifo", "drf", "drf"] and cache.read_text().endswith("\n")


def test_a_growth_model_records_its_growth_limits(tmp_path):
    """learned_suite runs a DLClusterGrow-v0 model and records each decision's growth index, jobs
    waiting, free GPUs and the GPUs the job asked for (its decisions plot has a job-size panel)."""
    import yaml
    from sb3_contrib import MaskablePPO

    from agents.policies import GrowPolicy
    from dlclusterenv.workload import load_scenario

    cfg = yaml.safe_load(Path("configs/agents/suite_103959_grow.yaml").read_text())
    del cfg["suite"]
    cfg["env"]["kwargs"].update(scenario="tiny", max_jobs=8)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = __import__("gymnasium").make("DLClusterGrow-v0", **cfg["env"]["kwargs"])
    MaskablePPO(GrowPolicy, env, seed=0, device="cpu").save(tmp_path / "model.zip")
    sc = load_scenario("tiny")[0]
    row, recs = ls.learned_episode(ls.Task("tiny@1x", "test", None, f"maskableppo:{tmp_path / 'model.zip'}", sc, 0, None))
    assert row["jobs_unfinished"] == 0 and len(recs) == len(__import__("dlclusterenv").make_sim("tiny", 0).specs)
    assert all(0 <= r["shape"] < 4 and r["job_gpus"] >= 1 and r["waiting"] >= 0 for r in recs)

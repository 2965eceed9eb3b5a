"""The benchmark suite (issue 15): suite files, splits, reference rows, validity, decision logs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from baselines.fixed import FixedShape, parse
from dlclusterenv import make_sim
from dlclusterenv.benchmark import (
    Qualify, ValidationError, fingerprint, instances, load_suite, plan, reusable, run_suite, run_task, score,
    validate_log,
)
from dlclusterenv.cli import main
from dlclusterenv.config import CONFIG_DIR, ConfigError
from dlclusterenv.traces import data_path
from dlclusterenv.workload import build
from helpers import needs_philly


def _suite_file(tmp_path: Path, **change) -> Path:
    data = yaml.safe_load((CONFIG_DIR / "benchmarks" / "tiny.yaml").read_text())
    for key, value in change.items():
        node, *path = key.split(".")
        target = data
        for k in [node, *path][:-1]:
            target = target[int(k)] if isinstance(target, list) else target[k]
        last = [node, *path][-1]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _interrupt_after(bm, monkeypatch, n: int):
    """Make `bm.run_task` run `n` tasks, then raise KeyboardInterrupt (a Ctrl-C between runs);
    returns the real `run_task`, to put back."""
    real, ran = bm.run_task, []

    def stopping(task):
        if len(ran) == n:
            raise KeyboardInterrupt
        ran.append(task)
        return real(task)

    monkeypatch.setattr(bm, "run_task", stopping)
    return real


@pytest.mark.parametrize("name", ["tiny", "v1", "v2", "v3", "v4"])
def test_shipped_suites_load(name):
    suite, path = load_suite(name)
    assert suite.version >= 1
    insts = instances(suite, path, say=lambda m: None)
    assert insts and all(i.entry.train.seeds and i.entry.test.seeds for i in insts)


def test_v2_keeps_v1_and_adds_heavy_philly_and_heterogeneous_gpus():
    """v2 = v1's instances (v1 still loads) + VC 6c71a0 at its 75th / 90th percentile load and the
    K80 / P100 / V100 cluster with Gavel among the heuristics."""
    v1, p1 = load_suite("v1")
    v2, p2 = load_suite("v2")
    k1 = {i.key for i in instances(v1, p1, lambda m: None)}
    got = {i.key: i for i in instances(v2, p2, lambda m: None)}
    assert v2.version == 2 and k1 < set(got)
    philly = data_path("../shared/traces/philly_jobs.csv").exists()  # else its instances are skipped
    assert set(got) - k1 == {"hetero-mixed@1x", "hetero-mixed@2x", "hetero-mixed@4x"} | (
        {"philly-6c71a0-nov@3x", "philly-6c71a0-nov@7x"} if philly else set())
    assert "gavel" in v2.heuristics and "gavel" not in v1.heuristics
    if philly:
        _, sc, seed = got["philly-6c71a0-nov@7x"].runs("test")[0]
        assert sc.workload.load == 7
    _, sc, seed = got["hetero-mixed@2x"].runs("test")[0]
    cluster = build(sc, seed)[1]
    assert len(set(cluster.node_gpu_type)) >= 2


def test_v3_is_v2_with_statistical_efficiency_on_trace_and_default_instances():
    v2, p2 = load_suite("v2")
    v3, p3 = load_suite("v3")
    i2 = {i.key: i for i in instances(v2, p2, lambda m: None)}
    i3 = {i.key: i for i in instances(v3, p3, lambda m: None)}
    assert v3.version == 3 and set(i2) == set(i3)
    for key, inst in i3.items():
        _, sc, seed = inst.runs("test")[0]
        _, sc2, seed2 = i2[key].runs("test")[0]
        want = "pgns" if key.split("@")[0] in ("philly-6c71a0-nov", "philly-103959-oct", "default") else "none"
        assert sc.efficiency == want and sc2.efficiency == "none"
        assert sc.model_copy(update={"efficiency": "none"}) == sc2 and seed == seed2
    assert v3.heuristics == sorted([*v2.heuristics, "pollux"])  # the goodput-aware peer of Optimus


def test_entry_efficiency_reaches_the_run_and_its_log_replays(tmp_path):
    path = _suite_file(tmp_path, **{"scenarios.0.efficiency": "pgns"})
    suite, _ = load_suite(path)
    task = next(t for t in plan(suite, instances(suite, path), tmp_path)
                if t.policy == "optimus" and t.split == "test")
    assert task.scenario.efficiency == "pgns"
    run_task(task)
    assert validate_log(Path(task.log))["policy"] == "optimus"


@pytest.mark.parametrize("change, field", [
    ({"version": "one"}, "version"),
    ({"scenarios.0.test.seeds": [1, 1000]}, "scenarios.0"),
    ({"heuristics": ["fifo", "nope"]}, "heuristics.1"),
    ({"heuristics": ["fifo", "srtf-oracle"]}, "heuristics.1"),
    ({"oracles": ["fifo"]}, "oracles.0"),
    ({"reference": "tetris", "heuristics": ["fifo"]}, "reference"),
    ({"constants.shapes": [[0, 2]]}, "constants"),
    ({"scenarios.0.loads": [0]}, "scenarios.0"),
    ({"scenarios.0.colour": "red"}, "scenarios.0.colour"),
    ({"scenarios.0.efficiency": "yes"}, "scenarios.0.efficiency"),
])
def test_bad_suite_is_a_clear_error(tmp_path, change, field):
    with pytest.raises(ConfigError) as e:
        load_suite(_suite_file(tmp_path, **change))
    assert "suite.yaml" in str(e.value) and field in str(e.value)


@pytest.mark.parametrize("change, message", [
    ({"scenarios.0.test.seeds": [-1, 1000]}, "scenarios.0.test.seeds.0: Input should be greater than or equal to 0"),
    ({"scenarios.0.test.seeds": [1000, 1000]}, "seeds: 1000 given twice"),
    ({"scenarios.0.loads": [1, 1]}, "loads: 1.0 given twice"),
    ({"heuristics": ["fifo", "fifo"]}, "heuristics: 'fifo' given twice"),
    ({"oracles": ["srtf-oracle", "srtf-oracle"]}, "oracles: 'srtf-oracle' given twice"),
    ({"constants.placers": ["spread", "spread"]}, "placers: 'spread' given twice"),
])
def test_a_negative_or_repeated_suite_value_is_refused(tmp_path, change, message):
    """A negative seed passed the suite's check and failed in numpy's traceback once its run
    started; a repeated seed, load, policy or placer was run twice and counted twice (badin16)."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_suite(_suite_file(tmp_path, **change))


def test_shared_seed_message_names_the_seeds(tmp_path):
    with pytest.raises(ConfigError, match=r"test.seeds: \[1\] are also train seeds"):
        load_suite(_suite_file(tmp_path, **{"scenarios.0.test.seeds": [1, 1000]}))


def test_windows_on_a_scenario_without_trace_are_refused(tmp_path):
    path = _suite_file(tmp_path, **{"scenarios.0.train.windows": [{"start": 0, "end": 10}],
                                    "scenarios.0.test.windows": [{"start": 10, "end": 20}]})
    suite, p = load_suite(path)
    with pytest.raises(ConfigError, match="scenarios.0.train.windows"):
        instances(suite, p)


def test_absent_trace_is_skipped_with_a_message():
    suite, path = load_suite("v1")
    said = []
    keys = [i.key for i in instances(suite, path, said.append)]
    assert not any(k.startswith("alibaba-openb") for k in keys)
    assert any("alibaba-openb" in m and "not present" in m for m in said)


@needs_philly
def test_trace_windows_of_the_splits_replay_different_jobs():
    suite, path = load_suite("v1")
    inst = next(i for i in instances(suite, path, lambda m: None) if i.key == "philly-6c71a0-nov@1x")
    ids = {split: {j.job_id for _, sc, seed in inst.runs(split) for j in build(sc, seed)[3]}
           for split in ("train", "test")}
    assert ids["train"] and ids["test"] and not ids["train"] & ids["test"]


def test_learned_policies_run_on_the_test_split_only(tmp_path):
    suite, path = load_suite("tiny")
    insts = instances(suite, path)
    tasks = plan(suite, insts, tmp_path, extra=["maskableppo:runs/x/model.zip"])
    mine = [t for t in tasks if t.policy.startswith("maskableppo:")]
    assert mine and {t.split for t in mine} == {"test"}
    assert {t.seed for t in mine} == set(suite.scenarios[0].test.seeds)
    assert all(t.log is None for t in mine)
    # the constant grid is tuned on train: it runs on both splits
    assert {t.split for t in tasks if t.policy.startswith("fixed-")} == {"train", "test"}
    assert {t.split for t in tasks if t.policy in suite.heuristics} == {"test"}


def test_check_computes_both_gaps_on_the_tiny_suite(tmp_path, capsys):
    assert main(["benchmark", "tiny", "--check", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "normalised score" not in out  # --check prints the validity report only
    runs = list(__import__("csv").DictReader(open(tmp_path / "runs.csv")))
    check = list(__import__("csv").DictReader(open(tmp_path / "check.csv")))
    suite, _ = load_suite("tiny")
    assert [c["instance"] for c in check] == ["tiny@1x", "tiny@2x"]
    for c in check:
        def mean(policy, split="test"):
            return np.mean([float(r["avg_jct_s"]) for r in runs
                            if r["instance"] == c["instance"] and r["policy"] == policy and r["split"] == split])
        h = min(mean(p) for p in suite.heuristics)
        const = min(mean(p) for p in suite.constants.names())
        o = min(mean(p) for p in suite.oracles)
        assert float(c["constant_gap"]) == pytest.approx(const / h - 1)
        assert float(c["oracle_headroom"]) == pytest.approx(1 - o / h)
        want = const / h - 1 > 0.10 and 1 - o / h >= 0.15
        assert c["qualifies"] == str(want)
        assert c["instance"] in out and f"{float(c['constant_gap']):+.1%}" in out
        assert f"{float(c['oracle_headroom']):.1%}" in out
        tuned = min(suite.constants.names(), key=lambda p: mean(p, "train"))
        assert c["tuned_constant"] == tuned


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    return out, run_suite("tiny", out, progress=False, say=lambda m: None)


def test_leaderboard_normalises_by_the_reference(tiny_run):
    _, res = tiny_run
    assert res["geomean"]["fifo"] == pytest.approx(1.0)
    for b in res["board"]:
        ref = next(x for x in res["board"] if x["instance"] == b["instance"] and x["policy"] == "fifo")
        assert b["normalised"] == pytest.approx(b["avg_jct_s"] / ref["avg_jct_s"])
    best = [b for b in res["board"] if b["policy"] == "best-oracle"]
    assert all(b["named"] in ("optimus-oracle", "srtf-oracle") for b in best)


def test_qualify_thresholds_decide_the_verdict():
    suite, path = load_suite("tiny")
    insts = instances(suite, path)[:1]
    jct = {"fifo": 110.0, "optimus": 100.0, "tetris": 130.0, "optimus-oracle": 80.0, "srtf-oracle": 90.0}
    rows = [{"instance": "tiny@1x", "split": "test", "policy": p, "avg_jct_s": v, "jobs_unfinished": 0}
            for p, v in jct.items()]
    for split in ("train", "test"):
        rows += [{"instance": "tiny@1x", "split": split, "policy": p, "avg_jct_s": 120.0 + i + (split == "test"),
                  "jobs_unfinished": 0} for i, p in enumerate(suite.constants.names())]
    c = score(suite, insts, rows)["check"][0]
    assert c["constant_gap"] == pytest.approx(0.21) and c["oracle_headroom"] == pytest.approx(0.2)
    assert c["best_heuristic"] == "optimus" and c["best_oracle"] == "optimus-oracle" and c["qualifies"]
    assert c["tuned_constant"] == suite.constants.names()[0]
    for q in (Qualify(constant_gap=0.25), Qualify(oracle_headroom=0.25)):
        assert not score(suite.model_copy(update={"qualify": q}), insts, rows)["check"][0]["qualifies"]
    other = suite.model_copy(update={"reference": "optimus"})
    assert score(other, insts, rows)["geomean"]["fifo"] == pytest.approx(1.1)
    assert score(suite, insts, rows)["geomean"]["optimus"] == pytest.approx(100 / 110)


def test_entry_load_and_mix_reach_the_scenario():
    suite, path = load_suite("tiny")
    insts = instances(suite, path)
    assert [i.key for i in insts] == ["tiny@1x", "tiny@2x"]
    for inst in insts:
        for _, sc, _ in inst.runs("test"):
            assert sc.workload.load == inst.load and sc.workload.ps_fraction == 0.5


def test_workers_do_not_change_the_results(tmp_path):
    path = _suite_file(tmp_path, **{"heuristics": ["fifo", "optimus"], "scenarios.0.loads": [2]})
    rows = []
    for workers in (1, 2):
        run_suite(path, tmp_path / f"w{workers}", workers=workers, progress=False, say=lambda m: None)
        rows.append([{k: v for k, v in r.items() if k != "wall_s"}
                     for r in __import__("csv").DictReader(open(tmp_path / f"w{workers}" / "runs.csv"))])
    assert rows[0] == rows[1]


_MINE = ("from dlclusterenv.api import Decision, Scheduler\n"
         "from dlclusterenv.placers import get_placer, start_pending\n\n"
         "class Mine(Scheduler):\n"
         "    def decide(self, view):\n"
         "        return start_pending(view, get_placer('pack'), Decision(), blocking=False)\n")


def test_own_scheduler_with_a_colon_runs_as_a_heuristic(tmp_path, monkeypatch):
    """`path/file.py:Class` (and module:Class) contain ":" like a learned KIND:PATH, but are
    Schedulers: they run through the simulator, write a decision log that replays, and are scored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(_MINE)
    spec = "mine.py:Mine"
    suite, path = load_suite("tiny")
    insts = instances(suite, path, lambda m: None)
    tasks = [t for t in plan(suite, insts, tmp_path / "out", extra=[spec]) if t.policy == spec]
    assert tasks and {t.split for t in tasks} == {"test"} and all(t.log for t in tasks)
    assert ":" not in Path(tasks[0].log).name  # the spec is quoted into one file name
    row = run_task(tasks[0])
    from dlclusterenv.schedulers import make

    assert row["avg_jct_s"] == make_sim(tasks[0].scenario, tasks[0].seed).run(make(spec)).avg_jct_s
    assert validate_log(Path(tasks[0].log))["policy"] == spec


def test_cli_refuses_baselines_in_policies(capsys):
    assert main(["benchmark", "tiny", "--policies", "fifo"]) == 2
    assert "KIND:PATH" in capsys.readouterr().err


def _one_log(tmp_path, policy="optimus"):
    suite, path = load_suite("tiny")
    tasks = plan(suite, instances(suite, path), tmp_path)
    task = next(t for t in tasks if t.policy == policy and t.split == "test")
    run_task(task)
    return Path(task.log)


@pytest.mark.parametrize("policy", ["optimus", "fixed-1x2-spread", "srtf-oracle"])
def test_decision_log_replays_to_identical_metrics(tmp_path, policy):
    log = _one_log(tmp_path, policy)
    head = validate_log(log)
    assert head["policy"] == policy and head["split"] == "test"
    assert main(["benchmark", "--validate", str(log)]) == 0


def test_a_tampered_log_fails_validation(tmp_path, capsys):
    log = _one_log(tmp_path)
    lines = log.read_text().splitlines()
    last = json.loads(lines[-1])
    last["metrics"]["avg_jct_s"] += 1.0
    bad = tmp_path / "metrics.jsonl"
    bad.write_text("\n".join(lines[:-1] + [json.dumps(last)]) + "\n")
    with pytest.raises(ValidationError, match="metrics.avg_jct_s"):
        validate_log(bad)
    assert main(["benchmark", "--validate", str(bad)]) == 1
    assert "MISMATCH" in capsys.readouterr().err
    # dropping a decision that started jobs changes the run: the replay no longer matches
    k = next(i for i, s in enumerate(lines) if '"place": {"' in s)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:k] + lines[k + 1:]) + "\n")
    with pytest.raises(ValidationError):
        validate_log(cut)


# ----------------------------------------------------------------------------- workload knobs
def _uniform(**kw):
    return {"name": "x", "cluster": "tiny", "workload": {
        "kind": "uniform", "num_jobs": 6, "window_s": 1000, "models": {"ResNet-50": 1}, **kw}}


def test_load_divides_the_gaps_between_arrivals():
    base = np.array([j.arrival_s for j in build(_uniform(), 0)[3]])
    fast = np.array([j.arrival_s for j in build(_uniform(load=2.0), 0)[3]])
    assert fast[0] == base[0]
    np.testing.assert_allclose(np.diff(fast), np.diff(base) / 2)


def test_ps_fraction_mixes_ps_and_allreduce_jobs():
    specs = build({**_uniform(ps_fraction=0.5), "workload": {**_uniform()["workload"], "num_jobs": 40,
                                                             "ps_fraction": 0.5}}, 0)[3]
    comms = {s.comm for s in specs}
    assert comms == {"ps", "allreduce"}
    assert all((s.num_ps == 0) == (s.comm == "allreduce") for s in specs)
    assert {s.comm for s in build(_uniform(ps_fraction=0.0), 0)[3]} == {"allreduce"}


@pytest.mark.parametrize("kw, key", [({"ps_fraction": 0.5, "comm": "ps"}, "ps_fraction"),
                                     ({"ps_fraction": 1.5}, "ps_fraction"), ({"load": 0}, "load")])
def test_bad_load_or_mix_is_a_config_error(kw, key):
    with pytest.raises(ConfigError, match=key):
        build(_uniform(**kw), 0)


# ----------------------------------------------------------------------------- constant rules
def test_fixed_shape_starts_every_job_at_its_shape():
    sc = {**_uniform(ps_fraction=0.5), "workload": {**_uniform()["workload"], "ps_fraction": 0.5}}
    sim = make_sim(sc, 0)
    m = sim.run(FixedShape(1, 2, "spread"))
    assert m.jobs_unfinished == 0
    for spec in sim.specs:
        job = sim.jobs[spec.job_id]
        assert job.num_workers == 2 and job.num_ps == (1 if spec.comm == "ps" else 0)


def test_fixed_shape_placer_and_shape_change_the_run():
    sc = "tiny"
    a = make_sim(sc, 0).run(parse("fixed-1x2-consolidate")).summary()
    b = make_sim(sc, 0).run(parse("fixed-1x2-spread")).summary()
    c = make_sim(sc, 0).run(parse("fixed-1x1-consolidate")).summary()
    assert a["cross_node_gb"] != b["cross_node_gb"]
    assert a["avg_jct_s"] != c["avg_jct_s"]
    with pytest.raises(ValueError, match="fixed-PxW-PLACER"):
        parse("fixed-2-spread")
    with pytest.raises(KeyError, match="unknown placer"):
        parse("fixed-1x2-nowhere")
    assert math.isfinite(a["avg_jct_s"])


class _OldFixed8x8:
    """benchmarks/learned_scheduler.py's own rule before it used FixedShape (transcribed as the
    reference): (8, 8) for every pending job in arrival order, consolidated, where it fits."""

    name, oracle = "fixed-8x8", False

    def reset(self, seed=None):
        pass

    def decide(self, view):
        from dlclusterenv.api import Decision
        from dlclusterenv.placers import Capacity, add_placement, consolidate, place_job

        d, cap = Decision(), Capacity.of(view)
        for j in view.pending:
            got = place_job(view.cluster, cap, consolidate, j.ps_demand, j.worker_demand, 8, 8)
            if got is not None:
                d.allocate[j.job_id] = (8, 8)
                add_placement(d, j.job_id, *got)
        return d


@pytest.mark.parametrize("seed", [2000, 2001])
def test_fixed_8x8_consolidate_is_learned_schedulers_old_rule(seed):
    """learned_scheduler.py's reference row now runs FixedShape(8, 8, "consolidate"): on `default`
    (every job PS) it makes the same decisions at the same times, so the same metrics."""
    from dlclusterenv.benchmark import Recorder

    old, new = Recorder(_OldFixed8x8()), Recorder(FixedShape(8, 8, "consolidate"))
    a = make_sim("default", seed).run(old).summary()
    b = make_sim("default", seed).run(new).summary()
    assert old.lines == new.lines and len(old.lines) > 10
    assert a == b
    src = (Path(__file__).parents[1] / "benchmarks" / "learned_scheduler.py").read_text()
    assert 'FixedShape(8, 8, "consolidate")' in src and "class FixedShape" not in src


# ----------------------------------------------------------------------------- --resume
def _csv(path: Path, drop=("wall_s",)) -> list[dict]:
    import csv

    return [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(open(path))]


def _quiet(m):
    return None


def test_resume_computes_only_the_missing_runs_and_equals_a_fresh_run(tmp_path, tiny_run):
    """A run of the suite without `tetris`, resumed with the whole suite, runs tetris alone and
    writes the CSVs of an uninterrupted run (wall times aside)."""
    fresh, _ = tiny_run
    out = tmp_path / "out"
    run_suite(_suite_file(tmp_path, heuristics=["fifo", "optimus"]), out, progress=False, say=_quiet)
    said = []
    res = run_suite("tiny", out, progress=False, say=said.append, resume=True)
    tetris = [t for t in plan(*_tiny_plan_args(out)) if t.policy == "tetris"]
    assert res["reused"] == res["runs"] - len(tetris) > 0 and "to run" in said[-1]
    for name in ("runs.csv", "leaderboard.csv", "check.csv"):
        assert _csv(out / name) == _csv(fresh / name), name
    assert len(list((out / "logs").rglob("*.jsonl"))) == len(list((fresh / "logs").rglob("*.jsonl")))
    again = run_suite("tiny", out, progress=False, say=_quiet, resume=True)
    assert again["reused"] == again["runs"]  # nothing left to run


def _tiny_plan_args(out):
    suite, path = load_suite("tiny")
    return suite, instances(suite, path, _quiet), out


@pytest.mark.parametrize("change", [{"scenarios.0.ps_fraction": 0.25}, {"scenarios.0.loads": [1.5, 2.5]}])
def test_resume_does_not_reuse_runs_of_a_changed_entry(tmp_path, tiny_run, change):
    """A changed entry field that changes the runs (mix, load) reuses nothing of that entry."""
    fresh, _ = tiny_run
    out = tmp_path / "out"
    import shutil

    shutil.copytree(fresh, out)
    suite, path = load_suite(_suite_file(tmp_path, **change))
    assert reusable(plan(suite, instances(suite, path, _quiet), out), out) == {}
    same, spath = load_suite(_suite_file(tmp_path, **{"scenarios.0.train.seeds": [0, 1, 2]}))
    tasks = plan(same, instances(same, spath, _quiet), out)
    done = reusable(tasks, out)  # a new train seed changes no existing run: the others are kept
    assert sorted(tasks[i].seed for i in range(len(tasks)) if i not in done) == [2] * (4 * 2)


def test_resume_needs_the_decision_log_and_reruns_old_runs_csv_rows_as_stale(tmp_path, tiny_run):
    """A scheduler row whose log is gone is rerun. Rows saved by an older version are read, named
    stale and rerun, not reused nor a crash: a runs.csv without the fingerprint column (its log
    records neither the trace file's content nor the code), and rows whose fingerprint held the
    trace file's size and mtime (any fingerprint other than today's)."""
    import shutil

    fresh, _ = tiny_run
    out = tmp_path / "out"
    shutil.copytree(fresh, out)
    suite, insts, _ = _tiny_plan_args(out)
    tasks = plan(suite, insts, out)
    Path(tasks[0].log).unlink()
    assert sorted(reusable(tasks, out)) == list(range(1, len(tasks)))
    rows = _csv(out / "runs.csv", drop=("fingerprint",))
    import csv

    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    said = []
    assert reusable(tasks, out, said.append) == {}
    assert said == [f"--resume: {len(tasks) - 1} rows of {out / 'runs.csv'} are stale ({len(tasks) - 1} from a "
                    "runs.csv without fingerprints, 0 with another: another scenario, trace file content, model "
                    "file or policy / engine code than now, or keyed by an older version, e.g. the trace file "
                    "by size and mtime); they are rerun"]
    old = _csv(fresh / "runs.csv")
    for r in old:
        r["fingerprint"] = "0123456789abcdef"  # as keyed by another version
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(old[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(old)
    said.clear()
    assert reusable(tasks, out, said.append) == {} and "(their fingerprint differs:" in said[0]
    res = run_suite("tiny", out, progress=False, say=said.append, resume=True)
    assert res["reused"] == 0 and said[-1].startswith(f"--resume: 0 of {len(tasks)} runs reused")
    assert _csv(out / "runs.csv", drop=("wall_s",)) == _csv(fresh / "runs.csv", drop=("wall_s",))


def test_runs_csv_cells_are_read_by_column(tmp_path, tiny_run):
    """Only numeric columns are cast: a policy or instance named like a number ("1e3", "007") and a
    fingerprint of digits stay text, so they still match the plan's keys; a bad number names its
    line and column."""
    from dlclusterenv.benchmark import read_runs
    from dlclusterenv.evaluate import write_csv

    fresh, _ = tiny_run
    rows = read_runs(fresh / "runs.csv")
    assert rows[0]["seed"] == 0 and rows[0]["window"] is None and isinstance(rows[0]["avg_jct_s"], float)
    assert isinstance(rows[0]["jobs_unfinished"], int)
    odd = [{**rows[0], "policy": "1e3", "instance": "007", "fingerprint": "1234567890123456"},
           {**rows[1], "policy": "007", "split": "1e3"}]
    write_csv(tmp_path / "runs.csv", odd)
    assert read_runs(tmp_path / "runs.csv") == odd
    write_csv(tmp_path / "bad.csv", [{**rows[0], "seed": "x"}])
    with pytest.raises(ValueError, match=r"bad.csv: line 2: column seed: 'x' is not a number"):
        read_runs(tmp_path / "bad.csv")


def test_resume_reruns_a_learned_policy_whose_model_file_changed(tmp_path, fifo_as_learned):
    """A learned policy's rows carry the content hash of its model file (and config): swapping
    model.zip for other bytes of the same size reruns that policy's runs and no other."""
    model = tmp_path / "m" / "model.zip"
    model.parent.mkdir()
    model.write_bytes(b"weights A")
    spec, out = f"maskableppo:{model}", tmp_path / "out"
    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    run_suite(path, out, progress=False, say=_quiet, extra=[spec])
    suite, where = load_suite(path)
    tasks = plan(suite, instances(suite, where, _quiet), out, [spec])
    mine = {i for i, t in enumerate(tasks) if t.policy == spec}
    assert mine and sorted(reusable(tasks, out)) == list(range(len(tasks)))
    model.write_bytes(b"weights B")
    assert sorted(reusable(tasks, out)) == sorted(set(range(len(tasks))) - mine)
    res = run_suite(path, out, progress=False, say=_quiet, extra=[spec], resume=True)
    assert res["reused"] == len(tasks) - len(mine)


def _logs(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "logs").rglob("*.jsonl"))}


def _consistent(out: Path) -> None:
    """Every row of runs.csv has its decision log, run on the scenario the row's fingerprint names."""
    suite, path = load_suite("tiny")
    for r in _csv(out / "runs.csv", drop=()):
        if r["policy"].startswith("maskableppo:"):
            continue
        w = "" if r["window"] == "" else f"-w{r['window']}"
        log = out / "logs" / r["instance"] / r["split"] / f"{r['policy']}-s{r['seed']}{w}.jsonl"
        head = json.loads(log.read_text().splitlines()[0])["header"]
        from dlclusterenv.workload import Scenario

        sc = Scenario.model_validate(head["scenario"])
        assert fingerprint(sc, r["policy"]) == r["fingerprint"], log


def test_a_killed_benchmark_leaves_out_as_it_was_and_resume_reuses_its_finished_runs(tmp_path, monkeypatch,
                                                                                     capsys):
    """Runs write their logs and rows to a hidden stage: a benchmark stopped part way (here: the
    third run raises) leaves the earlier CSVs and logs untouched, `--resume` reuses the two runs it
    finished, and the result equals an uninterrupted run's (wall times aside)."""
    import shutil

    import dlclusterenv.benchmark as bm

    one = {"heuristics": ["fifo"], "scenarios.0.loads": [2]}
    first = _suite_file(tmp_path, **one)
    out = tmp_path / "out"
    run_suite(first, out, progress=False, say=_quiet)
    before = {n: (out / n).read_bytes() for n in ("runs.csv", "leaderboard.csv", "check.csv", "suite.json")}
    logs = _logs(out)
    (tmp_path / "b").mkdir()
    changed = _suite_file(tmp_path / "b", **one, **{"scenarios.0.ps_fraction": 0.25})  # same log names
    real = _interrupt_after(bm, monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        run_suite(changed, out, progress=False, say=_quiet)
    assert {n: (out / n).read_bytes() for n in before} == before and _logs(out) == logs
    _consistent(out)
    assert list((out / ".staging").rglob("*.jsonl"))  # the finished runs wait there
    capsys.readouterr()
    assert main(["benchmark", "--validate", str(out)]) == 0  # the results' logs, not the stage's
    assert capsys.readouterr().out.startswith(f"{len(logs)} decision log(s) replayed")
    monkeypatch.setattr(bm, "run_task", real)
    res = run_suite(changed, out, progress=False, say=_quiet, resume=True)
    assert res["reused"] == 2 and not (out / ".staging").exists() and not (out / ".commit").exists()
    _consistent(out)
    fresh = tmp_path / "fresh"
    run_suite(changed, fresh, progress=False, say=_quiet)
    for name in ("runs.csv", "leaderboard.csv", "check.csv"):
        assert _csv(out / name) == _csv(fresh / name), name
    assert _logs(out) == _logs(fresh)
    # a stage left by a killed run is not reused without --resume, nor is a stale staged run with it
    _interrupt_after(bm, monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        run_suite(first, out, progress=False, say=_quiet)
    monkeypatch.setattr(bm, "run_task", real)
    assert run_suite(changed, out, progress=False, say=_quiet, resume=True)["reused"] == res["runs"]
    assert not (out / ".staging").exists()
    shutil.rmtree(fresh)


def test_a_commit_stopped_part_way_is_finished_by_the_next_benchmark(tmp_path, monkeypatch):
    """A benchmark SIGKILLed while renaming its outputs into place (simulated: the renames stop
    after the first file) leaves `.commit/`; the next benchmark into `out` moves the rest in first,
    so its --resume finds every run of the committed one."""
    import dlclusterenv.benchmark as bm
    import dlclusterenv.evaluate as ev

    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    out = tmp_path / "out"
    real = ev.move_all

    def one_file_then_killed(stage, dest):
        src = sorted(p for p in stage.rglob("*") if p.is_file())[0]
        (dest / src.relative_to(stage)).parent.mkdir(parents=True, exist_ok=True)
        src.rename(dest / src.relative_to(stage))
        raise SystemExit(-9)

    monkeypatch.setattr(bm, "move_all", one_file_then_killed)
    with pytest.raises(SystemExit):
        run_suite(path, out, progress=False, say=_quiet)
    assert (out / ".commit").is_dir() and not (out / "runs.csv").exists()
    monkeypatch.setattr(bm, "move_all", real)
    res = run_suite(path, out, progress=False, say=_quiet, resume=True)
    assert res["reused"] == res["runs"] and not (out / ".commit").exists()
    _consistent(out)


def test_a_benchmark_killed_at_its_commit_point_loses_no_run(tmp_path, monkeypatch):
    """Killed just before the stage is renamed to `.commit/`, `--resume` reuses every finished run
    (their rows are still staged); killed just after, the next benchmark moves the outputs in
    without the staged rows (`out/rows` is not an output)."""
    import pathlib

    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    out = tmp_path / "out"
    real_rename = pathlib.Path.rename

    def killed_at_commit(self, target):
        if self.name == ".staging":
            raise SystemExit(-9)
        return real_rename(self, target)

    monkeypatch.setattr(pathlib.Path, "rename", killed_at_commit)
    with pytest.raises(SystemExit):
        run_suite(path, out, progress=False, say=_quiet)
    monkeypatch.setattr(pathlib.Path, "rename", real_rename)
    assert not (out / "runs.csv").exists()
    res = run_suite(path, out, progress=False, say=_quiet, resume=True)
    assert res["reused"] == res["runs"]
    _consistent(out)

    def killed_after_commit(self, target):
        real_rename(self, target)
        if self.name == ".staging":
            raise SystemExit(-9)

    monkeypatch.setattr(pathlib.Path, "rename", killed_after_commit)
    with pytest.raises(SystemExit):
        run_suite(path, out, progress=False, say=_quiet)
    assert (out / ".commit" / "rows").is_dir()
    monkeypatch.undo()
    assert run_suite(path, out, progress=False, say=_quiet, resume=True)["reused"] == res["runs"]
    assert not (out / "rows").exists() and not (out / ".commit").exists()
    _consistent(out)


def test_a_benchmark_into_a_held_out_fails_at_once_naming_it(tmp_path):
    """One lock serves `evaluate` and `benchmark`: a benchmark into an --out that an evaluation
    (or another benchmark) holds fails before any run, and its message fits either holder."""
    from dlclusterenv.evaluate import EvaluateError, claim

    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    out = tmp_path / "out"
    with claim(out), pytest.raises(EvaluateError, match="another evaluation or benchmark is writing there"):
        run_suite(path, out, progress=False, say=_quiet)
    assert not (out / ".staging").exists() and not (out / "runs.csv").exists()


def test_cli_resume_flag(tmp_path, capsys):
    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    assert main(["benchmark", str(path), "--out", str(tmp_path / "o"), "--check"]) == 0
    assert "(0 reused)" in capsys.readouterr().out
    assert main(["benchmark", str(path), "--out", str(tmp_path / "o"), "--check", "--resume"]) == 0
    out = capsys.readouterr().out
    n = int(out.split(" runs (")[0].rsplit(" ", 1)[1])
    assert f"({n} reused)" in out


def test_resume_reruns_the_runs_of_a_scheduler_whose_code_changed(tmp_path):
    """A heuristic's rows are keyed by its source: edit your scheduler's file between two
    benchmarks and `--resume` reruns its runs only (the baselines' are reused)."""
    import os

    mine = tmp_path / "mine.py"
    mine.write_text("from baselines.fifo import FIFO\n\n\nclass Mine(FIFO):\n    name = 'mine'\n")
    spec = f"{mine}:Mine"
    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    out = tmp_path / "out"
    first = run_suite(path, out, extra=[spec], progress=False, say=_quiet)
    assert run_suite(path, out, extra=[spec], progress=False, say=_quiet, resume=True)["reused"] == first["runs"]
    st = mine.stat()
    mine.write_text(mine.read_text() + "# edited\n")
    os.utime(mine, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    said = []
    res = run_suite(path, out, extra=[spec], progress=False, say=said.append, resume=True)
    suite, spath = load_suite(path)
    own = [t for t in plan(suite, instances(suite, spath, _quiet), out, [spec]) if t.policy == spec]
    assert own and res["reused"] == res["runs"] - len(own)
    assert said[0].startswith(f"--resume: {len(own)} rows of {out / 'runs.csv'} are stale (their fingerprint differs")


@pytest.mark.parametrize("where", ["at the commit point", "during the renames"])
def test_ctrl_c_in_the_commit_finishes_it_and_exits_130_with_one_line(tmp_path, monkeypatch, capsys, where):
    """Ctrl-C (SIGINT to the process, as a terminal sends it) just after the stage became `.commit/`,
    or while its files are renamed into place: the commit finishes, `dlcluster benchmark` exits 130
    with one line saying `out` holds the outputs, no traceback, and `--resume` reuses every run."""
    import os
    import pathlib
    import signal

    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    out = tmp_path / "out"
    sent = []
    # a terminal's Ctrl-C handler, as `dlcluster` has it: pytest started as a background job inherits
    # SIGINT ignored from the shell, which signals_held rightly keeps ignored (exit 0, not 130)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupt():
        if not sent:
            sent.append(True)
            # raise(3) delivers to this thread at once; kill(getpid()) may go to another thread
            # (tqdm's monitor), which under load runs the C handler after the commit has returned
            signal.raise_signal(signal.SIGINT)

    if where == "at the commit point":
        real_rename = pathlib.Path.rename

        def rename(self, target):
            moved = real_rename(self, target)
            if self.name == ".staging":
                interrupt()
            return moved

        monkeypatch.setattr(pathlib.Path, "rename", rename)
    else:
        real_replace = os.replace

        def replace(src, dst):
            real_replace(src, dst)
            if "/.commit/" in str(src):
                interrupt()

        monkeypatch.setattr(os, "replace", replace)
    capsys.readouterr()
    try:
        rc = main(["benchmark", str(path), "--out", str(out), "--check"])
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert sent, "the commit's rename was never reached: no interrupt was sent"
    assert rc == 130 and "Traceback" not in err
    assert [line for line in err.splitlines() if "interrupted" in line] == [
        f"interrupted: {out} holds this benchmark's outputs, committed before the interrupt took effect "
        "(results not printed)"]
    assert not (out / ".commit").exists() and not (out / ".staging").exists()
    _consistent(out)
    assert main(["benchmark", str(path), "--out", str(out), "--check", "--resume"]) == 0
    printed = capsys.readouterr().out
    n = int(printed.split(" runs (")[0].rsplit(" ", 1)[1])
    assert f"({n} reused)" in printed


def test_ctrl_c_during_the_runs_exits_130_naming_what_resume_reuses(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the runs go: exit 130, one line: `out` is as it was, the finished runs staged."""
    import dlclusterenv.benchmark as bm

    path = _suite_file(tmp_path, **{"heuristics": ["fifo"], "scenarios.0.loads": [2]})
    out = tmp_path / "out"
    _interrupt_after(bm, monkeypatch, 2)
    assert main(["benchmark", str(path), "--out", str(out), "--check"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1] == (
        f"interrupted: {out} is as it was; `--resume` reuses the runs finished before it (kept in {out / '.staging'})")
    assert len(list((out / ".staging" / "rows").glob("*.json"))) == 2


@pytest.mark.parametrize("cut,why", [(-1, "7 cells, the header has 8"), (1, "9 cells, the header has 8")])
def test_runs_csv_row_of_the_wrong_length_names_its_line(tmp_path, cut, why):
    """A row with a cell too few (even a text one: its fingerprint) or too many is an error naming
    its line (counted in the file, past a blank line), not a row with a None cell or key."""
    from dlclusterenv.benchmark import read_runs

    head = "instance,split,window,policy,seed,avg_jct_s,wall_s,fingerprint"
    cells = ["x", "test", "", "fifo", "0", "1.5", "2.0", "ab12"]
    cells = cells[:cut] if cut < 0 else cells + ["extra"]
    (tmp_path / "runs.csv").write_text(f"{head}\nx,test,,fifo,1,1.5,2.0,ab12\n\n{','.join(cells)}\n")
    with pytest.raises(ValueError, match=rf"runs.csv: line 4: {why}"):
        read_runs(tmp_path / "runs.csv")

"""benchmarks/candidates.yaml (issue 15, branch qual12): the exploration suite of realistic candidate
instances loads and validates, and follows the rule written in its header (checked on the trace)."""

from __future__ import annotations

import csv
import datetime as dt
import math
from collections import defaultdict
from pathlib import Path

import pytest

from dlclusterenv.benchmark import instances, load_suite, plan
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import CONFIG_DIR
from dlclusterenv.workload import build, load_scenario
from helpers import shared_file

CANDIDATES = CONFIG_DIR.parent / "benchmarks" / "candidates.yaml"
OWN = {"ee9e8c": 160, "7f04ca": 96, "6214e9": 64, "6c71a0": 64, "103959": 32}  # VC: its own cluster's GPUs
SPAN = ("2017-09-25", "2017-12-14")  # v4's: train [09-25, 11-04), test [11-04, 12-14)


def test_candidates_load_with_v4s_grid_rule_and_windows():
    suite, _ = load_suite(CANDIDATES)
    v4, _ = load_suite("v4")
    assert (suite.constants, suite.qualify) == (v4.constants, v4.qualify)
    assert set(suite.heuristics) <= set(v4.heuristics) and suite.reference in suite.heuristics
    assert "pollux-oracle" in suite.oracles
    v4_windows = {split: getattr(next(e for e in v4.scenarios if e.name == "philly-6c71a0"), split).windows
                  for split in ("train", "test")}
    names = {e.name: e for e in suite.scenarios}
    assert set(names) == {f"own-{vc}" for vc in OWN} | {"philly-busy"}
    for vc, gpus in OWN.items():
        e = names[f"own-{vc}"]
        assert (e.loads, e.ps_fraction, e.efficiency) == ([1.0], 0.5, "pgns")
        assert e.train.windows == v4_windows["train"] and e.test.windows == v4_windows["test"]
        sc, _ = load_scenario(e.scenario)
        t = sc.workload.trace
        assert (t.vc, t.first_n, int(build_cluster(sc.cluster).gpus.sum())) == (vc, 240, gpus)


def test_candidate_runs_replay_each_window_up_to_240_jobs():
    """Each run replays its window's jobs, the first 240 at most (6214e9's tile holds more, 7f04ca's
    fewer)."""
    from dlclusterenv.traces import load_philly_csv

    path = shared_file("traces", "philly_jobs.csv")
    suite, where = load_suite(CANDIDATES)
    insts = [i for i in instances(suite, where) if i.key in ("own-6214e9@1x", "own-7f04ca@1x")]
    tasks = [t for t in plan(suite, insts, Path("unused")) if t.policy == "pollux" and t.window == 0]
    assert len(tasks) == 2
    for t in tasks:
        w = t.scenario.workload.trace
        in_tile = len(load_philly_csv(path, vc=w.vc, start=w.start, end=w.end).jobs)
        assert len(build(t.scenario, t.seed)[3]) == min(240, in_tile)
        assert (in_tile > 240) == (w.vc == "6214e9")


def _demand_and_busiest_days(path: Path):
    """Per VC: trace GPU-time / span over SPAN (average GPU demand); per half of SPAN: the day whose
    submitted jobs carry the most GPU-time (all VCs). Exact duplicate rows count once, as the replay
    reads them."""
    a, b = (dt.datetime.fromisoformat(x) for x in SPAN)
    gpu_time, by_day = defaultdict(float), defaultdict(float)
    with path.open(newline="") as f:
        rows = {tuple(r) for r in csv.reader(f) if r}
    for stamp, _, _, g, vc in rows - {("timestamp", "duration", "num_gpus", "gpu_time", "cluster")}:
        when = dt.datetime.fromisoformat(stamp)
        if a <= when < b:
            gpu_time[vc] += float(g)
            by_day[when.date()] += float(g)
    demand = {vc: g / (b - a).total_seconds() for vc, g in gpu_time.items()}
    mid = dt.date(2017, 11, 4)
    busiest = [max((d for d in by_day if (d < mid) == first), key=by_day.get) for first in (True, False)]
    return demand, busiest


def test_candidates_follow_the_rule_of_their_header():
    """VCs at least as heavy as 6c71a0 (plus v4's 103959), each on its average demand rounded up to
    32-GPU racks; philly-busy's days are the busiest of each of v4's two ranges."""
    demand, busiest = _demand_and_busiest_days(shared_file("traces", "philly_jobs.csv"))
    heavy = {vc for vc, g in demand.items() if g >= demand["6c71a0"]}
    assert heavy | {"103959"} == set(OWN)
    assert {vc: 32 * math.ceil(demand[vc] / 32) for vc in OWN} == OWN
    suite, _ = load_suite(CANDIDATES)
    busy = next(e for e in suite.scenarios if e.name == "philly-busy")
    assert load_scenario(busy.scenario)[0].cluster == "philly"
    assert [(busy.train.windows[0].start, busy.test.windows[0].start)] == [tuple(d.isoformat() for d in busiest)]


def test_the_counter_experiment_is_own_7f04ca_at_4x_and_nothing_else():
    suite, _ = load_suite(CANDIDATES)
    counter, _ = load_suite(CANDIDATES.with_name("candidates_counter.yaml"))
    for key in ("reference", "heuristics", "oracles", "constants", "qualify"):
        assert getattr(counter, key) == getattr(suite, key), key
    (e,) = counter.scenarios
    assert e == next(x for x in suite.scenarios if x.name == "own-7f04ca").model_copy(update={"loads": [4.0]})

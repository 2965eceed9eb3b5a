"""benchmarks/queue_share.py: queueing delay as a share of JCT for the policies `--check` names."""

import pytest

from benchmarks.queue_share import queue_share
from dlclusterenv.benchmark import Instance, load_suite
from dlclusterenv.workload import load_scenario


def test_queue_share_is_of_the_policies_the_check_names():
    suite, _ = load_suite("v4")
    e = next(e for e in suite.scenarios if e.name == "default")
    inst = Instance(f"{e.name}@1x", e, 1.0, load_scenario(e.scenario)[0])
    consts = suite.constants.names()
    rows = [{"instance": inst.key, "split": "train", "window": None, "seed": 0, "policy": p, "avg_jct_s": 100.0 + i,
             "jobs_unfinished": 0, "avg_queue_s": 0.0, "gpu_util": 0.5} for i, p in enumerate(consts)]
    # two test seeds: pollux best (JCT 100 / 300, queue 10 / 50: share 60 / 400), a constant at
    # 120 with no queue, optimus-oracle at 90 (queue 45 in one run), the rest at 500
    jct = {p: (500.0, 500.0) for p in [*suite.heuristics, *suite.oracles]}
    jct |= {"pollux": (100.0, 300.0), "optimus-oracle": (90.0, 90.0)}
    jct |= {p: (120.0 + i, 120.0 + i) for i, p in enumerate(consts)}
    queue = {"pollux": (10.0, 50.0), "optimus-oracle": (45.0, 0.0)}
    util = {"pollux": (0.2, 0.4)}
    for seed in (0, 1):
        rows += [{"instance": inst.key, "split": "test", "window": None, "seed": seed, "policy": p,
                  "avg_jct_s": v[seed], "jobs_unfinished": 0, "avg_queue_s": queue.get(p, (0.0, 0.0))[seed],
                  "gpu_util": util.get(p, (0.9, 0.9))[seed]} for p, v in jct.items()]
    (r,) = queue_share(suite, [inst], rows)
    assert (r["heuristic"], r["constant"], r["oracle"]) == ("pollux", consts[0], "optimus-oracle")
    assert r["heuristic_queue_share"] == 30.0 / 200.0 and r["heuristic_gpu_util"] == pytest.approx(0.3)
    assert r["constant_queue_share"] == 0.0 and r["oracle_queue_share"] == 22.5 / 90.0
    assert round(r["constant_gap"], 6) == -0.4 and round(r["oracle_headroom"], 6) == 0.55

"""benchmarks/window_check.py: the validity check computed on each test window alone."""

from benchmarks.window_check import per_window
from dlclusterenv.benchmark import Instance, load_suite
from dlclusterenv.workload import load_scenario


def test_each_window_is_checked_on_its_own_runs():
    suite, _ = load_suite("v4")
    e = next(e for e in suite.scenarios if e.name == "philly-6c71a0")
    inst = Instance(f"{e.name}@7x", e, 7.0, load_scenario(e.scenario)[0])
    consts = suite.constants.names()
    rows = [{"instance": inst.key, "split": "train", "window": k, "policy": p, "avg_jct_s": 100.0 + i,
             "jobs_unfinished": 0} for k in range(4) for i, p in enumerate(consts)]
    # window 0: heuristic 100, constants >= 120, oracle 80: qualifies; the others: a constant at 100
    for k in range(4):
        jct = {p: 200.0 for p in [*suite.heuristics, *suite.oracles]}
        jct |= {"pollux": 100.0, "optimus-oracle": 80.0 if k == 0 else 95.0}
        jct |= {p: (120.0 if k == 0 else 100.0) + i for i, p in enumerate(consts)}
        rows += [{"instance": inst.key, "split": "test", "window": k, "policy": p, "avg_jct_s": v,
                  "jobs_unfinished": 0} for p, v in jct.items()]
    checks = per_window(suite, [inst], rows)
    assert [c["window"] for c in checks] == [0, 1, 2, 3]
    assert [c["qualifies"] for c in checks] == [True, False, False, False]
    assert [round(c["constant_gap"], 6) for c in checks] == [0.2, 0.0, 0.0, 0.0]
    assert [round(c["oracle_headroom"], 6) for c in checks] == [0.2, 0.05, 0.05, 0.05]
    assert checks[0]["dates"] == f"{e.test.windows[0].start}..{e.test.windows[0].end}"
    assert all(c["best_heuristic"] == "pollux" and c["tuned_constant"] == consts[0] for c in checks)

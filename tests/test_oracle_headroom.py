"""benchmarks/oracle_headroom.py: pollux-oracle's runs planned as the suite plans its own, and the
headroom report counting it among the oracles."""

from pathlib import Path

from benchmarks.oracle_headroom import ORACLE, report, tasks
from dlclusterenv.benchmark import Instance, load_suite
from dlclusterenv.workload import load_scenario


def _inst(suite):
    e = next(e for e in suite.scenarios if e.name == "philly-6c71a0")
    return Instance(f"{e.name}@7x", e, 7.0, load_scenario(e.scenario)[0])


def test_one_run_per_test_window_and_seed():
    suite, _ = load_suite("v4")
    inst = _inst(suite)
    ts = tasks([inst], Path("/o"))
    assert [(t.split, t.window, t.seed, t.policy) for t in ts] == [("test", k, 1000, ORACLE) for k in range(4)]
    assert ts[1].log == "/o/logs/philly-6c71a0@7x/test/pollux-oracle-s1000-w1.jsonl"
    assert ts[1].scenario == inst.runs("test")[1][1]


def test_report_counts_pollux_oracle_among_the_oracles():
    suite, _ = load_suite("v4")
    inst = _inst(suite)
    consts = suite.constants.names()
    rows = [{"instance": inst.key, "split": "train", "window": k, "policy": p, "avg_jct_s": 300.0,
             "jobs_unfinished": 0} for k in range(4) for p in consts]
    for k in range(4):  # pollux 100; optimus-oracle 95; pollux-oracle 80 on window 0, 120 elsewhere
        jct = {p: 200.0 for p in [*suite.heuristics, *suite.oracles, *consts]}
        jct |= {"pollux": 100.0, "optimus-oracle": 95.0, ORACLE: 80.0 if k == 0 else 120.0}
        rows += [{"instance": inst.key, "split": "test", "window": k, "policy": p, "avg_jct_s": v,
                  "jobs_unfinished": 0} for p, v in jct.items()]
    lines = report(suite, [inst], rows)
    mean, w0, w1 = lines[2], lines[3], lines[4]
    assert "mean" in mean and "optimus-oracle" in mean.split()[-3] and "+5.0%" in mean  # 110 > 95
    assert mean.split()[-1] == "no" and len(lines) == 2 + 1 + 4
    assert w0.split()[-3:] == [ORACLE, "+20.0%", "yes"]
    assert w1.split()[-3:] == ["optimus-oracle", "+5.0%", "no"]

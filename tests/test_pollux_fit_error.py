"""benchmarks/pollux_fit_error.py: its probe leaves Pollux's decisions alone, and its errors are
split by the sizes a job ran at, with the shape scaled by each table's one-worker value."""

import numpy as np

from benchmarks.decision_log import decision_log
from benchmarks.pollux_fit_error import Probe, errors, run
from dlclusterenv.workload import load_scenario


def test_errors_split_seen_unseen_and_shape():
    fit = np.array([[2.0, 1.0], [3.0, 0.0]])  # [workers 1, 2] x [one node, several]
    true = np.array([[1.0, 1.0], [4.0, 2.0]])
    ran = np.array([[True, False], [False, False]])
    e = errors([(fit, true, ran)])
    assert e["seen"].tolist() == [1.0]  # 2 / 1 - 1 at the one size run
    assert e["unseen"].tolist() == [0.0, -0.25]  # the zero goodput cell is left out
    assert np.allclose(e["shape"], [0.0, -0.5, -0.625])  # fit / 2 against true / 1


def test_probe_compares_tables_and_decides_as_pollux():
    """The probe compares tables and leaves every decision Pollux's (decision logs equal; on the
    default scenario with 30 jobs, 100 decision points: its 60 took twice as long)."""
    n, e, _ = run("tiny", 0)
    assert n > 0 and len(e["seen"]) and len(e["unseen"])
    sc = load_scenario("default")[0].model_dump()
    sc["workload"]["num_jobs"] = 30
    assert decision_log(sc, Probe(), 0) == decision_log(sc, "pollux", 0)

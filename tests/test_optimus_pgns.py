"""benchmarks/optimus_pgns.py (why Optimus' v3 Philly JCT rose with `efficiency: pgns`): the plain
instrumented Optimus only records, its stepping equals Simulator.run, and each counter-experiment
changes exactly what it claims (the efficiency factor, the truth, the bias draw)."""

import importlib.util
from pathlib import Path

import pytest

from baselines.fifo import FIFO
from baselines.optimus import Optimus, OptimusOracle
from dlclusterenv import jobs, make_sim
from dlclusterenv.workload import load_scenario

_spec = importlib.util.spec_from_file_location(
    "optimus_pgns", Path(__file__).parent.parent / "benchmarks" / "optimus_pgns.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def scenarios():
    base, _ = load_scenario("default")
    return {eff: base.model_copy(update={"efficiency": eff}) for eff in ("pgns", "none")}


@pytest.fixture(scope="module")
def optimus_jct(scenarios):
    """Stock Optimus' avg JCT per scenario, run once for the tests that compare with it."""
    return {eff: _jct(sc, Optimus()) for eff, sc in scenarios.items()}


def _jct(sc, pol) -> float:
    """Simulator.run's avg JCT (an instrumented Optimus reads the truth from its engine)."""
    sim = make_sim(sc, 0)
    if isinstance(pol, bench.LoggedOptimus):
        pol.sim = sim
    return sim.run(pol).summary()["avg_jct_s"]


def test_logged_optimus_decides_as_optimus_and_run_steps_as_the_engine(scenarios, optimus_jct):
    runs = {}
    for eff, sc in scenarios.items():
        pol = bench.LoggedOptimus()
        r = runs[eff] = bench.run(sc, 0, pol)
        assert r["jct"] == optimus_jct[eff]
        assert pol.rem and all(p >= 1.0 and t >= 1.0 for _, p, t in pol.rem)
        assert r["n"] > 0 and r["workers"] > 0 and r["resize"] >= 0
    none, pgns = runs["none"], runs["pgns"]
    assert none["goodput"] == pytest.approx(1 - none["paused"])  # E = 1: only checkpoint pauses lose
    assert pgns["goodput"] < 1 - pgns["paused"] - 0.01  # large batches waste samples


def test_e_aware_reads_the_efficiency_only(scenarios, optimus_jct):
    assert _jct(scenarios["none"], bench.LoggedOptimus(aware=True)) == optimus_jct["none"]
    assert _jct(scenarios["pgns"], bench.LoggedOptimus(aware=True)) != optimus_jct["pgns"]


def test_blind_oracle_is_the_oracle_without_the_efficiency(scenarios):
    assert _jct(scenarios["none"], bench.BlindOracle()) == _jct(scenarios["none"], OptimusOracle())
    assert _jct(scenarios["pgns"], bench.BlindOracle()) != _jct(scenarios["pgns"], OptimusOracle())


def test_truth_variant_returns_the_truth(scenarios, optimus_jct):
    pol = bench.LoggedOptimus(truth=True)
    assert _jct(scenarios["pgns"], pol) != optimus_jct["pgns"]


def test_bias_stream_redraws_what_optimus_measures_only(scenarios, optimus_jct):
    sc, shipped = scenarios["pgns"], jobs.Job.draw_bias
    plain, fifo = optimus_jct["pgns"], _jct(sc, FIFO())
    jobs.Job.draw_bias = bench.bias_stream(1)
    try:
        redrawn, fifo_redrawn = _jct(sc, Optimus()), _jct(sc, FIFO())
    finally:
        jobs.Job.draw_bias = shipped
    assert redrawn != plain  # Optimus reads measured speeds
    assert fifo_redrawn == fifo  # FIFO does not

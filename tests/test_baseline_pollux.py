"""Pollux (Qiao et al., OSDI'21; baselines/pollux.py): goodput-aware allocation by a GA over allocation
matrices, power-mean fitness of speedups over a fair share, re-allocation penalty."""

from __future__ import annotations

import numpy as np
import pytest

import baselines
from baselines.pollux import Pollux, _Search, fair_goodput, fit_throughput, fitness, power_mean, step_time
from dlclusterenv import efficiency, make_sim
from dlclusterenv.efficiency import PGNS, EfficiencyConfig
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator
from dlclusterenv.workload import load_scenario

from helpers import make_cluster, make_zoo, model_dict

# two jobs on one node of 4 GPUs: A scales linearly, B gains nothing past one GPU
GOODPUT = np.zeros((2, 5, 2))
GOODPUT[0, :, 0] = GOODPUT[0, :, 1] = np.arange(5)
GOODPUT[1, :, 0] = GOODPUT[1, :, 1] = np.minimum(np.arange(5), 1)
SLOTS = np.array([[4], [4]])


def _all_matrices():
    return np.array([[[a], [b]] for a in range(5) for b in range(5) if a + b <= 4])


def test_fitness_toy_case_hand_computed_optimum():
    caps = np.array([4, 4])
    fair = fair_goodput(GOODPUT, SLOTS, caps)
    assert fair.tolist() == [2.0, 1.0]  # a fair share: 4 GPUs / 2 jobs each
    states = _all_matrices()
    base = np.array([[3], [1]])
    f = fitness(states, base, GOODPUT, fair, np.ones(2), -1.0)
    best = states[np.argmax(f)]
    assert best[:, 0].tolist() == [3, 1]
    # speedups 3/2 and 1/1: harmonic mean with the 1e-3 floor
    assert f.max() == pytest.approx(2 / (1 / 1.501 + 1 / 1.001))
    # a job without GPUs makes the p = -1 fitness tiny, the sum of speedups (p = 1) does not care
    four_zero = np.array([[[4], [0]]])
    assert fitness(four_zero, base, GOODPUT, fair, np.ones(2), -1.0)[0] < 0.01
    assert fitness(four_zero, base, GOODPUT, fair, np.ones(2), 1.0)[0] == pytest.approx((2.001 + 0.001) / 2)


def test_ga_finds_the_optimum_and_gives_gpus_to_the_higher_marginal_goodput():
    caps = np.array([4, 4])
    fair = fair_goodput(GOODPUT, SLOTS, caps)
    base = np.zeros((2, 1), dtype=np.int64)  # both pending
    need = np.array([[0, 0, 0, 1.0], [0, 0, 0, 1.0]])
    search = _Search(np.random.default_rng(0), base, caps, need, np.array([[8, 8, 8, 4.0]]), np.arange(2))
    pop = search.run(base[None], lambda s: fitness(s, base, GOODPUT, fair, np.ones(2), -1.0), 20, 30)
    assert pop[0][:, 0].tolist() == [3, 1]
    assert (pop.sum(axis=1) <= 4).all()  # repair kept every individual within the node's GPUs


def test_restart_penalty_changes_the_decision():
    """A running (2, 2) split loses to (3, 1) without a penalty; a heavy penalty keeps it."""
    caps = np.array([4, 4])
    fair = fair_goodput(GOODPUT, SLOTS, caps)
    states, base = _all_matrices(), np.array([[2], [2]])
    light = states[np.argmax(fitness(states, base, GOODPUT, fair, np.ones(2), -1.0))]
    heavy = states[np.argmax(fitness(states, base, GOODPUT, fair, np.full(2, 0.5), -1.0))]
    assert light[:, 0].tolist() == [3, 1] and heavy[:, 0].tolist() == [2, 2]
    # the penalty factor (T - R delta) / (T + delta) itself
    pol = Pollux(restart_delay_s=30.0)
    job = type("J", (), {"arrival_s": 0.0, "job_id": "x", "status": "running"})()
    view = type("V", (), {"time": 90.0})()
    assert pol._penalty(view, job) == pytest.approx(90 / 120)
    pol._restarts["x"] = 2
    assert pol._penalty(view, job) == pytest.approx(30 / 120)
    assert Pollux(restart_delay_s=0.0)._penalty(view, job) == 1.0


def test_power_mean_p():
    s = np.array([[1.0, 3.0]])
    assert power_mean(s, 1.0)[0] == pytest.approx(2.001)
    assert power_mean(s, 0.0)[0] == pytest.approx(np.sqrt(1.001 * 3.001))
    assert power_mean(s, -1.0)[0] == pytest.approx(2 / (1 / 1.001 + 1 / 3.001))


@pytest.mark.parametrize("p", [-1e300, -1e6, -2000.0, -1e-300, -1e-9, 1e-12, 1e-7, 2000.0, 1e6, 1e300])
def test_power_mean_of_any_finite_p_lies_between_the_extremes(p):
    """Any finite p is legal (Pollux's constructor): where s^p over- or underflows (large |p|)
    or 1 + p ln s rounds (tiny |p|), the mean is still computed: against log-sum-exp in Python's
    math.fsum, and for tiny |p| against the cumulant series exp(mean ln s + p var(ln s) / 2);
    the plain form gave inf or 0 for |p| >= ~1,000 and 1.0 or
    inf for |p| <= ~1e-7, so every allocation looked alike to the GA."""
    import math

    rows = np.array([[0.5, 2.0, 1.0], [0.05, 0.1, 3.0, 7.0], [1.0, 1.0, 1.0, 1.0]], dtype=object)
    for r in rows:
        s = np.array(r) + 1e-3  # power_mean adds FLOOR
        got = power_mean(np.array([r], float), p)[0]
        if abs(p) < 1e-3:  # ln M_p = mean(ln s) + p var(ln s) / 2 + O(p^2) (cumulants)
            ln = [math.log(x) for x in s]
            mu = math.fsum(ln) / len(s)
            want = math.exp(mu + p * math.fsum((v - mu) ** 2 for v in ln) / len(s) / 2)
        else:
            logs = [p * math.log(x) for x in s]
            top = max(logs)
            want = math.exp((top + math.log(math.fsum(math.exp(v - top) for v in logs) / len(s))) / p)
        assert s.min() * (1 - 1e-12) <= got <= s.max() * (1 + 1e-12)
        assert got == pytest.approx(want, rel=1e-9), (r, got, want)


def test_throughput_fit_recovers_a_known_model_and_is_optimistic_where_unmeasured():
    theta = np.array([0.2, 0.05, 0.01, 0.1, 0.02, 1.5])
    keys = [(1, False), (2, False), (4, False), (8, True), (16, True), (3, False), (12, True)]
    samples = {k: k[0] / float(step_time(theta, k[0], k[1])) for k in keys}
    fit = fit_throughput(samples)
    for w, multi in [(6, False), (24, True)]:
        assert step_time(fit, w, multi) == pytest.approx(step_time(theta, w, multi), rel=0.05)
    one = fit_throughput({(1, False): 5.0})  # one worker measured: larger sizes assumed to scale
    assert 8 / step_time(one, 8, True) == pytest.approx(40.0, rel=0.02)


# ----------------------------------------------------------------------------- on the engine
TWO = EfficiencyConfig.model_validate({
    "source": "inline test tables",
    "measured": {"noisy": {"source": "inline", "m0": 8, "phi": [[0.0, 10_000.0]]},
                 "quiet": {"source": "inline", "m0": 8, "phi": [[0.0, 8.0]]}},
    "models": {"big": {"measured": "noisy", "local_batch": 8, "why": "test"},
               "small": {"measured": "quiet", "local_batch": 8, "why": "test"}},
})


def _gpu_model():
    return model_dict(compute_on="gpu", step_compute_s=0.2, steps_per_epoch=2000, comm="allreduce",
                      worker={"cpu": 1.0, "mem_gb": 1.0, "gpu": 1})


def _two_job_sim(eff=None) -> Simulator:
    cluster = make_cluster(nodes_per_rack=1, cpus=32, gpus=8, gpu_memory_gb=16)
    zoo = make_zoo(big=_gpu_model(), small=_gpu_model())
    specs = [JobSpec("a", "big", 0.0, 0, 1), JobSpec("b", "small", 0.0, 0, 1)]
    return Simulator(cluster, specs, zoo, seed=0, tick_s=60.0, efficiency=eff or efficiency.Efficiency())


def _run_until(sim: Simulator, pol: Pollux, t: float) -> None:
    sim.reset()
    pol.reset(sim.seed)
    while sim.now < t and not sim.done:
        sim.decide(pol)
        sim.advance()


def test_more_gpus_to_the_job_whose_goodput_grows_more():
    """Same speeds; job a's noise scale is large (E ~ 1 at any size), b's tiny (E ~ 1/w): a grows
    (no re-allocation penalty here: that a penalty keeps a split is tested above)."""
    sim, pol = _two_job_sim(PGNS(TWO)), Pollux(restart_delay_s=0.0)
    _run_until(sim, pol, 600.0)
    a, b = sim.jobs["a"].num_workers, sim.jobs["b"].num_workers
    assert a > b >= 1 and a + b <= 8
    # without statistical efficiency the two are alike, and the split is even
    sim, pol = _two_job_sim(), Pollux(restart_delay_s=0.0)
    _run_until(sim, pol, 600.0)
    assert sim.jobs["a"].num_workers == sim.jobs["b"].num_workers


def test_reads_the_current_noise_scale_only():
    sim = _two_job_sim(PGNS(TWO))
    jv = {j.job_id: j for j in sim.view().jobs}
    assert jv["a"].noise_scale == 10_000.0 and jv["b"].local_batch == 8
    assert jv["b"].efficiency(4) == pytest.approx((8 + 8) / (8 + 32))
    plain = {j.job_id: j for j in _two_job_sim().view().jobs}
    assert plain["a"].efficiency(64) == 1.0


def _default(eff: str):
    sc, _ = load_scenario("default")
    small = sc.workload.model_copy(update={"num_jobs": 5, "window_s": 300})
    return sc.model_copy(update={"efficiency": eff, "workload": small})


@pytest.fixture(scope="module")
def reference():
    return make_sim(_default("pgns"), 0).run(baselines.make("pollux")).summary()


def test_deterministic_and_runs_with_and_without_efficiency(reference):
    one = make_sim(_default("pgns"), 0).run(baselines.make("pollux")).summary()
    assert one == reference and one["jobs_unfinished"] == 0
    none = make_sim(_default("none"), 0).run(baselines.make("pollux")).summary()
    assert none["jobs_unfinished"] == 0 and none != one


@pytest.mark.parametrize("kwargs", [
    {"interval_s": 300.0}, {"p": 1.0}, {"restart_delay_s": 600.0}, {"population": 4}, {"generations": 3},
    {"max_growth": 1.0}, {"max_workers": 2},
])
def test_every_parameter_changes_something(kwargs, reference):
    assert make_sim(_default("pgns"), 0).run(baselines.make("pollux", **kwargs)).summary() != reference


@pytest.mark.parametrize("kwargs, field", [
    ({"interval_s": 0}, "interval_s"), ({"max_growth": -1}, "max_growth"), ({"restart_delay_s": -1}, "restart_delay_s"),
    ({"population": 0}, "population"), ({"generations": 1.5}, "generations"), ({"max_workers": 0}, "max_workers"),
])
def test_bad_parameters_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        baselines.make("pollux", **kwargs)


def test_registered():
    assert "pollux" in baselines.names() and not baselines.make("pollux").oracle


def test_a_job_never_started_is_judged_at_least_one_round_old():
    """At its arrival (age 0) a new job's speedup is not zeroed: it is judged at age interval_s,
    as [ref]'s 60 s rounds first see a job at an age in (0, 60 s]; without this the D2S testbed
    (every job at t = 0, no periodic tick) started nothing and left 15 of 15 jobs unfinished."""
    pol = Pollux(restart_delay_s=30.0, interval_s=60.0)
    job = type("J", (), {"arrival_s": 5.0, "job_id": "n", "status": "pending"})()
    view = type("V", (), {"time": 5.0})()
    assert pol._penalty(view, job) == pytest.approx(60 / 90)
    pol._restarts["n"] = 1  # preempted once: judged at its real age
    assert pol._penalty(view, job) == 0.0
    summary = make_sim("d2s_ic", 0).run(baselines.make("pollux")).summary()
    assert summary["jobs_unfinished"] == 0 and summary["jobs_finished"] == 15

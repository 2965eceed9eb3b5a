"""Tiresias (Gu et al. NSDI'19): 2D-LAS queues over attained GPU-seconds, demotion past a threshold,
preemption across queues but not within one, starvation promotion, and the default scenario (run
directly: preemption is not expressible in the Gym envs, and the adapter says so)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from helpers import make_cluster, make_zoo, model_dict

import baselines
import dlclusterenv
from baselines.tiresias import Tiresias
from dlclusterenv.adapter import SchedulerAdapter
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator


def two_jobs() -> Simulator:
    """One node with 2 GPUs; job a (1 PS, 2 workers) from t=0, job b of the same size at t=200;
    decision points every 50 s."""
    cluster = make_cluster(nodes_per_rack=1, cpus=16, memory_gb=64, gpus=2, gpu_memory_gb=16)
    zoo = make_zoo(L=model_dict(compute_on="gpu", worker={"cpu": 1.0, "mem_gb": 1.0, "gpu": 1}))
    jobs = [JobSpec("a", "L", 0.0, 1, 2), JobSpec("b", "L", 200.0, 1, 2)]
    return Simulator(cluster, jobs, zoo, seed=0, tick_s=50)


def run_to(sim: Simulator, sched: Tiresias, t: float):
    """Decide and advance until the decision point at time t; returns the view there."""
    while sim.now < t:
        sim.decide(sched)
        sim.advance()
    assert sim.now == t
    return sim.view()


def test_demotion_after_threshold_then_preemption():
    """Threshold 100 GPU-s: at t=200 job a has 2 GPUs x 200 s = 400 GPU-s and sits in Q1; the new
    job b enters Q0 and preempts it."""
    sim, tir = two_jobs(), Tiresias(thresholds=(100.0,))
    tir.reset(0)
    view = run_to(sim, tir, 200.0)
    assert view.job("a").attained_gpu_s == pytest.approx(400.0)
    d = tir.decide(view)
    assert (tir.queue_of("a"), tir.queue_of("b")) == (1, 0)
    assert d.preempt == ["a"] and d.place == {"b/ps0": 0, "b/w0": 0, "b/w1": 0}


def test_below_threshold_no_preemption():
    """Threshold 1,000 GPU-s: both jobs are in Q0, where the running one keeps its GPUs (FIFO)."""
    sim, tir = two_jobs(), Tiresias(thresholds=(1000.0,))
    tir.reset(0)
    view = run_to(sim, tir, 200.0)
    assert tir.decide(view).empty()
    assert (tir.queue_of("a"), tir.queue_of("b")) == (0, 0)


def test_same_queue_does_not_preempt_and_starved_job_is_promoted():
    """After b has 100 GPU-s (t=250) it joins a in Q1, where the running b goes first: no swap.
    With starve_limit 1, a (ran 200 s) is promoted to Q0 once it has waited 200 s (t=400) and
    preempts b; without it, a keeps waiting."""
    for limit, at_400 in ((0.0, []), (1.0, ["b"])):
        sim, tir = two_jobs(), Tiresias(thresholds=(100.0,), starve_limit=limit)
        tir.reset(0)
        view = run_to(sim, tir, 250.0)
        assert tir.decide(view).empty() and tir.queue_of("b") == 1
        view = run_to(sim, tir, 400.0)
        d = tir.decide(view)
        assert d.preempt == at_400
        assert tir.queue_of("a") == (0 if limit else 1)


def test_default_thresholds_from_the_authors_simulator():
    assert Tiresias().thresholds == (3250.0, 7200.0)
    with pytest.raises(ValueError, match="increasing"):
        Tiresias(thresholds=(7200.0, 3250.0))


def test_default_scenario_both_front_doors():
    m = dlclusterenv.make_sim("default", 0).run(baselines.make("tiresias"))
    assert m.jobs_finished == 60 and m.jobs_unfinished == 0
    env = gym.make("DLClusterJoint-v0", scenario="default", max_jobs=64)
    assert SchedulerAdapter(env, baselines.make("tiresias")).run(0).summary() == m.summary()

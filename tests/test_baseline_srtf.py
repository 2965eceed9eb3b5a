"""SRTF (oracle): ranks by the engine's true remaining time, a shorter job preempts a longer one,
the non-preemptive variant waits; the default scenario directly (preemption is not expressible in
the Gym envs) and through the joint env with identical metrics."""

from __future__ import annotations

import gymnasium as gym
import pytest
from helpers import make_cluster, make_zoo, model_dict

import baselines
import dlclusterenv
from baselines.srtf import SRTFOracle
from dlclusterenv.adapter import SchedulerAdapter
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator


def two_jobs() -> Simulator:
    """One node with 2 GPUs; a long job runs from t=0 on both, a short one arrives at t=100."""
    cluster = make_cluster(nodes_per_rack=1, cpus=16, memory_gb=64, gpus=2, gpu_memory_gb=16)
    gpu = {"compute_on": "gpu", "worker": {"cpu": 1.0, "mem_gb": 1.0, "gpu": 1}}
    zoo = make_zoo(L=model_dict(**gpu), S=model_dict(steps_per_epoch=100, **gpu))
    return Simulator(
        cluster, [JobSpec("long", "L", 0.0, 1, 2), JobSpec("short", "S", 100.0, 1, 2)], zoo, seed=0
    )


def test_is_an_oracle():
    assert SRTFOracle.name == "srtf-oracle" and SRTFOracle.oracle
    assert baselines.make("srtf-oracle").oracle


def test_remaining_time_is_oracle_steps_over_true_speed():
    sim = two_jobs()
    srtf = SRTFOracle()
    srtf.reset(0)
    view = sim.view(oracle=True)
    job = view.job("long")
    want = view.oracle.remaining_steps("long") / view.oracle.speed("long", [0], [0, 0])
    assert srtf.remaining_s(view, job) == pytest.approx(want)


@pytest.mark.parametrize("preemptive", [True, False])
def test_shorter_job_preempts_longer(preemptive):
    sim = two_jobs()
    srtf = SRTFOracle(preemptive=preemptive)
    srtf.reset(0)
    sim.decide(srtf)
    assert sim.view().job("long").status == "running"
    sim.advance()  # the short job arrives
    assert sim.now == 100.0
    view = sim.view(oracle=True)
    assert srtf.remaining_s(view, view.job("short")) < srtf.remaining_s(view, view.job("long"))
    d = srtf.decide(view)
    if preemptive:
        assert d.preempt == ["long"]
        assert d.place == {"short/w0": 0, "short/w1": 0, "short/ps0": 0}
    else:
        assert d.empty()


def test_default_scenario_both_front_doors():
    """Preemptive and not: the joint env's release action expresses SRTF's preemptions."""
    for kw in ({}, {"preemptive": False}):
        direct = dlclusterenv.make_sim("default", 0).run(baselines.make("srtf-oracle", **kw))
        assert direct.jobs_finished == 60 and direct.jobs_unfinished == 0
        env = gym.make("DLClusterJoint-v0", scenario="default", max_jobs=64)
        through = SchedulerAdapter(env, baselines.make("srtf-oracle", **kw)).run(0)
        assert through.summary() == direct.summary()

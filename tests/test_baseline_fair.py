"""FAIR (D²S's comparator, Hadoop's fair scheduler): equal worker slots across jobs, capped by what
each job asked for, weights, PS in the requested ratio, and the default scenario through both doors."""

from __future__ import annotations

import gymnasium as gym
from helpers import make_cluster, make_zoo, model_dict

import baselines
import dlclusterenv
from baselines.fair import FAIR
from dlclusterenv.adapter import SchedulerAdapter
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator

GPU_MODEL = model_dict(compute_on="gpu", worker={"cpu": 1.0, "mem_gb": 1.0, "gpu": 1})


def allocation(gpus: int, jobs: list[JobSpec]) -> dict[str, tuple[int, int]]:
    """(PS, workers) each job runs with after FAIR's first decision on one node of `gpus` GPUs."""
    cluster = make_cluster(nodes_per_rack=1, cpus=64, memory_gb=256, gpus=gpus, gpu_memory_gb=16)
    sim = Simulator(cluster, jobs, make_zoo(M=GPU_MODEL), seed=0)
    fair = FAIR()
    fair.reset(0)
    sim.decide(fair)
    return {
        j.job_id: (j.num_ps, j.num_workers) if j.status == "running" else (0, 0)
        for j in sim.view().jobs
    }


def test_equal_slots_ties_in_arrival_order():
    """8 GPUs, three jobs wanting 8 workers each: max-min gives 3, 3, 2 (the earlier jobs win the
    odd slots), each with one PS (ceil(1 * w / 8))."""
    jobs = [JobSpec(f"j{i}", "M", 0.0, 1, 8) for i in range(3)]
    assert allocation(8, jobs) == {"j0": (1, 3), "j1": (1, 3), "j2": (1, 2)}


def test_demand_caps_the_share():
    """A job wanting 2 workers keeps 2; the other gets the remaining 6 of 8 GPUs, not 4."""
    jobs = [JobSpec("small", "M", 0.0, 1, 2), JobSpec("big", "M", 0.0, 1, 8)]
    assert allocation(8, jobs) == {"small": (1, 2), "big": (1, 6)}


def test_weights_scale_the_share():
    """Weight 2 against 1 on 6 GPUs: 4 and 2 workers."""
    jobs = [JobSpec("a", "M", 0.0, 1, 8, weight=2.0), JobSpec("b", "M", 0.0, 1, 8)]
    assert allocation(6, jobs) == {"a": (1, 4), "b": (1, 2)}


def test_ps_follow_the_requested_ratio():
    """A job asking for 2 PS : 4 workers gets 1 PS with 2 workers (ceil(2 * 2 / 4)), 2 with 4."""
    assert allocation(2, [JobSpec("j", "M", 0.0, 2, 4)]) == {"j": (1, 2)}
    assert allocation(4, [JobSpec("j", "M", 0.0, 2, 4)]) == {"j": (2, 4)}


def test_running_job_grows_when_slots_free():
    """Two jobs share 4 GPUs 2/2; when one finishes the other grows to the 4 it asked for."""
    cluster = make_cluster(nodes_per_rack=1, cpus=64, memory_gb=256, gpus=4, gpu_memory_gb=16)
    short = model_dict(compute_on="gpu", worker={"cpu": 1.0, "mem_gb": 1.0, "gpu": 1},
                       steps_per_epoch=10, convergence={"rel_delta": 0.5, "max_epochs": 2})
    zoo = make_zoo(M=GPU_MODEL, S=short)
    sim = Simulator(cluster, [JobSpec("long", "M", 0.0, 1, 4), JobSpec("short", "S", 0.0, 1, 4)],
                    zoo, seed=0)
    fair = FAIR()
    fair.reset(0)
    sim.decide(fair)
    assert (sim.view().job("long").num_workers, sim.view().job("short").num_workers) == (2, 2)
    sim.advance()  # the short job finishes
    assert [j.job_id for j in sim.view().jobs] == ["long"]
    sim.decide(fair)
    assert sim.view().job("long").num_workers == 4


def test_default_scenario_both_front_doors():
    direct = dlclusterenv.make_sim("default", 0).run(baselines.make("fair")).summary()
    assert direct["jobs_finished"] == 60 and direct["jobs_unfinished"] == 0
    env = gym.make("DLClusterJoint-v0", scenario="default", max_jobs=64)
    assert SchedulerAdapter(env, baselines.make("fair")).run(0).summary() == direct

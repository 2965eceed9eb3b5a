"""Tetris (Grandl et al. SIGCOMM'14, Optimus' comparator): the alignment score picks the node whose
free resources match the task's shape, the remaining-work term puts less work first, the fairness
knob keeps the jobs furthest below their share, and the default scenario through both doors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from helpers import make_cluster, make_zoo, model_dict

import baselines
import dlclusterenv
from baselines.tetris import Tetris, _remaining_work
from dlclusterenv import Decision
from dlclusterenv.adapter import SchedulerAdapter
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator


def shaped(ps: tuple[float, float], worker: tuple[float, float], **kw) -> dict:
    return model_dict(
        ps={"cpu": ps[0], "mem_gb": ps[1]}, worker={"cpu": worker[0], "mem_gb": worker[1]}, **kw
    )


def test_alignment_picks_the_matching_node():
    """Two 10-CPU / 10-GB nodes: node 0 has memory used (free <9 CPU, 2.5 GB>, load 0.75), node 1
    CPU used (free <3.5 CPU, 9 GB>, load 0.65). A CPU-heavy job (<2 CPU, 0.5 GB> tasks) aligns with
    node 0: 0.2*0.9 + 0.05*0.25 = 0.1925 against 0.2*0.35 + 0.05*0.9 = 0.115, so both its tasks go
    there, while load balancing (FIFO's spread) would pick the less loaded node 1."""
    cluster = make_cluster(nodes_per_rack=2, cpus=10, memory_gb=10)
    zoo = make_zoo(
        MEM=shaped((0.5, 3.5), (0.5, 4.0)), CPU=shaped((3.0, 0.5), (3.5, 0.5)),
        T=shaped((2.0, 0.5), (2.0, 0.5)),
    )
    jobs = [JobSpec("mem", "MEM", 0.0, 1, 1), JobSpec("cpu", "CPU", 0.0, 1, 1),
            JobSpec("t", "T", 0.0, 1, 1)]
    sim = Simulator(cluster, jobs, zoo, seed=0)
    sim.apply(Decision(place={"mem/ps0": 0, "mem/w0": 0, "cpu/ps0": 1, "cpu/w0": 1}))
    view = sim.view()
    assert list(view.free_cpu) == [9.0, 3.5] and list(view.free_mem) == [2.5, 9.0]
    assert Tetris().decide(view).place == {"t/w0": 0, "t/ps0": 0}
    assert baselines.make("fifo", placer="spread").decide(view).place["t/w0"] == 1


def test_remaining_work_term_puts_less_work_first():
    """One node, 4 CPU / 4 GB, tasks <1 CPU, 1 GB>: a 4-task job arrived first, a 2-task job
    second, only one can run. With the remaining-work term (m = 1) the smaller job goes first and
    the big one, left with 2 of its 4 tasks, waits; pure packing (m = 0) keeps arrival order."""
    cluster = make_cluster(nodes_per_rack=1, cpus=4, memory_gb=4)
    zoo = make_zoo(U=shaped((1.0, 1.0), (1.0, 1.0)))
    sim = Simulator(cluster, [JobSpec("big", "U", 0.0, 1, 3), JobSpec("small", "U", 0.0, 1, 1)],
                    zoo, seed=0)
    view = sim.view()
    assert Tetris(m=1.0).decide(view).place == {"small/w0": 0, "small/ps0": 0}
    assert set(Tetris(m=0.0).decide(view).place) == {"big/w0", "big/w1", "big/w2", "big/ps0"}


def test_remaining_work_is_duration_times_size():
    """W = remaining seconds x the job's tasks as cluster fractions: <1 CPU, 1 GB> PS and worker on
    4 CPU / 4 GB have size 2 * (1/4 + 1/4) = 1. Remaining seconds = steps left of the 100-epoch x
    1,000-step budget / speed: after 100 s at about 1 / 0.3 steps/s, its own measured speed."""
    cluster = make_cluster(nodes_per_rack=1, cpus=4, memory_gb=4)
    zoo = make_zoo(U=shaped((1.0, 1.0), (1.0, 1.0), steps_per_epoch=1000))
    sim = Simulator(cluster, [JobSpec("j", "U", 0.0, 1, 1)], zoo, seed=0, tick_s=100)
    totals = np.array([4.0, 4.0, 0.0, 1250e6])
    sched = Tetris()
    assert sched.remaining_seconds(sim.view().job("j")) is None  # never ran, no job of its model
    assert _remaining_work(sim.view().job("j"), totals, 7.0) == pytest.approx(7.0)
    sim.decide(sched)
    sim.advance()
    job = sim.view().job("j")
    assert sim.now == 100 and job.steps_done == pytest.approx(100 / 0.3)
    f = job.observed_speed[(1, 1)]  # measured: 1 / 0.3 with the shape's 2% bias (Job.draw_bias)
    assert f == pytest.approx(sim.jobs["j"]._bias[(1, 1)] / 0.3, rel=1e-9) and f != 1 / 0.3
    assert sched.remaining_seconds(job) == pytest.approx((100_000 - 100 / 0.3) / f)


def test_pending_job_duration_from_its_models_measured_speed():
    """Issue 12 item 9: a pending job never ran, so its duration comes from the speeds measured by
    jobs of its model: the mean at its (p, w), else the mean per worker x its workers."""
    cluster = make_cluster(nodes_per_rack=1, cpus=8, memory_gb=8)
    zoo = make_zoo(U=shaped((1.0, 1.0), (1.0, 1.0), steps_per_epoch=1000))
    sim = Simulator(cluster, [JobSpec("a", "U", 0.0, 1, 1), JobSpec("b", "U", 0.0, 1, 4)], zoo,
                    seed=0)
    sched = Tetris()
    sched._speeds = {"U": {"old1": {(1, 1): 2.0}, "old2": {(1, 1): 4.0, (1, 2): 5.0}}}
    view = sim.view()
    assert sched.remaining_seconds(view.job("a")) == pytest.approx(100_000 / 3.0)  # same shape
    per_worker = (2.0 + 4.0 + 5.0 / 2) / 3
    assert sched.remaining_seconds(view.job("b")) == pytest.approx(100_000 / (4 * per_worker))


def test_shorter_duration_goes_first():
    """Two pending jobs of the same footprint; one node holds one of them. Without a duration
    estimate they tie on remaining work and the earlier one goes first; once their models'
    measured speeds say the later one (j2) finishes 10x sooner, it goes first (m = 1), and pure
    packing (m = 0) ignores it."""
    cluster = make_cluster(nodes_per_rack=1, cpus=2, memory_gb=2)
    zoo = make_zoo(SLOW=shaped((1.0, 1.0), (1.0, 1.0)), FAST=shaped((1.0, 1.0), (1.0, 1.0)))
    sim = Simulator(cluster, [JobSpec("j1", "SLOW", 0.0, 1, 1),
                              JobSpec("j2", "FAST", 0.0, 1, 1)], zoo, seed=0)
    view = sim.view()
    assert set(Tetris().decide(view).place) == {"j1/w0", "j1/ps0"}
    for m, first in ((1.0, "j2"), (0.0, "j1")):
        sched = Tetris(m=m)
        sched._speeds = {"SLOW": {"x": {(1, 1): 1.0}}, "FAST": {"y": {(1, 1): 10.0}}}
        assert set(sched.decide(view).place) == {f"{first}/w0", f"{first}/ps0"}


def test_fairness_knob_keeps_jobs_furthest_below_their_share():
    """f = 0.5 over four jobs keeps the ceil(0.5 * 4) = 2 with the lowest dominant share."""
    held = {"a": np.array([3.0, 0, 0, 0]), "b": np.array([0, 1.0, 0, 0]),
            "c": np.zeros(4), "d": np.array([2.0, 0, 0, 0])}
    totals = np.array([10.0, 10.0, 0.0, 1.0])
    order = {"a": 0, "b": 1, "c": 2, "d": 3}
    assert Tetris(fairness=0.5)._fairest(set(held), held, totals, order) == {"c", "b"}
    assert Tetris(fairness=0.9)._fairest(set(held), held, totals, order) == {"c"}
    assert Tetris()._fairest(set(held), held, totals, order) == set(held)
    with pytest.raises(ValueError, match="fairness"):
        Tetris(fairness=1.0)


def test_default_scenario_both_front_doors():
    direct = dlclusterenv.make_sim("default", 0).run(baselines.make("tetris")).summary()
    assert direct["jobs_finished"] == 60 and direct["jobs_unfinished"] == 0
    env = gym.make("DLClusterJoint-v0", scenario="default", max_jobs=64)
    assert SchedulerAdapter(env, baselines.make("tetris")).run(0).summary() == direct



def test_equal_machines_get_bitwise_equal_alignment():
    """A BLAS product gave identical machines scores up to 1 ulp apart (614 of 2,000 random
    cases here), so ties did not go to the lower node as documented; the term-by-term sum does."""
    from baselines.tetris import alignment

    rng = np.random.default_rng(0)
    for _ in range(2000):
        vecs = rng.random((int(rng.integers(1, 200)), 4))
        col = rng.random(4)
        out = alignment(vecs, np.tile(col, (int(rng.integers(2, 300)), 1)))
        assert (out == out[:, :1]).all()

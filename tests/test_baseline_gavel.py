"""Gavel (Narayanan et al. OSDI'20): the max-min LP on a case whose optimum is known by hand, the
round mechanism on a mixed cluster, and every baseline placing correctly on the mixed preset."""

from __future__ import annotations

import numpy as np
import pytest

import baselines
import dlclusterenv
from baselines.gavel import max_min_allocation
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator
from dlclusterenv.workload import build


def test_max_min_lp_known_optimum():
    """Two types with one GPU each (fast, slow); job A runs at 3 / 1 steps/s on them, job B at 1 / 1,
    B's weight 0.5. X_equal gives each job half of each type: A 2, B 1 steps/s. A can reach at most
    3 (all of the fast GPU), i.e. 3 / (1 x 2) = 1.5, and B on the slow GPU gets 1 / (0.5 x 1) = 2 >= 1.5,
    so the optimum is t = 1.5, reached only with A on the fast GPU all the time."""
    T = np.array([[3.0, 1.0], [1.0, 1.0]])
    X, t = max_min_allocation(T, np.array([1.0, 0.5]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    assert t == pytest.approx(1.5, abs=1e-9)
    assert X[0, 0] == pytest.approx(1.0, abs=1e-9)
    assert (T[1] * X[1]).sum() / (0.5 * 1.0) >= 1.5 - 1e-9
    assert (X.sum(axis=1) <= 1 + 1e-9).all() and (X.sum(axis=0) <= 1 + 1e-9).all()


def test_weights_change_the_allocation():
    """Equal weights: B's share of its equal-share throughput bounds t at 1 (B runs at 1 anywhere)."""
    T = np.array([[3.0, 1.0], [1.0, 1.0]])
    _, t = max_min_allocation(T, np.array([1.0, 1.0]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    assert t == pytest.approx(1.0, abs=1e-9)


def test_a_job_without_a_runnable_type_is_an_error():
    with pytest.raises(ValueError, match="no GPU type"):
        max_min_allocation(np.array([[0.0, 0.0]]), np.ones(1), np.ones(1), np.array([1.0, 1.0]))


def test_a_lone_job_goes_to_its_fastest_type():
    _, cluster, zoo, _ = build("hetero_mixed")
    sim = Simulator(cluster, [JobSpec("a", "CycleGAN", 0.0, 0, 2)], zoo, seed=0)
    g = baselines.make("gavel")
    g.reset(0)
    sim.decide(g)
    nodes = {t.node for t in sim.jobs["a"].worker_tasks()}
    assert {cluster.node_gpu_type[n] for n in nodes} == {"v100"}


def test_gavel_is_deterministic_and_finishes_the_mixed_preset():
    a = dlclusterenv.make_sim("hetero_mixed", 1).run(baselines.make("gavel")).summary()
    b = dlclusterenv.make_sim("hetero_mixed", 1).run(baselines.make("gavel")).summary()
    assert a == b and a["jobs_unfinished"] == 0


@pytest.mark.parametrize("name", baselines.names())
def test_every_baseline_places_correctly_on_a_mixed_cluster(name):
    """The engine refuses any placement that breaks a capacity (DecisionError), so finishing every
    job is the check; worker speeds there depend on the GPU type (test_hetero.py)."""
    m = dlclusterenv.make_sim("hetero_mixed", 0).run(baselines.make(name))
    assert m.jobs_finished == 24 and m.jobs_unfinished == 0

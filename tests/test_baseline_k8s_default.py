"""Kubernetes default scheduling (DLTAP's comparator, seed 000 §3): legacy 0-10 priority scores
checked by hand, random tie-break, and Fig. 1 (a), the "non-ideal" placement it produces."""

from __future__ import annotations

import numpy as np
from helpers import make_cluster, make_sim, make_zoo, model_dict

import baselines
from baselines.k8s_default import default_scores, least_requested
from dlclusterenv.api import Decision
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity

WORKER = Demand(cpu=0.5, mem_gb=0.25)
PS = Demand(cpu=0.125, mem_gb=0.5)
# Background load per node (CPU cores, GB): "each host is load balanced due to other workloads"
# (seed 000 §3). s1, s2, s3 = r0-n0, r0-n1, r0-n2, each 2 cores / 2 GB as DLTAP's slaves.
BACKGROUND = ((0.25, 0.5), (0.75, 0.25), (0.75, 1.0))


def fig1_sim():
    """DLTAP's Fig. 1 cluster with the background load running and job J (2 PS + 3 workers, the
    3-million-parameter LeNet5 of seed 000 §3) pending."""
    cluster = make_cluster(nodes_per_rack=3, cpus=2, memory_gb=2, nic_MBps=125)
    models = {"lenet": model_dict(param_bytes=12e6, worker=WORKER.model_dump(), ps=PS.model_dump())}
    jobs = []
    for k, (cpu, mem) in enumerate(BACKGROUND):
        half = {"cpu": cpu / 2, "mem_gb": mem / 2}
        models[f"bg{k}"] = model_dict(param_bytes=1e3, worker=half, ps=half)
        jobs.append((f"B{k}", f"bg{k}", 1, 1))
    sim = make_sim(cluster, make_zoo(**models), jobs + [("J", "lenet", 2, 3)])
    sim.apply(Decision(place={f"B{k}/{t}": k for k in range(3) for t in ("ps0", "w0")}))
    return sim


def fig1_state() -> Capacity:
    c = make_cluster(nodes_per_rack=3, cpus=2, memory_gb=2)
    cpu, mem = np.array(BACKGROUND).T
    return Capacity(c.cpus - cpu, c.memory - mem, c.nic.copy(), np.zeros(3, np.int64))


def cross_node_pairs(place: dict, job: str = "J") -> int:
    ps = [n for t, n in place.items() if t.startswith(f"{job}/ps")]
    w = [n for t, n in place.items() if t.startswith(f"{job}/w")]
    return sum(a != b for a in w for b in ps)


def test_least_requested_integer_division():
    """calculateUnusedScore: (cap - req) * 10 / cap, integer; 0 when over capacity."""
    cap = np.array([2000, 2000, 2000, 0])
    req = np.array([750, 1250, 2500, 0])
    assert least_requested(req, cap).tolist() == [6, 3, 0, 0]  # 6.25 -> 6, 3.75 -> 3


def test_scores_worked_example():
    """By hand, 2000 millicores / 2 GiB per node; a worker asks 500m / 0.25 GiB.

    s1: requested 750m, 0.75 GiB -> LR = (floor(1250*10/2000)=6 + floor(1.25*10/2)=6) // 2 = 6;
        fractions 0.375 / 0.375 -> BRA = int((1 - 0) * 10) = 10; total 16.
    s2: 1250m, 0.5 GiB -> LR = (3 + 7) // 2 = 5; |0.625 - 0.25| = 0.375 -> BRA = int(6.25) = 6; 11.
    s3: 1250m, 1.25 GiB -> LR = (3 + 3) // 2 = 3; |0.625 - 0.625| = 0 -> BRA = 10; 13.
    A PS (125m / 0.5 GiB) on the same nodes:
    s1: 375m, 1.0 GiB -> LR = (8 + 5) // 2 = 6; |0.1875 - 0.5| -> int(6.875) = 6; 12.
    s2: 875m, 0.75 GiB -> LR = (5 + 6) // 2 = 5; |0.4375 - 0.375| -> int(9.375) = 9; 14.
    s3: 875m, 1.5 GiB -> LR = (5 + 2) // 2 = 3; |0.4375 - 0.75| -> int(6.875) = 6; 9.
    """
    c = make_cluster(nodes_per_rack=3, cpus=2, memory_gb=2)
    assert default_scores(c, fig1_state(), WORKER).tolist() == [16, 11, 13]
    assert default_scores(c, fig1_state(), PS).tolist() == [12, 14, 9]


def test_scores_filter_and_full_node():
    """PodFitsResources removes a node that cannot hold the pod (-1); a node filled exactly to its
    CPU passes the filter but BalancedResourceAllocation gives it 0 (fraction >= 1)."""
    c = make_cluster(nodes_per_rack=2, cpus=2, memory_gb=2)
    cap = Capacity(np.array([0.25, 0.5]), np.array([2.0, 2.0]), c.nic.copy(), np.zeros(2, np.int64))
    # node 1 after the pod: 2000m of 2000 (LR cpu 0), 0.25 of 2 GiB (LR mem 8): LR 4, BRA 0
    assert default_scores(c, cap, WORKER).tolist() == [-1, 4]


def test_random_tie_break_from_episode_seed():
    """Identical empty nodes tie; selectHost picks one at random, the same one for the same seed."""
    sim = make_sim(
        make_cluster(nodes_per_rack=3, cpus=2, memory_gb=2),
        make_zoo(m=model_dict(worker=WORKER.model_dump(), ps=PS.model_dump())),
        [("J", "m", 1, 1)],
    )
    firsts = []
    for seed in range(12):
        s = baselines.make("k8s-default")
        s.reset(seed)
        d = s.decide(sim.view())
        s.reset(seed)
        assert s.decide(sim.view()).place == d.place
        firsts.append(d.place["J/w0"])
    assert set(firsts) == {0, 1, 2}


def test_fig1a_non_ideal_placement():
    """Seed 000 Fig. 1 (a): the default scheduler puts wk1, wk3 on s1 and wk2 on s3 (scores
    [16, 11, 13], [12, 11, 13], [12, 11, 9]), then both PS on s2 (PS scores [11, 14, 10], then
    [11, 12, 10]): 3 x 2 = 6 cross-node worker-PS transmissions per mini-batch."""
    sched = baselines.make("k8s-default")
    sched.reset(0)
    d = sched.decide(fig1_sim().view())
    assert d.place == {"J/w0": 0, "J/w1": 2, "J/w2": 0, "J/ps0": 1, "J/ps1": 1}
    assert cross_node_pairs(d.place) == 6


def test_whole_job_or_nothing():
    """A job whose last task fits nowhere is not placed at all; a later job that fits still goes."""
    cluster = make_cluster(nodes_per_rack=2, cpus=2, memory_gb=2)
    zoo = make_zoo(
        big=model_dict(worker={"cpu": 1.0, "mem_gb": 0.5}, ps={"cpu": 1.0, "mem_gb": 0.5}),
        small=model_dict(worker={"cpu": 0.5, "mem_gb": 0.5}, ps={"cpu": 0.5, "mem_gb": 0.5}),
    )
    sim = make_sim(cluster, zoo, [("A", "big", 1, 4), ("B", "small", 1, 1)])
    sched = baselines.make("k8s-default")
    sched.reset(0)
    d = sched.decide(sim.view())
    assert set(d.place) == {"B/w0", "B/ps0"}

"""Issue 14 item 6 (D²S): the compact flow graph (identical tasks merged, rack vertices) has the
same optimum as the paper's per-task graph at every flow of a run, with fewer arcs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import dlclusterenv
from baselines.d2s import D2S
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator
from dlclusterenv.workload import build


class Twin(D2S):
    """D2S on the compact graph that also solves every flow on the paper's graph (on a copy of
    the capacity) and records both optima and arc counts."""

    def __init__(self):
        super().__init__(merge=True)
        self.paper = D2S(merge=False)
        self.log: list[tuple[int, int, int, int]] = []

    def _stage(self, cap, full, nt, ft, rank, groups):
        self.paper.last_unsent, self.paper._rack = {}, self._rack
        self.paper._stage(copy.deepcopy(cap), full, nt, ft, rank, groups)
        out = super()._stage(cap, full, nt, ft, rank, groups)
        self.log.append((self.last_cost, self.paper.last_cost, self.last_arcs, self.paper.last_arcs))
        return out


def scale_sim(jobs: int, workers: int, racks: int, per_rack: int) -> Simulator:
    from dlclusterenv.cluster import build_cluster
    from dlclusterenv.config import ClusterConfig

    c = build_cluster("default").config.model_dump()
    rack = c["racks"][0]
    c["racks"] = [dict(rack, count=racks, nodes=[dict(rack["nodes"][0], count=per_rack)])]
    cluster = build_cluster(ClusterConfig.model_validate(c))
    _, _, zoo, _ = build("default", 0)
    rng = np.random.default_rng(0)
    models = ("ResNet-50", "VGG-16", "AlexNet", "RHN")
    specs = [JobSpec(f"j{i}", models[i % len(models)], 0.0, 1, workers,
                     shard_nodes=tuple(int(x) for x in rng.choice(cluster.n_nodes, 2, replace=False)))
             for i in range(jobs)]
    return Simulator(cluster, specs, zoo, seed=0, tick_s=600)


@pytest.mark.parametrize("scenario", ["d2s_ic", "d2s_fr", "d2s_vc", "d2s_mixed"])
def test_same_optimum_at_every_flow_of_the_seed_scenarios(scenario):
    for seed in range(3):
        twin = Twin()
        dlclusterenv.make_sim(scenario, seed).run(twin)
        assert twin.log
        assert [a for a, *_ in twin.log] == [b for _, b, *_ in twin.log], (scenario, seed)
        assert sum(r[2] for r in twin.log) < sum(r[3] for r in twin.log)  # fewer arcs


def test_same_optimum_when_most_tasks_wait_on_a_large_cluster():
    """More workers than slots on 8 racks of 12: tasks compete for racks, hubs and waits."""
    sim = scale_sim(jobs=150, workers=7, racks=8, per_rack=12)
    twin = Twin()
    d = twin.decide(sim.view())
    assert d.place
    assert all(a == b for a, b, *_ in twin.log)
    compact, paper = sum(r[2] for r in twin.log), sum(r[3] for r in twin.log)
    assert compact * 5 < paper


def test_auto_keeps_the_papers_graph_below_the_threshold():
    """Equal-cost optima are broken by the solver; "auto" keeps small runs' decisions as they were."""
    for scenario in ("d2s_ic", "d2s_mixed"):
        a = dlclusterenv.make_sim(scenario, 2).run(D2S()).summary()
        b = dlclusterenv.make_sim(scenario, 2).run(D2S(merge=False)).summary()
        assert a == b


def test_merge_option_changes_the_graph_and_is_validated():
    sim = scale_sim(jobs=20, workers=4, racks=2, per_rack=8)
    arcs = {}
    for merge in (True, False):
        s = D2S(merge=merge)
        s.decide(sim.view())
        arcs[merge] = s.last_arcs
    assert arcs[True] < arcs[False]
    with pytest.raises(ValueError, match="merge"):
        D2S(merge="yes")


def reference_joint_worker_cost(job, tt_in, band, cap, full):
    """joint_worker_cost for a pending job as first written (commit 27e1ad3): the greedy
    worker loop with a full argmin per worker and candidate."""
    from baselines.d2s import PS_CANDIDATES, Capacity, exchange_bytes, slots

    ex = exchange_bytes(job) / band
    use = cap if cap.fits(job.ps_demand).any() else full
    w_free = slots(use, job.worker_demand)
    cands = np.flatnonzero(use.fits(job.ps_demand))
    if len(cands) > PS_CANDIDATES:
        shard = [n for n in dict.fromkeys(job.shard_nodes) if n in set(cands.tolist())]
        rest = cands[np.argsort(-w_free[cands], kind="stable")]
        cands = np.array(list(dict.fromkeys(shard + rest.tolist()))[:PS_CANDIDATES])
    best, best_r = np.inf, int(cands[0]) if len(cands) else 0
    for r in cands.tolist():
        left = w_free.copy()
        one = Capacity(use.cpu[r : r + 1].copy(), use.mem[r : r + 1].copy(), use.bw[r : r + 1].copy(),
                       use.gpu[r : r + 1].copy())
        one.take(0, job.ps_demand)
        left[r] = slots(one, job.worker_demand)[0]
        cost = tt_in + ex[:, r][None, :]
        total = 0.0
        for i in range(len(cost)):
            ok = np.flatnonzero(left > 0)
            m = int(ok[np.argmin(cost[i, ok])]) if len(ok) else int(np.argmin(cost[i]))
            total += cost[i, m]
            left[m] -= 1
        if total < best - 1e-9:
            best, best_r = total, r
    return tt_in + ex[:, best_r][None, :], best_r


@pytest.mark.parametrize("free_frac", [1.0, 0.3, 0.02])
def test_joint_worker_cost_equals_the_plain_greedy(free_frac):
    """The sorted-order greedy picks every candidate's total as the per-worker argmin did, on
    clusters from empty to nearly full (slots run out, the fallback acts)."""
    from baselines.d2s import Capacity, bandwidth, joint_worker_cost, worker_transfer

    sim = scale_sim(jobs=40, workers=12, racks=4, per_rack=10)
    view = sim.view()
    c = view.cluster
    rng = np.random.default_rng(3)
    cap = Capacity.of(view)
    cap.gpu[:] = np.floor(cap.gpu * free_frac * rng.random(len(cap.gpu))).astype(np.int64)
    full = Capacity(c.cpus * 1.0, c.memory * 1.0, c.nic * 1.0, c.gpus.astype(np.int64))
    band = bandwidth(c)
    assert np.array_equal(band, band.T)  # joint_worker_cost reads rows for columns
    for job in view.pending:
        tt_in = worker_transfer(job, job.input_bytes_per_step, band)
        got, r = joint_worker_cost(job, tt_in, band, cap, full)
        want, r0 = reference_joint_worker_cost(job, tt_in, band, cap, full)
        assert r == r0 and np.array_equal(got, want), job.job_id


def test_greedy_totals_equal_the_plain_loop_when_slots_run_out():
    """The candidates-at-once greedy equals the per-candidate, per-worker loop on small random
    cases where first choices collide, nodes run out of slots (and all of them do), and some
    costs are inf."""
    from baselines.d2s import _greedy_totals

    def plain(tt_in, ex, w_free, cands, left_r):
        totals = []
        for k, r in enumerate(cands.tolist()):
            left = w_free.copy()
            left[r] = left_r[k]
            cost, total = tt_in + ex[:, k][None, :], 0.0
            for i in range(len(cost)):
                ok = np.flatnonzero(left > 0)
                m = int(ok[np.argmin(cost[i, ok])]) if len(ok) else int(np.argmin(cost[i]))
                total += cost[i, m]
                left[m] -= 1
            totals.append(total)
        return totals

    rng = np.random.default_rng(5)
    for _ in range(500):
        n, w = int(rng.integers(1, 20)), int(rng.integers(1, 12))
        tt_in = np.round(rng.random((w, n)) * 3) / 2  # few distinct values: many ties
        tt_in = tt_in[rng.integers(0, max(1, w // 3), w)]  # workers sharing a row
        cands = rng.choice(n, int(rng.integers(1, min(n, 5) + 1)), replace=False)
        ex = np.round(rng.random((n, len(cands))) * 3) / 2
        ex[rng.random(ex.shape) < 0.1] = np.inf
        w_free = rng.integers(0, 3, n)
        left_r = np.maximum(w_free[cands] - rng.integers(0, 2, len(cands)), 0)
        assert _greedy_totals(tt_in, ex.T, w_free, cands, left_r) == plain(tt_in, ex, w_free, cands, left_r)


def test_capacity_fits_at_is_fits_at_one_node():
    from dlclusterenv.config import Demand
    from dlclusterenv.placers import Capacity

    rng = np.random.default_rng(0)
    eps = np.array([0.0, 1e-10, -1e-10, 1e-8])  # at, just inside and just outside the tolerances
    cap = Capacity(rng.integers(0, 3, 50) + rng.choice(eps, 50), rng.integers(0, 3, 50) * 1.0,
                   rng.integers(0, 3, 50) * 1e6 + rng.choice(eps * 1e7, 50), rng.integers(0, 2, 50))
    for d in (Demand(cpu=1, mem_gb=1, gpu=1, bw_MBps=1), Demand(cpu=2, mem_gb=0), Demand(cpu=0, mem_gb=2, bw_MBps=2)):
        assert [cap.fits_at(m, d) for m in range(50)] == cap.fits(d).tolist()

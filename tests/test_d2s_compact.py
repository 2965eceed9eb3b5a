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

"""Time-slicing over a server's GPUs (`Overheads.time_slice`, branch gts5): seed 002's Fig. 9, "Time
slicing six 1-GPU jobs on 4 GPUs", each long job's "share of GPU time drop to 4/6".

The jobs run a ResNext-50 variant with nothing but compute (1 worker, all-reduce, no per-step
overhead, no overlap, no input), so a job's speed over its speed alone is exactly its GPU factor."""

from __future__ import annotations

from pathlib import Path

import pytest

import baselines
import dlclusterenv
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import ConfigError, load_cluster, load_zoo
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator


def _one_server(time_slice: str):
    """One Gandiva server (4 P40s), with the given time-slicing rule."""
    cfg = load_cluster("gandiva")
    rack = cfg.racks[0].model_copy(update={"nodes": [cfg.racks[0].nodes[0].model_copy(update={"count": 1})]})
    overheads = cfg.overheads.model_copy(update={"time_slice": time_slice})
    return build_cluster(cfg.model_copy(update={"racks": [rack], "overheads": overheads}))


def _compute_only_zoo():
    zoo = load_zoo()
    base = zoo.models["ResNext-50"]
    model = base.model_copy(update={"comm": "allreduce", "step_overhead_s": 0.0, "overlap": 0.0,
                                    "input_bytes_per_step": 0.0, "dataset_bytes": 0.0})
    return zoo.model_copy(update={"models": {**zoo.models, "compute": model}})


def fig9_factors(time_slice: str) -> tuple[list[float], float]:
    """Six 1-GPU jobs placed by Gandiva on one 4-GPU server: each job's speed over its speed alone
    (sorted), and the switch factor 1 - suspend_resume_s / time_slice_s."""
    cluster = _one_server(time_slice)
    sim = Simulator(cluster, [JobSpec(f"j{i}", "compute", 0.0, 0, 1) for i in range(6)], _compute_only_zoo(),
                    seed=0, tick_s=60.0)
    sched = baselines.make("gandiva")
    sched.reset(0)
    sim.decide(sched)
    assert len(sim.rates().speed) == 6  # every job placed: two GPUs over-subscribed
    alone = sim.isolated_speed("j0", [], [0])
    o = cluster.config.overheads
    return sorted(s / alone for s in sim.rates().speed.values()), 1.0 - o.suspend_resume_s / o.time_slice_s


def test_fig9_server_time_slicing_gives_each_job_four_sixths():
    factors, switch = fig9_factors("server")
    assert factors == pytest.approx([switch * 4 / 6] * 6, rel=1e-12)


def test_fig9_per_gpu_time_slicing_gives_one_and_one_half():
    factors, switch = fig9_factors("gpu")
    assert factors == pytest.approx([switch / 2] * 4 + [1.0] * 2, rel=1e-12)


def test_the_rule_changes_the_total_only_by_the_switch_cost():
    """Server-wide rotation moves GPU time between the jobs; it adds no GPU: the six shares sum to
    4 x switch either way, less what the two jobs alone under `gpu` do not pay."""
    server, switch = fig9_factors("server")
    gpu, _ = fig9_factors("gpu")
    assert server != gpu
    assert sum(server) == pytest.approx(4 * switch, rel=1e-12)
    assert sum(gpu) == pytest.approx(2 * switch + 2, rel=1e-12)


def test_each_worker_alone_pays_no_switch_under_either_rule():
    """Four jobs on four GPUs: no GPU over-subscribed, so no rotation and factor 1 (the fast path)."""
    for rule in ("gpu", "server"):
        cluster = _one_server(rule)
        sim = Simulator(cluster, [JobSpec(f"j{i}", "compute", 0.0, 0, 1) for i in range(4)], _compute_only_zoo(),
                        seed=0)
        sched = baselines.make("gandiva")
        sched.reset(0)
        sim.decide(sched)
        alone = sim.isolated_speed("j0", [], [0])
        assert [s / alone for s in sim.rates().speed.values()] == [1.0] * 4


def test_a_bad_time_slice_is_a_clear_error_naming_the_field(tmp_path):
    path = tmp_path / "c.yaml"
    src = (Path(__file__).resolve().parent.parent / "configs" / "clusters" / "gandiva.yaml").read_text()
    path.write_text(src.replace("time_slice_s: 60", "time_slice_s: 60\n  time_slice: rack"))
    with pytest.raises(ConfigError, match=r"overheads\.time_slice.*'gpu' or 'server'"):
        load_cluster(path)


def test_gpu_keys_name_each_gpu_once_and_parse_back():
    """`Cluster.gpu_key` ("node/gSLOT": the graph's GPU names, the scheduler view's `gpu_key`, the
    keys of `Decision.gpu_mode`) names every GPU of a mixed cluster once, and the simulator reads
    each key back to its GPU."""
    sim = dlclusterenv.make_sim("hetero_mixed", 0)
    c = sim.cluster
    keys = [c.gpu_key(g) for g in range(c.n_gpus)]
    assert len(set(keys)) == c.n_gpus
    assert set(keys) == {n for n, kind in c.graph.nodes(data="kind") if kind == "gpu"}
    assert [sim.view().gpu_key(g) for g in range(c.n_gpus)] == keys
    assert [sim._gpu_key(k) for k in keys] == list(range(c.n_gpus))

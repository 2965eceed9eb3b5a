"""The grounded speed model (issue 11): each mechanism against the measurement that motivates it.

Pollux (adaptdl OSDI'21 artifact, ../shared/profiles/pollux_*_placements.csv) measured every layout
of 1-4 nodes x 1-4 T4 GPUs: in-node traffic is not free, a 4-GPU node beats 4 nodes of one GPU,
crossing nodes costs less as the local batch (compute) grows, and two-node layouts are slower than
four-node ones with the same GPUs per node. Constants here are the ones `dlcluster fidelity` fits
(configs/clusters/default.yaml), so the tests do not need the shared data.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dlclusterenv import fidelity as F
from dlclusterenv.api import Decision, DecisionError
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator

from helpers import make_cluster, make_zoo, model_dict

FIT = F.Constants(intra_MBps=7321.0, conn_MBps=478.0, latency_s=0.0, overlap=0.51, overlap_max=0.67)
BERT, RESNET50 = 109.5e6, 25_557_032


def step(layout, compute, params=BERT, c=FIT, comm="allreduce"):
    return F.step_time(layout, compute, params, c, gpus=4, nic_MBps=6250.0, comm=comm)


def test_in_node_traffic_costs_but_less_than_spreading():
    """Pollux BERT, local batch 4: '4' +0.08 s over '1', '1111' +0.73 s."""
    one, node, spread = step((1,), 0.455), step((4,), 0.455), step((1, 1, 1, 1), 0.455)
    assert one < node < spread


def test_host_path_is_what_makes_in_node_traffic_cost():
    free = F.Constants(1e9, FIT.conn_MBps, 0.0, FIT.overlap, FIT.overlap_max)
    assert step((4,), 0.455, c=free) == pytest.approx(0.455, rel=1e-5)
    assert step((4,), 0.455) > 0.455 * 1.01


def test_overlap_shrinks_the_cost_of_spreading_as_the_batch_grows():
    """Pollux ResNet-50 '4444': +0.28 s at local batch 20 (0.147 s compute), +0.12 s at 200 (0.924 s)."""
    small = step((4, 4, 4, 4), 0.147, RESNET50) - 0.147
    large = step((4, 4, 4, 4), 0.924, RESNET50) - 0.924
    assert large < small
    # without overlap the cost of spreading does not depend on the batch
    none = F.Constants(FIT.intra_MBps, FIT.conn_MBps, 0.0, 0.0, 0.0)
    assert step((4, 4, 4, 4), 0.924, RESNET50, c=none) - 0.924 == pytest.approx(
        step((4, 4, 4, 4), 0.147, RESNET50, c=none) - 0.147, rel=1e-9)


def test_first_extra_node_costs_more_than_later_ones():
    """Pollux BERT: '44' +2.03 s, '4444' +1.34 s; '11' +0.77 s, '111' +0.66 s."""
    assert step((4, 4), 0.455) > step((4, 4, 4, 4), 0.455)
    assert step((1, 1), 0.455) > step((1, 1, 1), 0.455)


@pytest.mark.parametrize("name,value", [
    ("intra_MBps", 2000.0), ("conn_MBps", 100.0), ("latency_s", 0.001), ("overlap", 0.1),
    ("overlap_max", 0.1),
])
def test_every_fitted_constant_changes_the_step(name, value):
    changed = F.Constants(**{**FIT.__dict__, name: value})
    assert step((2, 2), 0.455, c=changed) != pytest.approx(step((2, 2), 0.455), rel=1e-6)


def test_hierarchical_and_ring_all_reduce_differ():
    zoo = make_zoo(
        ring=model_dict(param_bytes=400e6, step_compute_s=0.5, comm="allreduce"),
        hier=model_dict(param_bytes=400e6, step_compute_s=0.5, comm="allreduce", allreduce="hierarchical"),
    )
    cluster = make_cluster(nodes_per_rack=4, gpus=4, nic_MBps=6250, intra_MBps=7000)
    sim = Simulator(cluster, [JobSpec("R", "ring", 0, 0, 8), JobSpec("H", "hier", 0, 0, 8)], zoo)
    w = [0, 0, 0, 0, 1, 1, 1, 1]
    r, h = sim.isolated_speed("R", [], w), sim.isolated_speed("H", [], w)
    assert r != pytest.approx(h, rel=1e-3)
    # hierarchical sends 2 (k-1)/k P across (k = 2 nodes), a ring 2 (n-1)/n P (n = 8): less across
    assert h > r


def test_all_reduce_and_ps_jobs_contend_on_one_nic():
    zoo = make_zoo(
        ar=model_dict(param_bytes=200e6, step_compute_s=0.2, comm="allreduce"),
        ps=model_dict(param_bytes=200e6, step_compute_s=0.2),
    )
    cluster = make_cluster(nodes_per_rack=2, gpus=4, nic_MBps=1000)
    jobs = [JobSpec("A", "ar", 0, 0, 2), JobSpec("P", "ps", 0, 1, 1)]
    sim = Simulator(cluster, jobs, zoo)
    alone_a = sim.isolated_speed("A", [], [0, 1])
    alone_p = sim.isolated_speed("P", [1], [0])
    sim.apply(Decision(place={"A/w0": 0, "A/w1": 1, "P/ps0": 1, "P/w0": 0}))
    r = sim.rates().speed
    assert r["A"] < alone_a * 0.99 and r["P"] < alone_p * 0.99


def test_all_reduce_job_has_no_ps():
    zoo = make_zoo(ar=model_dict(param_bytes=1e6, step_compute_s=0.2, comm="allreduce"))
    sim = Simulator(make_cluster(nodes_per_rack=2, gpus=4), [JobSpec("A", "ar", 0, 0, 2)], zoo)
    with pytest.raises(DecisionError, match="all-reduce job has no PS"):
        sim.apply(Decision(allocate={"A": (1, 2)}))
    sim.apply(Decision(place={"A/w0": 0, "A/w1": 0}))
    assert sim.jobs["A"].status == "running"


def test_weak_scaling_more_workers_on_one_node_never_slower():
    """Issue 11: with the old fixed global batch and a 2 GB/s CPU PS, 8 GPUs on one node gave fewer
    samples/s than 1. Weak scaling and a memory-bound PS update make speed grow with w."""
    zoo = make_zoo(m=model_dict(param_bytes=102e6, step_compute_s=0.205, ps_update_s=0.0102,
                                overlap=0.51, overlap_max=0.67))
    cluster = make_cluster(nodes_per_rack=1, gpus=8, cpus=64, memory_gb=512, intra_MBps=7321)
    sim = Simulator(cluster, [JobSpec("J", "m", 0, 1, 1)], zoo)
    v = [sim.isolated_speed("J", [0] * -(-w // 4), [0] * w) for w in range(1, 9)]
    assert all(b > a for a, b in zip(v, v[1:]))


# ----------------------------------------------------------------------------- fidelity
def _write(tmp_path, rows, header="placement,local_bsz,step_time,sync_time"):
    p = tmp_path / "m.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


def test_fidelity_scores_a_file_made_by_the_engine_as_exact(tmp_path):
    compute = {8: 0.3, 16: 0.5}
    layouts = [(1,), (2,), (4,), (1, 1), (2, 2), (1, 1, 1, 1), (4, 4)]
    rows = [f"{''.join(map(str, lay))},{b},{step(lay, c, 50e6)!r},0" for b, c in compute.items()
            for lay in layouts]
    path = _write(tmp_path, rows)
    got = F.score_pollux(F.load_pollux(path), F.single_gpu_steps(F.load_pollux(path), path), 50e6, FIT)
    assert got["spearman_median"] == pytest.approx(1.0)
    assert got["median_abs_rel_err"] < 1e-9 and got["p90_abs_rel_err"] < 1e-9
    assert got["n"] == 12
    # a 20% slower measurement everywhere shows up as a 1/1.2 - 1 error
    rows = [f"{''.join(map(str, lay))},{b},{(step(lay, c, 50e6) * (1.2 if lay != (1,) else 1))!r},0"
            for b, c in compute.items() for lay in layouts]
    path = _write(tmp_path, rows)
    got = F.score_pollux(F.load_pollux(path), F.single_gpu_steps(F.load_pollux(path), path), 50e6, FIT)
    assert got["median_abs_rel_err"] == pytest.approx(1 - 1 / 1.2, rel=1e-6)


def test_self_consistency_is_the_data_agreement_between_adjacent_batches(tmp_path):
    """The noise ceiling printed beside each Spearman: layouts' measured ranking at one local batch
    against the next. Batches 8 and 16 agree exactly, 16 and 32 are reversed: median of (1, -1)."""
    layouts = ["11", "2", "111", "22"]
    times = {8: [0.5, 0.6, 0.7, 0.8], 16: [0.9, 1.0, 1.1, 1.2], 32: [1.9, 1.8, 1.7, 1.6]}
    rows = [f"1,{b},{t[0] / 2},0" for b, t in times.items()]
    rows += [f"{lay},{b},{x},0" for b, t in times.items() for lay, x in zip(layouts, t)]
    path = _write(tmp_path, rows)
    sc = F.self_consistency(F.load_pollux(path))
    assert sc == {"adjacent_spearman": 0.0, "ceiling": pytest.approx(float("nan"), nan_ok=True), "pairs": 2}
    rows = [r for r in rows if ",32," not in r]
    path = _write(tmp_path, rows)
    data = F.load_pollux(path)
    got = F.score_pollux(data, F.single_gpu_steps(data, path), 50e6, FIT)
    assert got["self_consistency"] == {"adjacent_spearman": 1.0, "ceiling": 1.0, "pairs": 1}


def test_fit_recovers_the_constants_that_made_the_data(tmp_path):
    truth = F.Constants(intra_MBps=5000.0, conn_MBps=800.0, latency_s=0.0, overlap=0.4, overlap_max=0.6)
    compute = {8: 0.2, 32: 0.6}
    layouts = [(1,), (2,), (4,), (1, 1), (2, 2), (1, 1, 1), (4, 4), (2, 2, 2, 2), (1, 3)]
    rows = [F.Row(lay, b, step(lay, c, 100e6, truth), 0) for b, c in compute.items() for lay in layouts]
    c = F.fit([(rows, compute, 100e6, 4, 6250.0, "allreduce")], fixed={"latency_s": 0.0})
    pred = [step(r.layout, compute[r.local_bsz], 100e6, c) for r in rows]
    assert pred == pytest.approx([r.step_s for r in rows], rel=1e-3)


def test_fit_inner_loop_equals_the_engine():
    compute = {4: 0.455, 12: 0.922}
    rows = [F.Row(lay, b, 1.0, 0) for b in compute for lay in [(1,), (3,), (1, 2), (4, 4, 4), (2, 1, 1, 3)]]
    fast = F._predict(rows, compute, BERT, FIT, 4, 6250.0, "allreduce")
    engine = [step(r.layout, compute[r.local_bsz]) for r in rows]
    assert list(fast) == pytest.approx(engine, rel=1e-12)


def _gavel_entry(gpu, family, sf, alone, c):
    e = {"gpu": gpu, "job": f"{family} (batch size 8)", "family": family, "sf": sf, "alone": alone}
    t_cons, t_spread = F._gavel_steps(e, c)
    return {**e, "consolidated": sf / t_cons, "spread": sf / t_spread}


def test_gavel_server_links_come_from_spec_sheets():
    """PCIe 3.0 x16 (15.75 GB/s, shared by a server's GPUs) on K80/P100 servers; V100's NVLink
    2.0 (150 GB/s per GPU per direction, each GPU its own) for the consolidated run only: a spread
    run's GPU reaches the NIC over PCIe."""
    e = {"gpu": "v100", "sf": 4}
    assert F._gavel_layouts(e) == [((4,), 4 * 150_000.0), ((1, 1, 1, 1), 15_750.0)]
    assert F._gavel_layouts({"gpu": "p100", "sf": 4}) == [((4,), 15_750.0), ((1, 1, 1, 1), 15_750.0)]
    # NVLink makes the in-server all-reduce of a 48 M-parameter model cheaper than over PCIe
    c = F.Constants(7321.0, 478.0, 0.0, 0.0, 0.0)
    v100, p100 = (_gavel_entry(g, "Transformer", 4, 10.0, c) for g in ("v100", "p100"))
    assert v100["consolidated"] > p100["consolidated"] * 1.05
    assert v100["spread"] == pytest.approx(p100["spread"], rel=1e-9)  # the cap binds, not the NIC


def test_gavel_fit_recovers_the_connection_cap_that_made_the_data():
    truth = F.Constants(7321.0, 900.0, 0.0, 0.5, 0.6)
    entries = [_gavel_entry("v100", fam, sf, alone, truth)
               for fam, alone in (("ResNet-50", 5.0), ("LM", 60.0)) for sf in (2, 4, 8)]
    fitted = F._fit_gavel(entries, replace(truth, conn_MBps=300.0))
    assert fitted.conn_MBps == pytest.approx(900.0, rel=1e-3)
    assert all(F._gavel_ratio(e, fitted) == pytest.approx(e["consolidated"] / e["spread"], rel=1e-6)
               for e in entries)


@pytest.mark.parametrize("content,match", [
    ("placement,local_bsz,step_time\n1,8,0.5\n12,x,0.7\n", r"m\.csv: line 3: local_bsz: not a number"),
    ("placement,local_bsz,step_time\n1,8,0.5\n1a,8,0.7\n", r"line 3: placement"),
    ("placement,local_bsz,step_time\n1,8,-1\n", r"line 2: step_time: must be a positive"),
    ("a,b\n1,2\n", r"m\.csv: line 1: header"),
    ("num_nodes,num_replicas,local_bsz,step_time\n4,2,8,0.5\n", r"line 2: num_replicas: 2 < num_nodes 4"),
])
def test_malformed_measurement_file_names_file_line_and_field(tmp_path, content, match):
    p = tmp_path / "m.csv"
    p.write_text(content)
    with pytest.raises(F.FidelityError, match=match):
        F.load_pollux(p)


def test_file_without_one_gpu_rows_asks_for_step1(tmp_path):
    p = _write(tmp_path, ["11,8,0.9"], header="placement,local_bsz,step_time")
    with pytest.raises(F.FidelityError, match="--step1"):
        F.single_gpu_steps(F.load_pollux(p), p)


def test_scalability_layout_spreads_replicas_evenly(tmp_path):
    p = _write(tmp_path, ["3,8,16,0.9"], header="num_nodes,num_replicas,local_bsz,step_time")
    assert F.load_pollux(p)[0].layout == (3, 3, 2)


def test_all_reduce_trace_jobs_run_through_every_front_door():
    """Trace replays are all-reduce (no PS): the allocation envs offer no +PS for them, and a
    resizing heuristic (DRF) gives them workers only."""
    import gymnasium as gym

    import baselines
    import dlclusterenv

    wl = {"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "num_workers": 2,
                                     "comm": "allreduce"},
                                    {"model": "ResNet-50", "arrival_s": 10, "num_workers": 1}]}
    sc = {"name": "ar", "cluster": "tiny", "engine": {"tick_s": 300}, "workload": wl}
    m = dlclusterenv.make_sim(sc, 0).run(baselines.make("drf")).summary()
    assert m["jobs_finished"] == 2
    env = gym.make("DLClusterAlloc-v0", scenario=sc)
    env.reset(seed=0)
    job = env.unwrapped.slots()[0]
    assert not job.uses_ps
    mask = env.unwrapped.action_masks()
    assert not mask[0] and mask[1]  # slot 0: +PS masked, +worker offered


def test_a_ps_count_on_an_all_reduce_job_is_a_config_error():
    import dlclusterenv
    from dlclusterenv.config import ConfigError

    wl = {"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "num_ps": 2,
                                     "num_workers": 2, "comm": "allreduce"}]}
    with pytest.raises(ConfigError, match=r"workload\.jobs\.0\.num_ps: 2: an all-reduce job has no PS"):
        dlclusterenv.make_sim({"name": "ar", "cluster": "tiny", "workload": wl}, 0)


# ----------------------------------------------------------------------------- exchange every k steps
def _k_sim(k: int, comm: str = "ps", rpc_s: float = 0.0):
    """One job whose PS (or ring partner) is on another node, input read from a third."""
    zoo = make_zoo(m=model_dict(param_bytes=100e6, step_compute_s=0.2, ps_update_s=0.01,
                                input_bytes_per_step=1e6, comm=comm))
    cluster = make_cluster(nodes_per_rack=3, nic_MBps=100, overheads={"rpc_s": rpc_s})
    p, w = (1, 1) if comm == "ps" else (0, 2)
    spec = JobSpec("J", "m", 0.0, p, w, shard_nodes=(2,), exchange_every=k)
    sim = Simulator(cluster, [spec], zoo, seed=0)
    place = {"J/ps0": 1, "J/w0": 0} if comm == "ps" else {"J/w0": 0, "J/w1": 1}
    sim.apply(Decision(place=place))
    return sim


@pytest.mark.parametrize("comm", ["ps", "allreduce"])
def test_exchange_every_k_steps_charges_bytes_and_time_once_per_k(comm):
    """The exchange (param bytes both ways) is charged once per k steps; the input reads every step."""
    one, ten = _k_sim(1, comm).rates(), _k_sim(10, comm).rates()
    assert ten.speed["J"] > one.speed["J"] * 1.5  # the 100 MB exchange at 100 MB/s dominated the step
    per_step = {k: r.cross_node_Bps["J"] / (r.speed["J"] / (1 if comm == "ps" else 2))
                for k, r in ((1, one), (10, ten))}
    read = 1e6 * (1 if comm == "ps" else 2)  # the remote input reads, unchanged by k
    assert per_step[10] - read == pytest.approx((per_step[1] - read) / 10, rel=1e-9)


def test_exchange_every_k_steps_amortises_rpc_and_ps_update():
    """With no network cost (PS on the worker's node) k still divides the RPC and update time."""
    def t(k):
        zoo = make_zoo(m=model_dict(step_compute_s=0.2, ps_update_s=0.05))
        cluster = make_cluster(nodes_per_rack=1, overheads={"rpc_s": 0.01})
        sim = Simulator(cluster, [JobSpec("J", "m", 0.0, 1, 1, exchange_every=k)], zoo, seed=0)
        sim.apply(Decision(place={"J/ps0": 0, "J/w0": 0}))
        return 1.0 / sim.rates().speed["J"]
    assert t(1) == pytest.approx(0.2 + 0.02 + 0.05)
    assert t(5) == pytest.approx(0.2 + (0.02 + 0.05) / 5)


def test_data_fraction_shortens_the_epoch_and_the_job():
    zoo = make_zoo(m=model_dict(steps_per_epoch=1000))
    sim = Simulator(make_cluster(), [JobSpec("A", "m", 0.0, 1, 1),
                                     JobSpec("B", "m", 0.0, 1, 1, data_fraction=0.1)], zoo, seed=0)
    a, b = sim.jobs["A"], sim.jobs["B"]
    assert (a.steps_per_epoch, b.steps_per_epoch) == (1000, 100)
    assert b.total_steps * 10 == a.total_steps
    assert sim.job_view(b).steps_per_epoch == 100

"""Mechanism tests: each reproduces a figure or table of a seed document with real numbers.

Seeds (files in /work/shared/seeds/): 000 DLTAP, 001 D²S, 002 lecture notes (DRF / Optimus /
Gandiva), 004 FlowCon. Every cluster and model is built inline (tests/helpers.py), so the tests do not
depend on the preset YAML files.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import dlclusterenv
from dlclusterenv.api import Decision, DecisionError, JobView
from dlclusterenv.config import LossCurve, ModelSpec
from dlclusterenv.comm import pattern

from helpers import make_cluster, make_sim, make_zoo, model_dict

REL = 1e-9


def _nodes(sim, job_id):
    job = sim.jobs[job_id]
    ps = np.array([t.node for t in job.ps_tasks()], dtype=np.int64)
    w = np.array([t.node for t in job.worker_tasks()], dtype=np.int64)
    return ps, w


def _state(sim):
    """Everything a failed Decision must leave untouched."""
    return (
        sim.used_cpu.copy(),
        sim.used_mem.copy(),
        sim.used_bw.copy(),
        [list(g) for g in sim.gpu_tasks],
        sim.gpu_mode.copy(),
        {
            jid: (
                j.status,
                j.num_ps,
                j.num_workers,
                j.paused_until,
                tuple(j.locality),
                {tid: (t.node, t.gpu, t.cpu_limit) for tid, t in j.tasks.items()},
            )
            for jid, j in sim.jobs.items()
        },
    )


def _assert_same_state(a, b):
    for x, y in zip(a[:3], b[:3]):
        np.testing.assert_array_equal(x, y)
    assert a[3] == b[3]
    np.testing.assert_array_equal(a[4], b[4])
    assert a[5] == b[5]


# --------------------------------------------------------------------------------------- DLTAP
DLTAP_PLACEMENTS = {
    # seed 000 §2 "Problem Statement", Fig. 1. s1, s2, s3 = r0-n0, r0-n1, r0-n2;
    # wk1, wk2, wk3 = J/w0, J/w1, J/w2; ps1, ps2 = J/ps0, J/ps1.
    "a": {"J/w0": "r0-n0", "J/w2": "r0-n0", "J/ps0": "r0-n1", "J/ps1": "r0-n1", "J/w1": "r0-n2"},
    "b": {"J/w0": "r0-n0", "J/w2": "r0-n0", "J/ps0": "r0-n0", "J/ps1": "r0-n1", "J/w1": "r0-n2"},
}


def _dltap(scenario):
    cluster = make_cluster(nodes_per_rack=3, cpus=8, nic_MBps=125)  # gigabit Ethernet (seed 000 §4)
    # modified LeNet5 with 3 million parameters (seed 000 §2): 12 MB of float32
    zoo = make_zoo(lenet=model_dict(param_bytes=12e6, step_compute_s=0.3, step_overhead_s=0.01))
    sim = make_sim(cluster, zoo, [("J", "lenet", 2, 3)])
    sim.apply(Decision(place=dict(DLTAP_PLACEMENTS[scenario])))
    return sim


def test_dltap_fig1_cross_node_pairs_and_speed():
    """DLTAP (seed 000 §2, Fig. 1): 2 PS + 3 workers on s1..s3.

    (a) wk1, wk3 on s1; ps1, ps2 on s2; wk2 on s3: 6 cross-node worker-PS transmissions per step.
    (b) wk1, wk3, ps1 on s1; ps2 on s2; wk2 on s3: 4 cross-node and 2 inner-node.
    Each pair exchanges param_bytes / p both ways, so cross-node bytes per step = 2 * pairs * b.
    (b) trains faster and moves 4/6 of (a)'s cross-node bytes per step. Cross-node bytes per
    *second* are not compared: they also scale with speed (here (b) is 1.57x faster, so its
    bytes/s are 4.5% higher; the paper measured 12% lower with a compute-heavier job).
    """
    out = {}
    for sc in ("a", "b"):
        sim = _dltap(sc)
        job = sim.jobs["J"]
        assert job.status == "running"
        ps, w = _nodes(sim, "J")
        b = job.model.param_bytes / 2
        comm = pattern(job.model).plan(sim.cluster, job.model, job.spec.shard_nodes, ps, w)
        pairs = comm.cross_node / (2 * b)
        in_node = int((w[:, None] == ps[None, :]).sum())
        r = sim.rates()
        speed = r.speed["J"]
        out[sc] = (pairs, in_node, speed, r.cross_node_Bps["J"])
        # the engine's bytes/s are the per-step bytes at the job's speed (a step: one local batch
        # on each of the 3 workers)
        assert r.cross_node_Bps["J"] / speed * 3 == pytest.approx(comm.cross_node, rel=REL)

    (pa, ina, sa, bpsa), (pb, inb, sb, bpsb) = out["a"], out["b"]
    assert pa == pytest.approx(6) and ina == 0
    assert pb == pytest.approx(4) and inb == 2
    assert sb > sa
    # per-step cross-node bytes: 4/6 of (a)'s
    assert (bpsb / sb) / (bpsa / sa) == pytest.approx(4 / 6, rel=REL)
    # the busiest NIC carries 6 flows in (a) (s2 holds both PS) and 3 in (b) (s1 and s2)
    b = 6e6
    step_a = 0.3 + 0.01 + 6 * b / 125e6
    step_b = 0.3 + 0.01 + 3 * b / 125e6
    assert sa == pytest.approx(3 / step_a, rel=REL)
    assert sb == pytest.approx(3 / step_b, rel=REL)


# --------------------------------------------------------------------------------------- Optimus
OPTIMUS_PLACEMENTS = {
    # seed 002, Optimus Fig. 10; server1..3 = r0-n0..r0-n2; ps1, ps2 = J/ps0, J/ps1; w1..w4 = J/w0..3
    "a": {"J/ps0": 0, "J/w0": 0, "J/ps1": 1, "J/w1": 1, "J/w2": 2, "J/w3": 2},
    "b": {"J/ps0": 0, "J/ps1": 0, "J/w0": 0, "J/w1": 1, "J/w2": 2, "J/w3": 2},
    "c": {"J/ps0": 0, "J/w0": 0, "J/w1": 0, "J/ps1": 1, "J/w2": 1, "J/w3": 1},
}
OPTIMUS_TABLE = {  # "Units of data to transfer": ps1, ps2, worker1..worker4
    "a": (3, 3, 1, 1, 2, 2),
    "b": (3, 3, 0, 2, 2, 2),
    "c": (2, 2, 1, 1, 1, 1),
}


def _transfer_units(sim, job_id):
    """Per task, the number of remote peers: 1 unit = param_bytes / p, one worker-PS exchange."""
    ps, w = _nodes(sim, job_id)
    return tuple(int(x) for x in (ps[:, None] != w[None, :]).sum(axis=1)) + tuple(
        int(x) for x in (w[:, None] != ps[None, :]).sum(axis=1)
    )


def test_optimus_fig10_transfer_units_and_speed():
    """Optimus Fig. 10 (seed 002, table "Units of data to transfer"): 2 PS + 4 workers, 3 servers.

    The table's units follow from the placement; with a per-container PS bandwidth cap of 100 MB/s
    (well below the 1250 MB/s NICs) the step's transfer time is the busiest PS's units * b / cap,
    so (c), which puts the same number of PS and workers on each server, is fastest.
    """
    cluster = make_cluster(nodes_per_rack=3, cpus=32, nic_MBps=1250)
    zoo = make_zoo(
        resnet=model_dict(
            param_bytes=100e6,
            step_compute_s=1.0,
            step_overhead_s=0.02,
            ps_update_s=0.01,
            ps={"cpu": 1.0, "bw_MBps": 100.0},
        )
    )
    speeds = {}
    for sc, place in OPTIMUS_PLACEMENTS.items():
        sim = make_sim(cluster, zoo, [("J", "resnet", 2, 4)])
        sim.apply(Decision(place=dict(place)))
        assert sim.jobs["J"].status == "running"
        units = _transfer_units(sim, "J")
        assert units == OPTIMUS_TABLE[sc], sc
        speeds[sc] = sim.rates().speed["J"]
        b = 100e6 / 2
        step = 1.0 + 0.02 + 0.01 * 4 / 2 + max(units[:2]) * b / 100e6
        assert speeds[sc] == pytest.approx(4 / step, rel=REL), sc  # 4 local batches a step
    assert speeds["c"] > speeds["a"]
    assert speeds["c"] > speeds["b"]


# --------------------------------------------------------------------------------------- D²S
def test_d2s_data_locality_transfer_time_and_counters():
    """D²S (seed 001 Eq. 1, §4.1): 2 racks x 3 nodes, 100 MB/s inside a rack, 10 MB/s between racks.

    A worker whose input shard lives on r0-n0 reads input_bytes_per_step per step: nothing over the
    network when data-local, over the 100 MB/s NICs when rack-local (r0-n1), over the 10 MB/s uplinks
    when off-switch (r1-n0). Transfer time = bytes / bandwidth (Eq. 1). The PS sits with the worker
    and param_bytes is tiny, so reads dominate. job.locality counts [data-local, rack-local, off-switch].
    """
    cluster = make_cluster(racks=2, nodes_per_rack=3, cpus=16, nic_MBps=100, uplink_MBps=10)
    read = 10e6
    zoo = make_zoo(
        alexnet=model_dict(param_bytes=1e3, step_compute_s=0.5, input_bytes_per_step=read)
    )
    cases = {  # worker node: (read time per step, locality counters)
        "r0-n0": (0.0, [1, 0, 0]),
        "r0-n1": (read / 100e6, [0, 1, 0]),
        "r1-n0": (read / 10e6, [0, 0, 1]),
    }
    speeds = {}
    for node, (t_read, locality) in cases.items():
        sim = make_sim(cluster, zoo, [("J", "alexnet", 1, 1, (0,))])
        sim.apply(Decision(place={"J/ps0": node, "J/w0": node}))
        job = sim.jobs["J"]
        assert job.locality == locality, node
        r = sim.rates()
        speeds[node] = r.speed["J"]
        assert speeds[node] == pytest.approx(1 / (0.5 + t_read), rel=REL), node
        # remote reads are cross-node bytes; off-switch reads also cross the racks
        remote = read * speeds[node] if t_read else 0.0
        assert r.cross_node_Bps["J"] == pytest.approx(remote, rel=REL)
        off_switch = read * speeds[node] if node.startswith("r1") else 0.0
        assert r.cross_rack_Bps["J"] == pytest.approx(off_switch, rel=REL)
    assert speeds["r0-n0"] > speeds["r0-n1"] > speeds["r1-n0"]


# --------------------------------------------------------------------------------------- Gandiva
def _gandiva(util, mem_gb, *, alone=False, mode=None, time_slice_s=60.0):
    cluster = make_cluster(
        nodes_per_rack=1,
        cpus=48,
        gpus=1,
        gpu_memory_gb=24,  # P40 (seed 002, Table 1)
        nic_MBps=5000,
        overheads={"suspend_resume_s": 0.25, "time_slice_s": time_slice_s},
    )
    zoo = make_zoo(
        m=model_dict(
            compute_on="gpu",
            worker={"cpu": 1.0, "gpu": 1},
            gpu_util=util,
            gpu_mem_gb=mem_gb,
            param_bytes=1e6,
            step_compute_s=0.1,
        )
    )
    jobs = [("A", "m", 1, 1)] + ([] if alone else [("B", "m", 1, 1)])
    sim = make_sim(cluster, zoo, jobs)
    place = {"A/ps0": "r0-n0", "A/w0": ("r0-n0", 0)}
    if not alone:
        place.update({"B/ps0": "r0-n0", "B/w0": ("r0-n0", 0)})
    sim.apply(Decision(place=place, gpu_mode={"r0-n0/g0": mode} if mode else {}))
    return sim


def test_gandiva_table1_pack_vs_timeslice():
    """Gandiva Table 1 (seed 002): packing two low-utilisation jobs (VAE, 8.7% GPU) on one P40 beats
    time-slicing them (+412% in the paper); packing two high-utilisation ones (ResNet-50, 94%) loses
    (-13%). Time-slicing gives each job (1 - suspend_resume_s / time_slice_s) / 2 of its alone speed.
    """
    switch = 1.0 - 0.25 / 60.0
    agg = {}
    for name, util in (("low", 0.087), ("high", 0.94)):
        alone = _gandiva(util, 4.0, alone=True).rates().speed["A"]
        assert alone == pytest.approx(1 / 0.1, rel=REL)  # everything on one node: no network
        sl = _gandiva(util, 4.0).rates().speed
        for jid in ("A", "B"):
            assert sl[jid] == pytest.approx(switch / 2 * alone, rel=REL)
        pk = _gandiva(util, 4.0, mode="pack").rates().speed
        assert pk["A"] == pytest.approx(pk["B"], rel=REL)
        agg[name] = (sl["A"] + sl["B"], pk["A"] + pk["B"], alone)
    slice_low, pack_low, _ = agg["low"]
    slice_high, pack_high, _ = agg["high"]
    assert pack_low > slice_low
    assert pack_high < slice_high


@pytest.mark.parametrize("quantum", [30.0, 1.0])
def test_time_slice_s_sets_the_switch_loss(quantum):
    """`time_slice_s` away from its default 60 s: a shorter quantum switches more often, so each
    time-sliced job keeps (1 - suspend_resume_s / time_slice_s) / 2 of its alone speed."""
    alone = _gandiva(0.94, 4.0, alone=True).rates().speed["A"]
    sl = _gandiva(0.94, 4.0, time_slice_s=quantum).rates().speed
    assert [sl["A"], sl["B"]] == pytest.approx([(1 - 0.25 / quantum) / 2 * alone] * 2, rel=REL)


def test_gandiva_packing_beyond_gpu_memory_is_rejected():
    """Gandiva (seed 002): packing jobs whose memory exceeds the GPU's is not possible without paging;
    the engine refuses it (2 x 16 GB > 24 GB) and leaves the state untouched. Time-slicing is fine."""
    sim = _gandiva(0.087, 16.0)  # time-sliced: accepted
    assert sim.jobs["A"].status == sim.jobs["B"].status == "running"
    before = _state(sim)
    with pytest.raises(DecisionError, match=r"r0-n0/g0"):
        sim.apply(Decision(gpu_mode={"r0-n0/g0": "pack"}))
    _assert_same_state(before, _state(sim))
    # packing from the start is refused too
    with pytest.raises(DecisionError, match=r"32 GB > 24 GB"):
        _gandiva(0.087, 16.0, mode="pack")


# --------------------------------------------------------------------------------------- FlowCon
def _flowcon(jobs=("A", "B"), models=None, overheads=None):
    cluster = make_cluster(  # R320 (seed 004 §5.1)
        nodes_per_rack=1, cpus=8, memory_gb=16, nic_MBps=125, overheads=overheads
    )
    zoo = make_zoo(
        cnn=model_dict(param_bytes=1e3, step_compute_s=2.0, cpu_max=8.0),
        half=model_dict(param_bytes=1e3, step_compute_s=2.0, cpu_max=4.0),  # can use 4 cores
        thin=model_dict(
            param_bytes=1e3, step_compute_s=2.0, cpu_max=8.0, worker={"cpu": 0.5}, ps={"mem_gb": 0.2}
        ),
    )
    models = models or {}
    sim = make_sim(cluster, zoo, [(j, models.get(j, "cnn"), 1, 1) for j in jobs])
    sim.apply(Decision(place={t: "r0-n0" for j in jobs for t in (f"{j}/ps0", f"{j}/w0")}))
    return sim


def test_flowcon_equal_competition_and_soft_limits():
    """FlowCon (seed 004 §3): containers on one 8-core node. NA (no limits) = equal free
    competition: two CPU-bound jobs that each use all 8 cores alone run at half speed together.
    Limits 0.75 / 0.25 split the cores 3:1. Limits are soft (work-conserving): once B leaves, A with a
    0.25 limit still gets all 8 cores."""
    s = _flowcon(("A",)).rates().speed["A"]
    assert s == pytest.approx(1 / 2.0, rel=REL)

    sim = _flowcon()
    r = sim.rates()
    assert r.speed["A"] == pytest.approx(s / 2, rel=REL)
    assert r.speed["B"] == pytest.approx(s / 2, rel=REL)
    assert r.cpu_used[0] == pytest.approx(8.0)

    sim.apply(Decision(cpu_limits={"A/w0": 0.75, "B/w0": 0.25}))
    r = sim.rates()
    assert r.speed["A"] / r.speed["B"] == pytest.approx(3.0, rel=REL)
    assert r.speed["A"] == pytest.approx(0.75 * s, rel=REL)
    assert r.speed["B"] == pytest.approx(0.25 * s, rel=REL)

    sim.apply(Decision(cpu_limits={"A/w0": 0.25, "B/w0": 1.0}))
    r = sim.rates()
    assert r.speed["A"] == pytest.approx(0.25 * s, rel=REL)  # 2 of 8 cores while B competes
    assert r.speed["B"] == pytest.approx(0.75 * s, rel=REL)
    sim.apply(Decision(preempt=["B"]))  # B leaves the node
    assert sim.jobs["A"].tasks["A/w0"].cpu_limit == 0.25
    r = sim.rates()
    assert "B" not in r.speed
    assert r.speed["A"] == pytest.approx(s, rel=REL)
    assert r.cpu_used[0] == pytest.approx(8.0)

    # a competitor that can use only 4 cores: A's 0.25 limit (2 cores) yields to the 2 idle cores
    sim = _flowcon(("A", "C"), {"C": "half"})
    sim.apply(Decision(cpu_limits={"A/w0": 0.25}))
    r = sim.rates()
    assert r.speed["C"] == pytest.approx(1 / 2.0, rel=REL)  # all 4 of its cores: its alone speed
    assert r.speed["A"] == pytest.approx(0.5 * s, rel=REL)  # 2 (limit) + 2 (left idle by C) cores
    assert r.cpu_used[0] == pytest.approx(8.0)


def test_cpu_contention_costs_a_switch_per_cfs_slice():
    """FlowCon (seed 004 §5.3-5.5) gains makespan by shortening the overlap of jobs, which only
    costs something if free competition does: with cpu_switch_s each of k CPU-starved tasks on a
    node gets a CFS slice of max(latency / k, min_granularity) and loses one switch per slice.
    A job alone pays nothing; limits change shares, not the loss; utilisation still counts the
    cores as busy; 0 (the default) is ideal sharing."""
    o = {"cpu_switch_s": 0.001, "cpu_sched_latency_s": 0.024, "cpu_min_granularity_s": 0.003}
    alone = _flowcon(("A",), overheads=o).rates().speed["A"]
    assert alone == pytest.approx(1 / 2.0, rel=REL)  # one job: no time-slicing, no loss
    # k = 10: 24 ms / 10 is below the 3 ms floor
    for k, kept in ((2, 1 - 0.001 / 0.012), (3, 1 - 0.001 / 0.008), (10, 1 - 0.001 / 0.003)):
        jobs = tuple(f"J{i}" for i in range(k))
        thin = {j: "thin" for j in jobs}  # small reservations, so ten jobs fit the node
        r = _flowcon(jobs, thin, overheads=o).rates()
        assert [r.speed[j] for j in jobs] == pytest.approx([alone / k * kept] * k, rel=REL)
        assert r.cpu_used[0] == pytest.approx(8.0)  # lost time still keeps the cores busy
        ideal = _flowcon(jobs, thin).rates()
        assert [ideal.speed[j] for j in jobs] == pytest.approx([alone / k] * k, rel=REL)
    sim = _flowcon(overheads=o)
    sim.apply(Decision(cpu_limits={"A/w0": 0.75, "B/w0": 0.25}))
    r = sim.rates()
    kept = 1 - 0.001 / 0.012
    assert (r.speed["A"], r.speed["B"]) == pytest.approx((0.75 * alone * kept, 0.25 * alone * kept), rel=REL)
    # a competitor that gets all it wants (4 cores) is not time-sliced against: k = 1, no loss
    r = _flowcon(("A", "C"), {"C": "half"}, overheads=o).rates()
    assert (r.speed["A"], r.speed["C"]) == pytest.approx((alone / 2, 1 / 2.0), rel=REL)


@pytest.mark.parametrize("o, k, slice_s", [
    ({"cpu_sched_latency_s": 0.048}, 2, 0.024),  # the CFS period sets the slice: 48 ms / 2
    ({"cpu_sched_latency_s": 0.048}, 10, 0.0048),  # above the default 3 ms floor
    ({"cpu_min_granularity_s": 0.006}, 10, 0.006),  # the floor sets it: 24 ms / 10 < 6 ms
])
def test_cfs_period_and_floor_set_the_slice(o, k, slice_s):
    """`cpu_sched_latency_s` and `cpu_min_granularity_s` away from their defaults (the test above
    uses the defaults): each of k starved tasks loses cpu_switch_s per slice of
    max(latency / k, granularity)."""
    alone = _flowcon(("A",)).rates().speed["A"]
    jobs = tuple(f"J{i}" for i in range(k))
    r = _flowcon(jobs, {j: "thin" for j in jobs}, overheads={"cpu_switch_s": 0.001, **o}).rates()
    assert [r.speed[j] for j in jobs] == pytest.approx([alone / k * (1 - 0.001 / slice_s)] * k, rel=REL)


# --------------------------------------------------------------------------------------- migration
CKPT_S, CKPT_MBPS, PARAM = 10.0, 200.0, 400e6
PAUSE = CKPT_S + PARAM / (CKPT_MBPS * 1e6)  # 12 s


def _elastic_sim(checkpoint_s=CKPT_S, checkpoint_MBps=CKPT_MBPS):
    cluster = make_cluster(
        nodes_per_rack=2,
        cpus=8,
        nic_MBps=1250,
        overheads={"checkpoint_s": checkpoint_s, "checkpoint_MBps": checkpoint_MBps},
    )
    zoo = make_zoo(m=model_dict(param_bytes=PARAM, step_compute_s=1.0))
    sim = make_sim(cluster, zoo, [("J", "m", 1, 1)], tick_s=100.0)
    sim.apply(Decision(place={"J/ps0": "r0-n0", "J/w0": "r0-n0"}))
    return sim


def _steps_over_tick(sim):
    before, t0 = sim.jobs["J"].steps_done, sim.now
    sim.advance()
    assert sim.now == pytest.approx(t0 + 100.0)
    return sim.jobs["J"].steps_done - before


def test_migration_pauses_for_checkpoint_restore():
    """Gandiva migration / Optimus re-placement (seed 002): moving a running job's worker costs a
    checkpoint + restore, checkpoint_s + param_bytes / checkpoint_MBps = 10 + 400 MB / 200 MB/s = 12 s
    with no progress."""
    sim = _elastic_sim()
    s0 = sim.rates().speed["J"]
    assert _steps_over_tick(sim) == pytest.approx(100.0 * s0, rel=REL)  # no pause at first start

    sim.apply(Decision(place={"J/w0": "r0-n1"}))  # migrate the worker
    assert sim.jobs["J"].paused_until == pytest.approx(sim.now + PAUSE)
    assert "J" not in sim.rates().speed  # paused: no progress
    gained = _steps_over_tick(sim)
    s1 = sim.rates().speed["J"]  # new placement: worker and PS now exchange 400 MB per step
    assert s1 < s0
    assert gained == pytest.approx((100.0 - PAUSE) * s1, rel=REL)


@pytest.mark.parametrize("ckpt_s, ckpt_MBps", [(5.0, CKPT_MBPS), (CKPT_S, 100.0), (0.0, 400.0)])
def test_checkpoint_overheads_set_the_migration_pause(ckpt_s, ckpt_MBps):
    """`checkpoint_s` and `checkpoint_MBps` away from their defaults (10 s, 200 MB/s, which the test
    above gives): a migrated worker pauses checkpoint_s + param_bytes / checkpoint_MBps."""
    sim = _elastic_sim(ckpt_s, ckpt_MBps)
    sim.advance()
    sim.apply(Decision(place={"J/w0": "r0-n1"}))
    assert sim.jobs["J"].paused_until == pytest.approx(sim.now + ckpt_s + PARAM / (ckpt_MBps * 1e6))


def test_resize_pauses_for_checkpoint_restore():
    """Optimus (seed 002) resizes a job by checkpoint and restart: changing (p, w) via
    Decision(allocate=...) pauses progress for the same 12 s."""
    sim = _elastic_sim()
    _steps_over_tick(sim)
    sim.apply(Decision(allocate={"J": (1, 2)}, place={"J/w1": "r0-n0"}))
    job = sim.jobs["J"]
    assert (job.num_ps, job.num_workers) == (1, 2) and job.status == "running"
    assert job.paused_until == pytest.approx(sim.now + PAUSE)
    gained = _steps_over_tick(sim)
    s2 = sim.rates().speed["J"]
    assert s2 == pytest.approx(2.0, rel=REL)  # 1 s of compute split over 2 workers, all local
    assert gained == pytest.approx((100.0 - PAUSE) * s2, rel=REL)

    # same (p, w) again: nothing to restart, no pause
    sim.apply(Decision(allocate={"J": (1, 2)}))
    assert job.paused_until <= sim.now
    assert _steps_over_tick(sim) == pytest.approx(100.0 * s2, rel=REL)


# --------------------------------------------------------------------------------------- bad input
def _two_job_sim():
    cluster = make_cluster(nodes_per_rack=2, cpus=8, memory_gb=64)
    zoo = make_zoo(m=model_dict(worker={"cpu": 3.0}, ps={"cpu": 1.0}))
    sim = make_sim(cluster, zoo, [("A", "m", 1, 1), ("B", "m", 1, 3)])
    sim.apply(Decision(place={"A/ps0": "r0-n0", "A/w0": "r0-n0"}, cpu_limits={"A/w0": 0.5}))
    return sim


@pytest.mark.parametrize(
    "decision, pattern",
    [
        (Decision(place={"A/w7": "r0-n1"}), r"unknown task 'A/w7'"),
        (Decision(place={"Z/w0": "r0-n1"}), r"unknown task 'Z/w0'"),
        # ids that only look like existing ones (A has ps0 and w0; B has w0..w2)
        (Decision(place={"A/w00": "r0-n1"}), r"unknown task 'A/w00'"),
        (Decision(place={"B/ps0": "r0-n1", "B/w01": "r0-n1"}), r"unknown task 'B/w01'"),
        (Decision(cpu_limits={"A/ps00": 0.5}), r"unknown task 'A/ps00'"),
        (Decision(place={"A/W0": "r0-n1"}), r"unknown task 'A/W0'"),
        (Decision(place={"B/ps0": "r0-n1", "B/w0": "r9-n9"}), r"unknown node 'r9-n9'"),
        (Decision(place={"B/ps0": "r0-n1", "B/w0": 5}), r"B/w0.*node index 5 out of range"),
        # r0-n0 holds A (4 cores); B's 3 workers need 9 more: 13 > 8
        (
            Decision(place={"B/ps0": "r0-n1", "B/w0": "r0-n0", "B/w1": "r0-n0", "B/w2": "r0-n0"}),
            r"node r0-n0: CPU over capacity \(13 > 8\).*B/w0",
        ),
        # valid limits, then an unknown task in the same decision
        (Decision(cpu_limits={"A/w0": 0.9, "B/w9": 0.5}), r"unknown task 'B/w9'"),
        (Decision(cpu_limits={"A/w0": 1.5}), r"A/w0"),
        (Decision(allocate={"A": (1, 2)}, place={"A/w1": "r0-n0"}, preempt=["Q"]), r"'Q'"),
    ],
)
def test_bad_decisions_raise_and_change_nothing(decision, pattern):
    """Bad input (DESIGN.md): an invalid Decision raises DecisionError naming the task / node, and
    is rejected as a whole: used CPU/memory/bandwidth, placements, limits and statuses are unchanged."""
    sim = _two_job_sim()
    before = _state(sim)
    rates_before = dict(sim.rates().speed)
    with pytest.raises(DecisionError, match=pattern):
        sim.apply(decision)
    _assert_same_state(before, _state(sim))
    assert sim.rates().speed == rates_before
    np.testing.assert_array_equal(sim.used_cpu, [4.0, 0.0])


# A user scheduler's malformed Decision (badin16): before, a float count was truncated and applied
# ((1.7, 2.9) ran as (1, 2)), "2" and True were read as 2 and 1, inf raised a raw OverflowError,
# a non-string id or a list for `place` an AttributeError, an unhashable job id a TypeError, a bare
# job id for `preempt` was read letter by letter, and True passed as a CPU limit or a wake time.
@pytest.mark.parametrize(
    "decision, pattern",
    [
        (Decision(allocate={"B": (1.7, 2.9)}), r"^allocate\['B'\]: expected \(num_ps, num_workers\), two integers, got \(1\.7, 2\.9\)"),
        (Decision(allocate={"B": (1, 2.0)}), r"^allocate\['B'\]: .*two integers"),
        (Decision(allocate={"B": ("1", "2")}), r"^allocate\['B'\]: .*two integers"),
        (Decision(allocate={"B": (True, 2)}), r"^allocate\['B'\]: .*two integers"),
        (Decision(allocate={"B": (1, math.inf)}), r"^allocate\['B'\]: .*two integers, got \(1, inf\)"),
        (Decision(allocate={"B": "12"}), r"^allocate\['B'\]: .*two integers"),
        # a shape the empty cluster cannot hold never runs (10**9 tasks were built before)
        (Decision(allocate={"A": (1, 10**9)}), r"^allocate\['A'\]: 1 PS and 1000000000 workers can never "
                                               r"run: needs 3e\+09 CPU cores, the cluster 'inline' has 16$"),
        (Decision(allocate={"B": (8, 3)}), r"^allocate\['B'\]: 8 PS and 3 workers can never run: needs "
                                           r"17 CPU cores, the cluster 'inline' has 16$"),
        (Decision(place={0: "r0-n1"}), r"^place: unknown task 0$"),
        (Decision(cpu_limits={("A", "w0"): 0.5}), r"^cpu_limits: unknown task \('A', 'w0'\)$"),
        (Decision(cpu_limits={"A/w0": True}), r"^cpu_limits\['A/w0'\]: must be in \(0, 1\], got True$"),
        (Decision(gpu_mode={0: "pack"}), r"^gpu_mode: unknown GPU 0"),
        (Decision(preempt=[["A"]]), r"^preempt: no active job \['A'\]$"),
        (Decision(preempt="A"), r"^preempt: expected a list of job ids, got 'A'$"),
        (Decision(place=[("B/w0", "r0-n1")]), r"^place: expected a dict, got list"),
        (Decision(allocate=None), r"^allocate: expected a dict, got NoneType"),
        (Decision(wake_at=True), r"^wake_at: must be a time in seconds, got True$"),
        ({"place": {"B/w0": "r0-n1"}}, r"^expected a Decision, got dict$"),
        (None, r"^expected a Decision, got NoneType$"),
    ],
)
def test_malformed_decisions_name_the_field_and_change_nothing(decision, pattern):
    sim = _two_job_sim()
    before = _state(sim)
    wakes = list(sim._wakes)
    with pytest.raises(DecisionError, match=pattern):
        sim.apply(decision)
    _assert_same_state(before, _state(sim))
    assert sim._wakes == wakes


def test_more_workers_than_gpus_is_an_allocation_that_can_run():
    """GPU workers time-slice shared GPUs (DLClusterShare-v0 places 13 workers on `tiny`'s 8 GPUs),
    so an allocation is bounded by CPU, memory and bandwidth, not by the GPU count; a workload's
    job asking for more GPUs than the cluster has is still a config error (its request is a count
    of GPUs)."""
    sim = dlclusterenv.make_sim("tiny", 0)
    while not sim.active_jobs():
        sim.advance()
    job = sim.active_jobs()[0]
    assert job.num_ps >= 1 and 13 > sim.cluster.n_gpus
    sim.apply(Decision(allocate={job.job_id: (1, 13)}))
    assert (job.num_ps, job.num_workers) == (1, 13)


def test_numpy_numbers_in_a_decision_are_their_values():
    """np.int64 counts and np.float32 limits / wake times act as the Python numbers (np.float32
    was refused as a CPU limit: "must be in (0, 1], got np.float32(0.5)")."""
    states = []
    for i, f in ((int, float), (np.int64, np.float32)):
        sim = _two_job_sim()
        sim.apply(Decision(allocate={"B": (i(1), i(2))}, place={"B/ps0": i(1), "B/w0": "r0-n1"},
                           cpu_limits={"A/w0": f(0.25)}, wake_at=f(500.0)))
        states.append((_state(sim), sim._wakes))
    _assert_same_state(states[0][0], states[1][0])
    assert states[0][1] == states[1][1] == [500.0]


def _full_node_sim():
    """A (1 PS + 1 worker, 4 cores) fills node r0-n0 of 4-core nodes; B (1 PS, 3 workers) waits."""
    cluster = make_cluster(nodes_per_rack=3, cpus=4, memory_gb=64)
    zoo = make_zoo(m=model_dict(worker={"cpu": 3.0}, ps={"cpu": 1.0}))
    sim = make_sim(cluster, zoo, [("A", "m", 1, 1), ("B", "m", 1, 3)])
    sim.apply(Decision(place={"A/ps0": "r0-n0", "A/w0": "r0-n0"}))
    return sim


def test_capacity_check_names_the_first_node_over_in_node_order():
    """apply checks only the nodes a decision touches (no other can pass a limit; branch
    tires10) and names the first one over capacity in node order, as a check of every node
    does, whatever the order of the placements."""
    sim = _full_node_sim()
    before = _state(sim)
    with pytest.raises(DecisionError, match=r"node r0-n0: CPU over capacity \(7 > 4\).*B/w0"):
        sim.apply(Decision(place={"B/ps0": "r0-n1", "B/w1": "r0-n1", "B/w2": "r0-n1", "B/w0": "r0-n0"}))
    _assert_same_state(before, _state(sim))


def test_capacity_check_counts_what_leaves_a_node_first():
    """A decision that preempts the job filling a node may place on that node what fits once
    it has left (the check's node values take the leaving tasks off, then add the new ones, as
    the commit does)."""
    sim = _full_node_sim()
    sim.apply(Decision(preempt=["A"], place={"B/ps0": "r0-n0", "B/w0": "r0-n0", "B/w1": "r0-n1",
                                             "B/w2": "r0-n2"}))
    np.testing.assert_array_equal(sim.used_cpu, [4.0, 3.0, 3.0])


# --------------------------------------------------------------------------------------- honesty
def test_observation_honesty():
    """Observation honesty (issue #2; Optimus fits its loss curve from observed points, seed 002/003):
    the view shows noisy loss only at completed epochs and speeds only for (p, w) that ran; the true
    curve (b0, b1, b2) and the convergence point are not reachable from a JobView; no oracle unless
    asked for."""
    cluster = make_cluster(nodes_per_rack=2, cpus=16)
    zoo = make_zoo(
        m=model_dict(
            param_bytes=1e3,
            step_compute_s=1.0,
            steps_per_epoch=30,
            loss={"noise": 0.05},
            convergence={"rel_delta": 0.001, "max_epochs": 1000},
        )
    )
    sim = make_sim(cluster, zoo, [("J", "m", 1, 1)], tick_s=100.0)
    sim.apply(Decision(place={"J/ps0": 0, "J/w0": 0}))
    for _ in range(2):
        sim.advance()  # 200 s at 1 step/s: 200 steps = 6 complete epochs (180 steps)
    v = sim.view()
    assert v.oracle is None
    jv = v.jobs[0]
    assert jv.steps_done == pytest.approx(200.0, rel=REL)
    assert jv.epochs_done == 6
    assert [k for k, _ in jv.observed_loss] == [1, 2, 3, 4, 5, 6]
    job = sim.jobs["J"]
    true = [job.true_loss(k) for k in range(1, 7)]
    observed = [x for _, x in jv.observed_loss]
    assert observed != true  # noisy ...
    assert np.allclose(observed, true, rtol=0.3)  # ... but near the truth
    assert set(jv.observed_speed) == {(1, 1)}
    assert jv.observed_speed[(1, 1)] == pytest.approx(1.0, rel=0.1)

    # grow to (1, 2): the view gains a measured speed for (1, 2) only once it has run
    sim.apply(Decision(allocate={"J": (1, 2)}, place={"J/w1": 0}))
    assert set(sim.view().jobs[0].observed_speed) == {(1, 1)}
    sim.advance()
    assert set(sim.view().jobs[0].observed_speed) == {(1, 1), (1, 2)}

    # nothing in a JobView exposes the hidden truth
    names = {f.name for f in dataclasses.fields(JobView)}
    # (the job's stopping threshold rel_delta is the user's rule, so it is shown; the curve is not)
    hidden = {"b0", "b1", "b2", "loss", "loss_curve", "convergence", "total_steps", "total_epochs",
              "remaining_steps", "model_spec"}
    assert not names & hidden
    jv = sim.view().jobs[0]
    for name in hidden:
        assert not hasattr(jv, name), name
    for f in dataclasses.fields(JobView):
        value = getattr(jv, f.name)
        assert not isinstance(value, (ModelSpec, LossCurve)), f.name
        for item in value if isinstance(value, tuple) else ():
            assert not isinstance(item, (ModelSpec, LossCurve)), f.name
            if dataclasses.is_dataclass(item):
                for g in dataclasses.fields(item):
                    assert not isinstance(getattr(item, g.name), (ModelSpec, LossCurve))
    # the oracle is there only when asked for
    ov = sim.view(oracle=True).oracle
    assert ov is not None and ov.total_steps("J") == job.total_steps
    assert math.isfinite(jv.first_start_s) and jv.first_start_s == 0.0


def test_rpc_cost_makes_more_ps_eventually_slower():
    """Optimus' speed model (seed 003) has t4*p and t3*w terms: per step a worker talks to each PS
    and a PS serves each worker, at a fixed cost per round trip. With it, adding PS to a one-node
    job first helps (the PS update splits) and then hurts, so marginal gains turn negative."""
    cluster = make_cluster(nodes_per_rack=1, cpus=1000, memory_gb=10_000, overheads={"rpc_s": 0.01})
    zoo = make_zoo(m=model_dict(param_bytes=1e6, step_compute_s=0.4, ps_update_s=0.2))
    speeds = []
    for p in (1, 2, 4, 32):
        sim = make_sim(cluster, zoo, [("J", "m", p, 2)])
        sim.apply(Decision(place={f"J/ps{i}": 0 for i in range(p)} | {"J/w0": 0, "J/w1": 0}))
        speeds.append(sim.rates().speed["J"])
    # step = 0.4 + 0.2*2/p + 0.01*(p + 2), two local batches a step (weak scaling)
    want = [2 / (0.4 + 0.4 / p + 0.01 * (p + 2)) for p in (1, 2, 4, 32)]
    assert speeds == pytest.approx(want, rel=1e-9)
    assert speeds[1] > speeds[0] and speeds[3] < speeds[2]

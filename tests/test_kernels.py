"""_kernels.rates is the numpy code it replaced, bit for bit.

The oracle below is speed.compute_rates' arithmetic as it was in numpy before the kernel (main at
6bedb58, with its waterfill / cpu_split / cpu_contention), copied unchanged but for returning its
arrays. At every change of the rates of runs that between them reach every section of the model
(contended CPUs with soft limits and context-switch costs, parameter servers, async jobs, shared
GPUs time-sliced per GPU and per server, packed GPUs with the symmetric model and with Gavel's
pairs, CPU-bound workers), every array and total the engine reads must have the same bytes; the
test also fails if a section is never reached. Whole-run pins: test_engine_identity.py and
others."""

from __future__ import annotations

import collections
import functools
from unittest import mock

import numpy as np
import pytest

import baselines
import dlclusterenv
from dlclusterenv import sim as sim_mod
from dlclusterenv._kernels import (EVERY, GPU, MESSAGES, NPS, NW, OMEGA, OVERHEAD, PHI, PS_REF, SYNC, TASK_TIME,
                                   UPDATE, UTIL, W_REF, XNODE, XRACK, pairwise_sum)
from dlclusterenv.speed import PlanStack, _cluster_consts, compute_rates
from dlclusterenv.workload import load_scenario

(_NPS, _NW, _SYNC, _OVERHEAD, _UPDATE, _PS_REF, _UTIL, _W_REF, _TASK_TIME, _MESSAGES, _PHI, _OMEGA, _EVERY,
 _XNODE, _XRACK, _GPU) = (NPS, NW, SYNC, OVERHEAD, UPDATE, PS_REF, UTIL, W_REF, TASK_TIME, MESSAGES, PHI, OMEGA,
                          EVERY, XNODE, XRACK, GPU)


# ----------------------------------------------------------------------------- the numpy oracle
def waterfill(capacity: float, caps: np.ndarray) -> np.ndarray:
    """Max-min fair split of `capacity` among claimants each wanting at most `caps`."""
    out = np.zeros_like(caps)
    order = np.argsort(caps, kind="stable")
    left, n = capacity, len(caps)
    for k, i in enumerate(order):
        share = left / (n - k)
        give = min(caps[i], share)
        out[i] = give
        left -= give
    return out


def cpu_split(capacity: float, want: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Soft, work-conserving limits: fair share up to each limit, then the rest to whoever wants."""
    if want.sum() <= capacity:
        return want.copy()
    first = waterfill(capacity, np.minimum(want, limit * capacity))
    rest = capacity - first.sum()
    if rest > 1e-12:
        first += waterfill(rest, want - first)
    return first


def cpu_contention(
    got: np.ndarray, want: np.ndarray, t_node: np.ndarray, contended: np.ndarray, overheads: Overheads
) -> np.ndarray:
    """Cores each task turns into work, less what context switching costs on contended nodes.

    Why: FlowCon (seed 004) gains makespan "by reducing the overlap between jobs" (Sec. 5.3-5.4) and
    sees jitter "as a result of uncontrolled resource competition" (Sec. 5.5.1); under ideal
    processor sharing overlap is free. On a node whose tasks want more cores than it has, the k
    tasks that get less than they want are time-sliced on every core (DL frameworks run a thread
    per core); CFS gives each a slice of max(latency / k, min_granularity) and every slice ends in a
    switch that costs `cpu_switch_s` of work, so each of the node's tasks keeps 1 - cpu_switch_s /
    slice of its cores. Soft limits (work-conserving) leave the capped tasks runnable, so the loss
    depends on how many jobs overlap, not on the limits. `cpu_switch_s = 0` (the default) is ideal
    sharing. Cores used (utilisation) still count the lost time: the cores are busy.
    """
    o = overheads
    if o.cpu_switch_s <= 0 or not len(contended):
        return got
    eff = got.copy()
    for node in contended:
        sel = np.flatnonzero(t_node == node)
        k = int((got[sel] < want[sel] * (1 - 1e-9)).sum())
        if k >= 2:
            slice_s = max(o.cpu_sched_latency_s / k, o.cpu_min_granularity_s)
            eff[sel] *= max(1.0 - o.cpu_switch_s / slice_s, 0.0)
    return eff



def numpy_rates(cluster, jobs, gpu_mode, overheads, packing, st):
    """compute_rates' numpy arithmetic over a PlanStack (main at 6bedb58): its arrays, totals and
    which sections ran."""
    n, cc = cluster.n_nodes, _cluster_consts(cluster)
    n_link, cap = cc.n_link, cc.cap
    n_jobs = len(jobs)
    arr, k = st.gathered()
    shared_packed = []
    n_ps, n_w = k[:, _NPS].astype(np.int64), k[:, _NW].astype(np.int64)
    # Sections that cannot change a speed are skipped (no contended node: no water-filling; no
    # PS job: no PS factor, RPCs or update; every worker alone on its GPU: factor 1; all sync: no
    # per-worker loops); what is computed keeps the full model's operations in their order, so
    # the rates are the same bits either way (tests/test_engine_identity.py).
    any_ps = bool(n_ps.any())
    # ---- CPU: max-min fair shares with soft limits, only contended nodes need water-filling
    t_node, want = arr["task_node"], arr["want"]
    total = np.bincount(t_node, weights=want, minlength=n)
    contended = np.flatnonzero(total > cc.cpu_cap)
    if len(contended):
        got = want.copy()
        limit = arr["limit"]
        for node in contended:
            sel = np.flatnonzero(t_node == node)
            got[sel] = cpu_split(float(cluster.cpus[node]), want[sel], limit[sel])
        cpu_used = np.bincount(t_node, weights=got, minlength=n)
    else:  # every task gets the cores it wants
        got, cpu_used = want, total
    eff = cpu_contention(got, want, t_node, contended, overheads)
    # ---- per-job constants, and per-worker arrays in job order
    sync = k[:, _SYNC] > 0
    all_sync = bool(sync.all())
    overhead, update, ps_ref = k[:, _OVERHEAD], k[:, _UPDATE], k[:, _PS_REF]
    is_w = arr["is_worker"]
    if any_ps and len(contended):
        # PS factor: the most CPU-starved PS of the job (1 for all-reduce jobs, which have none;
        # 1 for all when no node is contended: each PS gets the cores it wants, its reference)
        ps_idx = np.flatnonzero(~is_w)
        ps_job = np.repeat(np.arange(n_jobs), n_ps)
        ratio = np.where(ps_ref[ps_job] > 0, np.minimum(1.0, eff[ps_idx] / np.maximum(ps_ref[ps_job], 1e-300)), 1.0)
        ps_f = np.ones(n_jobs)
        np.minimum.at(ps_f, ps_job, ratio)
        ps_f = np.maximum(ps_f, 1e-9)
    # worker factors: GPU share (alone / time-sliced / packed) or CPU cores over the reference
    w_job = np.repeat(np.arange(n_jobs), n_w) if not all_sync else None
    w_gpu = arr["w_gpu"]
    alone = False
    if w_gpu.min() >= 0:  # every worker computes on a GPU
        cnt = np.bincount(w_gpu, minlength=cluster.n_gpus)
        alone = cnt.max() <= 1
    if alone:  # each on a GPU of its own: its factor is 1 (x / 1.0 is x)
        c_w = arr["w_compute"]
    else:
        if w_job is None:
            w_job = np.repeat(np.arange(n_jobs), n_w)
        w_idx = np.flatnonzero(is_w)
        on_gpu = w_gpu >= 0
        g = np.where(on_gpu, w_gpu, 0)
        n_slots = max(cluster.n_gpus, int(g.max()) + 1)
        util = k[w_job, _UTIL]
        cnt = np.bincount(g[on_gpu], minlength=n_slots)
        util_sum = np.bincount(g[on_gpu], weights=util[on_gpu], minlength=n_slots)
        mode = np.zeros(n_slots, np.int8)
        k_modes = min(len(gpu_mode), n_slots)
        mode[:k_modes] = gpu_mode[:k_modes]
        switch = 1.0 - min(overheads.suspend_resume_s / overheads.time_slice_s, 1.0)
        share = np.maximum(cnt[g], 1)
        if overheads.time_slice == "server":
            # a node's time-sliced workers rotate over its time-sliced GPUs that hold workers: each
            # gets G / T of a GPU (1 where T = G: each alone, no rotation); packed GPUs keep theirs
            sliced = np.where(mode == 0, cnt, 0)
            pool = np.arange(n_slots) + cluster.n_nodes  # a slot past the cluster's GPUs: its own
            pool[: cluster.n_gpus] = cluster.gpu_node
            t_n = np.bincount(pool, weights=sliced)
            g_n = np.bincount(pool, weights=sliced > 0)
            w_pool = pool[g]
            share = np.where(on_gpu & (mode[g] == 0), t_n[w_pool] / np.maximum(g_n[w_pool], 1.0), share)
        # profiles.packing_speed, vectorised: (1 - eps) * min(1, 1 / sum of utilisations) ** gamma
        packed = (1.0 - packing.eps) * np.minimum(1.0, 1.0 / np.maximum(util_sum[g], 1e-12)) ** packing.gamma
        shared_packed = np.flatnonzero((cnt[: cluster.n_gpus] >= 2) & (mode[: cluster.n_gpus] == 1))
        if packing.colocation is not None and len(shared_packed):
            gavel = [j.model.gavel_job for j in jobs]
            for gid in shared_packed:
                ws = np.flatnonzero(on_gpu & (g == gid))
                names = [gavel[w_job[i]] for i in ws]
                if None not in names:
                    gpu = cluster.node_gpu_type[cluster.gpu_node[gid]]
                    packed[ws] = packing.colocation.factors(gpu, names)
        f_gpu = np.where(share == 1, 1.0, np.where(mode[g] == 1, packed, switch / share))
        w_ref = k[w_job, _W_REF]
        f_cpu = np.where(w_ref > 0, eff[w_idx] / np.where(w_ref > 0, w_ref, 1.0), 1.0)
        f = np.maximum(np.where(on_gpu, f_gpu, f_cpu), 1e-9)
        c_w = arr["w_compute"] / f  # each worker's, slowed by its share
    # ---- links: the sparse (job, link) incidence, one entry per link a job uses; each link
    # direction is shared equally per flow. A job's network time is its busiest NIC or uplink (or
    # its slowest capped connection); GPU transfers are staged through the host path, so its
    # busiest host path adds to it. Sums run in job order, as the dense jobs x links sums did.
    e_link, e_bytes, e_flows = arr["links"], arr["nbytes"], arr["flows"]
    flows_total = np.bincount(e_link, weights=e_flows, minlength=n_link)
    t_entry = (e_bytes * flows_total[e_link] / cap[e_link]) / e_flows
    net_e = e_link < cc.ib
    # per-job maxima over each job's run of entries (0 where it has none of the kind)
    counts = st.entry_counts
    has = counts > 0
    starts = st.ends("entry")[:-1][has]
    net, host = np.zeros(n_jobs), np.zeros(n_jobs)
    if len(starts):
        net[has] = np.maximum.reduceat(np.where(net_e, t_entry, 0.0), starts)
        host[has] = np.maximum.reduceat(np.where(net_e, 0.0, t_entry), starts)
    net = np.maximum(net, k[:, _TASK_TIME])
    latency = cluster.config.network.latency_s * k[:, _MESSAGES]
    # ---- step time of one local batch on every worker. Communication (and the PS update, which
    # MXNet and TF pipeline per layer) overlaps the backward pass: up to `overlap` of the compute
    # hides up to `overlap_max` of it (DDP-style buckets; fitted on Pollux, `dlcluster fidelity`).
    # Per step a worker makes p request/response round trips and a PS serves w of them, each with
    # a fixed RPC cost: Optimus' t4*p and t3*w terms.
    phi, omega = k[:, _PHI], k[:, _OMEGA]
    comm = net + host + latency
    w_off = st.ends("worker")[:-1]
    # sync waits for the slowest worker, and its PS apply every worker's gradient
    slowest = np.maximum.reduceat(c_w, w_off)
    if any_ps:
        # the RPCs and the PS update happen once per exchange, every k steps (comm is already per step)
        every = k[:, _EVERY]
        rpc = overheads.rpc_s * np.where(n_ps > 0, n_ps + n_w, 0) / every
        upd = update / np.maximum(n_ps, 1)
        if len(contended):  # (x / 1.0 is x)
            upd = upd / ps_f
        upd = np.where(n_ps > 0, upd, 0.0) / every
        x_sync = comm + upd * n_w
        t_fixed = slowest + overhead + rpc
    else:  # no RPCs and no update: their terms are 0.0, and a + 0.0 is a
        x_sync = comm
        t_fixed = slowest + overhead
    t_sync = t_fixed + x_sync - np.minimum(phi * slowest, omega * x_sync)
    # speeds in local batches per second (weak scaling: a sync step is one batch per worker)
    if all_sync:
        s = n_w / t_sync
    else:
        # async workers run their own loops; the job's speed is the sum of their rates
        x_w = (comm + upd)[w_job] if any_ps else comm[w_job]
        fixed_w = (overhead + rpc)[w_job] if any_ps else overhead[w_job]
        per_worker = c_w + fixed_w + x_w - np.minimum(phi[w_job] * c_w, omega[w_job] * x_w)
        s_async = np.add.reduceat(1.0 / per_worker, w_off)
        s = np.where(sync, n_w / t_sync, s_async)
    moved = s / n_w  # steps/s of the exchange: a sync step, or one async worker's update
    xn = k[:, _XNODE] * moved
    xr = k[:, _XRACK] * moved
    link_Bps = np.bincount(e_link, weights=e_bytes * np.repeat(moved, counts), minlength=n_link)
    # where no job has a link entry numpy's bincount gives int64 zeros; the kernel gives float zeros
    # (the same values; nothing in the package reads Rates.link_Bps' dtype)
    link_Bps = link_Bps.astype(float)
    gpu_busy = cnt[: cluster.n_gpus] > 0
    totals = (float(gpu_busy.sum()), float(cpu_used.sum()), float(link_Bps[: 2 * n].sum()))
    sections = {"contended": bool(len(contended)), "ps": any_ps, "shared gpu": not alone,
                "async": not all_sync,
                "switch": bool(overheads.cpu_switch_s > 0 and len(contended)),
                "server": bool(not alone and overheads.time_slice == "server"),
                "packed": bool(not alone and len(shared_packed)),
                "gavel pairs": bool(not alone and packing.colocation is not None and len(shared_packed))}
    return (s, xn, xr, n_w * k[:, _GPU], link_Bps, cpu_used, gpu_busy, got, totals), sections


# ----------------------------------------------------------------------------- the check
CASES = [  # (scenario, policy, overheads changed)
    ("default", "optimus", {}),  # parameter servers, async models
    ("default", "gandiva", {}),  # shared GPUs, time-sliced per server and packed
    ("gandiva", "gandiva", {"time_slice": "gpu"}),
    ("hetero_mixed", "gavel", {}),  # Gavel's measured pairs on packed GPUs
    ("flowcon_5", "flowcon", {"cpu_switch_s": 0.001}),  # contended CPUs, soft limits, CFS switches
    ("flowcon_5", "na", {}),
    ("dltap", "dltap", {}),  # DLTAP's asynchronous models (TensorFlow between-graph replication)
]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@functools.cache
def _checked_run(case: int) -> collections.Counter:
    """CASES[case] run with every rates computation checked against numpy_rates (assertions
    inside); the calls checked and the model sections they reached. Kept per case, so the section
    check below reuses the cases' runs and still runs them when it is selected alone."""
    scenario, policy, over = CASES[case]
    seen = collections.Counter()

    def checked(cluster, jobs, gpu_mode, overheads, packing, stack=None, replanned=None):
        r = compute_rates(cluster, jobs, gpu_mode, overheads, packing, stack, replanned)
        # the plans the stack followed are every job's current plan (PlanStack.follow)
        assert all(p is j.plan for p, j in zip(r._plans, jobs)) and len(r._plans) == len(jobs)
        if jobs:
            want, sections = numpy_rates(cluster, jobs, gpu_mode, overheads, packing, PlanStack().update(r._plans))
            got = (r.speed_arr, r.cross_node_arr, r.cross_rack_arr, r.gpus_arr, r.link_Bps, r.cpu_used,
                   r.gpu_busy, r._got, (r.gpus_busy, r.cores_used, r.nic_Bps))
            names = ("speed", "cross_node", "cross_rack", "gpus", "link_Bps", "cpu_used", "gpu_busy", "got", "totals")
            for name, g, w in zip(names, got, want):
                assert _same(g, w), (name, seen["calls"], sections)
            seen["calls"] += 1
            seen.update(s for s, on in sections.items() if on)
        return r

    with mock.patch.object(sim_mod, "compute_rates", checked):
        sim = dlclusterenv.make_sim(scenario, 0)
        if over:
            sim.overheads = sim.overheads.model_copy(update=over)
        sim.run(baselines.make(policy))
    return seen


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{s}-{p}" for s, p, _ in CASES])
def test_kernel_equals_numpy_at_every_rates_change(case):
    assert _checked_run(case)["calls"] >= 5


def test_every_section_was_checked():
    """Each section of the model ran in some case (the cases' runs, kept by _checked_run)."""
    seen = sum((_checked_run(i) for i in range(len(CASES))), collections.Counter())
    for section in ("contended", "ps", "shared gpu", "async", "switch", "server", "packed", "gavel pairs"):
        assert seen[section] > 0, (section, dict(seen))


@pytest.mark.parametrize("n", [*range(0, 300), 1000, 4992, 8191, 8192, 8193, 20000, 100001])
def test_pairwise_sum_is_numpys(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)
    assert pairwise_sum(a) == a.sum()
    assert pairwise_sum(-np.abs(a)).hex() == (-np.abs(a)).sum().hex()


def test_kernels_compile_without_a_writable_cache(monkeypatch):
    """Where numba finds no cache dir it can write (read-only package, no user cache), `_jit`
    compiles without caching instead of failing at import."""
    from dlclusterenv import _kernels

    real = _kernels.njit

    def njit(*args, **kw):
        if kw.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x.py'")
        return real(*args, **kw)

    monkeypatch.setattr(_kernels, "njit", njit)

    def f(a):
        return a + 1.0

    assert _kernels._jit(f)(1.0) == 2.0

"""Speed from placement: the network, CPU and GPU model that turns a placement into steps/s.

Per step every worker exchanges `param_bytes / p` with each of its job's p PS, both ways (Optimus
§3, DLTAP §3). Bytes between tasks on one node stay on the node; all others cross both nodes' NICs
and, between racks, both racks' uplinks. Links are full duplex; each direction of each link is
shared equally by every flow that crosses it, from all jobs (a flow = one worker-PS pair or one
remote input read, per direction). A job's time on a link is its bytes there divided by its flows'
share of the capacity; its communication time is that of its busiest link, or of its slowest capped
task (a task's `bw_MBps` is a per-container limit, which is what makes Optimus Fig. 10's per-task
transfer units matter). Input reads go from the shard's node to the worker over the same links
(D²S Eq. 1).

Step time, sync: max over workers of compute (the global batch split over w workers, slowed by the
worker's CPU or GPU share) + fixed overhead + PS update (w/p gradients per PS) + communication +
a fixed RPC cost per worker-PS round trip, rpc_s x (p + w) (a worker talks to p PS, a PS serves w
workers).
Async: each worker runs its own loop of compute + overhead + update + communication, and the job's
speed is the sum of its workers' rates. These give the shape of Optimus' fitted models
f(p,w) = 1/(t0 M/w + t1 + t2 w/p + t3 w + t4 p) without the engine ever evaluating that formula.

CPU: the tasks on a node share its cores by max-min fairness over what each can use (equal shares,
"NA" in FlowCon); a scheduler's soft limits cap a task only while others want the cores
(work-conserving, FlowCon §3); where an opt-in `cpu_switch_s` is set, tasks time-sliced on a
node's cores lose the context-switch cost per CFS slice (`cpu_contention`). GPU: workers sharing a
GPU are time-sliced (1/n each, less the suspend/resume cost per quantum, Gandiva §3) or, when the
GPU is set to pack, run together with the slowdown calibrated from Gavel's co-location
measurements (profiles.packing_speed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Cluster
from .config import Overheads
from .jobs import Job


@dataclass(frozen=True)
class PackingModel:
    """Fitted by `python -m dlclusterenv.profiles` on Gavel's v100/p100/k80 pairs (see config)."""

    eps: float
    gamma: float


def link_capacity(cluster: Cluster) -> np.ndarray:
    """Capacities of [NIC out (N), NIC in (N), uplink out (R), uplink in (R)] in bytes/s."""
    return np.concatenate([cluster.nic, cluster.nic, cluster.uplink, cluster.uplink])


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


@dataclass
class _Comm:
    links: np.ndarray  # link indices
    nbytes: np.ndarray  # bytes per step on each entry
    flows: np.ndarray  # flow count on each entry
    task_time: float  # slowest capped task's transfer time per step
    cross_node: float  # bytes per step crossing NICs (both directions)
    cross_rack: float


def job_comm(cluster: Cluster, job: Job, ps_nodes: np.ndarray, w_nodes: np.ndarray) -> _Comm:
    """Bytes and flows per link per step for one job's placement."""
    n, r = cluster.n_nodes, cluster.n_racks
    rack = cluster.node_rack
    m = job.model
    p, w = len(ps_nodes), len(w_nodes)
    b = m.param_bytes / p
    keys = (w_nodes[:, None] * n + ps_nodes[None, :]).ravel()
    keys = keys[(w_nodes[:, None] != ps_nodes[None, :]).ravel()]
    uk, cnt = np.unique(keys, return_counts=True)
    u, v = uk // n, uk % n
    cnt = cnt.astype(float)
    # exchange pairs: both directions between u and v
    links = [u, n + v, v, n + u]
    nbytes = [cnt * b] * 4
    flows = [cnt] * 4
    xr = rack[u] != rack[v]
    ru, rv, cx = rack[u][xr], rack[v][xr], cnt[xr]
    links += [2 * n + ru, 2 * n + r + rv, 2 * n + rv, 2 * n + r + ru]
    nbytes += [cx * b] * 4
    flows += [cx] * 4
    cross_node = 2.0 * cnt.sum() * b
    cross_rack = 2.0 * cx.sum() * b
    # remote input reads: shard node -> worker node
    read = 0.0
    remote_read = np.zeros(w, dtype=bool)
    if m.input_bytes_per_step > 0 and job.spec.shard_nodes:
        read = m.input_bytes_per_step / (w if m.sync else 1)
        shards = np.asarray(job.spec.shard_nodes)[np.arange(w) % len(job.spec.shard_nodes)]
        remote_read = shards != w_nodes
        s, d = shards[remote_read], w_nodes[remote_read]
        one = np.ones(len(s))
        links += [s, n + d]
        nbytes += [one * read] * 2
        flows += [one] * 2
        rx = rack[s] != rack[d]
        links += [2 * n + rack[s][rx], 2 * n + r + rack[d][rx]]
        nbytes += [one[rx] * read] * 2
        flows += [one[rx]] * 2
        cross_node += read * len(s)
        cross_rack += read * int(rx.sum())
    # per-task bandwidth caps (container traffic limits)
    task_time = 0.0
    if m.worker.bw_MBps > 0:
        remote_ps = (w_nodes[:, None] != ps_nodes[None, :]).sum(axis=1)
        per_worker = remote_ps * b + remote_read * read
        task_time = max(task_time, float(per_worker.max()) / (m.worker.bw_MBps * 1e6))
    if m.ps.bw_MBps > 0:
        remote_w = (ps_nodes[:, None] != w_nodes[None, :]).sum(axis=1)
        task_time = max(task_time, float(remote_w.max()) * b / (m.ps.bw_MBps * 1e6))
    return _Comm(
        np.concatenate(links).astype(np.int64),
        np.concatenate(nbytes),
        np.concatenate(flows),
        task_time,
        cross_node,
        cross_rack,
    )


@dataclass
class JobPlan:
    """What a job's speed depends on besides its neighbours, cached on the job until one of its
    tasks moves or its limits change (Simulator invalidates `job.plan`)."""

    task_ids: list[str]  # PS first, then workers
    task_node: np.ndarray
    want: np.ndarray  # cores each task can use
    limit: np.ndarray  # soft limits, fraction of the node
    ps_ratio_ref: float  # PS cores reserved (0: never CPU-limited)
    w_gpu: np.ndarray  # GPU per worker, -1 for CPU-bound workers
    w_ref: float  # cores a CPU-bound worker's step time is measured at
    comm: _Comm


def job_plan(cluster: Cluster, job: Job) -> JobPlan:
    if job.plan is None:
        m = job.model
        ps, ws = job.ps_tasks(), job.worker_tasks()
        w_want = (m.cpu_max or m.worker.cpu) if m.compute_on == "cpu" else m.worker.cpu
        ps_nodes = np.array([t.node for t in ps], dtype=np.int64)
        w_nodes = np.array([t.node for t in ws], dtype=np.int64)
        job.plan = JobPlan(
            task_ids=[t.task_id for t in ps + ws],
            task_node=np.concatenate([ps_nodes, w_nodes]),
            want=np.array([m.ps.cpu] * len(ps) + [w_want] * len(ws), dtype=float),
            limit=np.array([t.cpu_limit for t in ps + ws], dtype=float),
            ps_ratio_ref=m.ps.cpu,
            w_gpu=np.array([t.gpu if m.compute_on == "gpu" else -1 for t in ws], dtype=np.int64),
            w_ref=(m.cpu_max or m.worker.cpu) if m.compute_on == "cpu" else 0.0,
            comm=job_comm(cluster, job, ps_nodes, w_nodes),
        )
    return job.plan


class Rates:
    """Speeds and loads under the current placement; per-task cores are built on demand."""

    def __init__(self, speed, cross_node, cross_rack, link_Bps, cpu_used, gpu_busy, task_ids, got):
        self.speed: dict[str, float] = speed  # steps/s (sync: global steps; async: worker updates)
        self.cross_node_Bps: dict[str, float] = cross_node
        self.cross_rack_Bps: dict[str, float] = cross_rack
        self.link_Bps: np.ndarray = link_Bps  # bytes/s per link direction (see link_capacity)
        self.cpu_used: np.ndarray = cpu_used  # cores in use per node
        self.gpu_busy: np.ndarray = gpu_busy  # bool per GPU: a running worker computes on it
        self._task_ids, self._got, self._cores = task_ids, got, None
        # cluster-wide totals, constant until the rates change (the engine integrates them)
        n = len(cpu_used)
        self.gpus_busy = float(gpu_busy.sum())
        self.cores_used = float(cpu_used.sum())
        self.nic_Bps = float(link_Bps[: 2 * n].sum())

    @property
    def task_cores(self) -> dict[str, float]:
        """Cores each running task uses now."""
        if self._cores is None:
            self._cores = dict(zip(self._task_ids, self._got.tolist()))
        return self._cores


def compute_rates(
    cluster: Cluster,
    jobs: list[Job],
    gpu_mode: np.ndarray,
    overheads: Overheads,
    packing: PackingModel,
) -> Rates:
    """Steps/s of every job in `jobs` (all fully placed and not paused), vectorised over jobs."""
    n, n_links = cluster.n_nodes, 2 * cluster.n_nodes + 2 * cluster.n_racks
    cap = link_capacity(cluster)
    if not jobs:
        return Rates({}, {}, {}, np.zeros(n_links), np.zeros(n), np.zeros(cluster.n_gpus, bool), [], np.zeros(0))
    plans = [job_plan(cluster, j) for j in jobs]
    n_jobs = len(jobs)
    # ---- CPU: max-min fair shares with soft limits, only contended nodes need water-filling
    t_node = np.concatenate([p.task_node for p in plans])
    want = np.concatenate([p.want for p in plans])
    got = want.copy()
    total = np.bincount(t_node, weights=want, minlength=n)
    for node in np.flatnonzero(total > cluster.cpus * (1 + 1e-12)):
        sel = np.flatnonzero(t_node == node)
        limit = np.concatenate([p.limit for p in plans])[sel]
        got[sel] = cpu_split(float(cluster.cpus[node]), want[sel], limit)
    cpu_used = np.bincount(t_node, weights=got, minlength=n)
    eff = cpu_contention(got, want, t_node, np.flatnonzero(total > cluster.cpus * (1 + 1e-12)), overheads)
    # ---- per-job constants, and per-worker arrays in job order
    m = [j.model for j in jobs]
    n_ps = np.array([j.num_ps for j in jobs])
    n_w = np.array([j.num_workers for j in jobs])
    n_t = n_ps + n_w
    t_off = np.concatenate([[0], np.cumsum(n_t)[:-1]])
    sync = np.array([x.sync for x in m])
    compute = np.array([x.step_compute_s for x in m])
    overhead = np.array([x.step_overhead_s for x in m])
    update = np.array([x.ps_update_s for x in m])
    ps_ref = np.array([p.ps_ratio_ref for p in plans])
    # PS factor: the most CPU-starved PS of the job
    ps_idx = np.concatenate([np.arange(o, o + k) for o, k in zip(t_off, n_ps)])
    ps_job = np.repeat(np.arange(n_jobs), n_ps)
    ratio = np.where(ps_ref[ps_job] > 0, np.minimum(1.0, eff[ps_idx] / np.maximum(ps_ref[ps_job], 1e-300)), 1.0)
    ps_f = np.maximum(np.minimum.reduceat(ratio, np.concatenate([[0], np.cumsum(n_ps)[:-1]])), 1e-9)
    # worker factors: GPU share (alone / time-sliced / packed) or CPU cores over the reference
    w_job = np.repeat(np.arange(n_jobs), n_w)
    w_idx = np.concatenate([np.arange(o + k, o + k + w) for o, k, w in zip(t_off, n_ps, n_w)])
    w_gpu = np.concatenate([p.w_gpu for p in plans])
    on_gpu = w_gpu >= 0
    g = np.where(on_gpu, w_gpu, 0)
    n_slots = max(cluster.n_gpus, int(g.max()) + 1)
    util = np.array([x.gpu_util for x in m])[w_job]
    cnt = np.bincount(g[on_gpu], minlength=n_slots)
    util_sum = np.bincount(g[on_gpu], weights=util[on_gpu], minlength=n_slots)
    mode = np.zeros(n_slots, np.int8)
    k_modes = min(len(gpu_mode), n_slots)
    mode[:k_modes] = gpu_mode[:k_modes]
    switch = 1.0 - min(overheads.suspend_resume_s / overheads.time_slice_s, 1.0)
    k = np.maximum(cnt[g], 1)
    # profiles.packing_speed, vectorised: (1 - eps) * min(1, 1 / sum of utilisations) ** gamma
    packed = (1.0 - packing.eps) * np.minimum(1.0, 1.0 / np.maximum(util_sum[g], 1e-12)) ** packing.gamma
    f_gpu = np.where(k == 1, 1.0, np.where(mode[g] == 1, packed, switch / k))
    w_ref = np.array([p.w_ref for p in plans])[w_job]
    f_cpu = np.where(w_ref > 0, eff[w_idx] / np.where(w_ref > 0, w_ref, 1.0), 1.0)
    f = np.maximum(np.where(on_gpu, f_gpu, f_cpu), 1e-9)
    # ---- network: bytes and flows per (job, link); each link direction shared equally per flow
    links = np.concatenate([p.comm.links + i * n_links for i, p in enumerate(plans)])
    nbytes = np.concatenate([p.comm.nbytes for p in plans])
    flows = np.concatenate([p.comm.flows for p in plans])
    jb = np.bincount(links, weights=nbytes, minlength=n_jobs * n_links).reshape(n_jobs, n_links)
    jf = np.bincount(links, weights=flows, minlength=n_jobs * n_links).reshape(n_jobs, n_links)
    flows_total = jf.sum(axis=0)
    used = jf > 0
    t_link = np.zeros_like(jb)
    t_link[used] = (jb * flows_total / cap)[used] / jf[used]
    comm = np.maximum(t_link.max(axis=1), np.array([p.comm.task_time for p in plans]))
    # ---- step time: sync waits for the slowest worker; async workers run their own loops
    w_off = np.concatenate([[0], np.cumsum(n_w)[:-1]])
    # per step a worker makes p request/response round trips and a PS serves w of them, each with
    # a fixed RPC cost: Optimus' t4*p and t3*w terms
    fixed = overhead + comm + overheads.rpc_s * (n_ps + n_w)
    slowest = np.maximum.reduceat(compute[w_job] / n_w[w_job] / f, w_off)
    s_sync = 1.0 / (slowest + fixed + update * n_w / n_ps / ps_f)
    per_worker = compute[w_job] / f + (fixed + update / n_ps / ps_f)[w_job]
    s_async = np.add.reduceat(1.0 / per_worker, w_off)
    s = np.where(sync, s_sync, s_async)
    per_step = np.where(sync, 1.0, 1.0 / n_w)  # an async update moves one worker's share
    moved = s * per_step
    ids = [j.job_id for j in jobs]
    xn = np.array([p.comm.cross_node for p in plans]) * moved
    xr = np.array([p.comm.cross_rack for p in plans]) * moved
    task_ids = [t for p in plans for t in p.task_ids]
    return Rates(
        dict(zip(ids, s.tolist())),
        dict(zip(ids, xn.tolist())),
        dict(zip(ids, xr.tolist())),
        (jb * moved[:, None]).sum(axis=0),
        cpu_used,
        cnt[: cluster.n_gpus] > 0,
        task_ids,
        got,
    )

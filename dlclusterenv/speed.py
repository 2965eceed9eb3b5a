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
worker's CPU or GPU share) + fixed overhead + PS update (w/p gradients per PS) + communication.
Async: each worker runs its own loop of compute + overhead + update + communication, and the job's
speed is the sum of its workers' rates. These give the shape of Optimus' fitted models
f(p,w) = 1/(t0 M/w + t1 + t2 w/p + t3 w + t4 p) without the engine ever evaluating that formula.

CPU: the tasks on a node share its cores by max-min fairness over what each can use (equal shares,
"NA" in FlowCon); a scheduler's soft limits cap a task only while others want the cores
(work-conserving, FlowCon §3). GPU: workers sharing a GPU are time-sliced (1/n each, less the
suspend/resume cost per quantum, Gandiva §3) or, when the GPU is set to pack, run together with the
slowdown calibrated from Gavel's co-location measurements (profiles.packing_speed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Cluster
from .config import Overheads
from .jobs import Job
from .profiles import packing_speed


@dataclass(frozen=True)
class PackingModel:
    """Fitted by `python -m dlclusterenv.profiles` on Gavel's v100/p100/k80 pairs (see config)."""

    eps: float
    gamma: float


@dataclass
class Rates:
    speed: dict[str, float]  # job id -> steps/s (sync: global steps; async: worker updates)
    cross_node_Bps: dict[str, float]
    cross_rack_Bps: dict[str, float]
    link_Bps: np.ndarray  # bytes/s per link direction (see link layout in `link_capacity`)
    cpu_used: np.ndarray  # cores in use per node
    gpu_busy: np.ndarray  # bool per GPU: some running worker computes on it
    task_cores: dict[str, float]  # cores each running task uses now


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


def compute_rates(
    cluster: Cluster,
    jobs: list[Job],
    gpu_mode: np.ndarray,
    overheads: Overheads,
    packing: PackingModel,
) -> Rates:
    """Steps/s of every job in `jobs` (all fully placed and not paused) under the current placement."""
    n_links = 2 * cluster.n_nodes + 2 * cluster.n_racks
    cap = link_capacity(cluster)
    # ---- CPU: per node, max-min fair with soft limits
    want: dict[int, list[tuple[str, float, float]]] = {}
    for job in jobs:
        m = job.model
        for t in job.tasks.values():
            if t.role == "ps":
                c = m.ps.cpu
            else:
                c = (m.cpu_max or m.worker.cpu) if m.compute_on == "cpu" else m.worker.cpu
            want.setdefault(t.node, []).append((t.task_id, c, t.cpu_limit))
    cores: dict[str, float] = {}
    cpu_used = np.zeros(cluster.n_nodes)
    for node, lst in want.items():
        got = cpu_split(
            float(cluster.cpus[node]),
            np.array([x[1] for x in lst], dtype=float),
            np.array([x[2] for x in lst], dtype=float),
        )
        cpu_used[node] = got.sum()
        for (tid, _, _), g in zip(lst, got):
            cores[tid] = g
    # ---- GPU: residents per GPU among running workers
    residents: dict[int, list[Job]] = {}
    for job in jobs:
        for t in job.tasks.values():
            if t.gpu >= 0:
                residents.setdefault(t.gpu, []).append(job)
    switch = 1.0 - min(overheads.suspend_resume_s / overheads.time_slice_s, 1.0)
    gpu_busy = np.zeros(cluster.n_gpus, dtype=bool)
    gpu_factor: dict[int, dict[str, float]] = {}
    for g, js in residents.items():
        if g < len(gpu_busy):
            gpu_busy[g] = True
        if len(js) == 1:
            gpu_factor[g] = {js[0].job_id: 1.0}
        elif gpu_mode[g] == 1:  # packed
            total = sum(j.model.gpu_util for j in js)
            gpu_factor[g] = {
                j.job_id: packing_speed(
                    j.model.gpu_util, total - j.model.gpu_util, packing.eps, packing.gamma
                )
                for j in js
            }
        else:  # time-sliced round robin
            gpu_factor[g] = {j.job_id: switch / len(js) for j in js}
    # ---- network: per-job bytes and flows per link, then equal per-flow shares
    comms = []
    flows_total = np.zeros(n_links)
    for job in jobs:
        ps_nodes = np.array([t.node for t in job.ps_tasks()], dtype=np.int64)
        w_nodes = np.array([t.node for t in job.worker_tasks()], dtype=np.int64)
        c = job_comm(cluster, job, ps_nodes, w_nodes)
        comms.append(c)
        np.add.at(flows_total, c.links, c.flows)
    speed, xn, xr = {}, {}, {}
    link_Bps = np.zeros(n_links)
    for job, c in zip(jobs, comms):
        m = job.model
        comm = c.task_time
        if len(c.links):
            jb = np.bincount(c.links, weights=c.nbytes, minlength=n_links)
            jf = np.bincount(c.links, weights=c.flows, minlength=n_links)
            used = jf > 0
            comm = max(comm, float((jb[used] * flows_total[used] / (cap[used] * jf[used])).max()))
        p, w = job.num_ps, job.num_workers
        ps_f = min(
            (min(1.0, cores[t.task_id] / m.ps.cpu) if m.ps.cpu > 0 else 1.0)
            for t in job.ps_tasks()
        )
        ps_f = max(ps_f, 1e-9)
        factors = []
        for t in job.worker_tasks():
            if m.compute_on == "gpu":
                f = gpu_factor[t.gpu][job.job_id]
            else:
                ref = m.cpu_max or m.worker.cpu
                f = cores[t.task_id] / ref if ref > 0 else 1.0
            factors.append(max(f, 1e-9))
        factors = np.array(factors)
        if m.sync:
            step = (
                float((m.step_compute_s / w / factors).max())
                + m.step_overhead_s
                + m.ps_update_s * w / p / ps_f
                + comm
            )
            s = 1.0 / step
            per_step = 1.0
        else:
            steps = m.step_compute_s / factors + m.step_overhead_s + m.ps_update_s / p / ps_f + comm
            s = float((1.0 / steps).sum())
            per_step = 1.0 / w  # one update moves one worker's share of the exchange
        speed[job.job_id] = s
        xn[job.job_id] = c.cross_node * s * per_step
        xr[job.job_id] = c.cross_rack * s * per_step
        if len(c.links):
            np.add.at(link_Bps, c.links, c.nbytes * s * per_step)
    return Rates(speed, xn, xr, link_Bps, cpu_used, gpu_busy, cores)

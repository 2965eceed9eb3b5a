"""Speed from placement: the network, CPU and GPU model that turns a placement into steps/s.

Traffic: a job's communication pattern (comm.py: parameter servers, ring or hierarchical
all-reduce) puts bytes and flows on one shared link vector: NICs, rack uplinks and each node's host
path. Bytes between tasks on one node stay off the NICs but GPU transfers still cross the host path.
Links are full duplex; each direction of each link is shared equally by every flow that crosses
it, from all jobs, whatever their pattern. A job's network time is its busiest NIC or uplink, or
its slowest capped connection or task (a task's `bw_MBps` is a per-container limit, Optimus Fig.
10); its host-path time adds to it (socket transports stage GPU data through host memory); each
sequential all-reduce message adds `network.latency_s` (an alpha-beta cost). Input reads go from
the shard's node to the worker over the same links (D²S Eq. 1).

Step time (weak scaling: every worker computes its own local batch, as every measured source
reports it): a worker's compute is its model's measured step on its GPU's type (`gpu_compute_s`);
sync = slowest worker's compute (slowed by its CPU or GPU share) + fixed overhead +
RPC cost rpc_s x (p + w) for PS jobs + X - min(overlap x compute, overlap_max x X), where X is the
communication plus the PS update (w/p gradients per PS); a job that exchanges once per k steps
(`JobSpec.exchange_every`) pays the RPCs, the update and X's bytes once per k steps (amortised per
step); async: each worker runs that loop on its own, and the job's speed is the sum of its
workers' rates. Speeds are local batches per second.

CPU: the tasks on a node share its cores by max-min fairness over what each can use (equal shares,
"NA" in FlowCon); a scheduler's soft limits cap a task only while others want the cores
(work-conserving, FlowCon §3); where an opt-in `cpu_switch_s` is set, tasks time-sliced on a
node's cores lose the context-switch cost per CFS slice (`cpu_contention`). GPU: workers sharing a
GPU are time-sliced (less the suspend/resume cost per quantum, Gandiva §3): by default a node's
time-sliced workers rotate over its time-sliced GPUs, G/T of a GPU each (Gandiva's Fig. 9;
`Overheads.time_slice`), or each GPU's among its own, 1/n each (`time_slice: gpu`); or, when the
GPU is set to pack, run together: where every job on the GPU names its Gavel job type
(`ModelSpec.gavel_job`), each gets its own factor from Gavel's measurements (`Colocation`);
otherwise one symmetric slowdown from the models' Gandiva-scale `gpu_util` (profiles.packing_speed).
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, compress, count, repeat
from operator import attrgetter, is_, is_not
from pathlib import Path

import numpy as np

from .cluster import Cluster
from .comm import intra_base, link_capacity, n_links, pattern
from .config import ModelSpec, Overheads, read_yaml
from .jobs import Job


class Colocation:
    """Measured co-location per GPU type (configs/colocation/gavel.yaml, source and derivation there).

    A pair (a, b) on a GPU of type T gives a the factor r_ab (its speed over its speed alone):
    1. measured by Gavel on T: the measurement (asymmetric, each job its own);
    2. a type Gavel did not measure (P40, T4, ...): the geometric mean of the pair's measurements
       on the types that have it (scored as "leave one GPU type out" by `dlcluster fidelity`);
    3. a pair never measured: the per-type fit r_ab = 1 / (1 + s_a p_b) (profiles.fit_colocation),
       with a job's geometric mean of s and p over the measured types where T has no fit, and the
       typical job's s and p (geometric median) for a job without a fit ("leave one family out").
    k jobs on one GPU (k-way rule): slowdowns add, 1 / f_a - 1 = sum over partners b of
    (1 / r_ab - 1); with fitted pairs this is 1 / (1 + s_a * sum of the partners' p).
    """

    def __init__(self, data: dict, where: str = "colocation"):
        self.pairs: dict[tuple[str, str, str], float] = {}
        self.fit: dict[str, dict[str, tuple[float, float]]] = {}
        try:
            for gpu, entry in data.items():
                self.fit[gpu] = {j: (float(s), float(p)) for j, (s, p) in entry["fit"].items()}
                for a, b, ra, rb in entry["pairs"]:
                    self.pairs[gpu, a, b], self.pairs[gpu, b, a] = float(ra), float(rb)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{where}: expected {{gpu: {{fit: {{job: [s, p]}}, pairs: [[a, b, ra, rb]]}}}}: {e!r}") from None
        jobs = {j for f in self.fit.values() for j in f}
        self._mean = {j: tuple(np.exp(np.mean([np.log(np.maximum(f[j], 1e-12)) for f in self.fit.values()
                                               if j in f], axis=0))) for j in jobs}
        logs = np.log(np.maximum(np.array(list(self._mean.values())), 1e-12))
        self._typical = tuple(np.exp(np.median(logs, axis=0))) if len(logs) else (1.0, 1.0)
        across: dict[tuple[str, str], list[float]] = {}
        for (_, a, b), r in self.pairs.items():
            across.setdefault((a, b), []).append(r)
        self._pair_mean = {k: float(np.exp(np.mean(np.log(np.maximum(v, 1e-12))))) for k, v in across.items()}

    @classmethod
    def load(cls, path: str | Path) -> "Colocation":
        return cls(read_yaml(path), str(path))

    def _sp(self, gpu: str, job: str) -> tuple[float, float]:
        fit = self.fit.get(gpu)
        if fit is not None and job in fit:
            return fit[job]
        return self._mean.get(job, self._typical)

    def pair(self, gpu: str, a: str, b: str) -> float:
        """a's speed over its speed alone when it shares a GPU of type `gpu` with b (rules 1-3)."""
        if (gpu, a, b) in self.pairs:
            return self.pairs[gpu, a, b]
        if gpu not in self.fit and (a, b) in self._pair_mean:
            return self._pair_mean[a, b]
        return 1.0 / (1.0 + self._sp(gpu, a)[0] * self._sp(gpu, b)[1])

    def factors(self, gpu: str, jobs: list[str]) -> np.ndarray:
        """Each job's speed over its speed alone when `jobs` share one GPU of type `gpu`."""
        slow = np.array([sum(1.0 / self.pair(gpu, a, b) - 1.0 for j, b in enumerate(jobs) if j != i)
                         for i, a in enumerate(jobs)])
        return 1.0 / (1.0 + slow)


@dataclass(frozen=True)
class PackingModel:
    """eps, gamma: the symmetric gpu_util model, fitted by `python -m dlclusterenv.profiles` on
    Gavel's pairs (see sim.DEFAULT_PACKING); `colocation` takes over where every job on a GPU
    names its Gavel job type."""

    eps: float
    gamma: float
    colocation: Colocation | None = field(default=None, compare=False)


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


class SpeedError(ValueError):
    """A job that cannot be timed on the hardware it was given (names model and GPU type)."""


def gpu_compute_s(model: ModelSpec, gpu_type: str, name: str = "?") -> float:
    """One worker's compute per local batch on a GPU of `gpu_type` (cluster.gpu_type()).

    A model with measurements per GPU type (`gpu_step_s`, each number's source in its zoo file) uses
    the one for this type; a type it was not measured on is an error rather than a guess (the zoo
    files derive missing types by their written rule, e.g. a same-family model's ratio, before the
    numbers get here). A model without them has one speed on every GPU (`step_compute_s`), as the
    single-type seed testbeds define it.
    """
    if not model.gpu_step_s:
        return model.step_compute_s
    try:
        return model.gpu_step_s[gpu_type]
    except KeyError:
        raise SpeedError(
            f"model {name!r} has no measured step time on GPU type {gpu_type!r} "
            f"(gpu_step_s has {sorted(model.gpu_step_s)})"
        ) from None


# per-job constants in JobPlan.consts, one column each (compute_rates stacks them); the last two
# are the engine's, gathered with the plans so that it does not walk the running jobs for them at
# every change of the rates: the job's row in the simulator's Ledger and the dominant share of
# what it holds (Job.placed_dominant_share)
(_NPS, _NW, _SYNC, _OVERHEAD, _UPDATE, _PS_REF, _UTIL, _W_REF, _TASK_TIME, _MESSAGES, _PHI, _OMEGA,
 _EVERY, _XNODE, _XRACK, _GPU, ROW, SHARE) = range(18)
_N_CONSTS = SHARE + 1


@dataclass
class JobPlan:
    """What a job's speed depends on besides its neighbours, cached on the job until one of its
    tasks moves or its limits change (Simulator invalidates `job.plan`)."""

    task_ids: list[str]  # PS first, then workers
    task_node: np.ndarray
    is_worker: np.ndarray  # bool per task
    want: np.ndarray  # cores each task can use
    limit: np.ndarray  # soft limits, fraction of the node
    w_gpu: np.ndarray  # GPU per worker, -1 for CPU-bound workers
    w_compute: np.ndarray  # each worker's compute per local batch alone on its device
    # the job's sparse row of the (job, link) incidence, per step (the exchange amortised over
    # `exchange_every` steps): the links it uses, its bytes and flows on each (entries summed in
    # their order, as a dense bincount would)
    links: np.ndarray
    nbytes: np.ndarray
    flows: np.ndarray
    consts: tuple  # the _NPS.._GPU columns
    scalars: "_Scalars | None" = None  # its numbers as Python scalars, made when RateCache needs them


def job_plan(cluster: Cluster, job: Job) -> JobPlan:
    if job.plan is None:
        m = job.model
        ps, ws = job.ps_tasks(), job.worker_tasks()
        w_want = (m.cpu_max or m.worker.cpu) if m.compute_on == "cpu" else m.worker.cpu
        ps_nodes = np.array([t.node for t in ps], dtype=np.int64)
        w_nodes = np.array([t.node for t in ws], dtype=np.int64)
        on_gpu = m.compute_on == "gpu"
        every = job.spec.exchange_every
        comm = pattern(m, job.spec.comm).plan(cluster, m, job.spec.shard_nodes, ps_nodes, w_nodes, every)
        # each link once, in link order, with its entries' bytes and flows summed in their order
        # (np.unique's result, made in Python for a job's few entries)
        entries = comm.links.tolist()
        links = sorted(set(entries))
        pos = {link: i for i, link in enumerate(links)}
        inv = [pos[link] for link in entries]
        links = np.array(links, dtype=np.int64)
        job.plan = JobPlan(
            task_ids=[t.task_id for t in ps + ws],
            task_node=np.concatenate([ps_nodes, w_nodes]),
            is_worker=np.arange(len(ps) + len(ws)) >= len(ps),
            want=np.array([m.ps.cpu] * len(ps) + [w_want] * len(ws), dtype=float),
            limit=np.array([t.cpu_limit for t in ps + ws], dtype=float),
            w_gpu=np.array([t.gpu if on_gpu else -1 for t in ws], dtype=np.int64),
            w_compute=np.array([gpu_compute_s(m, cluster.node_gpu_type[t.node], job.spec.model)
                                if on_gpu else m.step_compute_s for t in ws], dtype=float),
            links=links,
            nbytes=np.bincount(inv, weights=comm.nbytes, minlength=len(links)),
            flows=np.bincount(inv, weights=comm.flows, minlength=len(links)),
            consts=(len(ps), len(ws), float(m.sync), m.step_overhead_s, m.ps_update_s, m.ps.cpu,
                    m.gpu_util, (m.cpu_max or m.worker.cpu) if m.compute_on == "cpu" else 0.0,
                    comm.task_time, comm.messages, m.overlap, m.overlap_max, every,
                    comm.cross_node, comm.cross_rack, m.worker.gpu, job.row,
                    job.placed_dominant_share(cluster)),
        )
    return job.plan


_PLAN = attrgetter("plan")


class PlanStack:
    """The running jobs' plan arrays concatenated in job order, kept between calls of
    `compute_rates`: when a few jobs started, ended or moved in a long list, only the run of jobs
    between the first and the last changed plan is gathered again and spliced in (gathering
    every plan was 40% of a call at Philly scale, 150 running jobs); when most changed (a small
    cluster), all are gathered, as before. Concatenation is exact, so the rates are the same
    bits either way. Plans are never changed in place (a moved task makes a new one), so a plan
    seen before at its place is taken as unchanged."""

    # per task, per worker and per (job, link) entry; `consts` is one row per job
    FIELDS = {"task": ("task_node", "is_worker", "want", "limit"), "worker": ("w_gpu", "w_compute"),
              "entry": ("links", "nbytes", "flows")}

    def __init__(self) -> None:
        self.plans: list[JobPlan] = []
        self.consts = np.zeros((0, _N_CONSTS))
        self.arrays: dict[str, np.ndarray] = {}
        self.entry_counts = np.zeros(0, np.int64)  # (job, link) entries per job
        self._ends: dict[str, np.ndarray] = {}  # per kind of row: 0, then each job's end

    def ends(self, kind: str) -> np.ndarray:
        """Where each job's rows of a kind ("task", "worker", "entry") end, after a leading 0;
        found when first needed (a splice), then kept by the splices."""
        if kind not in self._ends:
            sizes = [len(getattr(p, self.FIELDS[kind][0])) for p in self.plans]
            self._ends[kind] = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        return self._ends[kind]

    def update(self, plans: list[JobPlan]) -> "PlanStack":
        old, n_old, n_new = self.plans, len(self.plans), len(plans)
        n_min = min(n_old, n_new)
        # the common head and tail (first plans that differ, found at C speed)
        a = next(compress(count(), map(is_not, old, plans)), n_min)
        b = min(next(compress(count(), map(is_not, reversed(old), reversed(plans))), n_min), n_min - a)
        if a == n_old == n_new:
            return self
        if 2 * (n_new - a - b) > n_new:  # most changed: gather them all
            self.plans, self._ends = list(plans), {}
            self.consts = np.array([p.consts for p in plans], dtype=float).reshape(n_new, _N_CONSTS)
            for f in (f for fs in self.FIELDS.values() for f in fs):
                self.arrays[f] = np.concatenate([getattr(p, f) for p in plans])
            self.entry_counts = np.array([len(p.links) for p in plans], dtype=np.int64)
            return self
        mid = plans[a : n_new - b]
        cut = n_old - b  # old plans [a, cut) are replaced by `mid`
        if mid:
            self.consts = np.concatenate([self.consts[:a], np.array([p.consts for p in mid], dtype=float)
                                          .reshape(len(mid), _N_CONSTS), self.consts[cut:]])
        else:  # jobs left, none came
            self.consts = np.concatenate([self.consts[:a], self.consts[cut:]])
        ends = {kind: self.ends(kind) for kind in self.FIELDS}
        for kind, fields in self.FIELDS.items():
            e = ends[kind]
            lo, hi = int(e[a]), int(e[cut])
            for f in fields:
                arr = self.arrays[f]
                self.arrays[f] = np.concatenate([arr[:lo], *(getattr(p, f) for p in mid), arr[hi:]])
            mid_ends = list(accumulate((len(getattr(p, fields[0])) for p in mid), initial=lo))
            self._ends[kind] = np.concatenate([e[:a], mid_ends, e[cut + 1 :] + (mid_ends[-1] - hi)])
        self.plans = list(plans)
        self.entry_counts = np.diff(self._ends["entry"])
        return self


class Rates:
    """Speeds and loads under the current placement; per-job dicts and per-task cores are built
    when first read (the engine reads only the arrays, and rates change at every event)."""

    def __init__(self, jobs, speed, cross_node, cross_rack, gpus, link_Bps, cpu_used, gpu_busy, plans, got, consts,
                 nic: np.ndarray | None = None, n_link: int = 0):
        # per running job, in the order given (arrays, for the engine's vectorised integration)
        self._jobs = jobs
        self.speed_arr, self.cross_node_arr, self.cross_rack_arr = speed, cross_node, cross_rack
        self.gpus_arr = gpus  # GPUs each job holds (attained service per second)
        # link_Bps None (RateCache): summed from the plans when read, `nic` its NIC directions
        self._link_Bps, self._n_link = link_Bps, n_link
        self.cpu_used: np.ndarray = cpu_used  # cores in use per node
        self.gpu_busy: np.ndarray = gpu_busy  # bool per GPU: a running worker computes on it
        # got: cores per task of `plans` in their order, or (RateCache) a dict {id(plan): cores} of
        # the jobs with a task on a contended node, every other task getting what it wants
        self._plans, self._got, self._cores = plans, got, None
        self._state = None  # compute_rates' per-link flows, per-GPU workers, contended nodes
        self.consts = consts  # the jobs' JobPlan.consts, one row each (ROW, SHARE: the engine's)
        # cluster-wide totals, constant until the rates change (the engine integrates them)
        n = len(cpu_used)
        self.gpus_busy = float(gpu_busy.sum())
        self.cores_used = float(cpu_used.sum())
        self.nic_Bps = float((link_Bps[: 2 * n] if nic is None else nic).sum())

    @property
    def link_Bps(self) -> np.ndarray:
        """Bytes/s per link direction (see link_capacity)."""
        if self._link_Bps is None:  # compute_rates' sum: each entry's bytes x its job's exchanges/s
            plans = self._plans
            moved = self.speed_arr / self.consts[:, _NW].astype(np.int64)
            counts = [len(p.links) for p in plans]
            nbytes = np.concatenate([p.nbytes for p in plans]) if plans else np.zeros(0)
            links = np.concatenate([p.links for p in plans]) if plans else np.zeros(0, np.int64)
            self._link_Bps = np.bincount(links, weights=nbytes * np.repeat(moved, counts), minlength=self._n_link)
        return self._link_Bps

    @cached_property
    def row(self) -> dict[str, int]:
        """Each running job's row in the arrays."""
        return {j.job_id: k for k, j in enumerate(self._jobs)}

    @cached_property
    def speed(self) -> dict[str, float]:
        """Local batches/s of each running job."""
        return dict(zip(self.row, self.speed_arr.tolist()))

    @property
    def cross_node_Bps(self) -> dict[str, float]:
        """Bytes/s each running job sends across NICs."""
        return dict(zip(self.row, self.cross_node_arr.tolist()))

    @property
    def cross_rack_Bps(self) -> dict[str, float]:
        """Bytes/s each running job sends across rack uplinks."""
        return dict(zip(self.row, self.cross_rack_arr.tolist()))

    @property
    def task_cores(self) -> dict[str, float]:
        """Cores each running task uses now."""
        if self._cores is None:
            task_ids = [t for p in self._plans for t in p.task_ids]
            got = self._got
            if isinstance(got, dict):
                got = np.concatenate([got.get(id(p), p.want) for p in self._plans]) if self._plans else np.zeros(0)
            self._cores = dict(zip(task_ids, got.tolist()))
        return self._cores


class _ClusterConsts:
    """What compute_rates reads of a cluster at every call, made once per cluster (a Cluster's
    arrays are frozen)."""

    def __init__(self, cluster: Cluster):
        self.n_link = n_links(cluster)
        self.cap = link_capacity(cluster)
        self.ib = intra_base(cluster)
        self.cpu_cap = cluster.cpus * (1 + 1e-12)  # a node is contended above this


_CLUSTER_CONSTS: "weakref.WeakKeyDictionary[Cluster, _ClusterConsts]" = weakref.WeakKeyDictionary()


def _cluster_consts(cluster: Cluster) -> _ClusterConsts:
    cc = _CLUSTER_CONSTS.get(cluster)
    if cc is None:
        cc = _CLUSTER_CONSTS[cluster] = _ClusterConsts(cluster)
    return cc


def compute_rates(
    cluster: Cluster,
    jobs: list[Job],
    gpu_mode: np.ndarray,
    overheads: Overheads,
    packing: PackingModel,
    stack: PlanStack | None = None,
) -> Rates:
    """Speed of every job in `jobs` (all fully placed and not paused), vectorised over jobs, in
    local batches per second: a sync job of w workers does w per step, an async one the sum of its
    workers' rates. `Job.total_steps` counts local batches, so an epoch takes fewer steps as w grows.
    `stack`: the caller's PlanStack, kept between calls (the Simulator's), else a fresh one."""
    n, cc = cluster.n_nodes, _cluster_consts(cluster)
    n_link, cap = cc.n_link, cc.cap
    if not jobs:
        e = np.zeros(0)
        r = Rates([], e, e, e, e, np.zeros(n_link), np.zeros(n), np.zeros(cluster.n_gpus, bool), [], np.zeros(0),
                  np.zeros((0, _N_CONSTS)))
        r._state = (np.zeros(n_link), np.zeros(cluster.n_gpus, np.int64), e.astype(np.int64))
        return r
    plans = list(map(_PLAN, jobs))  # the cached plans, gathered at C speed; then the missing
    for i in compress(count(), map(is_, plans, repeat(None))):
        plans[i] = job_plan(cluster, jobs[i])
    n_jobs = len(jobs)
    st = (stack or PlanStack()).update(plans)
    arr, k = st.arrays, st.consts
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
    r = Rates(
        jobs,
        s,
        xn,
        xr,
        n_w * k[:, _GPU],
        np.bincount(e_link, weights=e_bytes * np.repeat(moved, counts), minlength=n_link),
        cpu_used,
        cnt[: cluster.n_gpus] > 0,
        plans,
        got,
        k,
    )
    r._state = (flows_total, cnt, contended)  # what a RateCache keeps to go on from these rates
    return r


class _Scalars:
    """A plan's numbers as Python scalars, for RateCache's per-job path (made once per plan)."""

    __slots__ = ("nodes", "res", "node_want", "gpus", "links", "nbytes", "flows", "whole", "at", "slowest", "k")

    def __init__(self, plan: JobPlan, n_nodes: int):
        t_node = plan.task_node.tolist()
        self.nodes = tuple(sorted(set(t_node)))  # nodes it has a task on
        self.links = tuple(plan.links.tolist())
        # what it shares with other jobs: its nodes (n), its links (n_nodes + link)
        self.res = self.nodes + tuple(n_nodes + link for link in self.links)
        self.node_want = tuple(zip(t_node, plan.want.tolist()))  # (node, cores wanted) per task
        self.gpus = tuple(plan.w_gpu.tolist())
        self.nbytes, self.flows = plan.nbytes.tolist(), plan.flows.tolist()
        self.whole = all(f.is_integer() and abs(f) < 2.0**40 for f in self.flows)  # flow counts: sums exact
        self.at = {link: i for i, link in enumerate(self.links)}
        self.slowest = max(plan.w_compute.tolist())
        self.k = tuple(float(x) for x in plan.consts)  # as compute_rates stacks them (float64)


def _scalars(plan: JobPlan, n_nodes: int) -> _Scalars:
    if plan.scalars is None:
        plan.scalars = _Scalars(plan, n_nodes)
    return plan.scalars


def _net_host(s: _Scalars, flows_total: list[float], cap: list[float], ib: int) -> tuple[float, float]:
    """compute_rates' busiest network link and host path of one job, each link shared per flow
    (0.0 where it has none of the kind), before the task-time floor."""
    net = host = 0.0
    for link, b, f in zip(s.links, s.nbytes, s.flows):
        t = b * flows_total[link] / cap[link] / f
        if link < ib:
            net = max(net, t)
        else:
            host = max(host, t)
    return net, host


def _uncoupled_speed(s: _Scalars, net: float, host: float, latency_s: float, rpc_s: float) -> tuple[float, float, float]:
    """compute_rates' speed, cross-node and cross-rack bytes/s of one sync job none of whose
    nodes is contended or has a GPU with two workers (so each task gets the cores it wants and
    each worker its GPU: factors 1), from its busiest link and host path (`_net_host`):
    compute_rates' operations on Python floats in its order (the same IEEE bits)."""
    k = s.k
    comm = max(net, k[_TASK_TIME]) + host + latency_s * k[_MESSAGES]
    slowest, n_ps, n_w = s.slowest, k[_NPS], k[_NW]
    if n_ps > 0:
        every = k[_EVERY]
        rpc = rpc_s * (n_ps + n_w) / every
        upd = k[_UPDATE] / n_ps / every
        x_sync = comm + upd * n_w
        t_fixed = slowest + k[_OVERHEAD] + rpc
    else:  # compute_rates' PS terms are 0.0 here, and a + 0.0 is a
        x_sync = comm
        t_fixed = slowest + k[_OVERHEAD]
    speed = n_w / (t_fixed + x_sync - min(k[_PHI] * slowest, k[_OMEGA] * x_sync))
    moved = speed / n_w
    return speed, k[_XNODE] * moved, k[_XRACK] * moved


class RateCache:
    """compute_rates kept between calls: after a change, only the jobs it reaches are recomputed
    (issue 14: "after a change, recompute only the jobs that share a link with it").

    Why: at Philly scale ~200 jobs run and a decision point starts or ends one or two, yet
    compute_rates ran its array pipeline and PlanStack splice over all of them: most of the
    engine's time. A job's speed depends on other jobs only through what they share: the flows on
    a link it uses (each link direction is split per flow), the cores of a contended node, a GPU
    with two workers or more (and, time-sliced per server, that GPU's node). So when every node a
    change touches (the started, ended or moved jobs' nodes; GPUs whose mode changed) is
    uncontended and has no shared GPU, before and after, only the started jobs and the jobs whose
    busiest link or host path changed can change speed. Those are recomputed one by one
    (`_uncoupled_speed`, which needs them sync and on such nodes only); a job on a link whose
    flows changed keeps its speed when that link was not its busiest and is not now. Per-node
    cores and NIC loads are summed again where the change reached them, over the jobs there in
    job order, as compute_rates' bincounts do; flows per link are whole counts, kept by adding
    and taking away (exact); other links' loads are summed when read (Rates.link_Bps). Otherwise
    (a contended node or a shared GPU in reach, an async job or one on such a node to
    recompute, fractional flow counts, a GPU past the cluster's) the whole compute_rates runs.
    The float operations are compute_rates' own in its order, so the rates are the same bits
    either way (tests/test_engine_identity.py, tests/test_rate_cache.py). The per-job columns
    are kept as one array: rows speed, cross-node, cross-rack, GPUs, then JobPlan.consts."""

    def __init__(self) -> None:
        self.stack = PlanStack()  # compute_rates' (the full path's)
        self.full_calls = self.fast_calls = 0
        self._key: tuple | None = None
        self._reset()

    def _reset(self) -> None:
        self._plans: list[JobPlan] = []
        self._by_id: dict[int, JobPlan] = {}
        self._index: dict[int, set[int]] = {}  # node (n) or n_nodes + link -> ids of the plans there
        self._frac = 0  # plans with a fractional flow count
        self._blk = None  # per-job rows (see above); None: no rates to go on from

    def rates(self, cluster: Cluster, jobs: list[Job], gpu_mode: np.ndarray, overheads: Overheads,
              packing: PackingModel) -> Rates:
        """compute_rates(cluster, jobs, gpu_mode, overheads, packing), the same bits."""
        key = (cluster, overheads, packing)
        if self._key is None or any(map(is_not, key, self._key)):
            self._key = key
            self._reset()
        plans = list(map(_PLAN, jobs))
        for i in compress(count(), map(is_, plans, repeat(None))):
            plans[i] = job_plan(cluster, jobs[i])
        # what changed: the plans between the common head and tail (found at C speed) that are
        # not on both sides (plans are never changed in place; a moved task makes a new one)
        old, n_old, n_new = self._plans, len(self._plans), len(plans)
        n_min = min(n_old, n_new)
        a = next(compress(count(), map(is_not, old, plans)), n_min)
        b = min(next(compress(count(), map(is_not, reversed(old), reversed(plans))), n_min), n_min - a)
        old_mid, new_mid = old[a : n_old - b], plans[a : n_new - b]
        both = set(map(id, old_mid)).intersection(map(id, new_mid))
        gone_at = [a + j for j, p in enumerate(old_mid) if id(p) not in both]
        came_at = [a + j for j, p in enumerate(new_mid) if id(p) not in both]
        n, index, by_id = cluster.n_nodes, self._index, self._by_id
        frac_before = self._frac
        for k in gone_at:
            p = old[k]
            del by_id[id(p)]
            self._frac -= not p.scalars.whole
            for r in p.scalars.res:
                index[r].discard(id(p))
        for k in came_at:
            p = plans[k]
            sc = _scalars(p, n)
            by_id[id(p)] = p
            self._frac += not sc.whole
            for r in sc.res:
                index.setdefault(r, set()).add(id(p))
        out = None
        if self._blk is not None and not frac_before and not self._frac and (gone_at or came_at):
            out = self._fast(cluster, jobs, plans, old, gone_at, came_at, gpu_mode, overheads)
        if out is None:
            out = self._full(cluster, jobs, plans, gpu_mode, overheads, packing)
            self.full_calls += 1
        else:
            self.fast_calls += 1
        self._plans = plans
        return out

    def _full(self, cluster, jobs, plans, gpu_mode, overheads, packing) -> Rates:
        r = compute_rates(cluster, jobs, gpu_mode, overheads, packing, self.stack)
        flows_total, cnt, contended = r._state
        n_gpus = cluster.n_gpus
        self._ft = flows_total.tolist()
        self._cap = _cluster_consts(cluster).cap.tolist()
        self._nh: dict[int, tuple[float, float]] = {}  # id(plan) -> _net_host under _ft, once asked
        self._cnt = np.zeros(n_gpus, np.int64)
        self._cnt[: min(len(cnt), n_gpus)] = cnt[:n_gpus]
        coupled = np.zeros(cluster.n_nodes, bool)
        coupled[contended] = True
        coupled[cluster.gpu_node[self._cnt >= 2]] = True
        self._coupled = coupled.tolist()
        # the full path only: workers on GPUs past the cluster's; jobs not in ledger-row order
        # (a job's place is found from its row)
        self._rows = r.consts[:, ROW].tolist()
        self._odd = bool(cnt[n_gpus:].any()) or any(map(float.__ge__, self._rows, self._rows[1:]))
        self._cpu_used, self._gpu_busy = r.cpu_used, r.gpu_busy
        self._nic = r.link_Bps[: 2 * cluster.n_nodes].copy()
        self._mode = gpu_mode.copy()
        self._blk = np.vstack([r.speed_arr, r.cross_node_arr, r.cross_rack_arr, r.gpus_arr, r.consts.T])
        got: dict[int, np.ndarray] = {}
        if len(contended):  # the jobs with a task that gets other than what it wants
            ends, want = self.stack.ends("task"), self.stack.arrays["want"]
            for k in np.flatnonzero(np.logical_or.reduceat(r._got != want, ends[:-1])):
                got[id(plans[k])] = r._got[ends[k] : ends[k + 1]]
        self._got = got
        return r

    def _fast(self, cluster, jobs, plans, old, gone_at, came_at, gpu_mode, overheads) -> Rates | None:
        if self._odd:
            return None
        n, cc = cluster.n_nodes, _cluster_consts(cluster)
        gone = [old[k] for k in gone_at]
        came = [plans[k] for k in came_at]
        # jobs stay in ledger-row order (their place is found from it)
        rows = self._rows[:]
        for k in reversed(gone_at):
            del rows[k]
        for k, p in zip(came_at, came):
            row = p.scalars.k[ROW]
            if (k and rows[k - 1] >= row) or (k < len(rows) and rows[k] <= row):
                return None
            rows.insert(k, row)
        dirty_nodes: set[int] = set()
        dirty_links: set[int] = set()
        for p in gone + came:
            dirty_nodes.update(p.scalars.nodes)
            dirty_links.update(p.scalars.links)
        mode_changed = np.flatnonzero(gpu_mode != self._mode)
        dirty_nodes.update(cluster.gpu_node[mode_changed].tolist())
        coupled = self._coupled
        if any(coupled[x] for x in dirty_nodes):
            return None
        # workers per GPU and flows per link: whole counts, kept by adding and taking away (exact)
        cnt, n_gpus, ft = self._cnt, cluster.n_gpus, self._ft
        ft_before = {link: ft[link] for link in dirty_links}
        gpus_moved = set()
        for plist, d in ((gone, -1), (came, 1)):
            for p in plist:
                sc = p.scalars
                for g in sc.gpus:
                    if g >= n_gpus:
                        return None
                    if g >= 0:
                        cnt[g] += d
                        gpus_moved.add(g)
                for link, f in zip(sc.links, sc.flows):
                    ft[link] += d * f
        index, by_id = self._index, self._by_id

        def on(r: int) -> list[_Scalars]:  # the plans on a node or link, in job order
            return sorted((by_id[i].scalars for i in index.get(r, ())), key=_row_of)

        # the touched nodes, after: uncoupled too, and their cores in use (each task its want)
        cpu_cap, base, n_gpu_node = cc.cpu_cap, cluster.gpu_base, cluster.gpus
        used: dict[int, float] = {}
        for x in dirty_nodes:
            total = 0.0
            for sc in on(x):
                for node, want in sc.node_want:
                    if node == x:
                        total += want
            b = int(base[x])
            if total > cpu_cap[x] or cnt[b : b + int(n_gpu_node[x])].max(initial=0) >= 2:
                return None
            used[x] = total
        # the jobs to recompute: those that came, and those whose busiest link or host path moved
        cap, ib, nh = self._cap, cc.ib, self._nh
        for p in gone:
            nh.pop(id(p), None)
        came_ids = set(map(id, came))
        redo = set(came_ids)
        for link in dirty_links:
            f_old, f_new = ft_before[link], ft[link]
            if f_old == f_new:
                continue
            c = cap[link]
            for i in index.get(n + link, ()):
                if i in redo:
                    continue
                if i not in nh:  # not known under the flows before: recomputed
                    redo.add(i)
                    continue
                sc = by_id[i].scalars
                j = sc.at[link]
                b, f, busiest = sc.nbytes[j], sc.flows[j], nh[i][0 if link < ib else 1]
                if f == 0 or c == 0 or not (b * f_old / c / f < busiest and b * f_new / c / f <= busiest):
                    redo.add(i)
        # the per-job rows: the gone ones out, the new ones in, then the recomputed ones
        blk = self._blk
        if gone_at:
            blk = np.delete(blk, gone_at, axis=1)
        if came_at:
            cols = np.array([(0.0, 0.0, 0.0, sc.k[_NW] * sc.k[_GPU]) + sc.k for sc in (p.scalars for p in came)]).T
            blk = np.insert(blk, [k - i for i, k in enumerate(came_at)], cols, axis=1)
        else:
            blk = blk.copy()
        latency_s, rpc_s = cluster.config.network.latency_s, overheads.rpc_s
        speed = blk[0]
        changed = []
        try:
            for i in redo:
                sc = by_id[i].scalars
                if sc.k[_SYNC] <= 0 or any(coupled[x] for x in sc.nodes if x not in dirty_nodes):
                    return None
                nh[i] = net_host = _net_host(sc, ft, cap, ib)
                row = _uncoupled_speed(sc, *net_host, latency_s, rpc_s)
                k = bisect.bisect_left(rows, sc.k[ROW])
                if i in came_ids or row[0] != speed.item(k):  # (a job whose speed stands keeps its row)
                    blk[0:3, k] = row
                    changed.append(sc)
        except ZeroDivisionError:  # (compute_rates' inf or nan)
            return None
        # NIC loads where a job's speed or a link's jobs changed, summed in job order
        nic_links = {link for link in dirty_links if link < 2 * n}
        for sc in changed:
            nic_links.update(link for link in sc.links if link < 2 * n)
        nic = self._nic
        if nic_links:
            nic = nic.copy()
            for link in nic_links:
                total = 0.0
                for sc in on(n + link):
                    total += sc.nbytes[sc.at[link]] * (speed.item(bisect.bisect_left(rows, sc.k[ROW])) / sc.k[_NW])
                nic[link] = total
        cpu_used = self._cpu_used
        if used:
            cpu_used = cpu_used.copy()
            for x, v in used.items():
                cpu_used[x] = v
        gpu_busy = self._gpu_busy
        if gpus_moved:
            gpu_busy = gpu_busy.copy()
            for g in gpus_moved:
                gpu_busy[g] = cnt[g] > 0
        got = self._got
        if any(id(p) in got for p in gone):
            got = {i: v for i, v in got.items() if i in by_id}
        if len(mode_changed):
            self._mode = gpu_mode.copy()
        self._rows, self._blk, self._got = rows, blk, got
        self._cpu_used, self._nic, self._gpu_busy = cpu_used, nic, gpu_busy
        return Rates(jobs, blk[0], blk[1], blk[2], blk[3], None, cpu_used, gpu_busy, plans, got, blk[4:].T,
                     nic=nic, n_link=cc.n_link)


def _row_of(sc: _Scalars) -> float:
    return sc.k[ROW]


def alone_speed(cluster: Cluster, job: Job, ps_nodes, worker_nodes, overheads: Overheads,
                packing: PackingModel) -> float:
    """True speed of `job` alone on an empty cluster with this placement, each worker on its own
    GPU (oracles, the fidelity check, tests); the job's tasks are (re)placed here."""
    job.resize(len(ps_nodes), len(worker_nodes))
    for t, n in zip(job.ps_tasks(), ps_nodes):
        t.node = int(n)
    for g, (t, n) in enumerate(zip(job.worker_tasks(), worker_nodes)):
        t.node = int(n)
        t.gpu = g if job.model.worker.gpu else -1
    r = compute_rates(cluster, [job], np.zeros(len(worker_nodes), np.int8), overheads, packing)
    return r.speed[job.job_id]

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

import weakref
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, count, repeat
from operator import is_, lt
from pathlib import Path

import numpy as np

from . import _kernels
from ._kernels import SHARE
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
# (the column numbers are defined in _kernels, whose kernels read the columns by number)
_N_CONSTS = SHARE + 1


@dataclass(eq=False)
class JobPlan:
    """What a job's speed depends on besides its neighbours, cached on the job until one of its
    tasks moves or its limits change (Simulator invalidates `job.plan`). Compared by identity
    (eq=False), so that lists of plans compare at C speed (PlanStack.update)."""

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
    # (a PlanStack's pool mark, the plan's index column there): where its arrays were copied
    slot: tuple | None = field(default=None, repr=False)


_FEW_ENTRIES = 96  # above it numpy's unique is the faster (measured: equal at about 100 entries)


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
        # each link once, in link order, with its entries' bytes and flows summed in their order:
        # np.unique's inverse and bincount; made in Python for a job's few entries, where numpy's
        # fixed cost is the larger (the same links and inverse, so the same sums)
        if len(comm.links) > _FEW_ENTRIES:  # a spread multi-PS job: hundreds to thousands
            links, inv = np.unique(comm.links, return_inverse=True)
            nbytes = np.bincount(inv, weights=comm.nbytes, minlength=len(links))
            flows = np.bincount(inv, weights=comm.flows, minlength=len(links))
        elif (entries := comm.links.tolist()) and all(map(lt, entries, entries[1:])):
            # each link once, in order (a read): bincount's sums of one entry each, 0.0 + x, are
            # these additions (same bits); with no entries bincount's result is int64, left to it
            links, nbytes, flows = comm.links, comm.nbytes + 0.0, comm.flows + 0.0
        else:
            links = sorted(set(entries))
            pos = {link: i for i, link in enumerate(links)}
            inv = [pos[link] for link in entries]
            links = np.array(links, dtype=np.int64)
            nbytes = np.bincount(inv, weights=comm.nbytes, minlength=len(links))
            flows = np.bincount(inv, weights=comm.flows, minlength=len(links))
        job.plan = JobPlan(
            task_ids=[t.task_id for t in ps + ws],
            # (no PS, as every all-reduce job: the workers' arrays are the tasks')
            task_node=np.concatenate([ps_nodes, w_nodes]) if ps else w_nodes,
            is_worker=np.arange(len(ps) + len(ws)) >= len(ps) if ps else np.ones(len(ws), bool),
            want=np.array([m.ps.cpu] * len(ps) + [w_want] * len(ws), dtype=float),
            limit=np.array([t.cpu_limit for t in ps + ws], dtype=float),
            w_gpu=np.array([t.gpu if on_gpu else -1 for t in ws], dtype=np.int64),
            w_compute=np.array([gpu_compute_s(m, cluster.node_gpu_type[t.node], job.spec.model)
                                if on_gpu else m.step_compute_s for t in ws], dtype=float),
            links=links,
            nbytes=nbytes,
            flows=flows,
            consts=(len(ps), len(ws), float(m.sync), m.step_overhead_s, m.ps_update_s, m.ps.cpu,
                    m.gpu_util, (m.cpu_max or m.worker.cpu) if m.compute_on == "cpu" else 0.0,
                    comm.task_time, comm.messages, m.overlap, m.overlap_max, every,
                    comm.cross_node, comm.cross_rack, m.worker.gpu, job.row,
                    job.placed_dominant_share(cluster)),
        )
    return job.plan


def common_run(x: list, y: list, n: int, tail: bool) -> int:
    """How many elements, up to n, lists x and y share at their head (or tail): a bisection over
    slice comparisons, each an element compare in C (an identity check for plans: JobPlan
    compares by identity), about n element checks in all instead of a Python-level call per
    element. (PlanStack's splice; Tiresias' diff of the running ids.)"""
    lo, hi = 0, n  # x and y share lo plans; they share no more than hi
    nx, ny = len(x), len(y)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        same = x[nx - mid : nx - lo] == y[ny - mid : ny - lo] if tail else x[lo:mid] == y[lo:mid]
        if same:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_ends(x: list, y: list) -> tuple[int, int]:
    """(head, tail): how many elements lists x and y share at their head, and then at their tail
    without overlapping the head, so x[head : len(x) - tail] became y[head : len(y) - tail]."""
    n = min(len(x), len(y))
    head = common_run(x, y, n, False)
    return head, common_run(x, y, n - head, True)


class PlanStack:
    """The running jobs' plan arrays concatenated in job order, kept between calls of
    `compute_rates`. Each plan's arrays are copied once into a pool (per field a growing array,
    the plan's rows noted on it: `JobPlan.slot`), the stack keeps per job where its rows lie
    (`index`), and a change splices only that index (the run of jobs between the first and the
    last changed plan; all of it when most changed); the rates kernel gathers the stack through
    it in compiled code (_kernels.gather). Splicing each field's arrays in numpy instead was ~15
    calls per change, the largest piece of a change at Philly scale (README Benchmarks, "plan
    pools"). Gathering is exact, so the rates are the same bits either way. Plans are never changed in
    place (a moved task makes a new one), so a plan seen before at its place is taken as
    unchanged. When a pool is full it is made again from the current stack alone (its gathered
    arrays are exactly that), so it holds the running jobs' plans and those added since; a plan
    whose rows were dropped so (a paused job's) is copied in again when it comes back."""

    # per task, per worker and per (job, link) entry; `consts` is one row per job
    FIELDS = {"task": ("task_node", "is_worker", "want", "limit"), "worker": ("w_gpu", "w_compute"),
              "entry": ("links", "nbytes", "flows")}
    DTYPES = {"task_node": np.int64, "is_worker": np.bool_, "want": np.float64, "limit": np.float64,
              "w_gpu": np.int64, "w_compute": np.float64, "links": np.int64, "nbytes": np.float64,
              "flows": np.float64}
    _FLAT = tuple(f for fs in FIELDS.values() for f in fs)
    _MIN_POOL = 256

    def __init__(self) -> None:
        self.plans: list[JobPlan] = []
        self.jobs: list[Job] = []  # what the plans are of, when followed (`follow`)
        # per job (a column each): offset and count in the pool of its task, worker and entry
        # rows, then its consts row
        self.index = np.zeros((7, 0), np.int64)
        self._pool(self._MIN_POOL, self._MIN_POOL, self._MIN_POOL, self._MIN_POOL)

    def _pool(self, n_task: int, n_worker: int, n_entry: int, n_job: int) -> None:
        """Empty pools of these sizes, and a new mark: every plan's rows are in the old ones."""
        size = {"task": n_task, "worker": n_worker, "entry": n_entry}
        self.pool = {f: np.zeros(size[g], self.DTYPES[f]) for g, fs in self.FIELDS.items() for f in fs}
        self.pool_consts = np.zeros((n_job, _N_CONSTS))
        self.used = [0, 0, 0, 0]  # rows taken: task, worker, entry, consts
        self.mark = object()  # JobPlan.slot holds the mark of the pools its rows are in

    @property
    def entry_counts(self) -> np.ndarray:
        """(job, link) entries per job."""
        return self.index[5]

    def gathered(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The stack's arrays (field -> its rows of every job, in job order) and consts (a row per
        job): what the kernel reads through the index."""
        out = _kernels.gather(self.index, self.pool_consts, True, *(self.pool[f] for f in self._FLAT))
        return dict(zip(self._FLAT, out[1:])), out[0]

    def ends(self, kind: str) -> np.ndarray:
        """Where each job's rows of a kind ("task", "worker", "entry") end, after a leading 0."""
        k = 2 * list(self.FIELDS).index(kind) + 1
        return np.concatenate([[0], np.cumsum(self.index[k], dtype=np.int64)])

    def _remake(self, need: list[int]) -> None:
        """New pools holding the current stack (rows in stack order: its gathered arrays) with
        room for `need` more rows of each kind; the stack's plans get their new rows."""
        n = len(self.plans)
        arrays, consts = self.gathered()
        live = [len(arrays["task_node"]), len(arrays["w_gpu"]), len(arrays["links"]), n]
        self._pool(*(max(2 * (a + b), self._MIN_POOL) for a, b in zip(live, need)))
        for f in self._FLAT:
            self.pool[f][: len(arrays[f])] = arrays[f]
        self.pool_consts[:n] = consts
        counts = self.index[1::2][:3]
        offs = np.cumsum(counts, axis=1) - counts
        self.index = np.concatenate([np.stack([offs[0], counts[0], offs[1], counts[1], offs[2],
                                               counts[2]]), np.arange(n)[None, :]])
        self.used = live
        for p, col in zip(self.plans, self.index.T.tolist()):
            p.slot = (self.mark, col)

    @staticmethod
    def _sizes(plans: list[JobPlan]) -> list[int]:
        """Rows of each kind, and consts rows, that `plans` take."""
        return [sum(len(p.task_node) for p in plans), sum(len(p.w_gpu) for p in plans),
                sum(len(p.links) for p in plans), len(plans)]

    def _slots(self, plans: list[JobPlan]) -> list[list[int]]:
        """Each plan's index column, its arrays copied into the pools where they are not yet."""
        def unpooled() -> list[JobPlan]:
            return [p for p in plans if p.slot is None or p.slot[0] is not self.mark]

        new = unpooled()
        if new:
            need = self._sizes(new)
            if any(u + k > len(a) for u, k, a in zip(self.used, need, (
                    self.pool["task_node"], self.pool["w_gpu"], self.pool["links"], self.pool_consts))):
                self._remake(self._sizes(plans))  # (room for all of them: some may lose rows)
                new = unpooled()
            pool, used = self.pool, self.used
            for p in new:
                col = []
                for k, fs in enumerate(self.FIELDS.values()):
                    lo, m = used[k], len(getattr(p, fs[0]))
                    for f in fs:
                        pool[f][lo : lo + m] = getattr(p, f)
                    used[k] = lo + m
                    col += (lo, m)
                self.pool_consts[used[3]] = p.consts
                col.append(used[3])
                used[3] += 1
                p.slot = (self.mark, col)
        return [p.slot[1] for p in plans]

    def update(self, plans: list[JobPlan]) -> "PlanStack":
        """Follow a list of plans: the run between their common head and tail with the last
        list's (identity) is spliced in."""
        old, n_old, n_new = self.plans, len(self.plans), len(plans)
        if n_old == n_new and old == plans:  # the same plans (identity, at C speed)
            return self
        a, b = common_ends(old, plans)  # the plans that differ lie between a head and a tail
        if 2 * (n_new - a - b) > n_new:  # most changed: the index made anew
            a = b = 0
        self._splice(list(plans), a, b, ())
        return self

    def follow(self, cluster: Cluster, jobs: list[Job], replanned) -> list[JobPlan]:
        """Follow a list of jobs, all fully placed, given `replanned`: every job whose plan was
        dropped since the last call (Job.touch), or more. Only the run between the common head
        and tail of the two job lists (identity), and the jobs of `replanned` in the list, have
        their plans read (made where dropped); the others keep theirs. Reading every job's plan
        at every change of the rates was the largest Python piece of a Philly-scale change (30 us
        of a rates change at ~400 running jobs)."""
        old, n_old, n = self.jobs, len(self.jobs), len(jobs)
        a, b = common_ends(old, jobs)
        if 2 * (n - a - b) > n:  # most changed: all read
            a = b = 0
        mid = jobs[a : n - b]
        plans = [*self.plans[:a], *(j.plan for j in mid), *self.plans[n_old - b :]]
        moved = []  # positions in the head or tail whose plan was dropped
        if a or b:
            for job in replanned:
                if job.fully_placed() and not any(job is m for m in mid):
                    try:  # (a paused job is not in the list: one scan of it, rarely)
                        k = jobs.index(job)
                    except ValueError:
                        continue
                    plans[k] = None
                    moved.append(k)
        for k in (*range(a, n - b), *moved):
            if plans[k] is None:
                plans[k] = job_plan(cluster, jobs[k])
        self.jobs = jobs
        if a == n == n_old and not moved:  # the same jobs and plans
            return self.plans
        self._splice(plans, a, b, moved)
        return plans

    def _splice(self, plans: list[JobPlan], a: int, b: int, moved) -> None:
        """The stack is now `plans`, of which those before `a`, in the last `b` and not at a
        position in `moved` were in the last one at the same place from either end."""
        cut = len(self.plans) - b  # old plans [a, cut) are replaced by plans[a : n - b]
        mid = plans[a : len(plans) - b]
        cols = self._slots(mid + [plans[k] for k in moved])  # (may remake the pools, and `index`)
        idx = self.index
        add = np.array(cols[: len(mid)], dtype=np.int64).reshape(len(mid), 7).T
        self.index = np.concatenate([idx[:, :a], add, idx[:, cut:]], axis=1)
        if moved:
            self.index[:, moved] = np.array(cols[len(mid) :], np.int64).T
        self.plans = plans


class Rates:
    """Speeds and loads under the current placement; per-job dicts and per-task cores are built
    when first read (the engine reads only the arrays, and rates change at every event)."""

    def __init__(self, jobs, speed, cross_node, cross_rack, gpus, link_Bps, cpu_used, gpu_busy, plans, got, rows,
                 shares, totals):
        # per running job, in the order given (arrays, for the engine's vectorised integration)
        self._jobs = jobs
        self.speed_arr, self.cross_node_arr, self.cross_rack_arr = speed, cross_node, cross_rack
        self.gpus_arr = gpus  # GPUs each job holds (attained service per second)
        self.link_Bps: np.ndarray = link_Bps  # bytes/s per link direction (see link_capacity)
        self.cpu_used: np.ndarray = cpu_used  # cores in use per node
        self.gpu_busy: np.ndarray = gpu_busy  # bool per GPU: a running worker computes on it
        self._plans, self._got, self._cores = plans, got, None
        # the engine's consts of each job (JobPlan.consts' ROW and SHARE): its Ledger row, its
        # dominant share
        self.rows, self.shares = rows, shares
        # cluster-wide totals, constant until the rates change (the engine integrates them): GPUs
        # busy, cores used, NIC bytes/s (np.sum's of gpu_busy, cpu_used, link_Bps[:2 n])
        self.gpus_busy, self.cores_used, self.nic_Bps = totals

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
            self._cores = dict(zip(task_ids, self._got.tolist()))
        return self._cores


class _ClusterConsts:
    """What compute_rates reads of a cluster at every call, made once per cluster (a Cluster's
    arrays are frozen)."""

    def __init__(self, cluster: Cluster):
        self.n_link = n_links(cluster)
        self.cap = link_capacity(cluster)
        self.ib = intra_base(cluster)
        self.cpus = np.ascontiguousarray(cluster.cpus, dtype=float)
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
    replanned=None,
) -> Rates:
    """Speed of every job in `jobs` (all fully placed and not paused), vectorised over jobs, in
    local batches per second: a sync job of w workers does w per step, an async one the sum of its
    workers' rates. `Job.total_steps` counts local batches, so an epoch takes fewer steps as w grows.
    `stack`: the caller's PlanStack, kept between calls (the Simulator's), else a fresh one; with
    `replanned` (the jobs whose plan was dropped since the stack's last call, or more) the stack
    follows the jobs (PlanStack.follow) instead of reading every job's plan."""
    n, cc = cluster.n_nodes, _cluster_consts(cluster)
    n_link, cap = cc.n_link, cc.cap
    follows = stack is not None and replanned is not None
    if follows:  # (an empty list too: `replanned` is spent)
        st, plans = stack, stack.follow(cluster, jobs, replanned)
    if not jobs:
        e = np.zeros(0)
        return Rates([], e, e, e, e, np.zeros(n_link), np.zeros(n), np.zeros(cluster.n_gpus, bool), [], np.zeros(0),
                     np.zeros(0, np.int64), e, (0.0, 0.0, 0.0))
    if not follows:  # every job's cached plan, then the missing
        plans = [j.plan for j in jobs]
        if None in plans:  # an identity scan in C (JobPlan compares by identity)
            for i in compress(count(), map(is_, plans, repeat(None))):
                plans[i] = job_plan(cluster, jobs[i])
        st = (stack or PlanStack()).update(plans)
    # One compiled pass (_kernels.rates) over the stacked plans does the model's arithmetic, in the
    # numpy code's order (same bits; sections that cannot change a speed are skipped):
    # ---- CPU: the tasks on a node share its cores by max-min fairness over what each can use,
    # soft limits capping a task only while others want the cores (work-conserving, FlowCon §3:
    # fair share up to each limit, then the rest to whoever wants); only contended nodes need
    # water-filling. With `cpu_switch_s` > 0, the k >= 2 tasks of a contended node that get less
    # than they want are time-sliced on every core (DL frameworks run a thread per core): CFS gives
    # each a slice of max(latency / k, min_granularity), every slice ends in a switch that costs
    # `cpu_switch_s` of work, so each of the node's tasks keeps 1 - cpu_switch_s / slice of its
    # cores (FlowCon, seed 004, Sec. 5.3-5.5: overlap costs; soft limits leave capped tasks
    # runnable, so the loss depends on how many jobs overlap; cores used still count the lost time).
    # ---- PS factor: the most CPU-starved PS of the job (1 for all-reduce jobs; 1 for all when no
    # node is contended: each PS gets the cores it wants, its reference).
    # ---- worker factors: alone on a GPU 1; time-sliced `switch / share` (share: the workers on
    # the GPU, or with `time_slice: server` a node's time-sliced workers over its time-sliced GPUs
    # that hold workers, G / T of a GPU each); packed: profiles.packing_speed, (1 - eps) *
    # min(1, 1 / sum of utilisations) ** gamma, or Gavel's measured pairs where every job on the
    # GPU names its job type (computed here, in numpy: see below); CPU-bound workers: their cores
    # over the reference.
    # ---- links: the sparse (job, link) incidence, one entry per link a job uses; each link
    # direction is shared equally per flow. A job's network time is its busiest NIC or uplink (or
    # its slowest capped connection); GPU transfers are staged through the host path, so its
    # busiest host path adds to it, and each sequential message adds the network latency.
    # ---- step time of one local batch on every worker. Communication (and the PS update, which
    # MXNet and TF pipeline per layer) overlaps the backward pass: up to `overlap` of the compute
    # hides up to `overlap_max` of it (DDP-style buckets; fitted on Pollux, `dlcluster fidelity`).
    # Per step a worker makes p request/response round trips and a PS serves w of them, each with
    # a fixed RPC cost (Optimus' t4*p and t3*w terms); the RPCs and the PS update happen once per
    # exchange, every k steps. Sync waits for the slowest worker, and its PS apply every worker's
    # gradient; async workers run their own loops and the job's speed is the sum of their rates.
    # Speeds are local batches per second (weak scaling: a sync step is one batch per worker).
    o = overheads
    switch = 1.0 - min(o.suspend_resume_s / o.time_slice_s, 1.0)
    args = (cc.cpus, cc.cpu_cap, cap, cluster.gpu_node, gpu_mode, cluster.n_gpus, cc.ib,
            cluster.config.network.latency_s, o.rpc_s, o.cpu_switch_s, o.cpu_sched_latency_s,
            o.cpu_min_granularity_s, switch, o.time_slice == "server", st.index, st.pool_consts,
            *(st.pool[f] for f in st._FLAT))
    out = _kernels.rates(*args, _NO_PACKED)
    if out[0]:  # a GPU set to pack holds several workers: their factors, then the pass again
        out = _kernels.rates(*args, _packed(cluster, jobs, st, packing, out[12], out[13]))
    _, s, xn, xr, gpus, link_Bps, cpu_used, gpu_busy, got, gpus_busy, cores_used, nic_Bps = out[:12]
    return Rates(jobs, s, xn, xr, gpus, link_Bps, cpu_used, gpu_busy, plans, got, out[14], out[15],
                 (gpus_busy, cores_used, nic_Bps))


_NO_PACKED = np.zeros(0)


def _packed(cluster: Cluster, jobs: list[Job], st: PlanStack, packing: PackingModel,
            util_w: np.ndarray, on_packed: np.ndarray) -> np.ndarray:
    """Each worker's speed factor on a GPU set to pack (used where `on_packed`: it shares one):
    profiles.packing_speed from its GPU's summed utilisation `util_w`, or, where every job on the
    GPU names its Gavel job type, Gavel's measured pairs (Colocation). In numpy, not in the kernel:
    numpy's `**` may use SIMD code whose last bit differs from libm's pow."""
    packed = (1.0 - packing.eps) * np.minimum(1.0, 1.0 / np.maximum(util_w, 1e-12)) ** packing.gamma
    if packing.colocation is not None:
        w_job = np.repeat(np.arange(len(jobs)), st.index[3])  # workers per job
        w_gpu = st.gathered()[0]["w_gpu"]
        gavel = [j.model.gavel_job for j in jobs]
        for gid in np.unique(w_gpu[on_packed]):
            ws = np.flatnonzero(on_packed & (w_gpu == gid))
            names = [gavel[w_job[i]] for i in ws]
            if None not in names:
                gpu = cluster.node_gpu_type[cluster.gpu_node[gid]]
                packed[ws] = packing.colocation.factors(gpu, names)
    return packed


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

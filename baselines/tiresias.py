"""Tiresias: discretized two-dimensional least-attained-service (2D-LAS) (Gu et al., NSDI'19).

The paper is not among the seeds and its text was not at hand: the section numbers (§4.2
scheduling, §4.3 placement) and the Gittins formula are cited from the published description as
recalled, and checked against the authors' simulator (SymbioticLab/Tiresias @b0ef844) where it
has the same thing (queue thresholds, get_gittins_index's 0 past the largest size).

Tiresias §4.2: a job's attained service is its GPUs x the time it has run (JobView.attained_gpu_s,
"2D": space x time); jobs sit in K priority queues Q0..Q(K-1) by attained service with thresholds
between them, a new job enters Q0 and a job is demoted when its attained service crosses its
queue's threshold; the scheduler runs jobs queue by queue, and a job of a higher queue preempts
running jobs of lower queues (Decision.preempt; progress is kept, resuming costs the simulator's
checkpoint restore). Starvation: with PromoteKnob (`starve_limit` > 0) a job waiting in a lower
queue for longer than starve_limit x the time it ran since it last entered Q0 goes back to Q0
with its service counter reset.

Choices where the sources leave room (reference: the authors' simulator, SymbioticLab/Tiresias
@b0ef844, simulator/run_sim.py `dlas_sim_jobs` with `--schedule=dlas-gpu`, and jobs.py):
- Thresholds: 3 queues split at 3,250 and 7,200 GPU-seconds (jobs.py: num_queue 3, queue_limit
  [3250, 7200, 18000], of which the first K-1 are used). `thresholds=` sets K-1 of them.
- Starvation promotion off by default (`dlas-gpu` runs with solve_starvation = 0).
- Order inside a queue: running jobs before waiting ones, each group first-come first-served by
  the time it entered the queue (the simulator moves a queue's pending jobs to its end after every
  round), so jobs of one queue never preempt each other.
- Admission: the simulator's loop counts free GPUs only; here a job runs if all its tasks fit on
  nodes (CPU, memory, GPUs, bandwidth) and a job that does not fit is skipped, not blocking. A
  waiting job preempts only running jobs of lower priority, the lowest first, and only as many as
  it needs to fit; when even all of them would not make room, nobody is preempted.
- Demotion and promotion at their instant: while a job waits, each decision asks for a decision
  point (`Decision.wake_at`) when the next running job crosses its queue's threshold (its GPUs x
  time reaches it) or, with PromoteKnob, the next waiting job becomes due for promotion, as the
  authors' simulator steps to each such instant (run_sim.py `next_job_jump`). With no job
  waiting, neither can change who runs, and a crossing is seen at the next decision point (jobs
  that crossed meanwhile enter their queue in arrival order). Before 2026-11-28 no wake-up was
  asked for (the docstring said the API had none), so a demotion waited for the next arrival,
  completion or tick (600 s on `default`); `wake=False` still decides so (no Gym env can express
  a wake-up, so that is how Tiresias runs through dlclusterenv.adapter). Under 2D-Gittins a
  waiting job's index overtaking a running one's inside a queue is still seen at decision points.
- Placement (§4.3, skew-based): Tiresias consolidates only the jobs whose model is sensitive to
  placement, which it finds from the skew of the model's tensor sizes (a few large tensors make
  the PS holding them a hot spot when spread); the others take free GPUs wherever they are. The
  view has no tensor list, so the model's size stands in for its skew (the paper's sensitive
  examples, VGG and AlexNet, have large fully-connected tensors and 240-550 MB of parameters;
  ResNet and Inception, insensitive, about 100 MB): `skew_bytes` (200 MB by default, between the
  two groups; None: no job is held to consolidation) splits them. Every job is placed by
  `placer` ("pack": the job's nodes first, then best fit); a sensitive job is started only on
  the fewest servers its GPU workers need (ceil(workers / GPUs per server)) and otherwise waits,
  as consolidation requires; an insensitive one starts on any GPUs that fit.
- Jobs keep the (p, w) they asked for (Tiresias does not resize).

`tiresias-gittins`, the discretized 2D-Gittins index (§4.2, the other half of the paper, for when
the distribution of job sizes is known): the queues and their thresholds are 2D-LAS's, and
inside a queue jobs are ordered by the Gittins index of their attained service a (GPU-seconds),

    G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a]   (§4.2),

the probability that the job finishes within the next D of service over the service it is
expected to use meanwhile; the highest index goes first. Choices:
- S: the GPU-seconds of service of the jobs that have finished so far (a job leaving the view
  has finished, at that decision point: its size is the service seen at the previous one plus
  its GPUs x the time since, if it was running), learned online, as Tiresias learns the
  distribution from history. Until `min_history` jobs have finished there is no distribution and
  a queue keeps LAS's order.
- D = the service left until the job's queue threshold (its quantum before demotion); in the
  last queue D is unbounded, so G = 1 / E[S - a | S > a]. (The authors' simulator,
  run_sim.py `gittins_sim_jobs`, uses one static D of 3,250 GPU-s and no queues; here the
  discretized form of the paper.)
- A job that has outlived every finished job (no S > a) gets index 0, as the authors'
  get_gittins_index returns. Ties keep LAS's order (running first, then entry order), so a
  running job is preempted by any job of a higher queue (as in 2D-LAS) or by a job of its own
  queue with a higher index (2D-LAS never preempts within a queue).

Cost (issue 13, bug 9): state is kept from one decision point to the next, so a decision looks at
the running jobs, those that arrived, started or stopped, and the waiting jobs that may start,
not at every waiting job; with PromoteKnob on, every waiting job that has run is visited too
(its waiting time grows); with `tiresias-gittins`, every waiting job whose service since it last
entered Q0 is not 0 is ranked again when the distribution changes (a job finished), those with
none share one index per queue and keep their order. This assumes the scheduler sees every
decision point (a job's service changes only while it runs, and a job that runs was started by
a decision or was running at one). Decisions are those of the full scan (tests/test_overload.py).
With skew placement, a sensitive job that has the GPUs but that the placer does not consolidate
used to be tried, with its walk over the jobs it may preempt, at every decision point, and every
such job in turn; now waiting jobs are bucketed by their workers too, and Admission remembers
which workers failed on which state of a walk (their placement does not depend on the rest of
the job), so one walk per kind of workers is made per change of the cluster, none while nothing
changes.
Issue 14: the simulator rebuilds a running job's view whenever it is read (its service and
losses move), which made a Philly-scale decision cost every running job's view. Tiresias now
reads the running jobs' ids and their attained service (ClusterView.attained_gpu_s) and keeps the
view taken at the first decision point that sees a job running for what stays fixed while it
runs (_Running); new jobs are found by id from the end of view.jobs. Decisions unchanged (every
job's finish time and every decision equal on default seeds 0-2, the Philly 1-VC week and the
all-VC day, main vs branch).
Issue 14, at whole-Philly scale (branch tires5): most of a decision was the preemption walks'
trial placements (about 17 per walk on the all-VC week, almost all of a placement-sensitive job
whose pack placement is found but spread over too many servers) and per-decision passes over
the running jobs. Now `placers.place_job` places a job's workers in one pass (the same nodes and
charges), the running jobs' service is one ledger gather (JobViews.attained_gpu_s), a running
job's 2D-LAS key is kept from its queue entry (no key made per running job per decision), the
jobs a walk may preempt are found by bisection on the round's keys, a demotion is one comparison
with the job's own queue threshold, and a walk state with fewer free GPUs than the job's workers
is refused by count (where `_room` refused it after a pass over the nodes). Decisions unchanged
(tests/test_baseline_tiresias.py pins main's logs; README, Benchmarks).
Issue 14, branch tires6: a walk's trial no longer places the job and takes it back. Where every
free value and every charge is a whole number (Philly: cores, GB, GPUs, bandwidth 0), the nodes
`place_job` would give a job without PS are counted (placers.WorkerOrder: pack's order of the
nodes with a free GPU kept sorted as the walk releases jobs; tested equal to place_job), and
the count stops once the first nodes the job may use (its most servers) are filled: such a
trial is refused as `_room` refuses (no memo written, so a later job of the same workers counts
again; what is remembered stays true). Per decision, the running jobs' service is one dict,
threshold crossings one array comparison, the 2D-LAS order of the running jobs is kept sorted
from one decision to the next (only the jobs that started, stopped or entered a queue move),
and Admission's state and suffix sums make no Python call per running job. The running jobs'
views are still built once, at the first decision point that sees each running
(tests/test_overload.py). Decisions unchanged (benchmarks/decision_log.py logs byte-equal to
main's: LAS and 2D-Gittins on `default` seeds 0-2, the Philly 1-VC week, the all-VC day, and
LAS on all VCs 2017-10-01..04).
Issue 14, branch tires7: a walk's trials share the cluster state, and releasing one job moves
the capacity of its nodes only; `placers.WorkerOrder.nodes` keeps each scan's result (SPREAD,
None or the nodes) until a node at or before the last one the scan read changes, so most trials
(86% of the all-VC week's) read no node; the order itself is kept from one exact round to the
next and follows the new capacity (`rebase`: the nodes whose values differ), where it was made
anew from every node; a kept running job is released per node in one charge where every value
is whole (the sums are exact, so equal to task by task); a walk counts its free GPUs and does
not call a trial that count refuses; the running jobs' ids and ledger rows are kept by the view
(api.JobViews) while the same jobs run. Decisions unchanged (benchmarks/decision_log.py logs
byte-equal to main's: LAS and 2D-Gittins on `default` seeds 0-2, the Philly 1-VC week, the
all-VC day and all VCs 2017-10-01..04).
Issue 14, branch tires8: no running job's view is built. A job this scheduler starts is recorded
(_Running) from the view it had waiting and the nodes Admission gave it (its running view, read
at the next decision point, made the engine compute the rates for its tasks' cores, and gave
only the demands and nodes the decision already knew); a job found running that it did not
start is still read from its view. The running jobs' service is one gather kept as an array; the jobs that left or joined
the running set are one diff of the engine's id list, made only when that list is a new one,
and drive the stopped / finished / started bookkeeping and the 2D-LAS order. A walk of a job
consolidated on one server is not made when it is certain to fail
(`placers.WorkerOrder.never_one_node`: no node that could take the workers is ever ahead of
one that holds some but not all of them; tested against orders made anew at every state of
random walks): it ends as the walk would (the failure remembered for its workers). Decisions
unchanged (decision_log.py logs byte-equal to main's: LAS and 2D-Gittins on `default` seeds
0-2, the Philly 1-VC week, the all-VC day and all VCs 2017-10-01..04).
Issue 14, branch tires9: 2D-Gittins ranked every running job at every decision point with ~7
numpy calls per index (83% of its decision); the indices a decision point needs are now made in
one compiled call (`gittins_indices`: numba, numpy's float operations and pairwise sum, bit for
bit; tests/test_tiresias_cost.py keeps numpy's formula as the oracle). Admission counts the
running jobs below a key as a sum over a kept per-job list (no suffix-sum pass per round),
counts free GPUs once per start, and skips its per-job type check for Tiresias' own records.
Decisions unchanged (decision_log.py logs byte-equal to main's, the same runs as above).
Issue 14, branch tires10: the certainty check of a walk (`never_one_node`, about 1 ms a call in
Python over the ~180 charges a walk gives back) is one compiled pass over the kept records' charge
arrays (`_Running.charges`), the same operations as the Python code (kept in
tests/test_placers.py as its oracle). Decisions unchanged (logs byte-equal to main's: fifo, LAS
and 2D-Gittins on `default` seeds 0-2 and the all-VC day, LAS on all VCs 2017-10-01..04).
Issue 14, branch tires11: a decision point where no job waits (after the queues are updated:
13,554 of the all-VC week's 24,741) returns the empty decision without an Admission round (its
capacity copy, `state()` and set-up); the failures kept from the last round stay as they were,
true in the state they were found in. The running set's diff is made over the run between the
old and new id lists' common head and tail (`speed.common_ends`), not over every running id.
Decisions unchanged (decision_log.py logs byte-equal to main's: fifo, LAS and 2D-Gittins on
`default` seeds 0-2 and the all-VC day, LAS on all VCs 2017-10-01..04;
tests/test_tiresias_cost.py checks the skip against a run making every round).
Issue 14, branch tires14: a walk of a consolidated job made a trial per state (about 330,000
failed trials of one-server jobs and 100,000 of jobs on 2-8 servers on the whole trace, where
never_one_node could not tell); the first state whose trial places the job is now found in one
compiled pass over the charges the walk gives back (`placers.WorkerOrder.placed_state`, exact:
it replaced never_one_node), the walk fails at once where there is none and otherwise makes only
that state's trial. After a walk, the victims it keeps running and the placement it takes are
counted (WorkerOrder) where the walk found every value whole, not placed and taken back. Per
round, the running jobs below a priority are summed once per place in the order; a round's
failures are kept (and its state made) only where it started no job. Decisions unchanged
(decision_log.py logs byte-equal to main's: LAS and 2D-Gittins on `default` seeds 0-2 and the
all-VC day, LAS on all VCs 2017-10-01..04; tests/test_tiresias_cost.py checks each shortcut
against the trials, place_job and the full state).
"""

from __future__ import annotations

import bisect
import math
from itertools import repeat
from operator import attrgetter
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from dlclusterenv._kernels import _jit, pairwise_sum
from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_bool, check_int, check_real
from dlclusterenv.placers import (
    Capacity, WorkerOrder, add_placement, get_placer, integral, place_job,
)
from dlclusterenv.speed import common_ends


@dataclass
class _Queued:
    queue: int
    seq: int  # order of entry into its queue
    gpu_s0: float  # attained service when it last entered Q0
    run_s0: float  # run time when it last entered Q0
    waited_s: float = 0.0  # time waiting since it last entered Q0
    seen_s: float = 0.0  # time of the last decision point that saw it
    kind: tuple = ()  # (GPUs, Admission.workers) it asks for: the key of its waiting bucket
    waiting: bool = False  # in its bucket
    a: float = 0.0  # service since it last entered Q0, when it was put in its bucket
    ngi: float = 0.0  # minus its Gittins index then (0 under 2D-LAS); its bucket key if a != 0
    rkey: tuple = ()  # its priority key while running under 2D-LAS order (set by _enter)


class _Bucket:
    """Waiting jobs of one queue asking for one number of GPUs, in queue order: those with no
    service since they entered Q0 (one index per queue: ordered by entry alone) and the others,
    by (minus their index, entry)."""

    __slots__ = ("fresh", "ran")

    def __init__(self) -> None:
        self.fresh: list[tuple[int, str]] = []  # (seq, job id)
        self.ran: list[tuple[float, int, str]] = []  # (-index, seq, job id)

    def skip(self, pos: list[int], ngi0: float, key: tuple) -> None:
        """Move `pos` past the jobs before `key` ((-index, seq, job id))."""
        if ngi0 < key[0]:  # every fresh job (key ngi0) comes before it
            pos[0] = len(self.fresh)
        elif ngi0 == key[0]:
            pos[0] = max(pos[0], bisect.bisect_right(self.fresh, key[1:]))
        pos[1] = max(pos[1], bisect.bisect_right(self.ran, key))

    def head(self, pos: list[int], ngi0: float):
        """The first job past `pos` as ((-index, seq, job id), which list), or (None, -1)."""
        f = (ngi0, *self.fresh[pos[0]]) if pos[0] < len(self.fresh) else None
        r = self.ran[pos[1]] if pos[1] < len(self.ran) else None
        if f is not None and (r is None or f < r):
            return f, 0
        return r, (1 if r is not None else -1)


class _Running:
    """A running job as Tiresias reads it at a decision point: what does not change while it runs
    (its demands and nodes: Tiresias never migrates or resizes), and its attained service now
    (ClusterView.attained_gpu_s), so that a decision does not rebuild the view of every running
    job (issue 14). Made from the view the job had waiting and the nodes this scheduler placed it
    on (`nodes`: its tasks' nodes in the view's task order), or, for a job running that this
    scheduler did not start, from its running view; kept, and its service updated, from one
    decision point to the next while the job runs. What Tiresias reads of it every decision is
    worked out once (`gpus` its workers', `nodes` and `held` as Admission reads them). Its
    service is read from `att[0]`, the scheduler's service of the running jobs at this decision
    point (_Service: one gather per decision, not a write per running job)."""

    __slots__ = ("view", "job_id", "arrival_s", "att", "placed", "num_workers",
                 "worker_demand", "gpus", "nodes", "held", "sig", "whole", "touched", "per_node",
                 "charges")
    status = "running"
    _FIXED = frozenset(("num_ps", "ps_demand", "param_bytes"))

    def __init__(self, view: JobView, att: list | None = None, nodes: Iterable[int] | None = None):
        self.view, self.job_id, self.arrival_s = view, view.job_id, view.arrival_s
        self.att = [{view.job_id: view.attained_gpu_s}] if att is None else att
        tasks = view.tasks
        self.nodes = tuple(t.node for t in tasks) if nodes is None else tuple(nodes)
        if len(self.nodes) != len(tasks):
            raise ValueError(f"job {view.job_id}: {len(self.nodes)} nodes for {len(tasks)} tasks")
        self.placed = tuple(zip(self.nodes, (t.demand for t in tasks)))  # (node, demand) per task
        self.num_workers, self.worker_demand = view.num_workers, view.worker_demand
        self.gpus = view.num_workers * view.worker_demand.gpu
        self.held = sum(d.gpu for n, d in self.placed if n >= 0)
        self.sig = (self.job_id, self.nodes)  # its part of Admission.state
        # releasing it keeps a whole-number capacity whole
        self.whole = all(_whole(d) for n, d in self.placed if n >= 0)
        self.touched = tuple(dict.fromkeys(self.nodes))  # nodes whose capacity a release moves
        # what it holds per node (node, cores, GB, bytes/s, GPUs), summed over its tasks there:
        # one charge per node where every value is whole (the sums are then exact, so equal to
        # the charges task by task: Admission._release)
        per: dict[int, list] = {}
        for n, d in self.placed:
            if n >= 0:
                v = per.setdefault(n, [n, 0.0, 0.0, 0.0, 0])
                v[1] += d.cpu
                v[2] += d.mem_gb
                v[3] += d.bw_MBps * 1e6
                v[4] += d.gpu
        self.per_node = tuple(map(tuple, per.values()))
        self.charges = np.array(self.per_node, dtype=float).reshape(len(per), 5)  # (placed_state's)

    @property
    def attained_gpu_s(self) -> float:
        return self.att[0][self.job_id]

    def __getattr__(self, name: str):
        if name not in _Running._FIXED:  # anything else may have moved since the view was taken
            raise AttributeError(f"a running job's {name!r} is not kept between decisions")
        return getattr(self.view, name)


class _Service:
    """The running jobs' attained service at one decision point (ids and values in the same
    order), read by id: the first two reads by position, later ones through a dict then made
    (under 2D-LAS only the jobs that finish are looked up, so most decision points read none
    or one; 2D-Gittins reads every running job's)."""

    __slots__ = ("ids", "values", "_by_id", "_reads")

    def __init__(self, ids: list[str], values: np.ndarray) -> None:
        self.ids, self.values, self._by_id, self._reads = ids, values, None, 0

    def __getitem__(self, job_id: str) -> float:
        if self._by_id is None:
            self._reads += 1
            if self._reads <= 2:
                return self.values.item(self.ids.index(job_id))
            self._by_id = dict(zip(self.ids, self.values.tolist()))
        return self._by_id[job_id]


def _sig(job) -> tuple:
    """A running job's part of Admission.state: its id and its tasks' nodes."""
    return job.sig if isinstance(job, _Running) else (job.job_id, tuple(t.node for t in job.tasks))


_SIG, _HELD = attrgetter("sig"), attrgetter("held")  # the same, of a _Running


def _held(job) -> int:
    """GPUs held by a running job's placed tasks (Admission._lower)."""
    return job.held if isinstance(job, _Running) else sum(
        t.demand.gpu for t in job.tasks if t.node >= 0)


_WHOLE: dict[tuple, bool] = {}


def _whole(d) -> bool:
    """Whether a demand's charges are whole numbers (placers.integral), remembered per value."""
    k = (d.cpu, d.mem_gb, d.bw_MBps, d.gpu)
    w = _WHOLE.get(k)
    if w is None:
        w = _WHOLE[k] = integral(d.cpu, d.mem_gb, d.bw_MBps * 1e6, d.gpu)
    return w


def _whole_tasks(job) -> bool:
    """Whether every placed task of a running job charges whole numbers."""
    return job.whole if isinstance(job, _Running) else all(
        _whole(t.demand) for t in job.tasks if t.node >= 0)


def _splice(arrays: tuple, old: list, new: list, left, joined, values: tuple,
            missing: tuple) -> tuple:
    """Arrays in the order of the ids `old`, made to follow `new` (the same ids in the same
    order, less those that `left`, with those that `joined`): the values at the ids that left
    taken out, those of the ids that joined (from the dicts `values`, or `missing`) put in."""
    out = list(arrays)
    for k in sorted(map(old.index, left), reverse=True):
        out = [np.concatenate((a[:k], a[k + 1:])) for a in out]
    for k in sorted(map(new.index, joined)):  # (ascending: each lands where `new` has it)
        jid = new[k]
        out = [np.concatenate((a[:k], [v.get(jid, m)], a[k:]))
               for a, v, m in zip(out, values, missing)]
    return tuple(out)


def _arrival(job: JobView) -> tuple[float, str]:
    return job.arrival_s, job.job_id


def _gpus(job: JobView) -> int:
    return job.num_ps * job.ps_demand.gpu + job.num_workers * job.worker_demand.gpu


def _workers(job: JobView, servers: int | None) -> tuple:
    """What decides where a job's workers go and whether that placement is taken (Admission)."""
    return job.worker_demand, job.num_workers, servers


@_jit
def _gittins(sizes, a, delta, out):
    """out[j] = gittins_index(sizes, a[j], delta[j]) for every j, in one compiled pass per j.

    Why compiled (issue 14): 2D-Gittins ranks every running job at every decision point, and
    the numpy form paid ~7 array calls per index (83% of its decision). The same floats as
    numpy's `sizes[sizes > a] - a`, `np.minimum(left, delta).mean()` and `(left <= delta)
    .mean()`: the kept values are written in the sizes' order (a branch-free compaction) and
    summed with numpy's pairwise blocking (`_kernels.pairwise_sum`); a mean of booleans is
    their exact count over m."""
    buf = np.empty(len(sizes))
    for j in range(len(a)):
        aj, dj = a[j], delta[j]
        m = 0
        c = 0
        for s in sizes:
            v = s - aj
            keep = s > aj
            c += keep and v <= dj
            buf[m] = v if v <= dj else dj  # np.minimum (no NaN here: service is finite)
            m += keep
        if m == 0:
            out[j] = 0.0
            continue
        done = c / m if np.isfinite(dj) else 1.0
        out[j] = done / (pairwise_sum(buf[:m]) / m)
    return out


def gittins_indices(sizes: np.ndarray, a, delta) -> np.ndarray:
    """§4.2: P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a] over the sizes S seen,
    for each pair of `a` and `delta` (sequences of one length); 0 where no size exceeds a."""
    a, delta = np.asarray(a, dtype=float), np.asarray(delta, dtype=float)
    if a.shape != delta.shape or a.ndim != 1:
        raise ValueError(f"a and delta must be 1-d of one length, got {a.shape} and {delta.shape}")
    return _gittins(np.ascontiguousarray(sizes, dtype=float), a, delta, np.empty(len(a)))


def gittins_index(sizes: np.ndarray, a: float, delta: float) -> float:
    """gittins_indices for one service `a` and horizon `delta`."""
    return float(gittins_indices(sizes, [a], [delta])[0])


class Tiresias(Scheduler):
    """Kept incrementally, so that a decision costs the running jobs and those that may start,
    not the whole queue: waiting jobs sit in buckets by (queue, GPUs asked for) in queue order,
    and a bucket asking for more GPUs than are free plus those of the running jobs it may
    preempt is not looked at (such a job cannot fit: the round would skip it anyway)."""

    name = "tiresias"
    gittins = False

    def __init__(
        self,
        thresholds: tuple[float, ...] = (3250.0, 7200.0),
        starve_limit: float = 0.0,
        placer: str = "pack",
        skew_bytes: float | None = 200e6,
        min_history: int = 1,
        wake: bool = True,
    ):
        """Finite values only: an infinite threshold is a queue no job reaches, an infinite
        `starve_limit` one that never promotes (0 turns it off), an infinite `skew_bytes` no
        sensitive job (None says so). `wake=False`: no wake-up asked for (demotions seen at the
        engine's decision points only), for front doors that cannot express one (the Gym
        adapter, dlclusterenv.adapter)."""
        owner = type(self).__name__
        if isinstance(thresholds, (str, bytes)) or not hasattr(thresholds, "__iter__"):
            raise ValueError(f"{owner}: thresholds must be a list of GPU-seconds, got {thresholds!r}")
        for i, t in enumerate(thresholds):
            check_real(t, f"thresholds[{i}]", owner, gt=0)
        if list(thresholds) != sorted(thresholds):
            raise ValueError(f"{owner}: thresholds must be in increasing order, got {thresholds!r}")
        check_real(starve_limit, "starve_limit", owner, ge=0, note="0: off")
        if skew_bytes is not None:
            check_real(skew_bytes, "skew_bytes", owner, ge=0, note="None: no job is held to consolidation")
        check_int(min_history, "min_history", owner, ge=1)
        check_bool(wake, "wake", owner)
        self.wake = wake
        self.thresholds = tuple(float(t) for t in thresholds)
        self.starve_limit = starve_limit
        self.placer = get_placer(placer)
        self.skew_bytes = skew_bytes
        self.min_history = min_history
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.state: dict[str, _Queued] = {}
        self._seq = 0
        self._ran: dict[str, None] = {}  # waiting after having run (starvation candidates)
        # waiting jobs: queue -> GPUs asked for -> their bucket
        self._waiting: dict[int, dict[int, _Bucket]] = {}
        self.sizes: list[float] = []  # GPU-seconds of the jobs that finished (2D-Gittins)
        # for the sizes of jobs that finish before the next decision point: the time of the last
        # one, the jobs it preempted and the (pending) views of those it started
        self._last_t = 0.0
        self._stopped: set[str] = set()
        self._started: dict[str, tuple] = {}  # Admission.started
        self._keyed = None  # the distribution the buckets' keys were computed on (None: LAS)
        self._gcache: dict[tuple[int, float], float] = {}
        self._garr = np.zeros(0)
        self._tops = (*self.thresholds, math.inf)  # queue -> its threshold (inf: the last)
        # (Admission.state, the failures found in it) at the last decision point
        self._failed: tuple = (None, None)
        self._runs: dict[str, _Running] = {}  # the running jobs at the last decision point
        self._gone: dict[str, _Running] = {}  # those of them not running now
        # [the running jobs' service now] (_Running.att)
        self._att: list = [_Service([], np.zeros(0))]
        self._prev_att = self._att[0]  # the same at the last decision point
        # the jobs the last decision started: id -> (view, nodes) (Admission.started)
        self._starting: dict[str, tuple] = {}
        # ids of the jobs running now and not at the last decision point, and the reverse
        self._new: Iterable[str] = ()
        self._left: Iterable[str] = ()
        # the running jobs' queue limits (gpu_s0 and the threshold of their queue; inf in the
        # last), id -> value, and as arrays in the order of `_ids` (None: made when first read,
        # then spliced as `_ids` changes and written as a running job enters a queue)
        self._g0: dict[str, float] = {}
        self._thr: dict[str, float] = {}
        self._ids: list[str] = []
        self._prev_ids = self._ids  # the same at the last decision point
        self._lims = None
        # 2D-LAS: the running jobs in priority order, their keys in the same order
        self._order: list[_Running] = []
        self._okeys: list[tuple] = []
        self._placed: dict[str, tuple] = {}  # id -> key of the jobs in `_order`
        self._rekeyed: set[str] = set()  # jobs that entered a queue since `_order` was made
        self._las_ids = None  # the running jobs' id list (`_ids`) `_order` was kept for
        self._att_now = np.zeros(0)  # the running jobs' service, in the order of `_ids`
        self._per: tuple = (None, 0)  # (cluster, its most GPUs on one server)
        self._worder: WorkerOrder | None = None  # the last exact round's (Admission `order`)

    def queue_of(self, job_id: str) -> int:
        return self.state[job_id].queue

    def sensitive(self, job: JobView) -> bool:
        """§4.3: this job must be consolidated (its model's skew, by the docstring's size proxy)."""
        return self.skew_bytes is not None and job.param_bytes >= self.skew_bytes

    def servers(self, view: ClusterView, job: JobView) -> int | None:
        """The most servers the job's GPU workers may be placed on: the fewest that hold them
        (ceil(workers / GPUs per server)) if it is sensitive, else None (any placement)."""
        if not self.sensitive(job) or not job.worker_demand.gpu:
            return None
        if self._per[0] is not view.cluster:
            self._per = (view.cluster, int(view.cluster.gpus.max()))
        return math.ceil(job.num_workers / max(self._per[1], 1))

    def index(self, job: JobView) -> float:
        """The job's 2D-Gittins index in its queue (see the module docstring)."""
        st = self.state[job.job_id]
        a = job.attained_gpu_s - st.gpu_s0
        top = self.thresholds[st.queue] if st.queue < len(self.thresholds) else math.inf
        return gittins_index(np.asarray(self.sizes), a, top - a)

    def _active(self) -> bool:
        """Whether jobs are ordered by their Gittins index inside a queue (else by LAS)."""
        return self.gittins and len(self.sizes) >= self.min_history

    def _ngi(self, queue: int, a: float) -> float:
        """Minus the Gittins index of service `a` in `queue` (0 under LAS), this decision."""
        if self._keyed is None:
            return 0.0
        k = (queue, a)
        g = self._gcache.get(k)
        if g is None:
            g = self._gcache[k] = -gittins_index(self._garr, a, self._tops[queue] - a)
        return g

    def _ngis(self, queues: list[int], a: list[float]) -> list[float]:
        """`_ngi` of each (queue, service) pair `queues`[k], `a`[k]: those not made this decision
        point in one compiled call (`gittins_indices`) instead of one per job (2D-Gittins reads
        every running job's index at every decision point)."""
        pairs = list(zip(queues, a))
        if self._keyed is None:
            return [0.0] * len(pairs)
        cache = self._gcache
        todo = list(dict.fromkeys(k for k in pairs if k not in cache))
        if todo:
            av = np.array([k[1] for k in todo], dtype=float)
            tops = np.array([self._tops[k[0]] for k in todo], dtype=float)
            cache.update(zip(todo, (-gittins_indices(self._garr, av, tops - av)).tolist()))
        return list(map(cache.__getitem__, pairs))

    def _running(self, view: ClusterView) -> dict[str, _Running]:
        """The running jobs (id -> _Running; one dict, updated): a job this scheduler started is
        recorded from the view it had waiting and the nodes it was given (no running view is
        built), any other from its running view; the records of those that left are kept for
        this decision point (`_gone`). Their service is one gather, made here (`_att`)."""
        ids, att = view.running.job_ids(), view.running.attained_gpu_s(array=True)
        self._prev_att, self._prev_ids = self._att[0], self._ids
        self._att[0] = _Service(ids, att)
        self._att_now = att
        # the engine's list is kept while the same jobs run: the same object, and none started
        # since the last decision point (a start would have made a new one)
        self._new = self._left = ()
        self._gone = {}
        if ids is not self._ids:
            if ids != self._ids:
                # `_runs` holds the ids `_ids`; both lists are in arrival order, so the jobs that
                # started or left are in the run between their common head and tail (found by
                # slice compares in C; one start or end per change, ~240 running on Philly)
                runs, starting, old = self._runs, self._starting, self._ids
                a, b = common_ends(old, ids)
                was, now = set(old[a : len(old) - b]), set(ids[a : len(ids) - b])
                self._new, self._left = now - was, was - now
                self._gone = {jid: runs.pop(jid) for jid in self._left}
                for jid in self._new:
                    s = starting.get(jid)
                    runs[jid] = (_Running(view.running[ids.index(jid)], self._att) if s is None
                                 else _Running(s[0], self._att, s[1]))
                if self._lims is not None:
                    self._lims = _splice(self._lims, self._ids, ids, self._left, self._new,
                                         (self._g0, self._thr), (0.0, math.inf))
            self._ids = ids
        self._starting = {}
        return self._runs

    def _las_order(self, running: dict[str, _Running]) -> tuple[list[_Running], list[tuple]]:
        """The running jobs in 2D-LAS order and their keys (`_Queued.rkey`, fixed from a job's
        queue entry), kept sorted from one decision point to the next: only the jobs that
        started, stopped or entered a queue since move (the order a sort of all would give:
        the keys are distinct)."""
        order, okeys, placed, state = self._order, self._okeys, self._placed, self.state
        if self._las_ids is self._ids and self._rekeyed.isdisjoint(placed):
            self._rekeyed = set()  # the same running jobs as when last kept, none re-entered
            return order, okeys
        if self._las_ids is self._prev_ids:  # kept for the last decision point's jobs: those
            moved = self._rekeyed.intersection(placed)  # that stopped or started since, and
            drop = moved.union(self._left)  # those that re-entered a queue, move
            add = moved.difference(self._left).union(self._new)
        else:  # kept for older jobs (only a run's first point reaches this): made anew, since a
            # job may have stopped and started again in between and its record be another now
            order.clear()
            okeys.clear()
            placed.clear()
            drop, add = (), None
        self._las_ids = self._ids
        for jid in drop:
            k = bisect.bisect_left(okeys, placed.pop(jid))
            del okeys[k], order[k]
        for jid in running.keys() - placed.keys() if add is None else add:
            key = placed[jid] = state[jid].rkey
            k = bisect.bisect_left(okeys, key)
            okeys.insert(k, key)
            order.insert(k, running[jid])
        self._rekeyed = set()
        return order, okeys

    def decide(self, view: ClusterView) -> Decision:
        d = self._decide(view)
        if self.wake and len(self._waiting):  # (len: a job waits; buckets are dropped when empty)
            d.wake_at = self._next_move(view, d)
        return d

    def _next_move(self, view: ClusterView, d: Decision) -> float | None:
        """When the next running job (after `d`) crosses its queue's threshold, or, with
        PromoteKnob, the next waiting job that has run is due for promotion (module docstring);
        None if never. A microsecond late, so the crossing has happened when it is read."""
        now, due = view.time, math.inf
        gone = set(d.preempt)
        runs = [(jid, a) for jid, a in zip(self._ids, self._att_now.tolist()) if jid not in gone]
        runs += [(jid, v.attained_gpu_s) for jid, (v, _) in self._starting.items()]
        for jid, att in runs:
            st = self.state.get(jid)
            gpus = st.kind[0] if st is not None else 0
            if gpus > 0 and st.queue < len(self.thresholds):
                due = min(due, now + max(st.gpu_s0 + self._thr[jid] - att, 0.0) / gpus)
        if self.starve_limit > 0:
            for jid in self._ran:
                st = self.state[jid]
                ran_s = view.job(jid).run_s - st.run_s0
                if st.queue > 0 and ran_s > 0:
                    due = min(due, now + max(self.starve_limit * ran_s - st.waited_s, 0.0))
        return due + 1e-6 if due < math.inf else None

    def _decide(self, view: ClusterView) -> Decision:
        running = self._running(view)
        self._update_queues(view, running)
        keys: dict[str, tuple] = {}

        def key(j: JobView) -> tuple[int, float, bool, int]:
            k = keys.get(j.job_id)
            if k is None:
                st = self.state[j.job_id]
                ngi = self._ngi(st.queue, j.attained_gpu_s - st.gpu_s0)
                k = keys[j.job_id] = (st.queue, ngi, j.status != "running", st.seq)
            return k

        if self._keyed is None:  # LAS order: a running job's key is fixed by its queue entry
            ordered, okeys = self._las_order(running)
        else:  # every running job's key as `key` makes it, its index from one compiled call
            ids = self._ids
            sts = list(map(self.state.__getitem__, ids))
            queues = [st.queue for st in sts]
            ngis = self._ngis(queues, [att - st.gpu_s0 for att, st in
                                       zip(self._att_now.tolist(), sts)])
            rkeys = [(q, g, False, st.seq) for q, g, st in zip(queues, ngis, sts)]
            order = sorted(range(len(ids)), key=rkeys.__getitem__)
            ordered, okeys = [running[ids[i]] for i in order], [rkeys[i] for i in order]
        if not self._waiting:  # no job to admit (half the Philly week's decision points): the
            d = Decision()  # round's decision, empty, without the round; the failures kept
            self._remember(view, d)  # (`_failed`) stay true in the state they were found in
            return d
        admission = Admission(
            view, ordered, key, self.placer, lambda j: self.servers(view, j), okeys, self._worder,
            kept=True,
        )
        state = None
        if self._failed[0] is not None:
            state = admission.state()
            if state == self._failed[0]:  # nothing a walk sees changed since the last decision
                admission.failed = admission.first = self._failed[1]
        self._admit(view, admission)
        self._starting = admission.started
        # kept for the next round only where this one started no job: a job it starts runs at
        # the next decision point, whose state then differs from this one's (unless that job
        # has ended already: a reuse missed, which only saves walks), so the state (~20 us) is
        # not made for nothing at the rounds that start a job (most of the Philly trace's)
        self._failed = (None, None) if admission.started else (
            admission.state() if state is None else state, admission.first)
        if admission._order is not None:  # kept for the next round while it is exact
            self._worder = admission._order if admission._exact else None
        d = admission.decision()
        self._remember(view, d)
        return d

    def _remember(self, view: ClusterView, d: Decision) -> None:
        """What the size of a watched job that finishes before the next decision point is made
        of (it was running at this one, kept in `_runs`, or started by this decision)."""
        self._last_t = view.time
        self._stopped = set(d.preempt)
        self._started = self._starting  # (the jobs watched that were not running)

    def _size(self, jid: str, now: float) -> tuple[tuple[float, str], float]:
        """(arrival key, GPU-seconds of service) of a watched job that finished: the service
        seen at the last decision point plus its GPUs x the time since."""
        r = self._gone.get(jid)
        if r is not None:
            gpus = 0 if jid in self._stopped else r.gpus
            return _arrival(r), self._prev_att[jid] + gpus * (now - self._last_t)
        v = self._started[jid][0]
        return _arrival(v), v.attained_gpu_s + v.num_workers * v.worker_demand.gpu * (
            now - self._last_t)

    def _admit(self, view: ClusterView, admission: Admission) -> None:
        """Try waiting jobs in priority order, leaving out, as the round goes, buckets whose
        first job cannot start: it asks for more GPUs than are free plus those held by the
        running jobs it may preempt (of lower priority: lower queues, and under 2D-Gittins its
        own queue's running jobs of lower index), or its workers failed on every state its walk
        would see (Admission.refused, until a job starts: a bucket left out so is then moved past
        the jobs that came before the one that started, which failed). The bucket's later jobs
        may preempt no more."""
        for q in sorted(self._waiting):
            buckets = self._waiting[q]
            ngi0 = self._ngi(q, 0.0)
            pos = {kind: [0, 0] for kind in buckets}
            refused: list[tuple] = []
            while True:
                free = admission.free_gpus()
                best = best_key = None
                for kind, b in buckets.items():
                    k, which = b.head(pos[kind], ngi0)
                    if which < 0:
                        continue
                    key = (q, k[0], True, k[1])
                    if kind[0] > free + admission.lower_gpus(key):
                        continue
                    if admission.refused(kind[1], key):
                        refused.append(kind)
                        continue
                    if best_key is None or k < best_key:
                        best, best_key, best_which = kind, k, which
                if best is None:
                    break
                pos[best][best_which] += 1
                job = view.job(best_key[2])
                if admission.start(job):
                    for kind in refused:
                        buckets[kind].skip(pos[kind], ngi0, best_key)
                refused = []

    def _enter(self, st: _Queued, queue: int, job_id: str | None = None) -> None:
        """The job enters `queue` now; with its id, its limits and LAS key are noted for the
        running jobs' kept arrays and order (`_lims`, `_las_order`)."""
        st.queue = queue
        st.seq = self._seq
        st.rkey = (queue, 0.0, False, st.seq)
        self._seq += 1
        if job_id is None:
            return
        g0 = self._g0[job_id] = st.gpu_s0
        thr = self._thr[job_id] = (self.thresholds[queue] if queue < len(self.thresholds)
                                   else math.inf)
        if self._lims is not None and job_id in self._runs:  # (the arrays follow `_ids`)
            k = self._ids.index(job_id)
            self._lims[0][k], self._lims[1][k] = g0, thr
        self._rekeyed.add(job_id)

    def _wait(self, job_id: str, waiting: bool, job: JobView | None = None) -> None:
        """Put a waiting job in its bucket (`job`: its view now), or take it out."""
        st = self.state[job_id]
        st.waiting = waiting
        b = self._waiting.setdefault(st.queue, {}).setdefault(st.kind, _Bucket())
        if waiting:
            st.a = job.attained_gpu_s - st.gpu_s0
            if st.a == 0:
                bisect.insort(b.fresh, (st.seq, job_id))
            else:
                st.ngi = self._ngi(st.queue, st.a)
                bisect.insort(b.ran, (st.ngi, st.seq, job_id))
            return
        if st.a == 0:
            del b.fresh[bisect.bisect_left(b.fresh, (st.seq, job_id))]
        else:
            del b.ran[bisect.bisect_left(b.ran, (st.ngi, st.seq, job_id))]
        if not b.fresh and not b.ran:
            del self._waiting[st.queue][st.kind]
            if not self._waiting[st.queue]:
                del self._waiting[st.queue]

    def _rekey(self) -> None:
        """The index order of this decision point: when the distribution of sizes changed (or
        2D-Gittins comes into force), waiting jobs with service are ordered again."""
        keyed = (id(self.sizes), len(self.sizes)) if self._active() else None
        if keyed == self._keyed:
            return
        self._keyed = keyed
        self._gcache = {}
        self._garr = np.asarray(self.sizes, dtype=float)
        if self._keyed is not None:
            ran = [(q, self.state[e[2]].a) for q, bs in self._waiting.items()
                   for b in bs.values() for e in b.ran]
            if ran:
                self._ngis(*map(list, zip(*ran)))  # (made here together, read below)
        for q, buckets in self._waiting.items():
            for b in buckets.values():
                for k, (_, seq, jid) in enumerate(b.ran):
                    st = self.state[jid]
                    st.ngi = self._ngi(q, st.a)
                    b.ran[k] = (st.ngi, seq, jid)
                b.ran.sort()

    def _update_queues(self, view: ClusterView, running: dict[str, _Running]) -> None:
        """What changed since the last decision point: jobs that finished (their sizes learned),
        started or stopped, arrived, were demoted (only a job that ran since can cross a
        threshold) or promoted."""
        now = view.time
        stopped = []
        done = []
        # the jobs watched (running at the last decision point, or started by it) not running
        # now, in that order: stopped or finished
        left = self._left
        gone = [jid for jid in self._prev_ids if jid in left] if len(left) > 1 else list(left)
        gone += [jid for jid in self._started if jid not in running]
        for jid in gone:
            st = self.state[jid]
            try:
                job = view.job(jid)
            except KeyError:  # finished: its size is the service seen last plus since then
                done.append(self._size(jid, now))
                if st.waiting:
                    self._wait(jid, False)
                del self.state[jid], self._g0[jid], self._thr[jid]
                self._ran.pop(jid, None)
                continue
            if not st.waiting:
                stopped.append(job)
        self.sizes.extend(s for _, s in sorted(done))  # in arrival order, as a full pass would
        self._rekey()
        for jid in self._new:  # only these can have been waiting: a job running before was
            st = self.state.get(jid)  # taken out of its bucket then (started)
            if st is not None and st.waiting:
                self._wait(jid, False)
                self._ran.pop(jid, None)
        for job in stopped:
            if job.run_s > 0:
                self._ran[job.job_id] = None
        # starvation (PromoteKnob on): every waiting job that has run counts the time since the
        # last decision point; a cost per such job, so kept only when it can promote
        promoted = set()
        if self.starve_limit > 0:
            for jid in self._ran:
                job, st = view.job(jid), self.state[jid]
                st.waited_s += now - st.seen_s
                st.seen_s = now
                ran_s = job.run_s - st.run_s0
                if st.queue > 0 and ran_s > 0 and st.waited_s >= self.starve_limit * ran_s:
                    promoted.add(jid)
            for job in running.values():
                if job.job_id in self.state:
                    self.state[job.job_id].seen_s = now
        # entries into queues in arrival order, as a pass over all jobs in that order would make
        # (only jobs promoted or demoted enter a queue: the others are left out before sorting)
        top, thresholds, state = len(self.thresholds), self.thresholds, self.state

        def moves(job, st: _Queued) -> bool:
            """Promoted, or its queue's threshold crossed (the thresholds increase, so the count
            of those crossed exceeds its queue exactly when its own queue's is crossed)."""
            return job.job_id in promoted or (
                st.queue < top and job.attained_gpu_s - st.gpu_s0 >= thresholds[st.queue])

        if self._lims is None:  # the running jobs' limits in the order of their service
            ids, n = self._ids, len(self._ids)
            self._lims = (np.fromiter(map(self._g0.get, ids, repeat(0.0)), float, n),
                          np.fromiter(map(self._thr.get, ids, repeat(math.inf)), float, n))
        g0, thr = self._lims
        # a running job's threshold crossed, for all of them at once: the same float operations
        # as `moves` (a job without a state has limit inf; none of them is promoted)
        crossed = (self._att_now - g0 >= thr).nonzero()[0].tolist()
        # (most decision points: no job crossed a threshold, stopped or was promoted)
        if crossed or promoted or stopped:
            changed = sorted(
                [running[jid] for k in crossed if (jid := self._ids[k]) not in promoted]
                + [running[jid] for jid in promoted if jid in running]
                + [j for j in stopped if moves(j, state[j.job_id])]
                + [view.job(jid) for jid in promoted if jid not in running], key=_arrival)
            for job in changed:
                st = self.state[job.job_id]
                if job.job_id in promoted:  # PromoteKnob: back to Q0, service counter reset
                    bucketed = st.waiting  # a job that stopped just now gets its bucket below
                    if bucketed:
                        self._wait(job.job_id, False)
                    st.gpu_s0, st.run_s0, st.waited_s = job.attained_gpu_s, job.run_s, 0.0
                    self._enter(st, 0, job.job_id)
                    if bucketed:
                        self._wait(job.job_id, True, job)
                    continue
                # 2D-LAS: GPUs x time attained since the job last entered Q0, against the
                # thresholds (read once: each read of a running job's is a lookup)
                a = job.attained_gpu_s - st.gpu_s0
                queue = sum(a >= t for t in self.thresholds)
                if queue > st.queue:  # demoted
                    self._enter(st, queue, job.job_id)
        for job in stopped:
            self._wait(job.job_id, True, job)
        for job in self._arrivals(view):  # a new job enters Q0
            kind = (_gpus(job), _workers(job, self.servers(view, job)))
            st = _Queued(0, 0, job.attained_gpu_s, job.run_s, 0.0, now, kind)
            self.state[job.job_id] = st
            self._enter(st, 0, job.job_id)
            if job.status != "running":  # (a running one is in `running` already)
                self._wait(job.job_id, True, job)
                if job.run_s > 0:
                    self._ran[job.job_id] = None

    def _arrivals(self, view: ClusterView) -> list[JobView]:
        """Jobs not seen before, in arrival order: the newest active jobs (view.jobs is in
        arrival order), found from the end."""
        new = []
        for k in range(len(view.jobs) - 1, -1, -1):
            if view.jobs.job_id(k) in self.state:
                break
            new.append(view.jobs[k])
        return new[::-1]


class _Failed:
    """What an Admission round learnt since its last start (see Admission)."""

    __slots__ = ("walks", "workers")

    def __init__(self) -> None:
        # (worker demand, workers, most servers) -> the deepest walk that failed on them alone
        self.walks: dict[tuple, int] = {}
        # (lower jobs released, worker demand) -> [the longest run of workers placed, the
        # fewest workers found not to fit]: any fewer workers go where that run's first ones do
        self.workers: dict[tuple, list] = {}


class Admission:
    """One round of Tiresias' `dlas_sim_jobs` loop, node-aware: running jobs keep their nodes;
    a waiting job (`start`, in priority order) starts where the placer fits all its tasks,
    preempting running jobs of lower priority (lowest first, no more than it needs) when that
    makes room; a job that does not fit even so waits, and later jobs still get their turn.
    `running` is in priority order, `key` orders any job by priority; `servers(job)`, when given,
    is the most servers the job's workers may be placed on (Tiresias: a sensitive job must be
    consolidated; None: any), and a placement on more counts as not fitting; `keys`, when given,
    are the running jobs' keys (else made with `key` when first needed); `kept`: every running
    job is a _Running record (Tiresias' own), not a view.

    Failures are remembered (issue 13): the workers of a job are placed first, so where they go
    depends only on their demand, their number and the free resources, and a later job's walk
    (it has lower priority) preempts a prefix of the same lower jobs in the same order. A job
    whose every state of its walk failed on its workers alone (placed nowhere, or on too many
    servers) therefore fails in the same way for any later job with the same workers and a walk
    no deeper, until a job starts: such a job is refused without placing anything. `failed`
    holds these (workers -> walk depth), `first` those found before the first start, which stay
    true at a later decision point with the same `state()`."""

    def __init__(
        self, view: ClusterView, running: list[JobView], key: Callable, placer,
        servers: Callable | None = None, keys: list | None = None,
        order: WorkerOrder | None = None, kept: bool = False,
    ):
        self.cluster, self.cap, self.placer = view.cluster, Capacity.of(view), placer
        self._view = view
        self.running, self.key = running, key
        most: dict[str, int | None] = {}  # job id -> servers(job), asked once per round
        given = servers if servers is not None else lambda job: None

        def servers_of(job) -> int | None:
            k = most.get(job.job_id, most)
            if k is most:
                k = most[job.job_id] = given(job)
            return k

        self.servers = servers_of
        self.victims: list[JobView] = []
        self.d = Decision()
        # id -> (view, its tasks' nodes in the view's order) of the jobs this round starts
        self.started: dict[str, tuple[JobView, tuple[int, ...]]] = {}
        # (GPUs held by each running job, 0 if preempted; the preempted ones' positions;
        # place in `running` -> `_lower`'s answer there), until a job is preempted
        self._suffix = None
        self._free: int | None = None  # free_gpus(), while no job started since it was counted
        # views, not kept records (`kept`: the caller's are all _Running, no check per job)
        self._views = not kept and bool(set(map(type, running)) - {_Running})
        self._keys = keys  # the running jobs' keys (ascending: they are in order), or None
        self._gone: set[str] = set()  # the victims' ids
        self.failed = _Failed()
        self.first = self.failed
        # every free value a whole number (placers.integral): a walk's trials count workers
        # (placers.WorkerOrder) instead of placing and taking them back; kept while every
        # charge and release is whole too (None: not checked yet; checked at the first trial,
        # when the charges since have all been whole, so the capacity is whole if it was)
        self._exact: bool | None = None
        self._order: WorkerOrder | None = None  # made at the first such trial, then kept
        # a WorkerOrder of an earlier round that ended exact (`order`): followed to this round's
        # capacity (WorkerOrder.rebase) instead of made anew
        self._kept = order if order is not None and (
            order.cluster is self.cluster and order.placer is placer) else None

    def state(self) -> tuple:
        """What a walk depends on: free resources and the running jobs, in order, on their
        nodes, as the round found them (the view's free resources: the same at any time of the
        round)."""
        v = self._view
        return (v.free_cpu.tobytes(), v.free_mem.tobytes(), v.free_bw.tobytes(),
                v.free_gpus.tobytes(),
                tuple(map(_sig, self.running)) if self._views else
                tuple(map(_SIG, self.running)))

    def free_gpus(self) -> int:
        """The free GPUs, counted once per start: a start that fails leaves the GPUs as they
        were (whole-number charges and releases undone exactly), so only a job that starts
        changes them (`start`)."""
        if self._free is None:
            self._free = int(self.cap.gpu.sum())
        return self._free

    def _lower(self, key) -> tuple[int, int]:
        """(GPUs held, count) of the running jobs not preempted yet whose priority is below
        `key`."""
        if self._suffix is None:  # GPUs held per running job (0: preempted), the preempted
            gone, running = self._gone, self.running  # ones' positions
            held = list(map(_held, running) if self._views else map(_HELD, running))
            dead = []
            for i, r in enumerate(running) if gone else ():
                if r.job_id in gone:
                    held[i] = 0
                    dead.append(i)
            self._suffix = (held, dead, {})
        held, dead, sums = self._suffix  # (a sum of a slice, kept per place: the waiting jobs
        i = self._below(key)  # of one queue share it under 2D-LAS; whole numbers, so exact)
        got = sums.get(i)
        if got is None:
            got = sums[i] = (sum(held[i:]),
                             len(held) - i - (len(dead) - bisect.bisect_left(dead, i)))
        return got

    def _below(self, key) -> int:
        """Where the running jobs of lower priority than `key` start in `running`."""
        if self._keys is None:
            self._keys = [self.key(r) for r in self.running]
        return bisect.bisect_right(self._keys, key)

    def lower_gpus(self, key) -> int:
        """GPUs held by the running jobs not preempted yet whose priority is below `key`: with
        the free ones, an upper bound on the GPUs a job of that key can get this round."""
        return self._lower(key)[0]

    def refused(self, workers: tuple, key) -> bool:
        """Whether jobs with these workers (`_workers`) failed on them alone at every state a job
        of priority `key` would see in its walk."""
        depth = self.failed.walks.get(workers)  # (no walk failed: nothing to count)
        return depth is not None and depth >= self._lower(key)[1]

    def _release(self, job: JobView, sign: int) -> None:
        if self._exact is not False and not _whole_tasks(job):
            self._exact = False
        kept = type(job) is _Running
        if self._order is not None:
            self._order.touch(job.touched if kept else (t.node for t in job.tasks))
        if kept and self._exact:  # whole values: one exact charge per node
            c = self.cap
            for n, cpu, mem, bw, gpu in job.per_node:
                c.cpu[n] += sign * cpu
                c.mem[n] += sign * mem
                c.bw[n] += sign * bw
                c.gpu[n] += sign * gpu
            return
        for n, d in job.placed if kept else ((t.node, t.demand) for t in job.tasks):
            if n >= 0:
                self.cap.take(n, d, -sign)

    def _accepts(self, job: JobView, workers: list[int]) -> bool:
        most = self.servers(job)
        return most is None or len(set(workers)) <= most

    def _room(self, job: JobView) -> bool:
        """Whether the free resources could hold the job's workers on as few nodes as it takes
        (all of them if any number will do): true of every placement it would take, whatever
        the placer, so when false no placement is tried. Per-node counts are rounded up a little
        (1e-6 of a core or GB, 1 byte/s), never refusing what fits."""
        d, c, w = job.worker_demand, self.cap, job.num_workers
        most = self.servers(job)
        fit = np.full(len(c.gpu), w, dtype=float)
        for free, need, tol in ((c.cpu, d.cpu, 1e-6), (c.mem, d.mem_gb, 1e-6),
                                (c.bw, d.bw_MBps * 1e6, 1.0), (c.gpu, d.gpu, 0)):
            if need > 0:
                fit = np.minimum(fit, np.floor((free + tol) / need))
        fit = np.maximum(fit, 0)
        if most is not None and most < len(fit):
            fit = np.partition(fit, len(fit) - most)[len(fit) - most:]
        return fit.sum() >= w

    def _fit(self, job: JobView, m: int | None = None, blame: list[bool] | None = None,
             free: int | None = None):
        """The job's placement now (charged to `cap`), or None. In a walk, `m` lower jobs
        released: what is known of its workers in this state is used and added to, and
        `blame[0]` set False when a failure is not its workers' alone; `free`: the free GPUs
        (free_gpus()), where the walk counts them."""
        w = job.num_workers
        if self._exact is not False and not (_whole(job.worker_demand)
                                             and (not job.num_ps or _whole(job.ps_demand))):
            self._exact = False  # this job's charges (placements are charged) may not be whole
        if m is not None and w * job.worker_demand.gpu > (
                self.free_gpus() if free is None else free):
            return None  # fewer GPUs than its workers: `_room` below would refuse it as well
        seen = None if m is None else self.failed.workers.setdefault(
            (m, job.worker_demand), [[], math.inf])
        # a walk's trial of a job without PS, every value whole: where place_job would put its
        # workers, counted without charging (`got` taken only if the job takes it); counting
        # costs less than `_room`'s bound, so the bound is not checked first (what the count
        # finds of the workers is as true as what `_room` would have spared). After the walk
        # (no `m`: the victims it keeps running, the placement it takes) the same where the
        # walk found every value whole
        dry = (m is not None or self._exact) and not job.num_ps and job.worker_demand.gpu >= 1
        if dry and self._exact is None:
            if self._kept is not None:  # whole when it ended: whole now if what changed is
                diff = self._kept.rebase(self.cap)
                self._order = self._kept
                c = self.cap
                self._exact = not len(diff) or integral(
                    np.concatenate((c.cpu[diff], c.mem[diff], c.bw[diff])))
            else:
                self._exact = WorkerOrder.usable(self.cluster, self.placer) and integral(
                    self.cap.cpu, self.cap.mem, self.cap.bw)
        dry = dry and self._exact
        if seen is not None:
            known = None
            if len(seen[0]) >= w:
                known = self._accepts(job, seen[0][:w])
            elif w >= seen[1] or not self._accepts(job, seen[0]):
                known = False  # its first workers already do not fit, or not on few enough nodes
            if known is None and not dry and not self._room(job):
                known = False  # no placer could put its workers on few enough nodes
            if known is False:
                return None
        if dry:
            if self._order is None:
                self._order = WorkerOrder(self.cluster, self.cap, self.placer)
            nodes = self._order.nodes(job.worker_demand, w, self.servers(job))
            if nodes is WorkerOrder.SPREAD:  # not on few enough nodes: refused, as by `_room`
                return None
            got = None if nodes is None else ([], nodes)
        else:
            got = place_job(
                self.cluster, self.cap, self.placer, job.ps_demand, job.worker_demand,
                job.num_ps, w,
            )
        if got is not None:
            if seen is not None and len(got[1]) > len(seen[0]):
                seen[0] = got[1]
            if self._accepts(job, got[1]):
                if dry:  # the charges place_job makes, in its order (whole: exact anyway)
                    for n in got[1]:
                        self.cap.take(n, job.worker_demand)
                self._touch(got)
                return got
            if not dry:
                self._unfit(job, got)  # a placement the job does not take (not consolidated)
        elif seen is not None and known is None and blame[0]:  # its workers alone: acceptable?
            alone = None if dry else place_job(  # (dry: the same call as above, no PS)
                self.cluster, self.cap, self.placer, job.ps_demand, job.worker_demand, 0, w)
            if alone is None:
                seen[1] = min(seen[1], w)
            else:
                self._unfit(job, alone)
                seen[0] = alone[1] if w > len(seen[0]) else seen[0]
                blame[0] = blame[0] and not self._accepts(job, alone[1])
        elif seen is not None:  # its workers fit acceptably: the PS do not
            blame[0] = False
        return None

    def _touch(self, got) -> None:
        """Nodes whose capacity a placement `got` changed, for the kept WorkerOrder."""
        if self._order is not None:
            self._order.touch(got[0])
            self._order.touch(got[1])

    def _unfit(self, job: JobView, got) -> None:
        self._touch(got)
        for n in got[0]:
            self.cap.take(n, job.ps_demand, -1)
        for n in got[1]:
            self.cap.take(n, job.worker_demand, -1)

    def _placed_at(self, job: JobView, lower: list) -> int | None:
        """How many of `lower` the walk releases before its first trial that places the job
        (-1: none does), found without its trials (WorkerOrder.placed_state), for a job held to
        consolidation (Tiresias' placement-sensitive jobs: almost every walk on Philly) whose
        trials are counted (`_fit`'s dry case, just taken at the walk's first state), every job
        it would release being a kept one with whole charges; None where not known this way.
        The trials skipped have effects on kept results only (WorkerOrder's, `failed.workers`),
        which do not change what is decided."""
        most = self.servers(job)
        if not (self._exact and self._order is not None and most is not None
                and not job.num_ps and job.worker_demand.gpu >= 1):
            return None
        if not all(type(r) is _Running and r.whole for r in lower):
            return None
        return self._order.placed_state(job.worker_demand, job.num_workers, most,
                                        [r.charges for r in lower])

    def start(self, job: JobView) -> bool:
        """Start the job if it fits, preempting if need be; whether it starts."""
        k = self.key(job)
        workers = _workers(job, self.servers(job))
        if self.refused(workers, k):
            return False
        blame = [True]
        free = self.free_gpus()
        got = self._fit(job, 0, blame, free)
        if got is None:  # (so the free GPUs are `free` again)
            gone = self._gone
            lower = [r for r in reversed(self.running[self._below(k):]) if r.job_id not in gone]
            at = self._placed_at(job, lower)
            if at == -1:  # as the walk below would end, without walking
                self.failed.walks[workers] = max(self.failed.walks.get(workers, -1), len(lower))
                return False
            freed = []
            # the free GPUs as the walk releases jobs: a state with fewer than the job's workers
            # is refused by `_fit` first thing (its one effect, on `_exact`, made by the trial
            # above), so it is not called for it; nor a state before the one `_placed_at`
            # found (its trial would fail)
            need = job.num_workers * job.worker_demand.gpu
            for r in lower:
                self._release(r, 1)
                freed.append(r)
                free += _held(r)
                if need > free or (at is not None and len(freed) < at):
                    continue
                got = self._fit(job, len(freed), blame, free)
                if got is not None:
                    break
            if got is None:
                for r in freed:
                    self._release(r, -1)
                if blame[0]:
                    self.failed.walks[workers] = max(self.failed.walks.get(workers, -1),
                                                     len(lower))
                return False
            self._unfit(job, got)
            for r in reversed(freed):  # keep running every victim the job does not need
                self._release(r, -1)
                trial = self._fit(job)
                if trial is None:
                    self._release(r, 1)
                else:
                    self._unfit(job, trial)
                    freed.remove(r)
            self.victims += freed
            self._gone.update(r.job_id for r in freed)
            self._suffix = None
            got = self._fit(job)
        add_placement(self.d, job.job_id, *got)
        self.started[job.job_id] = (job, (*got[0], *got[1]))  # its tasks' nodes: PS, workers
        self.failed = _Failed()  # resources changed: what failed may fit now
        self._free = None
        return True

    def decision(self) -> Decision:
        self.d.preempt = [v.job_id for v in self.victims]
        return self.d


def priority_admit(
    view: ClusterView, order: Iterable[JobView], placer, servers: Callable | None = None
) -> Decision:
    """Run jobs in the priority order `order` (every active job) as one Admission round;
    `servers` as in Admission."""
    order = list(order)
    rank = {j.job_id: k for k, j in enumerate(order)}
    rounds = Admission(
        view, [j for j in order if j.status == "running"], lambda j: rank[j.job_id], placer,
        servers,
    )
    for job in order:
        if job.status != "running":
            rounds.start(job)
    return rounds.decision()


class TiresiasGittins(Tiresias):
    """Tiresias with the discretized 2D-Gittins index (module docstring)."""

    name = "tiresias-gittins"
    gittins = True

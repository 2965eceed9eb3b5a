"""The event-driven engine: one simulator behind both front doors.

Between events every rate is constant (speeds depend only on placements, limits and GPU modes), so
the engine jumps from event to event: arrivals, completions, scheduling ticks (decision points), and
internally the end of checkpoint pauses and the edges of a job's statistical-efficiency buckets
(efficiency.py). `advance()` runs to the next decision point; `apply()`
takes a Decision, validates all of it before changing anything, and raises DecisionError naming the
offending task, job, node or GPU if any part is invalid.
"""

from __future__ import annotations

import bisect
import math
import time as _time
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from . import _kernels
from .api import ClusterView, Decision, DecisionError, JobView, Scheduler, TaskView
from .checks import is_int, is_real
from .cluster import Cluster, never_fits
from .config import CONFIG_DIR, ModelZoo
from .jobs import (DONE, L_BIAS, L_DOM, L_GPU, L_LAST, L_MARK, L_OBS_MEAN, L_OBS_TIME, L_RUN, L_STEPS, L_TOTAL,
                   L_XNODE, L_XRACK, PENDING, RUNNING, Job, JobSpec, Ledger, Task, job_epochs, stop_delta)
from .metrics import Metrics, summarize
from .comm import link_capacity, pattern
from .efficiency import Efficiency
from .speed import Colocation, PackingModel, PlanStack, Rates, alone_speed, compute_rates

EPS = 1e-9
_NONE = np.zeros(0)  # an optional array of _kernels.integrate left out
_LEDGER_COLS = np.array([L_STEPS, L_RUN, L_GPU, L_XNODE, L_XRACK, L_DOM, L_LAST, L_OBS_MEAN, L_OBS_TIME, L_TOTAL,
                         L_BIAS, L_MARK], np.int64)  # _kernels.integrate's `cols`
# Consecutive steps of the engine (loop turns of advance(), across calls) that may leave the clock
# where it is before the engine calls it a stall: a few are legitimate (events at one instant).
STALL_LIMIT = 1000
# Packing slowdown fitted to Gavel's co-location throughputs (stanford-futuredata/gavel @c4fa400,
# ../shared/profiles/gavel_throughputs.json), pooled over k80/p100/v100, 976 pairs, rmse 0.17:
# eps = 0.319 with gamma held at 1, since the data do not pin gamma (rmse flat over 0.5..4).
# Reproduce with `python -m dlclusterenv.profiles`. Jobs with a Gavel job type use the measured
# pairs and the per-type fit instead (speed.Colocation).
DEFAULT_PACKING = PackingModel(eps=0.319, gamma=1.0,
                               colocation=Colocation.load(CONFIG_DIR / "colocation" / "gavel.yaml"))


def _arrival_order(job: Job) -> tuple[float, str]:
    """The order jobs arrive in (Simulator.specs'), hence of _active."""
    return job.spec.arrival_s, job.job_id


def _check_fields(d: object) -> None:
    """The Decision's own shape, so a user scheduler's slip (a list for `place`, a bare job id for
    `preempt`, an int task id) is a DecisionError naming the field, not an AttributeError from
    deep in `apply` or a string iterated letter by letter."""
    if not isinstance(d, Decision):
        raise DecisionError(f"expected a Decision, got {type(d).__name__}")
    for name in ("allocate", "place", "cpu_limits", "gpu_mode"):
        value = getattr(d, name)
        if not isinstance(value, dict):
            raise DecisionError(f"{name}: expected a dict, got {type(value).__name__} {value!r}"[:200])
    if not isinstance(d.preempt, (list, tuple)):
        raise DecisionError(f"preempt: expected a list of job ids, got {d.preempt!r}"[:200])


class SimulationStalled(RuntimeError):
    """Simulated time stopped advancing: raised instead of looping forever at one instant."""


@dataclass
class Totals:
    """Running integrals that rewards and metrics are differences of."""

    job_seconds: float = 0.0  # integral of jobs in system (total JCT)
    cross_node_bytes: float = 0.0
    cross_rack_bytes: float = 0.0
    gpu_busy_s: float = 0.0  # GPU-seconds with a running worker
    cpu_used_s: float = 0.0  # core-seconds
    net_bytes: float = 0.0  # bytes over NIC directions
    jain_s: float = 0.0  # integral of Jain's index over time with >= 1 job in system
    jain_time: float = 0.0
    decision_s: list[float] = field(default_factory=list)
    timeline: list[tuple[float, float, float, float, float]] = field(default_factory=list)


class _Epoch:
    """What the engine reads at every event while the rates stand (built with them: every change
    of placement, status or pause drops both): the ledger rows of the jobs the rates cover, those
    whose completion is one array expression, the paused ones, and the holding jobs' dominant
    shares."""

    def __init__(self, sim: Simulator, running: list[Job], jobs: list[Job], rates: Rates):
        self.jobs = jobs  # rates' rows
        self.rows = rates.rows
        self.speed = rates.speed_arr
        self.observed = (self.speed > 0).nonzero()[0]  # (np.flatnonzero's result, without its ravel)
        # the measured ones as an index: every job (a slice, views not copies) while none stands still
        self.o_idx = slice(None) if len(self.observed) == len(jobs) else self.observed
        self.o_rows, self.speed_o = self.rows[self.o_idx], self.speed[self.o_idx]
        eff = [j.eff is not None for j in jobs] if sim._eff_on else ()
        self.ends = self.observed[~np.array(eff, bool)[self.observed]] if any(eff) else self.observed
        self.eff = [(jobs[k], float(self.speed[k])) for k in self.observed if eff[k]] if any(eff) else []
        # what each event reads of the jobs in `ends`: their rows, work to do (fixed per job), speeds
        led = sim._ledger
        every = len(self.ends) == len(jobs)  # `ends` is every position: the gathers are the arrays
        self.end_rows = self.rows if every else self.rows[self.ends]
        self.end_total = led.total[self.end_rows]
        self.end_speed = self.speed if every else self.speed[self.ends]
        self.running = running  # paused ones too
        # `jobs` are the awake ones of `running`, in its order: the same list when none sleeps
        all_awake = len(running) == len(jobs)
        self.rows_running = self.rows if all_awake else np.array([j.row for j in running], np.int64)
        # a running job is done once its work reaches this (_finish_due)
        total = self.end_total if every and all_awake else led.total[self.rows_running]
        self.done_at = total * (1 - 1e-12) - EPS
        awake = sim.now + EPS
        self.paused = [] if all_awake else [j for j in running if j.paused_until > awake]
        hold = sim._holding
        # `running` are the running ones of `hold`, in its order: the same when all run
        if all_awake and len(hold) == len(running):
            self.holding = self.rows
            self.shares = rates.shares
        else:
            self.holding = self.rows_running if len(hold) == len(running) else np.array([j.row for j in hold], np.int64)
            share = sim._dominant_share
            self.shares = np.array([share(j) if j.share is None else j.share for j in hold])
        self.shares_sum = self.shares.sum()
        self.shares_sq = float((self.shares**2).sum())


class Simulator:
    def __init__(
        self,
        cluster: Cluster,
        jobs: list[JobSpec],
        zoo: ModelZoo,
        *,
        seed: int = 0,
        tick_s: float | None = None,
        horizon_s: float = math.inf,
        packing: PackingModel = DEFAULT_PACKING,
        efficiency: Efficiency = Efficiency(),
    ):
        for s in jobs:
            if s.model not in zoo.models:
                raise KeyError(f"job {s.job_id}: unknown model {s.model!r}")
            if not (isinstance(s.gpu_milli, int) and 1 <= s.gpu_milli <= 1000):
                raise ValueError(f"job {s.job_id}: gpu_milli must be an integer in [1, 1000], got {s.gpu_milli!r}")
            if s.gpu_milli < 1000 and not zoo.models[s.model].worker.gpu:
                raise ValueError(f"job {s.job_id}: gpu_milli {s.gpu_milli} but model {s.model!r} uses no GPU")
        self.cluster = cluster
        self.zoo = zoo
        self.specs = sorted(jobs, key=lambda s: (s.arrival_s, s.job_id))
        self.seed = seed
        self.tick_s = tick_s
        self.horizon_s = horizon_s
        self.packing = packing
        self.efficiency = efficiency  # statistical efficiency (efficiency.py); default E = 1
        # each model's table, made now so that a model the piece cannot serve fails before any run
        self._eff = {name: efficiency.table(name, zoo.models[name]) for name in {s.model for s in self.specs}}
        self._eff_on = any(t is not None for t in self._eff.values())
        self.overheads = cluster.config.overheads
        cap = link_capacity(cluster)
        self._cores_total = float(cluster.cpus.sum())
        self._nic_total = float(cap[: 2 * cluster.n_nodes].sum())
        # what apply() checks the nodes against: capacity with a relative and absolute tolerance
        self._capacity_limits = [(name, a, a * (1 + 1e-9) + 1e-9) for name, a in
                                 (("CPU", cluster.cpus), ("memory", cluster.memory), ("bandwidth", cluster.nic))]
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        c = self.cluster
        self.now = 0.0
        self.jobs: dict[str, Job] = {}
        self._next_arrival = 0
        self.used_cpu = np.zeros(c.n_nodes)
        self.used_mem = np.zeros(c.n_nodes)
        self.used_bw = np.zeros(c.n_nodes)
        self.gpu_tasks: list[list[str]] = [[] for _ in range(c.n_gpus)]
        self.gpu_mode = np.zeros(c.n_gpus, dtype=np.int8)  # 0 timeslice, 1 pack
        self.free_gpus = c.gpus.copy()  # unoccupied GPUs per node
        self._active: list[Job] = []
        # jobs with a task on a node, in _active's (arrival) order: the running jobs and those
        # partly placed; what the engine walks per event, so that queued jobs cost nothing there
        self._holding: list[Job] = []
        self._pending: list[Job] = []  # active jobs waiting (not fully placed), in arrival order
        # running jobs in arrival order, replaced (never changed in place: views and the rates'
        # epoch hold it) when a job starts or stops running
        self._running: list[Job] = []
        self._running_ids: tuple[list[str], np.ndarray] | None = None  # running_ids_rows, kept
        self._pause_end = 0.0  # the latest paused_until set (no job sleeps after it)
        self.version = 0  # bumped by every change a ClusterView could show
        self._rates: Rates | None = None
        self._epoch: _Epoch | None = None  # what the engine needs per event, made with the rates
        self._ledger = Ledger(len(self.specs))  # every job's running totals (jobs.Ledger)
        self._plan_stack = PlanStack()  # the running jobs' plans, gathered once (speed.PlanStack)
        self._wakes: list[float] = []  # decision points schedulers asked for
        self._never: dict[tuple[str, int, int], str | None] = {}  # cluster.never_fits, per shape
        self.totals = Totals()
        self.done = False
        self._still = 0  # consecutive engine steps that left the clock where it was
        self._arrive_due()

    def job(self, job_id: str) -> Job:
        try:
            return self.jobs[job_id]
        except KeyError:
            raise DecisionError(f"unknown job {job_id!r}") from None

    def active_jobs(self) -> list[Job]:
        return self._active

    def pending_jobs(self) -> list[Job]:
        """Pending jobs in arrival order, kept as statuses change (a list the caller must not
        modify), so that a scheduler reading the head of the queue does not walk the running."""
        return self._pending

    def running_jobs(self) -> list[Job]:
        """Running jobs in arrival order (a list the caller must not modify): kept as jobs start
        and stop running, so that no decision walks the jobs holding nodes."""
        return self._running

    def running_ids_rows(self) -> tuple[list[str], np.ndarray]:
        """The running jobs' ids and ledger rows, in order (the caller must not modify them): kept,
        and spliced anew when a job starts or stops running (Tiresias reads them at every
        decision point; the same objects while the same jobs run)."""
        if self._running_ids is None:
            run = self._running
            self._running_ids = ([j.job_id for j in run], np.array([j.row for j in run], dtype=np.int64))
        return self._running_ids

    def _set_status(self, job: Job, status: str) -> None:
        """Change a job's status, keeping the running list (a new list when it changes)."""
        kept = self._running_ids  # new lists and arrays, spliced (the old ones may be held)
        if job.status == RUNNING:
            k = self._running.index(job)  # (jobs compare by identity)
            self._running = self._running[:k] + self._running[k + 1 :]
            if kept is not None:
                self._running_ids = (kept[0][:k] + kept[0][k + 1 :],
                                     np.concatenate((kept[1][:k], kept[1][k + 1 :])))
        elif status == RUNNING:
            k = bisect.bisect(self._running, _arrival_order(job), key=_arrival_order)
            self._running = self._running[:k] + [job] + self._running[k:]
            if kept is not None:
                self._running_ids = (kept[0][:k] + [job.job_id] + kept[0][k:],
                                     np.concatenate((kept[1][:k], [job.row], kept[1][k:])))
        job.status = status

    def _pause(self, job: Job, until: float) -> None:
        """The job computes nothing until `until` (checkpoint / restore)."""
        job.paused_until = max(job.paused_until, until)
        self._pause_end = max(self._pause_end, job.paused_until)

    def _arrive_due(self) -> bool:
        arrived = False
        while (
            self._next_arrival < len(self.specs)
            and self.specs[self._next_arrival].arrival_s <= self.now + EPS
        ):
            s = self.specs[self._next_arrival]
            model = self.zoo.models[s.model]
            self._ledger.grow(self._next_arrival + 1)
            job = Job(
                spec=s,
                model=model,
                rng=None,
                seed=(self.seed, self._next_arrival),  # its generator made at its first draw
                total_epochs=job_epochs(model, s),
                ledger=self._ledger,
                row=self._next_arrival,
            )
            job.rel_delta = stop_delta(model, job.total_epochs)
            job.eff = self._eff[s.model]
            job.resize(s.num_ps, s.num_workers)
            self.jobs[s.job_id] = job
            self._active.append(job)
            self._pending.append(job)
            self._next_arrival += 1
            arrived = True
        self.version += arrived
        return arrived

    # ------------------------------------------------------------------ view
    def view(self, oracle: bool = False) -> ClusterView:
        return ClusterView(self, oracle)

    def job_view(self, job: Job) -> JobView:
        """The job as a scheduler sees it; a pending job's view is kept until the job changes
        (Job.touch), so a long queue is not rebuilt at every decision."""
        if job.view is not None and job.status == PENDING:
            return job.view
        m = job.model
        # only a running job's tasks use cores (reading a queued job's view computes no rates)
        cores = self.rates().task_cores if job.status == RUNNING else {}
        tasks = tuple(
            TaskView(
                t.task_id,
                job.job_id,
                t.role,
                t.node,
                t.gpu,
                t.cpu_limit,
                m.ps if t.role == "ps" else m.worker,
                cores.get(t.task_id, 0.0),
            )
            for t in job.tasks.values()
        )
        view = JobView(
            job_id=job.job_id,
            model=job.spec.model,
            user=job.spec.user,
            weight=job.spec.weight,
            arrival_s=job.spec.arrival_s,
            status=job.status,
            num_ps=job.num_ps,
            num_workers=job.num_workers,
            requested=(job.spec.num_ps, job.spec.num_workers),
            ps_demand=m.ps,
            worker_demand=m.worker,
            param_bytes=m.param_bytes,
            sync=m.sync,
            gpu_util=m.gpu_util,
            gpu_milli=job.spec.gpu_milli,
            gpu_step_s=MappingProxyType(m.gpu_step_s),
            gpu_mem_gb=m.gpu_mem_gb,
            steps_per_epoch=job.steps_per_epoch,
            input_bytes_per_step=m.input_bytes_per_step,
            dataset_bytes=m.dataset_bytes * job.spec.data_fraction,
            max_epochs=max(m.convergence.max_epochs, job.total_epochs),
            rel_delta=job.rel_delta,
            steps_done=job.steps_done,
            epochs_done=job.epochs_done,
            observed_loss=job.loss_history(),
            observed_speed=MappingProxyType(job.speeds_seen()),
            last_speed=job.last_speed,
            attained_gpu_s=job.attained_gpu_s,
            run_s=job.run_s,
            first_start_s=job.first_start_s,
            shard_nodes=job.spec.shard_nodes,
            tasks=tasks,
            comm="ps" if job.uses_ps else "allreduce",
            exchange_every=job.spec.exchange_every,
            noise_scale=math.inf if job.eff is None else job.eff.phi[job.eff_bucket],
            local_batch=1 if job.eff is None else job.eff.local_batch,
        )
        job.view = view if job.status == PENDING else None
        return view

    # ------------------------------------------------------------------ decisions
    def place_target(self, tid: str, target: object) -> tuple[int, int]:
        """A Decision.place value -> (node index, global GPU index or -1 for "the simulator
        picks"); a malformed one raises DecisionError naming the task."""
        if not isinstance(target, tuple):
            return self._node(target, f"place[{tid!r}]"), -1
        if len(target) != 2:
            raise DecisionError(f"place[{tid!r}]: expected node or (node, gpu), got {target!r}")
        c = self.cluster
        node = self._node(target[0], f"place[{tid!r}]")
        slot = target[1]
        if not is_int(slot) or not 0 <= slot < c.gpus[node]:
            raise DecisionError(f"place[{tid!r}]: node {c.node_names[node]} has no GPU {slot!r}")
        return node, int(c.gpu_base[node] + slot)

    def _node(self, value: object, where: str) -> int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if 0 <= int(value) < self.cluster.n_nodes:
                return int(value)
            raise DecisionError(f"{where}: node index {value} out of range")
        if isinstance(value, str):
            try:
                return self.cluster.node_index(value)
            except KeyError:
                raise DecisionError(f"{where}: unknown node {value!r}") from None
        raise DecisionError(f"{where}: node must be a name or an index, got {value!r}")

    def _gpu_key(self, key: str) -> int:
        if not isinstance(key, str):
            raise DecisionError(f"gpu_mode: unknown GPU {key!r} (keys are 'node/gN' strings)")
        node, _, slot = key.rpartition("/g")
        n = self._node(node, f"gpu_mode[{key!r}]") if node else -1
        if n < 0 or not slot.isdigit() or int(slot) >= self.cluster.gpus[n]:
            raise DecisionError(f"gpu_mode: unknown GPU {key!r}")
        return int(self.cluster.gpu_base[n] + int(slot))

    def apply(self, d: Decision) -> None:
        """Validate the whole decision, then apply it; on error nothing has changed."""
        _check_fields(d)
        if d.empty():
            return
        if d.wake_at is not None:
            if not is_real(d.wake_at, inf=True):
                raise DecisionError(f"wake_at: must be a time in seconds, got {d.wake_at!r}")
        c = self.cluster
        # -- validate preempt and allocate
        preempt = []
        for jid in d.preempt:
            job = self._active_job(jid, "preempt")
            preempt.append(job)
        alloc: dict[str, tuple[int, int]] = {}
        for jid, pw in d.allocate.items():
            job = self._active_job(jid, "allocate")
            uses_ps = job.uses_ps
            # integers only: int() truncated (1.7, 2.9) to (1, 2), read "2" as 2, and raised a raw
            # OverflowError on inf
            if not (isinstance(pw, (tuple, list, np.ndarray)) and len(pw) == 2 and all(map(is_int, pw))):
                raise DecisionError(f"allocate[{jid!r}]: expected (num_ps, num_workers), two integers, got {pw!r}")
            p, w = int(pw[0]), int(pw[1])
            if uses_ps and (p < 1 or w < 1):
                raise DecisionError(f"allocate[{jid!r}]: needs at least 1 PS and 1 worker, got {pw!r}")
            if not uses_ps and (p != 0 or w < 1):
                raise DecisionError(
                    f"allocate[{jid!r}]: an all-reduce job has no PS and at least 1 worker, got {pw!r}"
                )
            if (p, w) != (job.num_ps, job.num_workers) and (why := self._never_runs(job, p, w)):
                # never placed whole, so never run (and allocate=(1, 10**9) built 10**9 tasks)
                raise DecisionError(f"allocate[{jid!r}]: {p} PS and {w} workers can never run: {why}")
            alloc[jid] = (p, w)
        preempted = {j.job_id for j in preempt}
        # -- placed tasks that leave their node: all of a preempted job's, those a shrink removes
        removed: list[Task] = []
        # in the decision's order, not a set's: the commit frees in this order, and float sums
        # freed in another order differ in the last bits (a set of strings iterates in an order
        # that changes with PYTHONHASHSEED, so two processes would not run alike)
        for jid in dict.fromkeys([*(j.job_id for j in preempt), *alloc]):
            job = self.jobs[jid]
            p, w = alloc.get(jid, (job.num_ps, job.num_workers))
            for t in job.tasks.values():
                if t.node >= 0 and (jid in preempted or not self._exists(t.task_id, job, p, w)):
                    removed.append(t)
        gone = {t.task_id for t in removed}

        def lookup(tid: str, where: str) -> tuple[Job, str]:
            job = self.jobs.get(tid.rpartition("/")[0]) if isinstance(tid, str) else None
            if job is not None and job.status != DONE:
                p, w = alloc.get(job.job_id, (job.num_ps, job.num_workers))
                if self._exists(tid, job, p, w):
                    return job, "ps" if tid.rpartition("/")[2].startswith("ps") else "worker"
            raise DecisionError(f"{where}: unknown task {tid!r}")

        # -- placements
        moves: dict[str, tuple[int, int, Job, str]] = {}  # task -> node, gpu (-1 = pick), job, role
        for tid, target in d.place.items():
            job, role = lookup(tid, "place")
            node, gpu = self.place_target(tid, target)
            if gpu >= 0 and (role != "worker" or job.model.worker.gpu == 0):
                raise DecisionError(f"place[{tid!r}]: a GPU was given but the task uses none")
            old = job.tasks.get(tid)
            if old is not None and old.node == node and gpu in (-1, old.gpu) and tid not in gone:
                continue  # already there: not a migration
            if old is not None and old.node >= 0 and tid not in gone:
                removed.append(old)
                gone.add(tid)
            moves[tid] = (node, gpu, job, role)
        # -- capacity check on the final state, of the nodes the decision touches: no node is over
        # a limit before it (every charge was checked so, and a task leaving only frees), so no
        # other node can be after it. Each touched node's values after it, made with the
        # commit's float operations in the commit's order (node -> [cores, GB, bytes/s]).
        after: dict[int, list[float]] = {}
        used = (self.used_cpu, self.used_mem, self.used_bw)

        def final(n: int) -> list[float]:
            v = after.get(n)
            if v is None:
                v = after[n] = [u.item(n) for u in used]
            return v

        occ: dict[int, int] = {}  # GPU -> occupancy after the decision, for GPUs it touches

        def occupancy(g: int) -> int:
            return occ.get(g, len(self.gpu_tasks[g]))

        milli: dict[int, int] = {}  # GPU -> thousandths in use after the decision, where touched

        def used_milli(g: int) -> int:
            if g not in milli:
                milli[g] = sum(self._milli(tid) for tid in self.gpu_tasks[g])
            return milli[g]

        for t in removed:
            dem = self._demand(t)
            v = final(t.node)
            v[0] -= dem.cpu
            v[1] -= dem.mem_gb
            v[2] -= dem.bw_MBps * 1e6
            if t.gpu >= 0:
                occ[t.gpu] = occupancy(t.gpu) - 1
                milli[t.gpu] = used_milli(t.gpu) - self._milli(t.task_id)
        gpu_of: dict[str, int] = {}
        modes: dict[int, int] = {}
        for tid, (node, gpu, job, role) in moves.items():
            dem = job.model.ps if role == "ps" else job.model.worker
            v = final(node)
            v[0] += dem.cpu
            v[1] += dem.mem_gb
            v[2] += dem.bw_MBps * 1e6
            if dem.gpu:
                want = job.spec.gpu_milli
                if gpu < 0:
                    gpu = self._pick_gpu(node, want, occupancy, used_milli)
                    if gpu < 0:
                        raise DecisionError(
                            f"place[{tid!r}]: node {c.node_names[node]} has no free GPU"
                            + (f" nor one with {want} thousandths left" if want < 1000 else "")
                        )
                occ[gpu] = occupancy(gpu) + 1
                milli[gpu] = used_milli(gpu) + want
                gpu_of[tid] = gpu
                if want < 1000 and occ[gpu] > 1 and milli[gpu] <= 1000:
                    modes.setdefault(gpu, 1)  # fractions that fit share their GPU by packing
        for k, (name, capacity, limit) in enumerate(self._capacity_limits):
            over = [n for n, v in after.items() if v[k] > limit.item(n)]
            if over:  # the first node over, in node order, as a check of every node finds
                n = min(over)
                tasks = [t for t, m in moves.items() if m[0] == n]
                raise DecisionError(
                    f"node {c.node_names[n]}: {name} over capacity "
                    f"({after[n][k]:.6g} > {capacity[n]:.6g}); placed there: {tasks}"
                )
        # -- limits and GPU modes
        for tid, lim in d.cpu_limits.items():
            lookup(tid, "cpu_limits")
            if not is_real(lim) or not 0 < lim <= 1:
                raise DecisionError(f"cpu_limits[{tid!r}]: must be in (0, 1], got {lim!r}")
        for key, mode in d.gpu_mode.items():
            g = self._gpu_key(key)
            if mode not in ("pack", "timeslice"):
                raise DecisionError(f"gpu_mode[{key!r}]: must be 'pack' or 'timeslice', got {mode!r}")
            modes[g] = 1 if mode == "pack" else 0
        # GPU memory: packed GPUs hold all residents at once (only GPUs this decision touches)
        residents: dict[int, list[float]] = {}
        for g in set(modes) | set(gpu_of.values()):
            residents[g] = [
                self.jobs[tid.rpartition("/")[0]].model.gpu_mem_gb
                for tid in self.gpu_tasks[g]
                if tid not in gone
            ]
        for tid, g in gpu_of.items():
            residents[g].append(moves[tid][2].model.gpu_mem_gb)
        for g, mems in residents.items():
            if used_milli(g) <= 1000:
                continue  # fractions of one GPU: each holds its share of the memory too (gpu_milli)
            if len(mems) > 1 and modes.get(g, self.gpu_mode[g]) == 1:
                node = int(c.gpu_node[g])
                if sum(mems) > c.gpu_memory[node] + 1e-9:
                    raise DecisionError(
                        f"gpu_mode: packing GPU {c.gpu_key(g)} needs "
                        f"{sum(mems):.3g} GB > {c.gpu_memory[node]:.3g} GB of GPU memory"
                    )
        # ---------------------------------------------------------- commit
        self.version += 1
        touched: dict[str, Job] = {}
        for t in removed:
            self._unplace(t)
        for job in preempt:
            touched[job.job_id] = job
        for jid, (p, w) in alloc.items():
            job = self.jobs[jid]
            if (p, w) != (job.num_ps, job.num_workers):
                was_running = job.status == RUNNING
                job.resize(p, w)
                touched[jid] = job
                if was_running:
                    self._pause(job, self.now + self._ckpt_s(job))
        for tid, (node, _, job, _) in moves.items():
            t = job.tasks[tid]
            self._place(t, job, node, gpu_of.get(tid, -1))
            touched[job.job_id] = job
            if job.status == RUNNING and tid in gone and job.job_id not in preempted:
                self._pause(job, self.now + self._ckpt_s(job))  # migration
                if t.role == "worker":
                    self._count_locality(job, [t])
        limited: dict[str, Job] = {}
        for tid, lim in d.cpu_limits.items():
            job = limited[tid.rpartition("/")[0]] = self.jobs[tid.rpartition("/")[0]]
            job.tasks[tid].cpu_limit = float(lim)
        for job in limited.values():
            job.relimit()
        for g, mode in modes.items():
            self.gpu_mode[g] = mode
        if d.wake_at is not None and self.now + EPS < d.wake_at < math.inf:  # inf: never, not kept
            self._wakes.append(float(d.wake_at))
        for job in touched.values():
            self._update_status(job)
        if touched or d.cpu_limits or modes:
            self._rates = None

    def _never_runs(self, job: Job, p: int, w: int) -> str | None:
        """cluster.never_fits for job's model at (p, w), GPUs shared (a worker may time-slice an
        occupied GPU, so more workers than GPUs can run), kept per shape (at most 4,096)."""
        key = (job.spec.model, p, w)
        if key not in self._never:
            if len(self._never) >= 4096:
                self._never.clear()
            self._never[key] = never_fits(self.cluster, job.model, p, w, shared_gpus=True)
        return self._never[key]

    @staticmethod
    def _exists(tid: str, job: Job, p: int, w: int) -> bool:
        """Whether task id names a task of `job` once it has p PS and w workers."""
        jid, _, name = tid.rpartition("/")
        if jid != job.job_id:
            return False
        for prefix, n in (("ps", p), ("w", w)):
            idx = name[len(prefix) :]
            if name.startswith(prefix) and idx.isdigit() and str(int(idx)) == idx:  # "w1", not "w01"
                return int(idx) < n
        return False

    def _milli(self, task_id: str) -> int:
        """Thousandths of its GPU a placed worker holds (1000 unless its job asks for less)."""
        return self.jobs[task_id.rpartition("/")[0]].spec.gpu_milli

    def _pick_gpu(self, node: int, want: int, occupancy, used_milli) -> int:
        """The GPU of `node` a worker asking for `want` thousandths goes to when none is named:
        a whole-GPU worker takes a free GPU; a fractional one the fullest GPU it still fits on,
        beside other fractional workers only (best fit, assumed: one of the GPU-sharing packing
        rules Weng et al. compare on this trace, ATC'23), else a free GPU. -1: none."""
        base = int(self.cluster.gpu_base[node])
        gpus = range(base, base + int(self.cluster.gpus[node]))
        if want < 1000:
            fits = [g for g in gpus if occupancy(g) > 0 and used_milli(g) + want <= 1000]
            if fits:
                return max(fits, key=lambda g: (used_milli(g), -g))
        return next((g for g in gpus if occupancy(g) == 0), -1)  # the first free GPU

    def place_one(self, task_id: str, node: int) -> None:
        """Fast path of `apply(Decision(place={task_id: node}))` for one unplaced task (the
        placement env's step): same checks and effects, without building a whole decision."""
        job = self.jobs.get(task_id.rpartition("/")[0])
        t = job.tasks.get(task_id) if job is not None and job.status != DONE else None
        if t is None or t.node >= 0 or not 0 <= node < self.cluster.n_nodes:
            return self.apply(Decision(place={task_id: node}))  # the general path explains
        c = self.cluster
        d = job.model.ps if t.role == "ps" else job.model.worker
        if d.gpu and job.spec.gpu_milli < 1000:
            return self.apply(Decision(place={task_id: node}))  # may share a GPU: the general path
        gpu = -1
        if d.gpu:
            base = int(c.gpu_base[node])
            free = [g for g in range(base, base + int(c.gpus[node])) if not self.gpu_tasks[g]]
            gpu = free[0] if free else -2
        if (
            gpu == -2
            or self.used_cpu[node] + d.cpu > c.cpus[node] * (1 + 1e-9) + 1e-9
            or self.used_mem[node] + d.mem_gb > c.memory[node] * (1 + 1e-9) + 1e-9
            or self.used_bw[node] + d.bw_MBps * 1e6 > c.nic[node] * (1 + 1e-9) + 1e-9
        ):
            return self.apply(Decision(place={task_id: node}))  # raises, naming the resource
        self._place(t, job, node, gpu)
        self._update_status(job)
        self._rates = None

    def _active_job(self, jid: str, where: str) -> Job:
        job = self.jobs.get(jid) if isinstance(jid, str) else None
        if job is None or job.status == DONE:
            raise DecisionError(f"{where}: no active job {jid!r}")
        return job

    def _demand(self, t: Task):
        job = self.jobs[t.task_id.rpartition("/")[0]]
        return job.model.ps if t.role == "ps" else job.model.worker

    def _ckpt_s(self, job: Job) -> float:
        o = self.overheads
        return o.checkpoint_s + job.model.param_bytes / (o.checkpoint_MBps * 1e6)

    def _place(self, t: Task, job: Job, node: int, gpu: int) -> None:
        dem = job.model.ps if t.role == "ps" else job.model.worker
        t.node, t.gpu = node, gpu
        job.n_placed += 1
        if job.n_placed == 1:
            bisect.insort(self._holding, job, key=_arrival_order)
        job.touch()
        self.version += 1
        self.used_cpu[node] += dem.cpu
        self.used_mem[node] += dem.mem_gb
        self.used_bw[node] += dem.bw_MBps * 1e6
        if gpu >= 0:
            if not self.gpu_tasks[gpu]:
                self.free_gpus[node] -= 1
            self.gpu_tasks[gpu].append(t.task_id)

    def _unplace(self, t: Task) -> None:
        job = self.jobs[t.task_id.rpartition("/")[0]]
        job.n_placed -= 1
        if job.n_placed == 0:
            self._holding.remove(job)
        job.touch()
        dem = job.model.ps if t.role == "ps" else job.model.worker
        self.used_cpu[t.node] -= dem.cpu
        self.used_mem[t.node] -= dem.mem_gb
        self.used_bw[t.node] -= dem.bw_MBps * 1e6
        if t.gpu >= 0:
            self.gpu_tasks[t.gpu].remove(t.task_id)
            if not self.gpu_tasks[t.gpu]:
                self.gpu_mode[t.gpu] = 0
                self.free_gpus[t.node] += 1
        t.node, t.gpu = -1, -1

    def _update_status(self, job: Job) -> None:
        if job.fully_placed():
            if job.status != RUNNING:
                if job.ran_before:  # resume after preemption: restore the checkpoint
                    self._pause(job, self.now + self._ckpt_s(job))
                if math.isnan(job.first_start_s):
                    job.first_start_s = self.now
                self._pending.remove(job)
                self._set_status(job, RUNNING)
                job.ran_before = True
                self._count_locality(job, job.worker_tasks())
        elif job.status != PENDING:
            self._set_status(job, PENDING)
            bisect.insort(self._pending, job, key=_arrival_order)

    def _count_locality(self, job: Job, workers: list[Task]) -> None:
        """D²S Table 1: each worker (a map task) that starts is data-local, rack-local or
        off-switch; counted when its job starts or resumes, and when a running worker moves."""
        shards = job.spec.shard_nodes
        if not shards:
            return
        rack = self.cluster.node_rack
        for t in workers:
            s = shards[int(t.task_id.rpartition("/w")[2]) % len(shards)]
            k = 0 if s == t.node else (1 if rack[s] == rack[t.node] else 2)
            job.locality[k] += 1

    # ------------------------------------------------------------------ time
    def rates(self) -> Rates:
        if self._rates is None:
            awake = self.now + EPS
            running = self._running
            awake_jobs = running if self._pause_end <= awake else [j for j in running if j.paused_until <= awake]
            replanned = self._ledger.replanned
            self._rates = compute_rates(
                self.cluster, awake_jobs, self.gpu_mode, self.overheads, self.packing, self._plan_stack,
                replanned)
            replanned.clear()
            self._epoch = _Epoch(self, running, awake_jobs, self._rates)
        return self._rates

    def _next_tick(self) -> float:
        if not self.tick_s:
            return math.inf
        return (math.floor(self.now / self.tick_s + EPS) + 1) * self.tick_s

    def advance(self) -> float:
        """Run to the next decision point (arrival, completion, tick) or the end; returns dt."""
        start = self.now
        while not self.done:
            r = self.rates()
            t_arr = (
                self.specs[self._next_arrival].arrival_s
                if self._next_arrival < len(self.specs)
                else math.inf
            )
            self._wakes = [w for w in self._wakes if w > self.now + EPS]
            t_wake = min(self._wakes, default=math.inf) if self._active else math.inf
            t_next = min(t_arr, self._next_tick() if self._active else math.inf, t_wake, self.horizon_s)
            ep, led, now = self._epoch, self._ledger, self.now
            awake = now + EPS
            t_pause = min((j.paused_until for j in ep.paused if j.paused_until > awake), default=math.inf)
            t_internal = math.inf
            # completion times of the running jobs whose efficiency does not change (rows `ends`)
            t_ends = now + (ep.end_total - led.steps[ep.end_rows]) / ep.end_speed
            if len(t_ends):
                t_next = min(t_next, float(t_ends.min()))
            bounds: list[tuple[float, float, Job]] = []  # (time, work, job): efficiency changes
            late: list[tuple[float, Job]] = []  # completions of jobs whose efficiency did change
            for job, rate in ep.eff:  # work advances at speed x E (efficiency.py)
                rate *= job.efficiency()
                edge = job.next_boundary()
                if edge < job.total_steps:  # an internal event: the work reaches a bucket edge
                    t_edge = now + max(edge - job.steps_done, 0.0) / rate
                    bounds.append((t_edge, edge, job))
                    if t_edge < t_internal:
                        t_internal = t_edge
                    continue
                t_end = now + (job.total_steps - job.steps_done) / rate
                late.append((t_end, job))
                if t_end < t_next:
                    t_next = t_end
            t_internal = min(t_internal, t_pause)
            t = min(t_next, t_internal)
            if math.isinf(t):  # nothing will ever happen again: jobs left are reported unfinished
                self.done = True
                break
            self._check_stall(t, lambda: [(float(e), ep.jobs[k]) for e, k in zip(t_ends, ep.ends)] + late)
            # a job whose completion time is t ends at t exactly, also when the clock cannot
            # resolve the time its last steps take (t == now)
            ending = [ep.jobs[k] for k in ep.ends[t_ends <= t]] + [job for t_end, job in late if t_end <= t]
            self._integrate(r, t, ending)
            for t_edge, edge, job in bounds:
                if t_edge <= t:  # exactly at the edge (as `ending`), then the next bucket's rate
                    job.steps_done = edge
                    job.eff_bucket += 1
            if t_internal < t_next:
                if t_pause <= t:  # a job resumes: rates change (a bucket edge changes none)
                    self._rates = None
                continue
            finished = self._finish_due(r)
            arrived = self._arrive_due()
            if self.now >= self.horizon_s - EPS or (
                not self._active and self._next_arrival >= len(self.specs)
            ):
                self.done = True
            if finished or arrived or self.done or t_next < t_arr:
                break
        return self.now - start

    def _check_stall(self, t: float, ends) -> None:
        """Count engine steps that leave the clock at `now`; after STALL_LIMIT in a row, raise
        SimulationStalled naming the time and the running jobs (`ends()`: their completion
        times) instead of looping forever."""
        if t > self.now:
            self._still = 0
            return
        self._still += 1
        if self._still > STALL_LIMIT:
            ends = ends()
            nearest = ", ".join(
                f"{job.job_id} ({job.total_steps - job.steps_done:.3g} steps left, "
                f"ends at {t_end!r} s)"
                for t_end, job in sorted(ends, key=lambda e: e[0])[:5]
            )
            raise SimulationStalled(
                f"simulated time stuck at t = {self.now!r} s for {self._still} engine steps "
                f"(next event at {t!r} s); running jobs nearest completion: {nearest or 'none'}"
            )

    def _integrate(self, r: Rates, t: float, ending: list[Job]) -> None:
        """Run every rate from now to t; jobs in `ending` complete at t with exactly their total
        steps (no float residue left for a step the clock cannot resolve). Per-job totals are one
        compiled pass over the ledger's rows (jobs.Ledger, _kernels.integrate), in the order the
        scalar code did them; the engine's totals add the jobs' shares one after the other."""
        dt = t - self.now
        tot = self.totals
        self.version += 1
        if dt > 0:
            ep, led = self._epoch, self._ledger
            for job in led.reload:  # measurements a reader held: the engine's again
                job._obs_in()
            led.reload.clear()
            rows, speed = ep.rows, r.speed_arr
            obs, o_rows = ep.observed, ep.o_rows  # rows measured (speed > 0), as positions in `rows`
            for k in obs[np.isnan(led.bias[o_rows])]:  # a (p, w) measured for the first time
                ep.jobs[k].draw_bias()
            # work (speed x E where efficiency.py applies; speed is what is measured), run time,
            # GPU-seconds, bytes, dominant share-seconds; what a real cluster shows: the speed with
            # the configuration's bias, time-weighted per (p, w); the finished epochs are queued for
            # loss draws from the work at `mark` (compiled: _kernels.integrate)
            eff = np.array([j.efficiency() for j in ep.jobs]) if self._eff_on else _NONE
            held_here = ep.holding is rows  # every holding job runs: its dominant share is a column here
            tot.cross_node_bytes, tot.cross_rack_bytes = _kernels.integrate(
                led.data, _LEDGER_COLS, rows, speed, eff, dt, obs, ep.speed_o, r.gpus_arr, r.cross_node_arr,
                r.cross_rack_arr, ep.shares if held_here else _NONE, tot.cross_node_bytes, tot.cross_rack_bytes)
            tot.gpu_busy_s += r.gpus_busy * dt
            tot.cpu_used_s += r.cores_used * dt
            tot.net_bytes += r.nic_Bps * dt
            n = len(self._active)
            tot.job_seconds += n * dt
            if n:  # a job without a placed task has dominant share 0
                if not held_here:
                    led.dom[ep.holding] += ep.shares * dt
                led.held[ep.holding] = True
                denom = n * ep.shares_sq
                jain = float(ep.shares_sum ** 2 / denom) if denom > 0 else 1.0
                tot.jain_s += jain * dt
                tot.jain_time += dt
            tot.timeline.append(
                (
                    self.now,
                    t,
                    r.gpus_busy / max(self.cluster.n_gpus, 1),
                    r.cores_used / self._cores_total,
                    r.nic_Bps / self._nic_total,
                )
            )
        for job in ending:
            job.steps_done = float(job.total_steps)
        self.now = t

    def _dominant_share(self, job: Job) -> float:
        """DRF's dominant share of what the job holds now (placed tasks), over cluster totals."""
        if job.share is None:
            job.share = job.placed_dominant_share(self.cluster)
        return job.share

    def _finish_due(self, r: Rates) -> bool:
        ep, led = self._epoch, self._ledger
        due = (led.steps[ep.rows_running] >= ep.done_at).nonzero()[0]
        finished = [ep.running[k] for k in due]
        for job in finished:
            job.steps_done = float(job.total_steps)
            self._end(job)
        return bool(finished)

    def _end(self, job: Job) -> None:
        """The job leaves now: its tasks leave their nodes and it is done at this time."""
        for t in job.tasks.values():
            if t.node >= 0:
                self._unplace(t)
        if job.status == PENDING:
            self._pending.remove(job)
        self._set_status(job, DONE)
        job.finish_s = self.now
        job.release_losses()
        self._active.remove(job)
        self._rates = None
        self.version += 1

    def stop(self, job_id: str) -> None:
        """The user stops an active job where it is (hyper-parameter search killing a poor
        configuration): it ends now, with the steps it has done."""
        self._end(self._active_job(job_id, "stop"))

    # ------------------------------------------------------------------ drivers
    def decide(self, scheduler: Scheduler) -> None:
        """One decision point: ask the scheduler, time it, apply its decision."""
        view = self.view(oracle=scheduler.oracle)
        t0 = _time.perf_counter()
        decision = scheduler.decide(view)
        self.totals.decision_s.append(_time.perf_counter() - t0)
        self.apply(decision)

    def run(self, scheduler: Scheduler) -> Metrics:
        """Run a whole episode with a Scheduler (front door 1)."""
        self.reset()
        scheduler.reset(self.seed)
        while not self.done:
            self.decide(scheduler)
            self.advance()
        return self.metrics()

    def metrics(self) -> Metrics:
        return summarize(self)

    def projected_cross_node_bytes(self) -> float:
        """Cross-node bytes the placed tasks of active jobs will still move if nothing changes:
        bytes per local batch among placed tasks x the local batches still to process
        (`Job.raw_remaining`: the remaining steps over the statistical efficiency, if any). A
        potential for reward shaping; uses the engine's truth, which a reward may, and an
        observation may not."""
        total = 0.0
        for job in self._active:
            if job.proj is None:
                ps = np.array([t.node for t in job.ps_tasks() if t.node >= 0], dtype=np.int64)
                ws = np.array([t.node for t in job.worker_tasks() if t.node >= 0], dtype=np.int64)
                job.proj = 0.0
                if len(ws) and (len(ps) or not job.uses_ps):
                    plan = pattern(job.model, job.spec.comm).plan
                    comm = plan(self.cluster, job.model, job.spec.shard_nodes, ps, ws, job.spec.exchange_every)
                    job.proj = comm.cross_node / job.num_workers  # per local batch
            total += job.proj * job.raw_remaining()
        return total

    def projected_job_seconds(self) -> float:
        """Seconds the running jobs still need, summed: the local batches still to process
        (`Job.raw_remaining`) at the current speed (a paused job: its pause, then the speed its
        placement has alone). Each running job adds
        that much to the total JCT if nothing changes, so it is the JCT reward's potential for
        shaping; uses the engine's truth, which a reward may, and an observation may not."""
        speed = self.rates().speed
        total = 0.0
        for job in self._active:
            if job.status != RUNNING:
                continue
            v, wait = speed.get(job.job_id, 0.0), 0.0
            if v <= 0.0:
                wait = max(job.paused_until - self.now, 0.0)
                v = self.isolated_speed(job.job_id, [t.node for t in job.ps_tasks()],
                                        [t.node for t in job.worker_tasks()])
            if v > 0.0:
                total += wait + job.raw_remaining() / v
        return total

    def isolated_speed(self, job_id: str, ps_nodes: list[int], worker_nodes: list[int]) -> float:
        """True speed of a job alone on an empty cluster with this placement (oracles, tests)."""
        src = self.jobs[job_id] if job_id in self.jobs else None
        if src is None:
            raise KeyError(f"unknown job {job_id!r}")
        job = Job(src.spec, src.model, np.random.default_rng(0), src.total_epochs)
        return alone_speed(self.cluster, job, ps_nodes, worker_nodes, self.overheads, self.packing)

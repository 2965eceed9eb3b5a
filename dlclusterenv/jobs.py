"""Data-parallel training jobs (PS/worker or all-reduce): what a job is (JobSpec), its hidden truth, and what a cluster shows of it.

The engine knows each job's true loss curve and hence the step at which it converges; schedulers see
only noisy loss points at epoch boundaries and the speeds measured for (p, w) configurations that
actually ran (issue #2, "observation honesty").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from . import _kernels
from .checks import is_real
from .config import ModelSpec
from .efficiency import PhiTable

PENDING, RUNNING, DONE = "pending", "running", "done"


@dataclass(frozen=True)
class JobSpec:
    """A job as submitted: which model, when, with how many PS and workers requested."""

    job_id: str
    model: str
    arrival_s: float
    num_ps: int
    num_workers: int
    shard_nodes: tuple[int, ...] = ()  # nodes holding the input shards (data locality)
    epoch_scale: float = 1.0  # per-job variation of the convergence point
    user: str = "default"
    weight: float = 1.0
    synthetic: tuple[str, ...] = ()  # which fields a trace replay had to invent
    comm: str | None = None  # "ps" | "allreduce": overrides the model's communication pattern
    exchange_every: int = 1  # k: the exchange (push/pull or all-reduce) runs once per k steps
    data_fraction: float = 1.0  # share of the model's data set one epoch of this job reads
    # local batches to train, set by a trace replay so that the trace's duration is kept (see
    # workload.replay_work); None: the model's convergence epoch (scaled by epoch_scale)
    work_steps: float | None = None
    gpu_milli: int = 1000  # thousandths of a GPU each worker asks for (Alibaba's gpu_milli); < 1000 shares one
    # local batches per epoch of this job's own data set, replacing the model's (and
    # data_fraction); a trace replay sets it to work_steps / its model's convergence epoch so
    # that the job trains that many epochs (workload.replay_work); a float, possibly under 1
    steps_per_epoch: float | None = None

    def __post_init__(self) -> None:
        spe = self.steps_per_epoch
        if spe is not None and not (is_real(spe) and spe > 0):
            raise ValueError(f"job {self.job_id}: steps_per_epoch: {spe!r}: must be a finite number "
                             "of local batches > 0 (or None: the model's)")


def _improvement(spec: ModelSpec, k: int) -> float:
    """Relative loss improvement of epoch k over epoch k-1 on the model's true curve."""
    c = spec.loss

    def loss(x: float) -> float:
        return 1.0 / (c.b0 * x + c.b1) + c.b2

    return (loss(k - 1) - loss(k)) / loss(k - 1)


def convergence_epoch(spec: ModelSpec, epoch_scale: float = 1.0) -> int:
    """The epoch at which a job of this model converges, within its budget.

    The model converges at K, the first epoch whose true loss improves on the previous one by less
    than rel_delta (with l(k) = 1/(b0 k + b1) + b2 the improvement falls monotonically, so bisection
    finds K exactly). A job with `epoch_scale` s converges at round(s K), between 1 and the budget:
    its user's stopping threshold is set so that its own curve crosses it there (`stop_delta`),
    so a scheduler that fits the job's loss and applies the job's threshold can predict it.
    """
    hi, lo = spec.convergence.max_epochs, 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _improvement(spec, mid) < spec.convergence.rel_delta:
            hi = mid
        else:
            lo = mid + 1
    return min(max(round(lo * epoch_scale), 1), spec.convergence.max_epochs)


def steps_per_epoch(spec: ModelSpec, job: JobSpec) -> int | float:
    """Local batches per epoch: the job's own (`JobSpec.steps_per_epoch`, a replayed job's), else
    its part of the model's data set (`JobSpec.data_fraction`), a whole number."""
    if job.steps_per_epoch is not None:
        return job.steps_per_epoch
    return max(1, round(spec.steps_per_epoch * job.data_fraction))


def job_epochs(spec: ModelSpec, job: JobSpec) -> int:
    """Epochs the job trains: where its work is set (a replay), the whole epochs in it, at least
    one, else its convergence epoch.

    Whole epochs (floor), because that is what the engine counts: epoch k ends when the work
    reaches k x steps_per_epoch, so a finished job reports floor(work / steps_per_epoch) epochs
    (a remainder under one epoch runs after its last one and adds no loss point). A replayed job's
    epoch is sized so that this is its model's convergence epoch (workload.replay_work); with the
    model's epoch it may exceed the budget (a job given work and no epoch of its own)."""
    if job.work_steps is not None:
        return max(int(job.work_steps // steps_per_epoch(spec, job)), 1)
    return convergence_epoch(spec, job.epoch_scale)


def stop_delta(spec: ModelSpec, epochs: int) -> float:
    """The job's stopping threshold: the first epoch improving by less than it is `epochs`.

    A job stopped by its epoch budget keeps the model's threshold."""
    if epochs >= spec.convergence.max_epochs and _improvement(spec, epochs) >= spec.convergence.rel_delta:
        return spec.convergence.rel_delta
    below = _improvement(spec, epochs)
    above = _improvement(spec, epochs - 1) if epochs > 1 else 2.0 * below
    return 0.5 * (below + above)


@dataclass(eq=False)
class Task:
    task_id: str
    role: str  # "ps" | "worker"
    node: int = -1  # -1: not placed
    gpu: int = -1  # global GPU index, -1: none
    cpu_limit: float = 1.0  # soft limit as a fraction of the node's cores (1.0 = none)


_PCG64_MULT = 0x2360ED051FC65DA44385DF649FCCF645  # PCG's default 128-bit multiplier
_M128 = (1 << 128) - 1


def _seed_words(x) -> list[int] | None:
    """numpy SeedSequence's 32-bit words of a non-negative int (least significant first; 0 is
    one word) or of a (nested) tuple or list of them, in order; None for anything else."""
    if isinstance(x, (int, np.integer)):
        n = int(x)
        if n < 0:
            return None
        out = [n & 0xFFFFFFFF]
        n >>= 32
        while n:
            out.append(n & 0xFFFFFFFF)
            n >>= 32
        return out
    if isinstance(x, (tuple, list)):
        out = []
        for v in x:
            w = _seed_words(v)
            if w is None:
                return None
            out += w
        return out
    return None


def pcg64_state(entropy, spawn_key: tuple) -> dict | None:
    """The state `np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=spawn_key))` starts
    in (its `bit_generator.state`), made without either object: the sequence's words
    (_kernels.seed_state) and PCG's seeding (state 0, increment 2 x seq + 1, a step, the initial
    state added, a step) in Python's exact integers. Making the two objects took about 16 us, most
    of a job's speed-bias draw (Job.draw_bias, once per job: 2-3% of a whole-trace replay). None
    where the entropy or key is not made of non-negative ints (numpy's own path then)."""
    run, spawn = _seed_words(entropy), _seed_words(spawn_key)
    if run is None or spawn is None:
        return None
    if spawn and len(run) < 4:  # the run entropy is padded to the pool's 4 words
        run += [0] * (4 - len(run))
    w = _kernels.seed_state(np.array(run + spawn, np.uint64)).tolist()
    val = [w[2 * k] | w[2 * k + 1] << 32 for k in range(4)]  # generate_state(4, np.uint64)
    init_state, init_seq = val[0] << 64 | val[1], val[2] << 64 | val[3]
    inc = (init_seq << 1 | 1) & _M128
    state = ((inc + init_state) * _PCG64_MULT + inc) & _M128  # (0 x mult + inc) is inc
    return {"bit_generator": "PCG64", "state": {"state": state, "inc": inc}, "has_uint32": 0,
            "uinteger": 0}


class Ledger:
    """Running totals of a simulator's jobs, one row per job (its arrival index), as float64
    columns of one (rows x columns) array, so that the engine advances every running job in a few
    array operations (sim._integrate: one gather and one scatter of the running rows, elementwise
    in the scalar code's order of operations, hence the same bits). Each column is also an
    attribute (a view). A Job reads and writes its row through properties."""

    COLUMNS = ("steps", "run_s", "gpu_s", "xnode", "xrack", "dom", "last_speed", "obs_mean", "obs_time",
               "total", "bias", "mark")
    # bias: the current (p, w)'s speed bias, nan: not drawn yet; mark: work when unqueued finished
    # epochs began (Job._queue_epochs), nan: none
    _NAN = ("bias", "mark")

    def __init__(self, n: int):
        self.data = self._block(n)
        self._views()
        self.held = np.zeros(n, bool)  # the job held a node at some integration (dom_share_time)
        self.reload: list[Job] = []  # jobs whose measurements a reader holds (Job._obs_out)
        # jobs whose speed plan was dropped (Job.touch) since the engine last computed the rates
        # (compute_rates' `replanned`), in the order they were dropped: a dict, not a set, since a
        # set of Jobs iterates in memory-address order, which differs between processes
        self.replanned: dict[Job, None] = {}

    @cached_property
    def bias_rng(self) -> np.random.Generator:
        """Set to each speed bias' own stream before its draw (Job.draw_bias); made at the first
        (a job outside a simulator has a ledger of its own), its seed unused."""
        return np.random.Generator(np.random.PCG64(0))

    def _block(self, n: int) -> np.ndarray:
        data = np.zeros((n, len(self.COLUMNS)))
        for name in self._NAN:
            data[:, self.COLUMNS.index(name)] = math.nan
        return data

    def _views(self) -> None:
        for k, name in enumerate(self.COLUMNS):
            setattr(self, name, self.data[:, k])

    def grow(self, n: int) -> None:
        """Room for at least n rows."""
        size = len(self.data)
        if n > size:
            data = self._block(max(n, 2 * size))
            data[:size] = self.data
            self.data = data
            self._views()
            self.held = np.concatenate([self.held, np.zeros(len(data) - size, bool)])


# column indices of Ledger.data
(L_STEPS, L_RUN, L_GPU, L_XNODE, L_XRACK, L_DOM, L_LAST, L_OBS_MEAN, L_OBS_TIME, L_TOTAL, L_BIAS,
 L_MARK) = range(len(Ledger.COLUMNS))


def _column(name: str, doc: str) -> property:
    """A float of the job's ledger row, read and written as an attribute."""

    def get(job: "Job") -> float:
        return getattr(job.ledger, name).item(job.row)

    def put(job: "Job", value: float) -> None:
        getattr(job.ledger, name)[job.row] = value

    return property(get, put, doc=doc)


@dataclass(eq=False)
class Job:
    """Engine-side state of one job. Never handed to a scheduler: see api.JobView."""

    spec: JobSpec
    model: ModelSpec
    # the job's loss draws, and the seed of its speed biases (draw_bias); None once it ended
    # (release_losses), or until its first draw where `seed` is given
    rng: np.random.Generator | None
    total_epochs: int
    rel_delta: float = 0.0  # the job's stopping threshold (see stop_delta)
    status: str = PENDING
    num_ps: int = 0
    num_workers: int = 0
    tasks: dict[str, Task] = field(default_factory=dict)
    first_start_s: float = math.nan
    finish_s: float = math.nan
    paused_until: float = 0.0
    ran_before: bool = False  # a restart after preemption costs a restore
    _loss: list[tuple[int, float]] = field(default_factory=list, repr=False)
    _loss_tuple: tuple[tuple[int, float], ...] = field(default=(), repr=False)  # see loss_history
    _loss_due: list[list[int]] = field(default_factory=list, repr=False)  # [first, last] epochs
    _epochs_queued: int = field(default=0, repr=False)  # the last epoch queued (see _queue_epochs)
    # after the release of the losses (see release_losses), the number of epochs that ended (None
    # while the history is held)
    _epochs_ended: int | None = field(default=None, repr=False)
    _bias: dict[tuple[int, int], float] = field(default_factory=dict)
    locality: list[int] = field(default_factory=lambda: [0, 0, 0])  # data/rack-local, off-switch
    n_placed: int = 0  # tasks on a node now (kept by the Simulator)
    plan: object = None  # speed.JobPlan cache, dropped by touch()
    share: float | None = None  # dominant-share cache, dropped by touch()
    proj: float | None = None  # cross-node bytes per step of the placed tasks, dropped by touch()
    view: object = None  # api.JobView of a pending job (Simulator.job_view), dropped by touch()
    eff: PhiTable | None = None  # statistical efficiency over the work (efficiency.py); None: E = 1
    eff_bucket: int = 0  # the bucket of `eff` the work done is in (moved by the engine's events)
    # where the job's running totals live (a Simulator's Ledger, one row per job); a job made on
    # its own gets a ledger of its own
    ledger: Ledger | None = field(default=None, repr=False)
    row: int = 0
    # with `rng` None: the generator's seed, `np.random.default_rng(seed)` made at the first loss
    # draw (the engine's jobs: making a generator per arriving job cost ~14 us, and a job draws
    # only when its losses are read, which Tiresias does not do for running jobs; the same draws
    # whenever it is made); a tuple of ints, which the collector stops tracking
    seed: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.job_id = self.spec.job_id
        self._ps: list[Task] = []
        self._workers: list[Task] = []
        if self.ledger is None:
            self.ledger, self.row = Ledger(1), 0
        self.ledger.total[self.row] = self.total_steps
        if self.rng is None and self.seed is None:
            raise ValueError(f"job {self.job_id}: rng or seed must be given (the loss generator or its seed)")
        # before any draw: replays the losses (a lazy generator's start is its seed's)
        self._rng_start = None if self.rng is None else self.rng.bit_generator.state
        # measured speeds of (p, w)s run before; the current one's accumulates in the ledger
        # while `_obs_live` (see _obs_out)
        self._obs_speed: dict[tuple[int, int], float] = {}
        self._speed_times: dict[tuple[int, int], float] = {}
        self._obs_live = True

    steps_done = property(lambda self: self.ledger.steps.item(self.row), doc="Local batches of work done.")

    @steps_done.setter
    def steps_done(self, value: float) -> None:
        """Set the work done. The engine sets it where its integration stops a float residue off
        an exact value (a job's total at its end, an efficiency bucket's edge). The epochs ended
        so far are queued at the work they ended at; a value past the old work ends the epochs
        between the two too, so the old work becomes the mark they are queued from (without it,
        a job whose last epoch boundary is its total, reached only by the snap, reported one loss
        point short)."""
        self._queue_epochs()
        led, r = self.ledger, self.row
        old = led.steps.item(r)
        if value > old:
            led.mark[r] = old
        led.steps[r] = value

    run_s = _column("run_s", "Seconds it has run (placed, not paused).")
    attained_gpu_s = _column("gpu_s", "GPU-seconds received so far (Tiresias' attained service).")
    bytes_cross_node = _column("xnode", "Bytes it sent across NICs.")
    bytes_cross_rack = _column("xrack", "Bytes it sent across rack uplinks.")

    @property
    def dom_share_time(self) -> float:
        """Integral of its dominant share over its time in the system (a numpy float once it
        held a node, as the scalar engine's sums of numpy shares were: reprs stay the same)."""
        led, r = self.ledger, self.row
        return led.dom[r] if led.held[r] else led.dom.item(r)

    @dom_share_time.setter
    def dom_share_time(self, value: float) -> None:
        self.ledger.dom[self.row] = value

    last_speed = _column("last_speed", "Speed measured over the most recent interval it ran.")

    @property
    def obs_speed(self) -> dict[tuple[int, int], float]:
        """Mean measured speed (local batches/s) per (p, w) that ran, time-weighted."""
        self._obs_out()
        return self._obs_speed

    @property
    def _speed_time(self) -> dict[tuple[int, int], float]:
        """Seconds each (p, w) ran, the weights of obs_speed."""
        self._obs_out()
        return self._speed_times

    def speeds_seen(self) -> dict[tuple[int, int], float]:
        """A copy of obs_speed that leaves the measurements with the engine (for views)."""
        seen = dict(self._obs_speed)
        led, r = self.ledger, self.row
        if self._obs_live and led.obs_time[r] > 0:
            seen[self.num_ps, self.num_workers] = led.obs_mean.item(r)
        return seen

    def _obs_out(self) -> None:
        """Hand the current (p, w)'s measurements from the ledger to the dicts, which are then
        the truth (a reader may change them) until the engine takes them back (`_obs_in`)."""
        if not self._obs_live:
            return
        led, r = self.ledger, self.row
        if led.obs_time[r] > 0:
            key = (self.num_ps, self.num_workers)
            self._obs_speed[key] = led.obs_mean.item(r)
            self._speed_times[key] = led.obs_time.item(r)
        self._obs_live = False
        led.reload.append(self)

    def _obs_in(self) -> None:
        """The current (p, w)'s measurements, and its speed bias if drawn, into the ledger."""
        if self._obs_live:
            return
        led, r, key = self.ledger, self.row, (self.num_ps, self.num_workers)
        led.obs_mean[r] = self._obs_speed.get(key, 0.0)
        led.obs_time[r] = self._speed_times.get(key, 0.0)
        led.bias[r] = self._bias.get(key, math.nan)
        self._obs_live = True

    def draw_bias(self) -> None:
        """The current (p, w)'s speed-measurement bias, drawn when it first runs: speeds are
        measured with a 2% error fixed per configuration, as a profiler's.

        From a generator of its own: the (p, w) child of the job's seed (the SeedSequence of its
        loss generator, [workload seed, arrival index] in the engine) by numpy's spawn key, its
        documented way to derive independent streams from one seed (the entropy is padded before
        the key, so no child is any job's loss generator). So the bias is a pure function of
        (seed, job, p, w), the same whenever and however often the shape runs;
        drawn from the loss generator (as before branch bias7) it moved with the number of epochs
        ended before a resize, and the loss generator now draws losses only."""
        key = (self.num_ps, self.num_workers)
        entropy, spawn_key = self.seed_key()
        spawn_key = (*spawn_key, *key)
        state = pcg64_state(entropy, spawn_key)  # (the same stream, without making it anew)
        if state is None:
            z = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=spawn_key)).standard_normal()
        else:
            rng = self.ledger.bias_rng
            rng.bit_generator.state = state
            z = rng.standard_normal()
        self._bias[key] = self.ledger.bias[self.row] = 1.0 + 0.02 * float(z)

    def seed_key(self) -> tuple:
        """(entropy, spawn key) of the loss generator's SeedSequence, without making the
        generator where it is made lazily (`seed`)."""
        if self._rng_start is None:
            return self.seed, ()
        seq = self.rng.bit_generator.seed_seq
        return seq.entropy, seq.spawn_key

    @cached_property
    def steps_per_epoch(self) -> int | float:
        """Local batches per epoch (module function `steps_per_epoch`)."""
        return steps_per_epoch(self.model, self.spec)

    @cached_property
    def total_steps(self) -> float:
        """Local batches to train (weak scaling: a sync step of w workers does w of them): the
        replay's work where a trace sets it, else whole epochs up to convergence (fixed when the
        job is made; the engine reads it at every event, so it is kept)."""
        if self.spec.work_steps is not None:
            return self.spec.work_steps
        return self.total_epochs * self.steps_per_epoch

    def efficiency(self) -> float:
        """Local batches of work per local batch processed now (efficiency.PhiTable.efficiency)."""
        return 1.0 if self.eff is None else self.eff.efficiency(self.eff_bucket, self.num_workers)

    def next_boundary(self) -> float:
        """Work (local batches) at which the efficiency changes next; inf if it does not."""
        eff = self.eff
        if eff is None or self.eff_bucket + 1 >= len(eff.starts):
            return math.inf
        return eff.starts[self.eff_bucket + 1] * self.total_steps

    def raw_remaining(self, workers: int | None = None) -> float:
        """Local batches still to process at `workers` (default: the current count): the remaining
        work, each bucket's part divided by its efficiency (the work itself when E = 1)."""
        if self.eff is None:
            return self.total_steps - self.steps_done
        total, done, w = self.total_steps, self.steps_done, workers or self.num_workers
        ends = self.eff.starts[1:] + (1.0,)
        raw = 0.0
        for k in range(self.eff_bucket, len(ends)):
            hi = min(ends[k] * total, total)
            raw += max(hi - done, 0.0) / self.eff.efficiency(k, w)
            done = max(done, hi)
        return raw

    @property
    def uses_ps(self) -> bool:
        """PS jobs need at least one PS; all-reduce jobs have workers only."""
        return (self.spec.comm or self.model.comm) == "ps"

    @property
    def epochs_done(self) -> int:
        return int(self.steps_done // self.steps_per_epoch)

    def true_loss(self, epoch: float) -> float:
        c = self.model.loss
        return 1.0 / (c.b0 * epoch + c.b1) + c.b2

    def ps_tasks(self) -> list[Task]:
        """PS tasks in index order (a list the caller must not modify)."""
        return self._ps

    def worker_tasks(self) -> list[Task]:
        """Worker tasks in index order (a list the caller must not modify)."""
        return self._workers

    def fully_placed(self) -> bool:
        return (self.num_ps >= 1 or not self.uses_ps) and self.num_workers >= 1 and (
            self.n_placed == len(self.tasks)
        )

    def resize(self, num_ps: int, num_workers: int) -> None:
        """Set (p, w): new tasks start unplaced; removed tasks are the highest-numbered."""
        self._obs_out()
        for role, old, new in (("ps", self.num_ps, num_ps), ("w", self.num_workers, num_workers)):
            for i in range(new, old):
                del self.tasks[f"{self.job_id}/{role}{i}"]
            for i in range(old, new):
                tid = f"{self.job_id}/{role}{i}"
                self.tasks[tid] = Task(tid, "ps" if role == "ps" else "worker")
        self._ps = [self.tasks[f"{self.job_id}/ps{i}"] for i in range(num_ps)]
        self._workers = [self.tasks[f"{self.job_id}/w{i}"] for i in range(num_workers)]
        self.num_ps, self.num_workers = num_ps, num_workers
        self._obs_in()
        self.touch()

    def placed_dominant_share(self, cluster) -> float:
        """DRF's dominant share of what the job holds now (placed tasks), over the cluster's totals."""
        c, m = cluster, self.model
        placed = [t for t in self.tasks.values() if t.node >= 0]
        if not placed:
            return 0.0
        nps = sum(1 for t in placed if t.role == "ps")
        nw = len(placed) - nps
        cores, memory = c.core_memory_sums()
        shares = [
            (nps * m.ps.cpu + nw * m.worker.cpu) / cores,
            (nps * m.ps.mem_gb + nw * m.worker.mem_gb) / memory,
        ]
        if c.n_gpus:
            shares.append(nw * m.worker.gpu / c.n_gpus)
        return max(shares)

    def touch(self) -> None:
        """A task moved: drop what was cached from the placement (and say so to the engine's
        plan stack: Ledger.replanned)."""
        self.plan = None
        self.ledger.replanned[self] = None
        self.share = None
        self.proj = None
        self.view = None

    def relimit(self) -> None:
        """Only soft CPU limits changed: the plan keeps what the placement made (traffic, links,
        compute) and takes its tasks' limits anew, as speed.job_plan reads them, in a new plan
        object (the plan stack follows plans by identity). FlowCon sets limits at every run of
        its Algorithm 1, and a full re-plan per limit change was a fifth of a Philly-scale
        FlowCon run. Placement-derived caches (share, proj) stay: limits do not enter them."""
        plan = self.plan
        if plan is None:
            self.touch()
            return
        limit = np.array([self.tasks[tid].cpu_limit for tid in plan.task_ids], dtype=float)
        self.plan = replace(plan, limit=limit, slot=None)
        self.ledger.replanned[self] = None
        self.view = None

    def _queue_epochs(self) -> None:
        """Queue for loss draws the epochs that ended since the ledger's mark: the work at the
        start of the intervals run since the last queueing (sim._integrate sets it), or before
        the steps_done setter moved it forward. Epochs count once, up to `total_epochs`, in the
        order they ended.

        The mark can lie below an epoch already queued: an integration that overshoots an
        efficiency bucket's edge by a float residue ends the epoch at that edge, and the snap back
        to the edge (steps_done's setter) leaves the work, the next mark, a residue below that
        epoch's boundary (Philly jobs whose epoch count is a multiple of 5 have their bucket
        edges on epoch boundaries). So epochs are queued from past the last one queued, never
        twice (FlowCon's loss slope divided by zero on the repeated epoch)."""
        led, r = self.ledger, self.row
        mark = led.mark.item(r)
        if math.isnan(mark):
            return
        led.mark[r] = math.nan
        spe = self.steps_per_epoch
        first = max(int(mark // spe), self._epochs_queued) + 1
        last = min(int(led.steps.item(r) // spe), self.total_epochs)
        if first <= last:
            self._epochs_queued = last
            due = self._loss_due
            if due and due[-1][1] + 1 == first:
                due[-1][1] = last
            else:
                due.append([first, last])

    @property
    def obs_loss(self) -> list[tuple[int, float]]:
        """(epoch, observed loss) per finished epoch: the model's loss with relative noise per
        epoch. Drawn when asked, from the job's generator in the order the epochs ended (epoch
        n's noise is its n-th normal draw), so the values do not depend on when they are read.

        Once the job has ended (release_losses) the history is not kept: each read replays it
        from the generator's start, a new list equal to the one the job held, in time
        proportional to its epochs. Nothing schedules an ended job; this is for analysis after
        a run (the engine-identity pins hash it)."""
        if self._epochs_ended is not None:
            return self._replay_losses()
        self._draw_losses()
        return self._loss

    def loss_history(self) -> tuple[tuple[int, float], ...]:
        """obs_loss as a tuple, made again only when an epoch was added: every view of the job
        shares it (a running job's view is rebuilt at each decision that reads it, and copying
        its whole history each time cost every scheduler in proportion to the epochs run)."""
        loss = self.obs_loss
        if len(self._loss_tuple) != len(loss):
            self._loss_tuple = tuple(loss)
        return self._loss_tuple

    def release_losses(self) -> None:
        """The job has ended (Simulator._end): drop its loss history and generator, which held a
        Python tuple per epoch for the rest of the run (Philly jobs run up to 478,000 epochs;
        the whole trace's histories took gigabytes). Its generator draws losses only, for epochs
        that ended, so the history is fixed now: epochs 1..n, replayed on read (obs_loss). The
        list and the epoch queue become empty tuples, which the garbage collector does not track:
        every full collection walks what the ended jobs hold (about 6% of a whole-trace run)."""
        self._queue_epochs()
        self._epochs_ended = self._epochs_queued
        self._loss, self._loss_tuple, self._loss_due, self.rng = (), (), (), None

    def _replay_losses(self) -> list[tuple[int, float]]:
        """An ended job's history, drawn again from the generator's start state. Epochs end in
        order and count once, so the history is epochs 1..n with the n-th normal draw as epoch
        n's noise."""
        n = self._epochs_ended
        if not n:  # no epoch ended
            return []
        return self._loss_points(range(1, n + 1), self._start_generator().standard_normal(n).tolist())

    def _start_generator(self) -> np.random.Generator:
        """A loss generator at its stream's start: made from `seed`, or set to the state recorded
        before the given generator's first draw."""
        start = self._rng_start
        if start is None:
            return np.random.default_rng(self.seed)
        rng = np.random.Generator(getattr(np.random, start["bit_generator"])())
        rng.bit_generator.state = start
        return rng

    def _loss_points(self, epochs, z: list[float]) -> list[tuple[int, float]]:
        """(epoch, observed loss) for these epochs and their normal draws (one formula for the
        draws and the replay, so both give the same bits)."""
        noise, true_loss = self.model.loss.noise, self.true_loss
        return [(k, max(true_loss(k) * (1.0 + noise * x), 0.0)) for k, x in zip(epochs, z)]

    def _draw_losses(self) -> None:
        self._queue_epochs()
        if not self._loss_due:
            return
        epochs = [k for a, b in self._loss_due for k in range(a, b + 1)]
        self._loss_due.clear()
        self._loss += self._loss_points(epochs, self.generator().standard_normal(len(epochs)).tolist())

    def generator(self) -> np.random.Generator:
        """The loss generator of a job in the system (made from `seed` at its first use)."""
        if self.rng is None:
            self.rng = self._start_generator()
        return self.rng

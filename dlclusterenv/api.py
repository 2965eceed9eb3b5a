"""Front door 1, the Scheduler API: a read-only view in, a decision out.

A heuristic subclasses :class:`Scheduler` and implements ``decide(view) -> Decision``. The view shows
what a real cluster shows (observed loss points, measured speeds, progress, placements, free
resources); the true loss curve and speed function stay inside the engine. A scheduler that is an
oracle by design (e.g. SRTF, optimus-oracle) sets ``oracle = True`` and gets ``view.oracle``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import numpy as np

from .config import Demand
from .efficiency import gain

if TYPE_CHECKING:
    from .cluster import Cluster
    from .sim import Simulator


class DecisionError(ValueError):
    """A decision that cannot be applied; the message names the task, job, node or GPU."""


@dataclass
class Decision:
    """What a scheduler wants changed. Empty fields change nothing.

    - allocate: job id -> (num_ps, num_workers); new tasks start unplaced, the highest-numbered go.
    - place: task id -> node (name or index) or (node, gpu slot on that node). Placing a placed
      task of a running job migrates it (checkpoint/restore cost). Without a GPU slot a worker gets
      a free GPU of the node; with one it may share an occupied GPU (time-slicing or packing).
    - preempt: job ids whose tasks all leave their nodes; progress is kept (suspend), and a later
      placement resumes the job after a restore.
    - cpu_limits: task id -> soft limit as a fraction of its node's cores (FlowCon); 1.0 = none.
    - gpu_mode: "node/gN" -> "pack" or "timeslice" for workers that share that GPU.
    - wake_at: ask for an extra decision point at this time (e.g. when a job will cross a
      Tiresias queue threshold); the earliest pending request wins; inf (or a time not after
      now) asks for none.
    """

    allocate: dict[str, tuple[int, int]] = field(default_factory=dict)
    place: dict[str, object] = field(default_factory=dict)
    preempt: list[str] = field(default_factory=list)
    cpu_limits: dict[str, float] = field(default_factory=dict)
    gpu_mode: dict[str, str] = field(default_factory=dict)
    wake_at: float | None = None

    def empty(self) -> bool:
        return not (
            self.allocate or self.place or self.preempt or self.cpu_limits or self.gpu_mode
            or self.wake_at is not None
        )


@dataclass(frozen=True)
class TaskView:
    task_id: str
    job_id: str
    role: str
    node: int  # -1: unplaced
    gpu: int  # global GPU index, -1: none
    cpu_limit: float
    demand: Demand
    cores: float  # cores in use now (0 unless its job is running)


@dataclass(frozen=True)
class JobView:
    """One job as a cluster operator sees it: no true curve, no true speed function."""

    job_id: str
    model: str
    user: str
    weight: float
    arrival_s: float
    status: str  # pending | running
    num_ps: int
    num_workers: int
    requested: tuple[int, int]  # (num_ps, num_workers) asked for at submission
    ps_demand: Demand
    worker_demand: Demand
    param_bytes: float
    sync: bool
    gpu_util: float  # profiled utilisation alone (Gandiva-style introspection)
    gpu_mem_gb: float
    gpu_milli: int  # thousandths of a GPU per worker; < 1000: the engine packs it onto a shared GPU
    gpu_step_s: Mapping[str, float]  # profiled step alone per GPU type (empty: same on every type)
    steps_per_epoch: int | float  # a replayed trace job's own: work / its model's convergence epoch
    input_bytes_per_step: float  # input read per local batch, from the job's data set
    dataset_bytes: float
    max_epochs: int  # the user's epoch budget (a replayed trace job: at least the epochs it ran)
    rel_delta: float  # the user's stopping rule: stop at the first epoch improving by less
    steps_done: float
    epochs_done: int
    observed_loss: tuple[tuple[int, float], ...]
    observed_speed: Mapping[tuple[int, int], float]  # mean measured speed (local batches/s) per (p, w) that ran
    last_speed: float  # local batches/s measured over the most recent interval it ran (0 if never)
    attained_gpu_s: float  # GPU-seconds received so far (Tiresias' attained service)
    run_s: float
    first_start_s: float  # nan if never started
    shard_nodes: tuple[int, ...]
    tasks: tuple[TaskView, ...]
    comm: str = "ps"  # "ps" (needs >= 1 PS) | "allreduce" (workers only: allocate (0, w))
    exchange_every: int = 1  # the job exchanges gradients once per this many steps (local SGD)
    # Gradient noise scale phi of the work done so far (efficiency.py; Pollux's agent measures it
    # online, OSDI'21 Sec. 3.1), in samples, and the local batch M0 it is counted against; inf: the
    # scenario has no statistical efficiency (E = 1 at any size).
    noise_scale: float = math.inf
    local_batch: int = 1

    def efficiency(self, workers: int) -> float:
        """Pollux Eq. 7 at the phi measured now (efficiency.gain); 1 without statistical efficiency."""
        if math.isinf(self.noise_scale):
            return 1.0
        return gain(self.noise_scale, self.local_batch, workers)


class OracleView:
    """The engine's hidden truth, for schedulers that declare themselves oracles."""

    def __init__(self, sim: Simulator):
        self._sim = sim

    def remaining_steps(self, job_id: str) -> float:
        job = self._sim.job(job_id)
        return job.total_steps - job.steps_done

    def total_steps(self, job_id: str) -> int:
        return self._sim.job(job_id).total_steps

    def speed(self, job_id: str, ps_nodes: list[int], worker_nodes: list[int]) -> float:
        """True steps/s of the job alone on the cluster with this placement."""
        return self._sim.isolated_speed(job_id, ps_nodes, worker_nodes)

    def remaining_batches(self, job_id: str, workers: int) -> float:
        """Local batches the job still has to process at `workers` workers: its remaining steps
        divided by the statistical efficiency of that size over the work left (efficiency.py;
        equal to remaining_steps when the scenario has none). Over `speed`: the true time left."""
        return self._sim.job(job_id).raw_remaining(workers)

    def efficiency(self, job_id: str, workers: int) -> float:
        """Mean statistical efficiency at `workers` over the job's remaining work (1.0 without)."""
        job = self._sim.job(job_id)
        if job.eff is None:
            return 1.0
        rem = job.total_steps - job.steps_done
        return rem / job.raw_remaining(workers) if rem > 0 else job.eff.efficiency(job.eff_bucket, workers)


class JobViews(Sequence):
    """Views of the simulator's `jobs`, each built when first read: a scheduler that reads the
    head of a long queue pays for the head only. Valid until the simulator changes (a
    ClusterView is read at its decision point)."""

    def __init__(self, sim: Simulator, jobs: list):
        self._sim, self._version = sim, sim.version
        self._jobs = jobs
        self._views: dict[int, JobView] = {}

    def _check(self) -> None:
        if self._sim.version != self._version:
            raise RuntimeError("a ClusterView is read at its decision point, before the "
                               "simulator moves on")

    def __len__(self) -> int:
        self._check()
        return len(self._jobs)

    def __bool__(self) -> bool:
        self._check()
        return bool(self._jobs)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return tuple(self[i] for i in range(*k.indices(len(self))))
        self._check()
        k = range(len(self._jobs))[k]  # normalised; IndexError if out of range
        view = self._views.get(k)
        if view is None:
            view = self._views[k] = self._sim.job_view(self._jobs[k])
        return view

    def __iter__(self) -> Iterator[JobView]:
        for k in range(len(self)):
            yield self[k]

    def job_id(self, k: int) -> str:
        """The id of job `k` without building its view (a scheduler that tracks jobs itself
        reads ids every decision, views only of jobs that changed)."""
        self._check()
        return self._jobs[k].job_id

    def _ids_rows(self) -> tuple[list[str], np.ndarray]:
        """The jobs' ids and ledger rows; for the simulator's running jobs, its kept ones."""
        sim, jobs = self._sim, self._jobs
        if jobs is sim.running_jobs():
            return sim.running_ids_rows()
        return [j.job_id for j in jobs], np.array([j.row for j in jobs], dtype=np.int64)

    def job_ids(self) -> list[str]:
        """Every job's id, in order, without building views (a list the caller must not
        modify)."""
        self._check()
        return self._ids_rows()[0]

    def attained_gpu_s(self, array: bool = False) -> list[float] | np.ndarray:
        """Every job's JobView.attained_gpu_s, in order, without building views: one gather of
        the engine's ledger (Tiresias reads every running job's service at every decision);
        `array`: as a new float64 array (Tiresias compares them all with its queue limits)."""
        self._check()
        got = self._sim._ledger.gpu_s[self._ids_rows()[1]]
        return got if array else got.tolist()

    def observed_speeds(self) -> list[dict[tuple[int, int], float]]:
        """Every job's JobView.observed_speed, in order, without building views: new dicts the
        caller may keep. A scheduler that pools measured speeds over all jobs (Optimus) reads
        them at every decision, and a running job's view (its tasks, loss points) would be
        rebuilt at each one."""
        self._check()
        return [j.speeds_seen() for j in self._jobs]

    def __repr__(self) -> str:
        return f"JobViews({len(self)} jobs)"


class ClusterView:
    """Read-only snapshot of the cluster at a decision point (arrays are not writeable). Job
    views are built as they are read, so the view must be read before its decision is applied."""

    def __init__(self, sim: Simulator, oracle: bool):
        self.time: float = sim.now
        self.tick_s: float | None = sim.tick_s  # the scenario's scheduling interval
        self.cluster: Cluster = sim.cluster
        self.free_cpu = _frozen(sim.cluster.cpus - sim.used_cpu)
        self.free_mem = _frozen(sim.cluster.memory - sim.used_mem)
        self.free_bw = _frozen(sim.cluster.nic - sim.used_bw)
        self.free_gpus = _ro(sim.free_gpus)
        self.gpu_packed = _frozen(sim.gpu_mode.astype(bool))
        self.jobs: Sequence[JobView] = JobViews(sim, sim.active_jobs())  # arrival order
        self.pending: Sequence[JobView] = JobViews(sim, sim.pending_jobs())
        self.running: Sequence[JobView] = JobViews(sim, sim.running_jobs())
        self.oracle = OracleView(sim) if oracle else None
        self._sim = sim
        self._owners: tuple[tuple[str, ...], ...] | None = None
        self._cores: Mapping[str, float] | None = None

    @property
    def gpu_owners(self) -> tuple[tuple[str, ...], ...]:
        """Task ids on each GPU (global index); built when first read, as the job views are (a
        Philly-scale cluster has 2,496 GPUs, most schedulers never look)."""
        if self._owners is None:
            self.jobs._check()
            self._owners = tuple(tuple(o) for o in self._sim.gpu_tasks)
        return self._owners

    def job(self, job_id: str) -> JobView:
        self.jobs._check()
        job = self._sim.jobs.get(job_id)
        if job is None or job.status == "done":
            raise KeyError(f"no active job {job_id!r}")
        return self._sim.job_view(job)

    def attained_gpu_s(self, job_id: str) -> float:
        """An active job's JobView.attained_gpu_s now, without building its view (a running
        job's view is rebuilt at every decision point: its service and losses move)."""
        self.jobs._check()
        job = self._sim.jobs.get(job_id)
        if job is None or job.status == "done":
            raise KeyError(f"no active job {job_id!r}")
        return job.attained_gpu_s

    def task_cores(self) -> Mapping[str, float]:
        """Cores each task of a running job uses now (TaskView.cores), by task id, without
        building job views; a task not in it uses none. FlowCon reads every container's usage at
        every decision point, and its timer makes ~30x the decision points of its peers."""
        self.jobs._check()
        if self._cores is None:
            self._cores = MappingProxyType(self._sim.rates().task_cores)
        return self._cores

    def gpu_key(self, gpu: int) -> str:
        """The key `Decision.gpu_mode` takes for GPU index `gpu`."""
        return self.cluster.gpu_key(gpu)


def _ro(a: np.ndarray) -> np.ndarray:
    """A read-only copy."""
    return _frozen(np.array(a))


def _frozen(a: np.ndarray) -> np.ndarray:
    """`a` itself, made read-only (for arrays made for the view, no copy needed)."""
    a.setflags(write=False)
    return a


class Scheduler(ABC):
    """Base class of every heuristic: one method, ``decide``.

    ``name`` is the registry name; ``oracle`` asks for the engine's truth (named as such in results).
    ``reset(seed)`` is called at the start of each episode with the episode's seed.
    """

    name: str = "scheduler"
    oracle: bool = False

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    @abstractmethod
    def decide(self, view: ClusterView) -> Decision:
        """Return the changes to make at this decision point."""

"""Optimus (Peng et al., EuroSys'18): allocation by marginal gain, placement on the fewest servers.

Seed 002 ("Optimus", lecture 10) gives the allocation heuristic and the placement principle; seed
003 (reading notes) the convergence and speed models and the public code in outline
(pengyanghua/optimus @8d46148, scheduler/optimus_scheduler.py and estimator.py, cited as [code]).

Per job, every scheduling interval:
1. Convergence model, seed 003: l(k) = 1/(b0*k + b1) + b2 fitted to the job's *observed* loss
   points (non-negative parameters, later points weighted more: three segments with sigma divided by
   4 per segment, as [code] estimator._loss_curve_fitting). The job converges at the first epoch
   whose fitted loss improves on the previous one by less than the owner's threshold (the
   simulator's `convergence.rel_delta`, read from configs/models.yaml: the view does not carry it),
   capped at the epoch budget. Remaining work Q_j is in *steps* (epochs x steps_per_epoch - steps
   done), and speeds are in steps/s, so Q_j / f is seconds ([code] divides remaining *epochs* by
   steps/s; not copied).
2. Speed model, seed 003: sync 1/f = t0*M/w + t1 + t2*w/p + t3*w + t4*p, async w/f = t0 + t1*w/p +
   t2*w + t3*p, both linear in non-negative t, fitted by scipy.optimize.nnls to the speeds measured
   so far (JobView.observed_speed), rows scaled by 1/y so residuals are relative. M, the global
   batch, is fixed per job, so t0*M is one coefficient.
3. Allocation, seed 002 "Marginal Gain based Heuristic": every job gets 1 PS + 1 worker (arrival
   order, while resources last); then repeatedly the job with the largest marginal gain, the
   reduction of Q_j / f per unit of the dominant resource's *share of cluster capacity*, gets one PS
   or one worker, whichever gains more, until resources run out or no gain is positive ([code]
   divides by the raw amount of the dominant resource; not copied).
4. Placement, seed 002 Fig. 10: each job on the fewest servers with the same number of PS and of
   workers on each ([code] __place: round robin over the k candidate servers, k = 1, 2, ...).

Choices where the sources leave room:
- Identifiable speed samples. A job measures only the (p, w) it ran. The paper profiles each new job
  on a few (p, w) before scheduling it; [code] test_speed profiles p = w only, which makes t1 and t2
  (and t3 and t4) collinear, so the sync model is not identifiable (not copied). Here profiling is
  emulated in production, honestly: samples of jobs of the same model are pooled (as [code]
  test_speed reuses speed points of jobs of the same workload), and while a model's pooled samples
  do not have full rank, each of its jobs runs the next untried configuration of PROFILE_DESIGN
  (distinct p != w shapes; the first five have full rank for both models) for an interval instead
  of taking part in the greedy (as [code] leaves jobs without an estimate at 1 PS + 1 worker).
  Predictions use the job's own measured speed for a (p, w) it ran, else the pooled measurement,
  else the fit ([code] est_speed: "use the real one if already exists").
- Before 3 loss points the job is assumed to need 20 more epochs ([code] __update_util_queue's
  fallback "job.progress + 20"), within its epoch budget. A fitted convergence epoch at or below the
  epochs done (the job is still running, so it has not converged) counts as the next epoch.
- Jobs at their beginning (fewer than `early_epochs` observed loss points, large prediction error)
  have their marginal gain multiplied by `early_factor` (0.95, seed 002 "Sensitivity to Prediction
  Error"); 1.0 turns it off.
- "Until resources run out": an increment that does not fit the cluster's remaining capacity is
  replaced by the job's other increment if that gains and fits, else the job stops growing and the
  others go on ([code] stops the whole round at the first increment that does not fit).
- Resources are checked in aggregate (CPU, memory, bandwidth, GPUs) during allocation, per node
  during placement. Placement tries k = 1, 2, ... servers, ordered by most free GPUs (jobs with GPU
  workers), then CPU and memory ([code] orders by free CPU, since its servers are all alike; on a
  cluster with CPU-only servers that order would put workers where they cannot run). Jobs are
  placed in order of increasing p + w ([code]). A job that fits on no k servers falls back to [code]'s
  partial placement: PS and workers alternately, each on the job's servers first, else the server
  with the most free, keeping what fits (at least 1 PS and 1 worker) and lowering (p, w) to it.
  Every attempt works on a copy of the free capacity and is committed only when it succeeds, so a
  failed attempt leaves nothing taken ([code] leaks the workers of an attempt whose PS did not fit,
  and checks GPUs against BW_PER_NODE; neither copied).
- Decision points. Optimus reallocates every `interval_s` (600 s, [code] params.TS_INTERVAL, seed
  002 "~10 mins"): at the first decision point of each interval all active jobs are reallocated from
  1 PS + 1 worker. Jobs whose (p, w) is unchanged keep their tasks where they are (moving them would
  cost a checkpoint for nothing; [code] restarts every job each slot); jobs whose (p, w) changed are
  resized (one checkpoint in the engine) and placed afresh; jobs that get nothing or cannot be placed
  wait (a running one is preempted, keeping its progress, as [code] leaves it pending). At arrivals
  and completions in between, running jobs are left alone and only the pending jobs are allocated,
  by the same heuristic, in the free resources (so a new job does not idle up to 10 minutes and
  freed resources are reused at once, without resizing anyone between intervals).
- `optimus-oracle` replaces both models by the truth (view.oracle): remaining steps, and the job's
  speed alone on an empty cluster under the placement step 4 would choose there. No profiling, no
  early downgrade. An upper bound on what better prediction buys, not the paper's system.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.optimize import curve_fit, nnls

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.cluster import Cluster
from dlclusterenv.config import Demand, load_zoo
from dlclusterenv.placers import Capacity

# Profiling shapes, smallest first: p != w so that w/p and w, p vary independently. The first five
# give the sync features full rank 5, the first four the async features rank 4.
PROFILE_DESIGN = ((1, 1), (1, 2), (2, 2), (1, 4), (2, 4), (2, 1), (3, 3), (1, 3), (3, 6))
FALLBACK_EPOCHS = 20  # [code] __update_util_queue: end_epoch = job.progress + 20 without a fit
LOSS_SEGMENTS = 3  # [code] _loss_curve_fitting: NUM_SEGMENTS, sigma /= 4 ** segment
MIN_LOSS_POINTS = 3  # [code] est_epoch: len(job.val_losses) >= 3


# ----------------------------------------------------------------------------- speed model
def speed_features(sync: bool, p: float, w: float) -> np.ndarray:
    """Seed 003: sync 1/f = [M/w, 1, w/p, w, p] . t; async w/f = [1, w/p, w, p] . t."""
    if sync:
        return np.array([1.0 / w, 1.0, w / p, w, p])
    return np.array([1.0, w / p, w, p])


def fit_speed(samples: dict[tuple[int, int], float], sync: bool) -> np.ndarray | None:
    """Non-negative t for the speed model from measured speeds; None while not identifiable."""
    pts = [(p, w, f) for (p, w), f in samples.items() if f > 0]
    n = 5 if sync else 4
    if len(pts) < n:
        return None
    a = np.array([speed_features(sync, p, w) for p, w, _ in pts])
    y = np.array([(1.0 / f) if sync else (w / f) for p, w, f in pts])
    a, y = a / y[:, None], np.ones(len(y))  # relative residuals
    if np.linalg.matrix_rank(a / np.linalg.norm(a, axis=0)) < n:
        return None
    theta, _ = nnls(a, y)
    return theta if theta.any() else None


def predict_speed(theta: np.ndarray, sync: bool, p: int, w: int) -> float:
    d = float(speed_features(sync, p, w) @ theta)
    if d <= 0:
        return 0.0
    return 1.0 / d if sync else w / d


# ----------------------------------------------------------------------------- convergence model
def loss_curve(k, b0, b1, b2):
    """Seed 003: l(k) = 1/(b0*k + b1) + b2."""
    return 1.0 / (b0 * k + b1) + b2


def fit_loss(points: tuple[tuple[int, float], ...]) -> tuple[float, float, float] | None:
    """(b0, b1, b2) >= 0 from observed (epoch, loss), later points weighted more ([code])."""
    if len(points) < MIN_LOSS_POINTS:
        return None
    k = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    seg = math.ceil(len(k) / LOSS_SEGMENTS)
    sigma = 1.0 / 4.0 ** (np.arange(len(k)) // seg)
    wt = 1.0 / sigma**2
    # start: for a fixed b2, 1/(l - b2) = b0*k + b1 is linear; scan b2 below the smallest loss
    best, start = math.inf, None
    for b2 in np.linspace(0.0, 0.99 * max(y.min(), 1e-9), 25):
        z = 1.0 / np.maximum(y - b2, 1e-9)
        a = np.stack([k, np.ones_like(k)], axis=1) * np.sqrt(wt)[:, None]
        (b0, b1), _ = nnls(a, z * np.sqrt(wt))
        if b0 * k.min() + b1 <= 0:
            continue
        err = float((wt * (loss_curve(k, b0, b1, b2) - y) ** 2).sum())
        if err < best:
            best, start = err, (b0, b1, b2)
    if start is None:
        return None
    try:
        b, _ = curve_fit(
            loss_curve, k, y, p0=np.maximum(start, 1e-6), sigma=sigma, bounds=(0.0, np.inf),
            maxfev=2000,
        )
        if float((wt * (loss_curve(k, *b) - y) ** 2).sum()) <= best:
            return float(b[0]), float(b[1]), float(b[2])
    except (RuntimeError, ValueError):
        pass
    return start


def convergence_epoch(b: tuple[float, float, float], rel_delta: float, max_epochs: int) -> int:
    """First epoch whose fitted loss improves on the previous by less than rel_delta (budget cap)."""
    k = np.arange(1, max_epochs + 1, dtype=float)
    prev, cur = loss_curve(k - 1, *b), loss_curve(k, *b)
    small = np.flatnonzero((prev - cur) / prev < rel_delta)
    return int(k[small[0]]) if len(small) else max_epochs


@lru_cache(maxsize=None)
def _owner_rel_delta(model: str) -> float:
    zoo = load_zoo()
    if model not in zoo.models:
        raise KeyError(
            f"Optimus: model {model!r} is not in configs/models.yaml, so its convergence threshold "
            "is unknown; pass rel_delta= to the scheduler"
        )
    return zoo.models[model].convergence.rel_delta


# ----------------------------------------------------------------------------- allocation
def resource_vec(d: Demand) -> np.ndarray:
    """(cpu, mem GB, bandwidth B/s, GPUs): the resources Optimus' shares are taken over."""
    return np.array([d.cpu, d.mem_gb, d.bw_MBps * 1e6, d.gpu], dtype=float)


def cluster_totals(c: Cluster) -> np.ndarray:
    return np.array([c.cpus.sum(), c.memory.sum(), c.nic.sum(), c.n_gpus], dtype=float)


def dominant_share(d: Demand, totals: np.ndarray) -> float:
    """Seed 002: the largest share of cluster capacity among the resources one task uses."""
    v = resource_vec(d)
    used = totals > 0
    return float((v[used] / totals[used]).max())


@dataclass
class AllocJob:
    """What the allocator needs of one job; `speed(p, w)` returns steps/s or None (no estimate)."""

    job_id: str
    ps: Demand
    worker: Demand
    remaining: float  # Q_j, steps
    speed: object  # callable (p, w) -> float | None
    factor: float = 1.0  # seed 002: 0.95 at the beginning of training
    start: tuple[int, int] = (1, 1)  # a profiling shape replaces (1, 1)
    grow: bool = True  # False: keeps `start` (profiling, or no speed estimate)


def marginal_gain(job: AllocJob, p: int, w: int, role: str, totals: np.ndarray) -> float:
    """Seed 002: (Q/f(p, w) - Q/f(p', w')) / dominant share of the added task, times the factor."""
    f0 = job.speed(p, w)
    f1 = job.speed(p + 1, w) if role == "ps" else job.speed(p, w + 1)
    if not f0 or not f1:
        return -math.inf
    share = dominant_share(job.ps if role == "ps" else job.worker, totals)
    return job.factor * (job.remaining / f0 - job.remaining / f1) / share


def allocate(jobs: list[AllocJob], free: np.ndarray, totals: np.ndarray) -> dict[str, tuple[int, int]]:
    """Seed 002 "Marginal Gain based Heuristic for Resource Allocation", in aggregate resources.

    `jobs` in arrival order; `free` = (cpu, mem, bw, gpu) the allocation may spend. Returns (p, w)
    for every job that got at least 1 PS and 1 worker."""
    free = free.astype(float).copy()
    eps = np.array([1e-9, 1e-9, 1e-3, 1e-9])

    def need(job: AllocJob, p: int, w: int) -> np.ndarray:
        return p * resource_vec(job.ps) + w * resource_vec(job.worker)

    alloc: dict[str, tuple[int, int]] = {}
    # "First allocate one worker and one parameter server to each active job to avoid starvation"
    for job in jobs:
        n = need(job, 1, 1)
        if (n <= free + eps).all():
            free -= n
            alloc[job.job_id] = (1, 1)
    for job in jobs:  # profiling shapes, where they fit
        if job.job_id in alloc and job.start != (1, 1):
            n = need(job, *job.start) - need(job, 1, 1)
            if (n <= free + eps).all():
                free -= n
                alloc[job.job_id] = job.start
    by_id = {j.job_id: j for j in jobs}
    order = {j.job_id: i for i, j in enumerate(jobs)}
    heap: list[tuple[float, int, str]] = []

    def push(jid: str) -> None:
        job = by_id[jid]
        if job.grow:
            heapq.heappush(heap, (-best(job)[0], order[jid], jid))

    def best(job: AllocJob) -> tuple[float, str]:
        p, w = alloc[job.job_id]
        g = {r: marginal_gain(job, p, w, r, totals) for r in ("ps", "worker")}
        role = "ps" if g["ps"] >= g["worker"] else "worker"
        return g[role], role

    for jid in alloc:
        push(jid)
    # "Iteratively select the job with the largest marginal gain and add one worker or PS ...
    # until some resource in the cluster is used up, or marginal gains of all jobs become
    # non-positive."
    while heap:
        neg, _, jid = heapq.heappop(heap)
        job = by_id[jid]
        if -neg <= 0:
            break  # the largest gain is not positive: so are all others
        p, w = alloc[jid]
        gains = {r: marginal_gain(job, p, w, r, totals) for r in ("ps", "worker")}
        for role in sorted(gains, key=lambda r: -gains[r]):
            if gains[role] <= 0:
                continue
            d = resource_vec(job.ps if role == "ps" else job.worker)
            if (d <= free + eps).all():
                free -= d
                alloc[jid] = (p + 1, w) if role == "ps" else (p, w + 1)
                push(jid)
                break
    return alloc


# ----------------------------------------------------------------------------- placement
def _node_order(cluster: Cluster, cap: Capacity, worker: Demand) -> list[int]:
    """Servers with the most free resources first: GPUs (for GPU workers), then CPU, memory."""
    gpu = cap.gpu if worker.gpu > 0 else np.zeros_like(cap.gpu)
    return sorted(range(cluster.n_nodes), key=lambda n: (-gpu[n], -cap.cpu[n], -cap.mem[n], n))


def _copy(cap: Capacity) -> Capacity:
    return Capacity(cap.cpu.copy(), cap.mem.copy(), cap.bw.copy(), cap.gpu.copy())


def _commit(cap: Capacity, trial: Capacity) -> None:
    cap.cpu[:], cap.mem[:], cap.bw[:], cap.gpu[:] = trial.cpu, trial.mem, trial.bw, trial.gpu


def place_even(
    cluster: Cluster, cap: Capacity, ps: Demand, worker: Demand, p: int, w: int
) -> tuple[list[int], list[int]] | None:
    """Seed 002 Fig. 10: the fewest servers, the same number of PS and of workers on each.

    k = 1, 2, ... candidate servers (most free first); PS i and worker i go to server i mod k
    ([code] __place). `cap` is charged only on success."""
    order = _node_order(cluster, cap, worker)
    for k in range(1, cluster.n_nodes + 1):
        cand, trial, ok = order[:k], _copy(cap), True
        ps_nodes = [cand[i % k] for i in range(p)]
        w_nodes = [cand[i % k] for i in range(w)]
        for n, d in [(n, ps) for n in ps_nodes] + [(n, worker) for n in w_nodes]:
            if not trial.fits(d)[n]:
                ok = False
                break
            trial.take(n, d)
        if ok:
            _commit(cap, trial)
            return ps_nodes, w_nodes
    return None


def place_partial(
    cluster: Cluster, cap: Capacity, ps: Demand, worker: Demand, p: int, w: int
) -> tuple[list[int], list[int]] | None:
    """[code] __place's last resort: PS and workers alternately, as many as fit (>= 1 of each);
    each on the job's servers first, else the server with the most free. `cap` charged on success."""
    trial = _copy(cap)
    out: dict[str, list[int]] = {"ps": [], "w": []}
    want = {"ps": p, "w": w}
    dem = {"ps": ps, "w": worker}
    open_roles = ["ps", "w"]
    while open_roles:
        for role in list(open_roles):
            if len(out[role]) >= want[role]:
                open_roles.remove(role)
                continue
            fit = trial.fits(dem[role])
            mine = [n for n in out["ps"] + out["w"] if fit[n]]
            other = [n for n in _node_order(cluster, trial, worker) if fit[n]]
            if not mine and not other:
                open_roles.remove(role)
                continue
            n = mine[0] if mine else other[0]
            trial.take(n, dem[role])
            out[role].append(n)
    if not out["ps"] or not out["w"]:
        return None
    _commit(cap, trial)
    return out["ps"], out["w"]


# ----------------------------------------------------------------------------- the scheduler
@dataclass
class _Estimates:
    """Per-model pooled speed samples (job -> {(p, w): steps/s}) and cached loss fits."""

    speeds: dict[str, dict[str, dict[tuple[int, int], float]]] = field(default_factory=dict)
    loss: dict[str, tuple[int, tuple[float, float, float] | None]] = field(default_factory=dict)


class Optimus(Scheduler):
    name = "optimus"

    def __init__(
        self,
        interval_s: float = 600.0,
        early_factor: float = 0.95,
        early_epochs: int = 5,
        rel_delta: float | None = None,
    ):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if not 0 < early_factor <= 1:
            raise ValueError(f"early_factor must be in (0, 1], got {early_factor}")
        self.interval_s = interval_s
        self.early_factor = early_factor
        self.early_epochs = early_epochs
        self.rel_delta = rel_delta
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._next_full = 0.0
        self._est = _Estimates()

    # ---------------------------------------------------------------- estimates
    def _observe(self, view: ClusterView) -> None:
        for j in view.jobs:
            if j.observed_speed:
                self._est.speeds.setdefault(j.model, {})[j.job_id] = dict(j.observed_speed)

    def _pooled(self, model: str) -> dict[tuple[int, int], float]:
        acc: dict[tuple[int, int], list[float]] = {}
        for samples in self._est.speeds.get(model, {}).values():
            for pw, f in samples.items():
                acc.setdefault(pw, []).append(f)
        return {pw: float(np.mean(v)) for pw, v in acc.items()}

    def remaining_steps(self, view: ClusterView, job: JobView) -> float:
        """Q_j in steps from the fitted convergence model (see the module docstring)."""
        n = len(job.observed_loss)
        cached = self._est.loss.get(job.job_id)
        if cached is None or cached[0] != n:
            cached = (n, fit_loss(job.observed_loss))
            self._est.loss[job.job_id] = cached
        b = cached[1]
        if b is None:
            end = min(job.epochs_done + FALLBACK_EPOCHS, job.max_epochs)
        else:
            rd = self.rel_delta if self.rel_delta is not None else _owner_rel_delta(job.model)
            end = convergence_epoch(b, rd, job.max_epochs)
        end = max(end, job.epochs_done + 1)
        return max(end * job.steps_per_epoch - job.steps_done, 1.0)

    def speed_fn(self, view: ClusterView, job: JobView):
        """(p, w) -> steps/s: the job's measurement, the pooled one, else the fitted model; None
        when the model's samples are not yet identifiable."""
        pooled = self._pooled(job.model)
        theta = fit_speed(pooled, job.sync)
        own = job.observed_speed

        def speed(p: int, w: int) -> float | None:
            if (p, w) in own:
                return own[(p, w)]
            if (p, w) in pooled:
                return pooled[(p, w)]
            return predict_speed(theta, job.sync, p, w) if theta is not None else None

        return speed, theta is not None

    def _alloc_job(self, view: ClusterView, job: JobView, profiling: dict[str, set]) -> AllocJob:
        speed, ready = self.speed_fn(view, job)
        start, grow = (1, 1), ready
        if not ready:  # emulated profiling: the next shape no job of this model has run
            taken = profiling.setdefault(job.model, set(self._pooled(job.model)))
            start = next((pw for pw in PROFILE_DESIGN if pw not in taken), (1, 1))
            taken.add(start)
        early = len(job.observed_loss) < self.early_epochs
        return AllocJob(
            job.job_id,
            job.ps_demand,
            job.worker_demand,
            self.remaining_steps(view, job),
            speed,
            self.early_factor if early else 1.0,
            start,
            grow,
        )

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Decision:
        self._observe(view)
        full = view.time >= self._next_full - 1e-6
        if full:
            self._next_full = (math.floor(view.time / self.interval_s + 1e-9) + 1) * self.interval_s
        movable = list(view.jobs) if full else list(view.pending)
        if not movable:
            return Decision()
        c = view.cluster
        totals = cluster_totals(c)
        # capacity the round may spend: what is free plus what the movable jobs hold now
        cap = Capacity.of(view)
        for j in movable:
            for t in j.tasks:
                if t.node >= 0:
                    cap.take(t.node, t.demand, -1)
        free = np.array([cap.cpu.sum(), cap.mem.sum(), cap.bw.sum(), cap.gpu.sum()], dtype=float)
        profiling: dict[str, set] = {}
        alloc = allocate([self._alloc_job(view, j, profiling) for j in movable], free, totals)
        return self._place(view, movable, alloc, cap)

    def _place(
        self, view: ClusterView, movable: list[JobView], alloc: dict[str, tuple[int, int]], cap: Capacity
    ) -> Decision:
        c = view.cluster
        d = Decision()
        keep = [
            j for j in movable
            if j.status == "running" and alloc.get(j.job_id) == (j.num_ps, j.num_workers)
        ]
        for j in keep:  # unchanged: stays where it is
            for t in j.tasks:
                cap.take(t.node, t.demand)
        kept = {j.job_id for j in keep}
        todo = sorted(
            (j for j in movable if j.job_id in alloc and j.job_id not in kept),
            key=lambda j: (sum(alloc[j.job_id]), j.arrival_s, j.job_id),  # [code]: by p + w
        )
        for j in todo:
            p, w = alloc[j.job_id]
            got = place_even(c, cap, j.ps_demand, j.worker_demand, p, w) or place_partial(
                c, cap, j.ps_demand, j.worker_demand, p, w
            )
            if got is None:
                if j.status == "running":
                    d.preempt.append(j.job_id)
                continue
            ps_nodes, w_nodes = got
            if (len(ps_nodes), len(w_nodes)) != (j.num_ps, j.num_workers):
                d.allocate[j.job_id] = (len(ps_nodes), len(w_nodes))
            for i, n in enumerate(ps_nodes):
                d.place[f"{j.job_id}/ps{i}"] = n
            for i, n in enumerate(w_nodes):
                d.place[f"{j.job_id}/w{i}"] = n
        for j in movable:  # got nothing this round: a running job waits, keeping its progress
            if j.status == "running" and j.job_id not in alloc:
                d.preempt.append(j.job_id)
        return d


class OptimusOracle(Optimus):
    """Optimus with the true remaining steps and the true speed alone under its own placement."""

    name = "optimus-oracle"
    oracle = True

    def __init__(self, interval_s: float = 600.0):
        super().__init__(interval_s=interval_s, early_factor=1.0)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._true: dict[tuple[str, int, int], float] = {}

    def remaining_steps(self, view: ClusterView, job: JobView) -> float:
        return max(view.oracle.remaining_steps(job.job_id), 1.0)

    def speed_fn(self, view: ClusterView, job: JobView):
        c = view.cluster
        empty = Capacity(c.cpus.astype(float), c.memory.astype(float), c.nic.astype(float), c.gpus.astype(np.int64))

        def speed(p: int, w: int) -> float | None:
            key = (job.job_id, p, w)
            if key not in self._true:
                got = place_even(c, _copy(empty), job.ps_demand, job.worker_demand, p, w)
                self._true[key] = view.oracle.speed(job.job_id, *got) if got else 0.0
            return self._true[key] or None

        return speed, True

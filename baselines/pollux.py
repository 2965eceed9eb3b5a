"""Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep Learning",
OSDI'21): GPUs go where they buy the most goodput, fairly. Not one of the five seeds; the paper's
sections are cited, and the public reference petuum/adaptdl (simulator/pollux.py, simulator/
goodput.py, sched/adaptdl_sched/policy/pollux.py, cited as [ref]) was read, not copied.

1. Goodput (Sec. 3, Eq. 5): GOODPUT(a) = THROUGHPUT(a) x EFFICIENCY(M). Here throughput is local
   batches/s and E(M) = (phi + M0) / (phi + M) (Eq. 7) with M = w x M0: the engine keeps each
   model's local batch fixed, so Pollux's batch-size co-adaptation (PolluxAgent picking m and the
   gradient accumulation steps, Sec. 4.1) is ABSENT: the max over m in Eq. 13 is over one value.
2. Throughput model (Sec. 3.2, Eq. 9-11): T_iter = (T_grad^g + T_sync^g)^(1/g), T_grad constant (fixed
   local batch), T_sync = 0 for one worker, else alpha + beta x (w - 2), with one (alpha, beta) for
   workers on one node and a larger one for several nodes ([ref] goodput.py keeps the node terms
   >= the local ones), g in [1, 10]. Fitted per job by scipy least squares on log T_iter to the
   speeds the job showed under the (workers, nodes) layouts this scheduler gave it, with a small
   pull of the sync terms towards 0: where a size was never measured, the fit assumes it scales
   (Pollux's optimistic prior; [ref] likewise caps a job at twice its largest measured size,
   simulator.py max_replicas = min(max(2 x max_profiled, 1), 64), done here by `max_growth` and
   `max_workers`).
3. SPEEDUP (Sec. 4.2, Eq. 13): a job's goodput under an allocation over its goodput under a fair
   share a_f, an exclusive 1/J of the cluster's GPUs (ceil(G / J), within its cap, on the fewest
   nodes).
4. FITNESS (Sec. 4.2, Eq. 14): the power mean (1/J sum SPEEDUP_j^p)^(1/p), p = -1 by default; as in
   [ref], 1e-3 is added to each speedup so a job without GPUs gives a finite, tiny fitness.
5. Re-allocation penalty (Sec. 4.2): the speedup of a job whose allocation changes is multiplied by
   (T_j - R_j delta) / (T_j + delta), T_j the job's age, R_j the re-allocations (changes after its
   first start, preemption included) this scheduler gave it so far, delta = `restart_delay_s` (30 s,
   [ref] simulator/pollux.py). A pending job's first start is a change too, penalised with R = 0 at age
   max(T_j, interval_s) (`_penalty`: rounds here also come at arrival, where T_j = 0).
6. Interference avoidance (Sec. 4.2): at most one job spanning several nodes per node, enforced
   as [ref]'s repair masks it (adaptdl sched/policy/pollux.py `_repair`: a cumulative count of
   distributed jobs per node over the jobs in order): once a node has seen a second multi-node
   job (a job counts where it asked for replicas, even if the rule then removes it there), every
   later job's replicas there are removed, single-node jobs included. Stricter than Sec. 4.2's
   aim (no two distributed jobs on one node); kept as [ref]. One difference in order: [ref]
   masks before the per-job replica cap, this repair after it (step (1) of `_repair` below).
7. Search (Sec. 4.2): a genetic algorithm over allocation matrices (jobs x nodes, workers per node):
   single-point crossover over jobs, mutation (reset a job to its current row, clear some entries,
   raise some to a random feasible count), a repair that enforces each job's cap, step 6 and node
   capacities (jobs with least attained GPU time first, then arrival, as [ref]), elitist selection.
   Seeded by `reset(seed)`: the same seed gives the same decisions. Chosen over an exact search
   because the matrices of the benchmark clusters (tens of jobs x tens of nodes) are far beyond
   enumeration; an exact search would serve the toy cases only. [ref] uses NSGA-II with a second
   objective for cluster autoscaling; the cluster here is fixed, so fitness is the one objective.
   The population starts from the current allocation and the last round's population. [ref] runs
   100 individuals x 100 generations; the defaults here are 50 x 30 for time: on `default` seed 0
   with `efficiency: pgns` they gave avg JCT 924 s in 15.5 s wall, 100 x 100 gave 926 s in 76.7 s.

What it reads, and why that is honest: JobView.last_speed (the speed the job runs at now, which
PolluxAgent measures, Sec. 4.1) under the layout this scheduler gave it; JobView.noise_scale, the
gradient noise scale phi of the work done so far, which PolluxAgent measures online from gradient
statistics (Sec. 3.1), never its future values nor the remaining work; arrival, attained GPU time,
demands, placements. Without a statistical efficiency (scenario `efficiency: none`) phi is infinite
and E = 1, and Pollux allocates by throughput alone.

Adaptations to the engine (ours): Pollux allocates GPUs only, so a PS job keeps the ratio of PS to
workers its user asked for (at least 1 PS), its PS spread over its worker nodes, else any node with
room, placed after the search; the search counts each worker with its share of the PS (that ratio),
and a job whose tasks then do not fit waits. GPU types are not told apart (Pollux's cluster is homogeneous). Rounds: at
the engine's decision points (arrivals, completions, the scenario's tick_s), at every change of the
set of active jobs and otherwise at most every `interval_s` (60 s: PolluxSched's period, Sec. 5).
No extra wake-up is asked for (Decision.wake_at: no Gym env can express it, so the adapter could
not run this policy), so where tick_s > interval_s the tick sets the period.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from scipy.optimize import least_squares

from dlclusterenv._kernels import _jit
from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_int, check_real
from dlclusterenv.placers import Capacity

from .optimus import _assign, _task_nodes, resource_vec

SYNC_PRIOR = 1e-2  # weight of the pull of the sync terms to 0 (relative to a log-residual of 1)
FLOOR = 1e-3  # [ref]: added to every speedup in the power mean
SMALL_P = 1e-6  # below it power_mean takes the log form (its docstring)
_TINY = np.finfo(float).tiny  # the smallest normal float (power_mean's plain-form test)


# ----------------------------------------------------------------------------- throughput model
def step_time(theta: np.ndarray, w, multi) -> np.ndarray:
    """Eq. 9-11 with a fixed local batch: theta = (T_grad, alpha_l, beta_l, d_alpha_n, d_beta_n, g),
    the node terms = the local ones + d (so never below). w >= 1 workers; multi: on several nodes."""
    tg, al, bl, dan, dbn, g = theta
    w = np.asarray(w, dtype=float)
    multi = np.asarray(multi, dtype=bool)
    sync = np.where(multi, al + dan + (bl + dbn) * (w - 2), al + bl * (w - 2))
    sync = np.where(w > 1, np.maximum(sync, 0.0), 0.0)
    return (tg**g + sync**g) ** (1.0 / g)


def fit_throughput(samples: dict[tuple[int, bool], float]) -> np.ndarray:
    """theta of `step_time` from measured speeds {(workers, multi-node): local batches/s}."""
    w = np.array([k[0] for k in samples], dtype=float)
    multi = np.array([k[1] for k in samples])
    t = w / np.array(list(samples.values()))  # seconds per iteration
    scale = float(t.min())
    resid = _Residual(w, multi, t, scale)
    x = least_squares(resid, X0, jac=resid.jac, bounds=BOUNDS).x
    return np.concatenate([x[:5] * scale, x[5:]])


X0 = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # the fit's start: no sync time, g = 1
BOUNDS = (np.array([1e-6, 0, 0, 0, 0, 1.0]), np.array([np.inf, np.inf, np.inf, np.inf, np.inf, 10.0]))
REL_STEP = np.finfo(float).eps ** 0.5  # scipy's relative step for '2-point' differences


class _Residual:
    """The fit's residuals (log of the modelled over the measured step time, and the pull of the
    sync terms to 0) and their Jacobian, cheaper than `step_time` plus scipy's jac='2-point' (the
    fit's cost was mostly their per-call overhead; README, branch poll11) and equal to them bit
    for bit: the same float operations in the same order, and `jac` is scipy's forward difference
    (scipy.optimize._numdiff.approx_derivative, method '2-point', default step, with `BOUNDS`).
    tests/test_pollux_exact.py compares both with the plain computation."""

    def __init__(self, w: np.ndarray, multi: np.ndarray, t: np.ndarray, scale: float):
        self.multi, self.t, self.scale = multi, t, scale
        self.w2, self.many = w - 2, w > 1
        self.last: tuple[bytes, np.ndarray] | None = None  # jac is asked at the point just evaluated

    def __call__(self, x: np.ndarray) -> np.ndarray:
        tg, al, bl, dan, dbn = x[:5] * self.scale
        g = x[5]
        sync = np.where(self.multi, al + dan + (bl + dbn) * self.w2, al + bl * self.w2)
        sync = np.where(self.many, np.maximum(sync, 0.0), 0.0)
        f = np.concatenate([np.log((tg**g + sync**g) ** (1.0 / g) / self.t), SYNC_PRIOR * x[1:5]])
        self.last = (x.tobytes(), f)
        return f

    def jac(self, x: np.ndarray) -> np.ndarray:
        f0 = self.last[1] if self.last is not None and self.last[0] == x.tobytes() else self(x)
        lb, ub = BOUNDS
        h = REL_STEP * ((x >= 0).astype(float) * 2 - 1) * np.maximum(1.0, np.abs(x))
        lower, upper = x - lb, ub - x
        fitting = np.abs(h) <= np.maximum(lower, upper)
        h[((x + h < lb) | (x + h > ub)) & fitting] *= -1  # a step out of bounds goes the other way
        h = np.where(~fitting & (upper >= lower), upper, np.where(~fitting, -lower, h))
        jt = np.empty((len(x), len(f0)))
        for i in range(len(x)):
            x1 = x.copy()
            x1[i] = x[i] + h[i]
            jt[i] = (self(x1) - f0) / ((x[i] + h[i]) - x[i])
        return jt.T  # scipy's layout (a transposed view) too


# ----------------------------------------------------------------------------- fitness
def power_mean(speedups: np.ndarray, p: float) -> np.ndarray:
    """Eq. 14 over the last axis (jobs), FLOOR added ([ref]); p = 0: the geometric mean.

    Any finite p: where the mean of s^p is not a normal float (a large |p|: s^p overflows or
    underflows, and the plain form gave inf or 0 for a mean that lies between the smallest and
    largest speedup), each row is scaled by its extreme term (the largest for p > 0, the smallest
    for p < 0), whose scaled power is 1; for 0 < |p| < SMALL_P, where 1 + p ln s rounds, the form
    exp(log1p(mean(expm1(p ln s))) / p) keeps the digits. Elsewhere the plain form, unchanged."""
    s = speedups + FLOOR
    if p == 0:
        return np.exp(np.log(s).mean(axis=-1))
    if abs(p) < SMALL_P:
        return np.exp(np.log1p(np.mean(np.expm1(p * np.log(s)), axis=-1)) / p)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        m = np.mean(s**p, axis=-1)
        out = m ** (1.0 / p)
    odd = ~((m >= _TINY) & (m < np.inf))
    if odd.any():
        top = (s.max if p > 0 else s.min)(axis=-1, keepdims=True)
        with np.errstate(under="ignore"):
            scaled = top[..., 0] * np.mean((s / top) ** p, axis=-1) ** (1.0 / p)
        out = np.where(odd, scaled, out)
    return out


def fitness(states: np.ndarray, base: np.ndarray, goodput: np.ndarray, fair: np.ndarray,
            penalty: np.ndarray, p: float) -> np.ndarray:
    """FITNESS_p of each allocation matrix in `states` (pop x jobs x nodes, workers per node).

    goodput[j, w, m]: job j's goodput at w workers, m = on several nodes; fair[j]: at its fair
    share; penalty[j]: the re-allocation factor applied where the job's row differs from `base`."""
    w = states.sum(axis=2)
    multi = (states > 0).sum(axis=2) > 1
    j = np.arange(states.shape[1])
    speed = goodput[j, w, multi.astype(int)] / fair
    changed = (states != base).any(axis=2)
    speed = np.where(changed, speed * penalty, speed)
    return power_mean(speed, p)


def fair_goodput(goodput: np.ndarray, slots: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Each job's goodput at a_f (Sec. 4.2): an exclusive 1/J of the cluster, i.e. ceil(the workers
    of its kind the cluster holds / J) (the dominant-share rule of [ref]), within its cap, at least
    1, on several nodes when one node cannot hold them. slots[j, n]: workers of j node n holds."""
    jobs = len(goodput)
    k = np.maximum(np.minimum(np.ceil(slots.sum(axis=1) / jobs), caps), 1).astype(np.int64)
    multi = (k > slots.max(axis=1)).astype(int)
    return np.maximum(goodput[np.arange(jobs), k, multi], 1e-12)


# ----------------------------------------------------------------------------- search
class _Search:
    """The GA of Sec. 4.2 over one round's matrices (module docstring, step 7)."""

    def __init__(self, rng: np.random.Generator, base: np.ndarray, caps: np.ndarray, need: np.ndarray,
                 room: np.ndarray, order: np.ndarray):
        self.rng, self.base, self.caps = rng, base, caps
        self.need, self.room, self.order = need, room, order  # need: jobs x R, room: nodes x R
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.where(need[:, None, :] > 0, room[None, :, :] / need[:, None, :], np.inf)
        self.slots = np.floor(np.minimum(per.min(axis=2), 1e6) + 1e-9).astype(np.int64)
        self.max_cell = np.minimum(self.slots, caps[:, None])

    def repair(self, s: np.ndarray) -> np.ndarray:
        """Caps, one multi-node job per node, node capacities (priority order `order`)."""
        perm = self.rng.permuted(np.broadcast_to(np.arange(s.shape[2]), s.shape), axis=2)
        out = _repair(s, perm, self.max_cell, self.caps, self.order, self.need, self.room)
        return out.transpose(1, 0, 2)  # numpy's layout (jobs outermost): `fitness`' sums follow it

    def mutate(self, s: np.ndarray) -> np.ndarray:
        s = s.copy()
        pop, jobs, nodes = s.shape
        reset = self.rng.random((pop, jobs)) < 0.1
        s = np.where(reset[:, :, None], self.base[None], s)
        clear = (self.rng.random((pop, jobs, 1)) < 0.1) & (self.rng.random(s.shape) < 0.1)
        s[clear] = 0
        raise_ = self.rng.random(s.shape) < 1.0 / nodes
        hi = np.maximum(self.max_cell[None], s)
        val = s + np.floor(self.rng.random(s.shape) * (hi - s + 1)).astype(np.int64)
        s[raise_] = val[raise_]
        return s

    def crossover(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        point = self.rng.integers(0, a.shape[1] + 1, size=(len(a), 1, 1))
        return np.where(np.arange(a.shape[1])[None, :, None] < point, a, b)

    def run(self, seeds: np.ndarray, score, population: int, generations: int) -> np.ndarray:
        pop = self.repair(seeds)
        if len(pop) < population:
            extra = self.mutate(pop[self.rng.integers(0, len(pop), population - len(pop))])
            pop = np.concatenate([pop, self.repair(extra)])
        fit = score(pop)
        keep = np.argsort(-fit, kind="stable")[:population]
        pop, fit = pop[keep], fit[keep]
        for _ in range(generations):
            i, k = self.rng.integers(0, len(pop), (2, population))
            kids = self.repair(self.mutate(self.crossover(pop[i], pop[k])))
            allp = np.concatenate([pop, kids])
            allf = np.concatenate([fit, score(kids)])
            keep = np.argsort(-allf, kind="stable")[:population]
            pop, fit = allp[keep], allf[keep]
        return pop  # best first


@_jit
def _repair(s, perm, max_cell, caps, order, need, room):
    """`_Search.repair` after its random draw, compiled: in each individual, (1) each job's row is
    cut to max_cell and its cap is filled over the nodes in the order `perm` draws; then, jobs in
    priority order `order`: (2) a job on several nodes loses the nodes where an earlier one on
    several nodes is; (3) a job gets on each node what still fits of its workers (the node's
    charges of all jobs so far, uncut, against its room, as numpy's cumsum / minimum / diff).
    A loop per individual and job instead of ~40 numpy calls of ~20 us per generation; the same
    float operations in the same order (tests/test_pollux_exact.py keeps the numpy code). Returns
    jobs x individuals x nodes: the numpy code's result was laid out so in memory."""
    pop, jobs, nodes = s.shape
    res = need.shape[1]
    out = np.empty((jobs, pop, nodes), dtype=np.int64)
    row = np.empty(nodes, dtype=np.int64)
    for p in range(pop):
        count = np.zeros(nodes, dtype=np.int64)  # jobs on several nodes so far, per node
        acc = np.zeros((nodes, res))  # charges so far, per node and resource
        for jo in range(jobs):
            j = order[jo]
            total = 0
            for q in range(nodes):  # (1)
                n = perm[p, j, q]
                before = min(total, caps[j])
                total += min(s[p, j, n], max_cell[j, n])
                row[n] = min(total, caps[j]) - before
            used = 0
            for n in range(nodes):
                used += row[n] > 0
            for n in range(nodes):
                if used > 1 and row[n] > 0:  # (2)
                    count[n] += 1
                if count[n] > 1:
                    row[n] = 0
                k = float(row[n])
                for r in range(res):  # (3)
                    before = min(acc[n, r], room[n, r]) if jo else 0.0  # numpy: diff(prepend=0)
                    acc[n, r] += row[n] * need[j, r]
                    if need[j, r] > 0:
                        k = min(k, np.floor((min(acc[n, r], room[n, r]) - before) / need[j, r] + 1e-9))
                out[j, p, n] = np.int64(k)
    return out


# ----------------------------------------------------------------------------- the scheduler
class Pollux(Scheduler):
    """PolluxSched (Sec. 4.2) on the engine; see the module docstring."""

    name = "pollux"

    def __init__(self, interval_s: float = 60.0, p: float = -1.0, restart_delay_s: float = 30.0,
                 population: int = 50, generations: int = 30, max_growth: float = 2.0,
                 max_workers: int = 64):
        """`p`: the power mean's exponent (Eq. 14), any finite real: negative (the default -1)
        favours the slowest jobs, 0 is the geometric mean, 1 the arithmetic. `max_growth` is
        finite (its floor must be an int); max_workers caps a job anyway."""
        owner = type(self).__name__
        check_real(interval_s, "interval_s", owner, gt=0)
        check_real(p, "p", owner)
        check_real(restart_delay_s, "restart_delay_s", owner, ge=0)
        check_int(population, "population", owner, ge=1)
        check_int(generations, "generations", owner, ge=0)
        check_real(max_growth, "max_growth", owner, gt=0)
        check_int(max_workers, "max_workers", owner, ge=1)
        self.interval_s, self.p, self.restart_delay_s = interval_s, p, restart_delay_s
        self.population, self.generations = int(population), int(generations)
        self.max_growth, self.max_workers = max_growth, int(max_workers)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._next, self._ids = 0.0, ()
        self._samples: dict[str, dict[tuple[int, bool], list[float]]] = {}
        self._layout: dict[str, tuple[int, bool]] = {}  # (workers, multi-node) given last round
        self._theta: dict[str, tuple[tuple, np.ndarray]] = {}
        self._fits: dict[tuple, np.ndarray] = {}  # fit inputs (means) -> theta: 1 fit in 10 repeats one
        self._restarts: Counter[str] = Counter()
        self._most: Counter[str] = Counter()  # largest worker count each job has run at
        self._prev: tuple[list[str], np.ndarray] | None = None

    # ---------------------------------------------------------------- measurements
    def _measure(self, view: ClusterView) -> None:
        """Record each running job's measured speed under the layout it was given (Sec. 4.1)."""
        for j in view.running:
            layout = _worker_layout(j)
            if self._layout.get(j.job_id) == layout and j.last_speed > 0:
                self._samples.setdefault(j.job_id, {}).setdefault(layout, []).append(j.last_speed)
                self._most[j.job_id] = max(self._most[j.job_id], layout[0])
            self._layout[j.job_id] = layout

    def goodput_table(self, job: JobView, w_max: int, view: ClusterView | None = None) -> np.ndarray:
        """[w, multi]: goodput (local batches of work per s) at 0..w_max workers, one / many nodes,
        from the fit and the measured phi (`view` is read by `PolluxOracle` only)."""
        w = np.arange(w_max + 1)
        samples = self._samples.get(job.job_id)
        if not samples:  # never measured: a linear guess (only w <= 1 is allowed by the cap)
            thr = np.stack([w, w], axis=1).astype(float)
        else:
            key = tuple(sorted((k, len(v)) for k, v in samples.items()))
            cached = self._theta.get(job.job_id)
            if cached is None or cached[0] != key:
                means = tuple((k, float(np.mean(v))) for k, v in samples.items())
                theta = self._fits.get(means)
                if theta is None:
                    theta = self._fits[means] = fit_throughput(dict(means))
                self._theta[job.job_id] = cached = (key, theta)
            ww = np.maximum(w, 1)
            thr = np.stack([ww / step_time(cached[1], ww, False), ww / step_time(cached[1], ww, True)], 1)
        eff = np.array([job.efficiency(int(k)) if k else 0.0 for k in w])
        return np.where(w[:, None] > 0, thr * eff[:, None], 0.0)

    def cap(self, job: JobView) -> int:
        """Largest worker count it may get: max_growth x its largest measured, at least 1."""
        return self.cap_at(job, self.max_growth)

    def cap_at(self, job: JobView, growth: float) -> int:
        """The cap under a growth limit: growth x its largest measured size, at least 1, at most
        max_workers."""
        return int(min(max(math.floor(growth * self._most[job.job_id]), 1), self.max_workers))

    def largest_measured(self, job: JobView) -> int:
        """The largest worker count the job has been measured at (0: never)."""
        return self._most[job.job_id]

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Decision:
        ids = tuple(j.job_id for j in view.jobs)
        if view.time < self._next - 1e-6 and ids == self._ids:
            return Decision()
        self._next, self._ids = view.time + self.interval_s, ids
        self._measure(view)
        jobs = list(view.jobs)
        if not jobs:
            return Decision()
        c = view.cluster
        cap = Capacity.without(view, jobs)  # free + what every active job holds: all are re-allocated
        room = np.stack([cap.cpu, cap.mem, cap.bw, cap.gpu.astype(float)], axis=1)
        need = np.array([_need(j) for j in jobs])
        caps = np.array([self.cap(j) for j in jobs])
        base = np.zeros((len(jobs), c.n_nodes), dtype=np.int64)
        for i, j in enumerate(jobs):
            for n in _task_nodes(j, "worker"):
                if n >= 0:
                    base[i, n] += 1
        w_max = int(max(caps.max(), base.sum(axis=1).max()))
        goodput = np.stack([self.goodput_table(j, w_max, view) for j in jobs])
        penalty = np.array([self._penalty(view, j) for j in jobs])
        order = np.lexsort(([j.arrival_s for j in jobs], [j.attained_gpu_s for j in jobs]))
        search = _Search(self.rng, base, caps, need, room, order)
        fair = fair_goodput(goodput, search.slots, caps)
        seeds = [base[None]]
        if self._prev is not None:
            ids, prev = self._prev
            at = {k: i for i, k in enumerate(ids)}
            carried = np.repeat(base[None], len(prev), axis=0)
            for i, j in enumerate(jobs):
                if j.job_id in at:
                    carried[:, i] = prev[:, at[j.job_id]]
            seeds.append(carried)
        pop = search.run(np.concatenate(seeds), lambda s: fitness(s, base, goodput, fair, penalty, self.p),
                         self.population, self.generations)
        self._prev = ([j.job_id for j in jobs], pop)
        return self._decision(view, jobs, base, pop[0], cap)

    def _penalty(self, view: ClusterView, job: JobView) -> float:
        """(T_j - R_j delta) / (T_j + delta), floored at 0 (Sec. 4.2). A job never started is judged
        at age max(T_j, interval_s): in [ref] rounds come every 60 s, so a job is first considered at
        an age in (0, 60 s]; here rounds also come at its arrival, where T_j = 0 would zero its
        speedup and, without a periodic tick, leave it waiting for ever (the D²S testbed)."""
        age, d = view.time - job.arrival_s, self.restart_delay_s
        if job.status == "pending" and not self._restarts[job.job_id]:
            age = max(age, self.interval_s)
        if age + d <= 0:
            return 1.0
        return max(age - self._restarts[job.job_id] * d, 0.0) / (age + d)

    def _decision(self, view: ClusterView, jobs: list[JobView], base: np.ndarray, best: np.ndarray,
                  cap: Capacity) -> Decision:
        """The chosen matrix as engine actions; PS placed after the workers (module docstring)."""
        d = Decision()
        kept = [(best[i] == base[i]).all() and j.status == "running" for i, j in enumerate(jobs)]
        for i, j in enumerate(jobs):  # jobs left as they are keep their tasks
            if kept[i]:
                for t in j.tasks:
                    if t.node >= 0:
                        cap.take(t.node, t.demand)
        for i, j in enumerate(jobs):
            row = best[i]
            if kept[i] or not (row.any() or base[i].any()):
                continue
            nodes = tuple(int(n) for n in np.repeat(np.arange(len(row)), row))
            fits = bool(nodes) and _take_workers(cap, j, row)
            ps = (self._place_ps(j, nodes, cap) if j.comm == "ps" else ()) if fits else None
            if ps is None:  # no GPUs, or its tasks do not fit: it waits
                if fits:  # its workers were charged, its PS did not fit
                    _take_workers(cap, j, -row)
                if j.status == "running":
                    d.preempt.append(j.job_id)
                    self._restarts[j.job_id] += 1
                self._layout.pop(j.job_id, None)
                continue
            if math.isfinite(j.first_start_s):  # a re-allocation; the first start is none ([ref])
                self._restarts[j.job_id] += 1
            if (len(ps), len(nodes)) != (j.num_ps, j.num_workers):
                d.allocate[j.job_id] = (len(ps), len(nodes))
            for prefix, cur, want in (("ps", _task_nodes(j, "ps"), ps), ("w", _task_nodes(j, "worker"), nodes)):
                for k, n in enumerate(_assign(cur, want)):
                    if k >= len(cur) or cur[k] != n:
                        d.place[f"{j.job_id}/{prefix}{k}"] = n
        return d

    @staticmethod
    def _place_ps(job: JobView, nodes: tuple[int, ...], cap: Capacity) -> tuple[int, ...] | None:
        """PS in the ratio to workers the user asked for (at least 1), round-robin over the job's
        worker nodes, else any node with room."""
        p0, w0 = job.requested
        want = max(math.ceil(len(nodes) * p0 / max(w0, 1)), 1)
        spots = list(dict.fromkeys(nodes))
        out = []
        for k in range(want):
            i = k % len(spots)
            n = next((n for n in spots[i:] + spots[:i] if cap.fits_at(n, job.ps_demand)), None)
            if n is None:  # only then every node is checked
                free = np.flatnonzero(cap.fits(job.ps_demand))
                if not len(free):
                    for m in out:
                        cap.take(m, job.ps_demand, -1)
                    return None
                n = int(free[0])
            cap.take(n, job.ps_demand)
            out.append(n)
        return tuple(out)


def _need(job: JobView) -> np.ndarray:
    """What one worker takes in the search: its demand plus its share of the job's PS (the ratio
    the user asked for), so the matrix leaves room for the PS placed after it."""
    p0, w0 = job.requested
    ps = max(p0, 1) / max(w0, 1) if job.comm == "ps" else 0.0
    return resource_vec(job.worker_demand) + ps * resource_vec(job.ps_demand)


def _take_workers(cap: Capacity, job: JobView, row: np.ndarray) -> bool:
    """Charge the row's workers (a negative row gives them back); False, charging nothing, if
    they do not fit."""
    nodes = np.flatnonzero(row)
    k = row[nodes]
    d = job.worker_demand
    if (row > 0).any() and not (
        (cap.cpu[nodes] + 1e-9 >= k * d.cpu).all() and (cap.mem[nodes] + 1e-9 >= k * d.mem_gb).all()
        and (cap.bw[nodes] + 1e-3 >= k * d.bw_MBps * 1e6).all() and (cap.gpu[nodes] >= k * d.gpu).all()):
        return False
    for n, c in zip(nodes, k):
        cap.take(int(n), d, int(c))
    return True


def _worker_layout(job: JobView) -> tuple[int, bool]:
    """(workers, on several nodes) of a placed job."""
    nodes = {t.node for t in job.tasks if t.role != "ps" and t.node >= 0}
    return job.num_workers, len(nodes) > 1


class PolluxGrowth(Pollux):
    """Pollux whose growth cap is set per job from outside: `growth[job_id]` (else max_growth)
    times the largest size the job was measured at. DLClusterGrow-v0's agent sets `growth`; the
    fit, fair share, fitness, penalty and GA are Pollux's, unchanged. Not a registered baseline:
    without someone setting `growth` it is Pollux."""

    name = "pollux-growth"

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.growth: dict[str, float] = {}

    def cap(self, job: JobView) -> int:
        return self.cap_at(job, self.growth.get(job.job_id, self.max_growth))

    def scaling(self, job_id: str, workers: int, multi: bool) -> float:
        """The fitted throughput at `workers` (on several nodes: `multi`) over workers x at one:
        how well the fit says the job scales there (1 while it has no fit)."""
        fit = self._theta.get(job_id)
        if fit is None or workers < 1:
            return 1.0
        return float(min(max(step_time(fit[1], 1, False) / step_time(fit[1], workers, multi), 0.0), 1.0))


class PolluxOracle(Pollux):
    """Pollux with its goodput exact: the throughput at w workers on one node / on several nodes is
    `view.oracle.speed` (the job alone) instead of the fit, and the statistical efficiency is
    `view.oracle.efficiency(job, w)` (the mean over its remaining work) instead of Eq. 7 at the
    phi measured so far; fair share, fitness, penalty, GA and seeds are Pollux's. Its cap is
    `max_workers` alone: Pollux's growth cap (2x the largest size measured, [ref] max_replicas)
    guards the fit's optimistic prior at sizes never measured, and the truth has no prior to guard
    (with the cap kept, the truth moved Pollux's avg JCT by under 1%: README, "A stronger
    oracle?"). The layout
    read (`oracle_layout`): w workers on the fewest nodes of the most GPUs (nodes by GPU count,
    most first, ties by index), one node for "one node", else max(2, ceil(w / that count)) nodes,
    the workers dealt round-robin; a PS job's PS as `Pollux._place_ps` puts them when there is
    room (the ratio the user asked for, at least 1, round-robin over the worker nodes). The
    search charges only (w, multi), so the oracle reads one layout per (job, w, multi), cached."""

    name = "pollux-oracle"
    oracle = True

    def __init__(self, **kw):
        """`max_growth` is refused where `cap` ignores it: it used to be taken and change nothing."""
        if "max_growth" in kw and type(self).cap is PolluxOracle.cap:
            raise ValueError("max_growth: pollux-oracle has no growth cap (its cap is max_workers)")
        super().__init__(**kw)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._true: dict[tuple[str, int, bool], float] = {}

    def cap(self, job: JobView) -> int:
        return self.max_workers

    def goodput_table(self, job: JobView, w_max: int, view: ClusterView | None = None) -> np.ndarray:
        w = np.arange(w_max + 1)
        thr = np.zeros((w_max + 1, 2))
        for k in range(1, w_max + 1):
            for m in (0, 1):
                key = (job.job_id, k, bool(m))
                if key not in self._true:
                    self._true[key] = view.oracle.speed(job.job_id, *oracle_layout(view.cluster, job, k, bool(m)))
                thr[k, m] = self._true[key]
        eff = np.array([view.oracle.efficiency(job.job_id, int(k)) if k else 0.0 for k in w])
        return thr * eff[:, None]


def oracle_layout(cluster, job: JobView, w: int, multi: bool) -> tuple[list[int], list[int]]:
    """(PS nodes, worker nodes) that `PolluxOracle` reads the true speed of (its docstring)."""
    order = np.argsort(-cluster.gpus, kind="stable")
    per = max(int(cluster.gpus[order[0]]), 1)
    n = min(max(2, -(-w // per)), cluster.n_nodes) if multi else 1
    workers = sorted(int(order[k % n]) for k in range(w))
    if job.comm != "ps":
        return [], workers
    p0, w0 = job.requested
    spots = list(dict.fromkeys(workers))
    return [spots[k % len(spots)] for k in range(max(math.ceil(w * p0 / max(w0, 1)), 1))], workers

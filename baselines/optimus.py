"""Optimus (Peng et al., EuroSys'18): allocation by marginal gain, placement on the fewest servers.

Seed 002 ("Optimus", lecture 10) gives the allocation heuristic and the placement principle; seed
003 (reading notes) the convergence and speed models and the public code in outline
(pengyanghua/optimus @8d46148, scheduler/optimus_scheduler.py and estimator.py, cited as [code]).

1. Convergence model, seed 003 ("SGD converges at O(1/k) ... so we approximate the training loss
   curve by" l(k) = 1/(b0*k + b1) + b2, refitted as points come in) fitted to the job's *observed*
   loss points by weighted least squares (non-negative parameters, later points weighted more: three
   segments, sigma divided by 4 per segment, as [code] _loss_curve_fitting). The fit is exact to
   the optimum: for fixed c = b1/b0 the model is linear in 1/b0 and b2, so those are closed-form
   and only c is searched (fit_loss; [code] calls scipy's curve_fit, which stops short on long
   noisy series, see README "Benchmark suite"). The job converges at the first epoch whose fitted
   loss improves on the previous one by less than the owner's threshold (JobView.rel_delta, the
   job's stopping rule), within the epoch budget ([code] instead waits for a fitted change below 0.05 over 10 epochs; the owner's
   threshold is the simulator's definition of convergence). Remaining work Q_j is in *steps* (that
   epoch x steps_per_epoch - steps done) and speeds in steps/s, so Q_j / f is seconds ([code]
   divides remaining *epochs* by steps/s).
2. Speed model, seed 003 (lines 37-42: speed is set by forward, backward and communication time,
   sync and async differ, the numbers of PS and workers determine them; the formulas themselves are
   figures, lost from the text): in the paper's units, iterations/s with the global batch M fixed
   per job, sync 1/f = t0*M/w + t1 + t2*w/p + t3*w + t4*p and async w/f = t0 + t1*w/p + t2*w +
   t3*p. The engine scales weakly (issue 11, README "Speed model fidelity"): each worker computes
   its own local batch m, as [code] runs its sync jobs (seed 003 line 340: ResNet-50 set_train(...,
   batch_size=32, kv_store='dist_sync', scale_bs=True); [code] job.py __set_batch_size then gives
   every worker the whole batch size), and speeds are local batches/s, so f = w x iterations/s.
   Rewritten in these units from the paper's own terms (speed_features, with the derivation), sync
   and async take one form, w/f = t0 + t1*w/p + t2*w + t3*p, linear in t >= 0, fitted by
   scipy.optimize.nnls to the speeds measured so far (JobView.observed_speed), rows scaled by 1/y
   so residuals are relative. The fixed-M form (before audit5's finding) is kept as the comparison in
   benchmarks/optimus_speed_features.py.
3. Allocation, seed 002 "Marginal Gain based Heuristic": every job first gets 1 PS + 1 worker
   (arrival order, while they fit); then repeatedly the job with the largest marginal gain, the
   cut in Q_j / f per unit of the added task's dominant resource, gets one PS or one worker,
   whichever gains more, until nothing more fits or no gain is positive. Seed 002 divides by
   N_j^D / O_j^D', the *amount* of its dominant resource one PS / worker consumes (so does [code]:
   `(rem_time - ps_rem_time) / resource_reqs[dom_res]`). Amounts of different resources are in
   different units (cores, GB, GPUs, MB/s), so what that compares depends on the units chosen:
   a PS of 3 cores against a worker of 1 GPU is 3 : 1, and 9 : 1 if its memory dominates. Our
   choice (`gain_per="share"`, the default): the amount as a share of the cluster's capacity, the
   unit-free reading of "per unit dominant resource consumption". `gain_per="amount"` divides
   by the amount in the config's units, as the seed writes it (README "Optimus' gain per unit").
4. Placement, seed 002 Fig. 10: a job on the fewest servers with the same number of PS and of
   workers on each ([code] __place: PS i and worker i on candidate i mod k, k = 1, 2, ...). As in
   [code], "fewest" is searched over the first k candidates of one server order (the job's
   servers, then the most free), not over every set of k servers: a job that one server further
   down the order could hold alone may get two (finding the fewest over all sets is a set
   selection per trial, at 16,000 servers; not done). Counts per server differ by one where k does
   not divide p or w (i mod k, as [code]).

Choices where the sources leave room:
- Identifiable speed samples. A job measures only the (p, w) it ran. The paper profiles each new job
  on a few (p, w) before scheduling it; [code] test_speed profiles p = w only, where w/p is constant
  and p equals w, so the model cannot be identified (not copied). Here profiling is emulated
  in production: samples of jobs of the same model are pooled ([code] test_speed reuses the speed
  points of jobs of the same workload), and while a model's pooled samples lack full rank its jobs
  do not take part in the greedy ([code] leaves jobs without an estimate at 1 PS + 1 worker) but
  each runs, for an interval, the first shape of PROFILE_DESIGN that no job of its model has run or
  been given this round, where it fits. A prediction is the job's own measured speed for a (p, w)
  it ran, else the pooled measurement, else the fit ([code] est_speed: "use the real one").
- Before 3 loss points a job is taken to need 20 more epochs ([code]: "job.progress + 20"), within
  its budget. A fitted end at or before the epochs done counts as the next epoch (it still runs).
- Loss-fit cost (`loss_fit_max_points`, ours, off by default: None fits every point). The fit is
  exact on all of a job's points, as [code] est_epoch fits every (epoch, validation loss) it holds
  ("we do not need curve fitting each time, can be further optimized in future"); each cost
  evaluation is O(points). [code] never holds more than 100 points: its jobs run --num-epochs 100
  (jobrepo.py) and est_epoch gives up past epoch 100 ("each job must have at most 100 epochs"). A
  replayed Philly job has up to ~480,000 epochs (its trace duration in a zoo model's short epoch;
  README), and refitting them every interval is most of Optimus' time there. Neither the paper nor
  [code] bounds or thins the history, so a cap is our choice: with N, a job with more than N points
  is fitted on N of them evenly spaced by index, the first and the last kept (thin_loss_points),
  [code]'s segment weights applied over those N. The Philly-scale benchmark row uses N = 100, the
  most points [code] ever fits (not a value tuned on run time); README gives avg JCT with and
  without it.
- Jobs at their beginning (fewer than `early_epochs` = 5 loss points) have their marginal gain
  multiplied by `early_factor` (0.95, seed 002 "Sensitivity to Prediction Error"); 1.0 turns it off.
- "Until some resource is used up" is read per node: an increment counts as fitting only if the
  job's new (p, w) can be placed, so allocation and placement are done together (each increment
  re-places the job by step 4, else adds the task to its current layout: on its servers first,
  else the server with the most free). [code] allocates in cluster-wide totals and places after,
  shrinking jobs that then do not fit; on Optimus' own testbed, where only 6 of 13 servers have
  GPUs, totals promise workers the GPU servers' memory that PS already hold. An increment that
  does not fit gives way to the job's other increment, else the job stops growing while the others
  go on ([code] ends the round at the first increment that does not fit).
- Candidate servers: the job's current ones first, then most free GPUs (for GPU workers), CPU,
  memory ([code] orders by free CPU only: its servers are alike; here CPU-only servers would come
  first and fail every worker). Every trial works on a copy of the free capacity and is committed
  only on success ([code] leaks the workers of a trial whose PS did not fit, and checks GPUs
  against BW_PER_NODE; neither copied).
- Scale (seed 002: 4,000 jobs, ~100,000 tasks, 16,000 nodes in ~5 s): allocate() keeps the free
  capacity in _Free, which holds _node_order's two orders sorted as nodes change and lets each
  trial touch only the nodes it changes (no copy of the whole capacity, no sort of every node per
  trial), with the same arithmetic, so the same plans as the plain functions (tested equal on the
  default, optimus and Philly scenarios; benchmarks/optimus_scale.py --check at full scale). The
  greedy's trials are incremental per job (issue 14): a job's committed layout is kept as tasks per
  server, so the trial for one more task gives it back server by server, not task by task, and
  the Fig. 10 search reads candidate servers only up to the k it tries; a trial costs about the
  servers the job uses, not its tasks (layouts and capacities bitwise layout_for's: property test).
  Measured speeds are pooled at every decision point without building job views
  (JobViews.observed_speeds; a job's view is built only when it may move) into per-model pools
  (_SpeedPool) whose means are kept per (p, w), so a decision costs the active jobs, not every job
  ever pooled (the same means, bitwise, in the same order: property test; issue 14).
- Decision points: Optimus reallocates every `interval_s` (600 s, [code] TS_INTERVAL; seed 002 "~10
  mins"): at the first decision point of an interval every active job is reallocated from 1 PS + 1
  worker. A job left with its (p, w) and servers is not touched ([code] restarts every job each
  slot); a changed job is resized or moved (one checkpoint in the engine); a running job that gets
  nothing is preempted (progress kept), as [code] leaves it pending. At arrivals and completions in
  between, running jobs are left alone and only pending jobs are allocated, by the same heuristic,
  in the free resources, so a new job does not idle until the next interval.
- No rule on the ratio of PS to workers. An earlier version allowed no more PS than workers; no
  seed says so (seed 002's heuristic adds "one worker or parameter server ... whichever brings
  larger marginal gain"), nor does [code] (_schedule / __update_util_queue compare ps_util with
  worker_util and nothing else; test_speed profiles p = w). With the true speeds the rule cost a
  lone ResNet-50 job 12% (it stopped at (3, 3); (4, 4) and more PS are faster), so it is gone.
- Extrapolation (ours): the fitted speed model answers only for p up to EXTRAPOLATE (2) x the
  largest p measured for the model (own or pooled samples) and w up to 2 x the largest w; beyond,
  there is no estimate, so that increment gains nothing this round. Samples measured under
  contention are noisy, and nnls then often sets the per-PS cost (t4*p) to 0: the fit promises gains
  from every further PS, and unbounded the greedy gave an AlexNet job 796 PS for 3 workers (default
  scenario, seed 0). Each interval the job runs the shape it got, which widens the range, so the
  reach doubles per interval as measurements come in ([code] has no such bound).
- `optimus-oracle` replaces both models by the truth (view.oracle): remaining steps, and the job's
  true speed alone on the cluster under the layout the round would give it, times the true
  statistical efficiency of w workers over the work left where the scenario has one (efficiency.py;
  Optimus itself measures steps/s and fits loss over epochs of work, so it does not see it). No
  profiling, no early downgrade. An upper bound on what better prediction buys, not the paper's
  system.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from itertools import chain, islice
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize_scalar, nnls

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_int, check_real
from dlclusterenv.cluster import Cluster
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity

# Profiling shapes, small first, varying p and w independently (not p = w only): the first five give
# the PS features [1, w/p, w, p] full rank 4 (the first four only rank 3: at p = 1, w/p equals w),
# their distinct w (1, 2, 4, then 3) the all-reduce features [1/w, 1, w] rank 3. Later shapes are
# run while a model's samples still lack rank (some did not fit, or measured no speed).
PROFILE_DESIGN = ((1, 1), (1, 2), (2, 2), (1, 4), (2, 4), (2, 1), (3, 3), (1, 3), (3, 6))
FALLBACK_EPOCHS = 20  # [code] __update_util_queue: end_epoch = job.progress + 20 without a fit
LOSS_SEGMENTS = 3  # [code] _loss_curve_fitting: NUM_SEGMENTS, sigma /= 4 ** segment
EXTRAPOLATE = 2  # the fitted speed model is used up to 2x the largest p and w measured (docstring)
MIN_LOSS_POINTS = 3  # [code] est_epoch: len(job.val_losses) >= 3
# ln(b1/b0) scanned before Brent (fit_loss): 1e-16 is b1 = 0 to double precision (k + c == k for
# k >= 1) with l(0) = 1/b1 + b2 still finite
LOSS_C_GRID = np.log(np.r_[1e-16, np.logspace(-8, 10, 19)])


# ----------------------------------------------------------------------------- speed model
def speed_features(p: float, w: float) -> np.ndarray:
    """Features of the speed model in the engine's units (local batches/s); y = w/f for PS jobs
    (p > 0), y = 1/f for all-reduce (p = 0); y = features . t.

    Derivation, from seed 003's per-iteration terms (module docstring, item 2): a sync iteration
    takes T = t0*b + t1 + t2*w/p + t3*w + t4*p, where b is the batch one worker computes (t0*b +
    t1 its forward and backward pass), t2*w/p the transfer at each PS (w workers' gradients of
    1/p of the parameters each), t3*w a per-worker and t4*p a per-PS overhead. The paper fixes the
    global batch M, so b = M/w and, in iterations/s, 1/f = t0*M/w + t1 + ... The engine scales
    weakly: b = m, the job's local batch, whatever w, so t0*m + t1 is one constant, and f = w/T
    local batches/s: w/f = (t0*m + t1) + t2*w/p + t3*w + t4*p, four terms where the fixed-M form
    has five (1/f = [t0*m + t1, t2, t3, t4] . [1/w, 1/p, 1, p/w], the same model divided by w).
    Async: each worker iterates on its own batch at its own pace, so the paper's w/f = t0 + t1*w/p +
    t2*w + t3*p already counts a per-worker batch and local batches/s: right as it was, and the
    same form as sync (the fitted t differ). The async arithmetic is unchanged, so async jobs'
    decisions are too.

    All-reduce (p = 0, not in the seeds, our choice): 1/f = [1/w, 1, w] . t, i.e. T = w/f = t0 +
    t1*w + t2*w^2: t0 the local compute plus the ring's transfer (2(w-1)/w of the gradient per
    worker: none at w = 1, then within 2x of constant), t1*w the per-worker overhead (seed 003's
    t3*w) and the ring's 2(w-1) messages. t2*w^2 has no counterpart in the paper's terms (nnls may set it to 0); it is
    kept because dropping it moves every Philly run (all all-reduce), not re-measured here."""
    if p == 0:
        return np.array([1.0 / w, 1.0, w])
    return np.array([1.0, w / p, w, p])


def fit_speed(samples: dict[tuple[int, int], float]) -> np.ndarray | None:
    """Non-negative t for the speed model from measured speeds; None while not identifiable
    (fewer samples than terms, or features of less than full rank)."""
    pts = [(p, w, f) for (p, w), f in samples.items() if f > 0]
    if not pts:
        return None
    n = len(speed_features(pts[0][0], 1.0))
    if len(pts) < n:
        return None
    a = np.array([speed_features(p, w) for p, w, _ in pts])
    y = np.array([(w / f) if p else (1.0 / f) for p, w, f in pts])
    a, y = a / y[:, None], np.ones(len(y))  # relative residuals
    if np.linalg.matrix_rank(a / np.linalg.norm(a, axis=0)) < n:
        return None
    theta, _ = nnls(a, y)
    return theta if theta.any() else None


def predict_speed(theta: np.ndarray, p: int, w: int) -> float:
    """Local batches/s of the fitted model at (p, w); 0 where the model gives no positive time."""
    d = float(speed_features(p, w) @ theta)
    if d <= 0:
        return 0.0
    return w / d if p else 1.0 / d


# ----------------------------------------------------------------------------- convergence model
def loss_curve(k, b0, b1, b2):
    """Seed 003: l(k) = 1/(b0*k + b1) + b2."""
    return 1.0 / (b0 * k + b1) + b2


def loss_array(points: tuple[tuple[int, float], ...]) -> np.ndarray:
    """(n, 2) float array of (epoch, loss): the same doubles as np.asarray(points, float), read
    flat (a Philly job has 10,000-260,000 points; asarray of a tuple of tuples was half a fit)."""
    n = len(points)
    return np.fromiter(chain.from_iterable(points), float, 2 * n).reshape(n, 2)


class _LossFit:
    """Weighted least squares of l(k) = a/(k + c) + b2 over a, b2 >= 0 at a given c >= 0.

    l(k) = 1/(b0*k + b1) + b2 is a/(k + c) + b2 with a = 1/b0, c = b1/b0: for fixed c it is linear
    in (a, b2), so the best a and b2 (non-negative) and the cost are closed-form and the fit is a
    search over c alone (variable projection, Golub & Pereyra 1973). Sums are taken as products
    then .sum() (no BLAS: a threaded dot costs ~100x more on a busy machine, and the sums then do
    not depend on the thread count)."""

    def __init__(self, points: tuple[tuple[int, float], ...] | np.ndarray):
        pts = points if isinstance(points, np.ndarray) else loss_array(points)
        self.k, y = np.ascontiguousarray(pts[:, 0]), pts[:, 1]
        n = len(y)
        # [code] _loss_curve_fitting: sigma / 4 per segment, so weights 1/sigma^2 x 16
        self.w = 16.0 ** (np.arange(n) // math.ceil(n / LOSS_SEGMENTS))
        self.sw = self.w.sum()
        self.ym = float((self.w * y).sum()) / self.sw
        self.yc = y - self.ym
        self.syy = float((self.w * self.yc * self.yc).sum())
        self._g, self._wg, self._t = np.empty(n), np.empty(n), np.empty(n)

    def solve(self, c: float) -> tuple[float, float, float]:
        """(a, b2, weighted squared error) at c: the unconstrained optimum if a, b2 >= 0, else the
        better of the edges b2 = 0 and a = 0 (a flat curve at the weighted mean)."""
        g, wg, t, w = self._g, self._wg, self._t, self.w
        np.add(self.k, c, out=g)
        np.reciprocal(g, out=g)
        gm = float(np.multiply(w, g, out=t).sum()) / self.sw
        g -= gm
        np.multiply(w, g, out=wg)
        sgg = float(np.multiply(wg, g, out=t).sum())
        sgy = float(np.multiply(wg, self.yc, out=t).sum())
        flat = (0.0, self.ym, self.syy)
        if sgy <= 0 or sgg <= 0:
            return flat
        a = sgy / sgg
        if self.ym - a * gm >= 0:
            return a, self.ym - a * gm, self.syy - a * sgy
        sgy0, sgg0 = sgy + self.sw * gm * self.ym, sgg + self.sw * gm * gm  # uncentred: b2 = 0
        a0 = sgy0 / sgg0
        err0 = self.syy + self.sw * self.ym * self.ym - a0 * sgy0
        return (a0, 0.0, err0) if err0 < self.syy else flat

    def cost(self, u: float) -> float:
        return self.solve(math.exp(u))[2]


def fit_loss(
    points: tuple[tuple[int, float], ...] | np.ndarray,
) -> tuple[float, float, float] | None:
    """(b0, b1, b2) >= 0 minimising the weighted squared error over the observed (epoch, loss),
    later points weighted more ([code]); epochs count from 1. `points`: pairs, or their
    loss_array.

    Seed 003: the loss model, fitted to the points so far ("the fit improves as more points come
    in"). The search over c = b1/b0 (see _LossFit): ln c on a grid (LOSS_C_GRID: 1e-16, then
    factor 10 from 1e-8 to 1e10), then Brent's method between the best grid point's neighbours. At
    the grid's ends the optimum is a bound: c = 0 (b1 = 0) or c -> inf (the curve all but a
    straight line, b0 -> 0). A flat curve (a = 0: the loss did not fall) is (0, 1/mean, 0): it
    converges at once. Where the earlier fit (bounded TRF, `curve_fit` as [code]) converged, this
    is its optimum (tests/test_optimus_fit.py); where it stopped short this is lower (README,
    "Benchmark suite")."""
    if len(points) < MIN_LOSS_POINTS:
        return None
    f = _LossFit(points)
    costs = [f.cost(u) for u in LOSS_C_GRID]
    i = int(np.argmin(costs))  # the first minimum: costs[i - 1] > costs[i]
    if 0 < i < len(LOSS_C_GRID) - 1 and costs[i] < costs[i + 1]:  # Brent needs a strict bracket
        lo, mid, hi = LOSS_C_GRID[i - 1 : i + 2]
        # Brent evaluates its bracket again: those three costs are the grid's (same u, same value)
        known = {lo: costs[i - 1], mid: costs[i], hi: costs[i + 1]}

        def cost(u: float) -> float:
            v = known.get(u)
            return f.cost(u) if v is None else v

        c = math.exp(minimize_scalar(cost, bracket=(lo, mid, hi), method="brent").x)
    else:
        c = math.exp(LOSS_C_GRID[i])
    a, b2, _ = f.solve(c)
    if a > 0:
        return 1.0 / a, c / a, b2
    return (0.0, 1.0 / f.ym, 0.0) if f.ym > 0 else None


def thin_loss_points(points: np.ndarray, max_points: int) -> np.ndarray:
    """At most `max_points` rows of a loss_array, evenly spaced by index, the first and the last
    point kept (Optimus(loss_fit_max_points=...): an opt-in cap on the fit's cost, module
    docstring)."""
    n = len(points)
    if n <= max_points:
        return points
    return points[(np.arange(max_points) * (n - 1)) // (max_points - 1)]


def convergence_epoch(b: tuple[float, float, float], rel_delta: float, max_epochs: int) -> int:
    """First epoch whose fitted loss improves on the previous by less than rel_delta (or the
    budget).

    Scanned in blocks from epoch 1, doubling (a replayed Philly job's budget is up to ~480,000
    epochs and the answer is usually early); each epoch's test is the same elementwise
    arithmetic as on the whole range, so the answer is the same."""
    lo, size = 1, 1024
    while lo <= max_epochs:
        k = np.arange(lo, min(lo + size, max_epochs + 1), dtype=float)
        prev, cur = loss_curve(k - 1, *b), loss_curve(k, *b)
        small = np.flatnonzero((prev - cur) / prev < rel_delta)
        if len(small):
            return int(k[small[0]])
        lo, size = lo + size, 2 * size
    return max_epochs


# ----------------------------------------------------------------------------- resources
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


GAIN_PER = ("share", "amount")
_UNITS = np.array([1.0, 1.0, 1e-6, 1.0])  # resource_vec -> the config's units (bandwidth in MB/s)


def dominant_cost(d: Demand, totals: np.ndarray, per: str = "share") -> float:
    """What a marginal gain is divided by (module docstring, item 3): the task's dominant share
    ("share"), or the amount of its dominant resource in the config's units ("amount": seed 002's
    N_j^D and O_j^D'; the dominant resource is the one of largest share)."""
    if per == "share":
        return dominant_share(d, totals)
    v = resource_vec(d)
    used = np.flatnonzero(totals > 0)
    r = used[int(np.argmax(v[used] / totals[used]))]
    return float(v[r] * _UNITS[r])


# ----------------------------------------------------------------------------- placement
Layout = tuple[tuple[int, ...], tuple[int, ...]]  # (PS nodes, worker nodes)


def _copy(cap: Capacity) -> Capacity:
    return Capacity(cap.cpu.copy(), cap.mem.copy(), cap.bw.copy(), cap.gpu.copy())


def _charge(cap: Capacity, nodes: tuple[int, ...], d: Demand, sign: int = 1) -> None:
    """cap.take for many tasks of one demand at once."""
    if nodes:
        k = np.bincount(nodes, minlength=len(cap.cpu)) * sign
        cap.cpu -= k * d.cpu
        cap.mem -= k * d.mem_gb
        cap.bw -= k * d.bw_MBps * 1e6
        cap.gpu -= k * d.gpu


def _node_order(
    cluster: Cluster, cap: Capacity, gpu_first: bool, prefer: tuple[int, ...] = ()
) -> np.ndarray:
    """The job's current servers first (those holding most of its tasks first), then the servers
    with the most free: GPUs (when placing GPU workers), CPU, memory ([code]: least used CPU)."""
    held = np.bincount(np.asarray(prefer, dtype=np.int64), minlength=cluster.n_nodes)
    gpu = cap.gpu if gpu_first else np.zeros_like(cap.gpu)
    idx = np.arange(cluster.n_nodes)
    return np.lexsort((idx, -cap.mem, -cap.cpu, -gpu, -held))  # last key sorts first


def _even_servers(
    free: np.ndarray, ps: Demand, worker: Demand, p: int, w: int
) -> int | None:
    """The fewest k of the first n candidates (columns of `free`, 4 x n) that hold PS i and worker i
    on candidate i mod k; None if no k fits."""
    n = free.shape[1]
    free = free + np.array([1e-9, 1e-9, 1e-3, 0.0])[:, None]
    k = np.arange(1, n + 1)[:, None]  # row: k servers; column j: the j-th candidate
    j = np.arange(n)[None, :]
    n_ps = (p // k + (j < p % k)) * (j < k)  # candidate j holds PS j, j + k, ... (i mod k)
    n_w = (w // k + (j < w % k)) * (j < k)
    need = n_ps[None] * resource_vec(ps)[:, None, None]
    need += n_w[None] * resource_vec(worker)[:, None, None]
    ok = np.flatnonzero((need <= free[:, None, :]).all(axis=(0, 2)))
    return int(ok[0]) + 1 if len(ok) else None


def place_even(
    cluster: Cluster, cap: Capacity, ps: Demand, worker: Demand, p: int, w: int,
    prefer: tuple[int, ...] = (),
) -> Layout | None:
    """Seed 002 Fig. 10: the fewest servers, the same number of PS and of workers on each.

    k = 1, 2, ... candidate servers; PS i and worker i go to candidate i mod k ([code] __place).
    `cap` is charged only on success (a failed k leaves nothing taken). The plain version, on
    whole arrays; allocate() uses _Free, which gives the same layouts touching only the nodes that
    change (tests/test_baseline_optimus.py checks decisions equal)."""
    order = _node_order(cluster, cap, worker.gpu > 0, prefer)
    # with k >= max(p, w) servers every candidate holds at most one PS and one worker, the same
    # layout as k = max(p, w): no need to look further (and no (nodes x nodes) arrays)
    n = min(cluster.n_nodes, max(p, w))
    free = np.stack([cap.cpu, cap.mem, cap.bw, cap.gpu.astype(float)])[:, order[:n]]
    kk = _even_servers(free, ps, worker, p, w)
    if kk is None:
        return None
    ps_nodes = tuple(int(order[i % kk]) for i in range(p))
    w_nodes = tuple(int(order[i % kk]) for i in range(w))
    _charge(cap, ps_nodes, ps)
    _charge(cap, w_nodes, worker)
    return ps_nodes, w_nodes


def place_task(cluster: Cluster, cap: Capacity, d: Demand, job_nodes: tuple[int, ...]) -> int:
    """[code] __place's last resort for one task: a server of its job that fits, else the server
    with the most free that fits (GPUs first only for a task that needs one). -1 if none."""
    fit = cap.fits(d)
    for n in _node_order(cluster, cap, d.gpu > 0, job_nodes):
        if fit[n]:
            return int(n)
    return -1


def layout_for(
    cluster: Cluster, cap: Capacity, ps: Demand, worker: Demand, p: int, w: int,
    now: Layout | None = None, prefer: tuple[int, ...] = (),
) -> tuple[Layout, Capacity] | None:
    """Where the job's (p, w) goes in `cap` once the layout it holds in the plan (`now`) is given
    back: the Fig. 10 layout if it fits, else `now` plus the missing tasks one by one (workers
    first); with the capacity left after it. None if a task fits nowhere; `cap` is not changed.
    The plain version (a copy of every array per trial); allocate() uses _Free.layout."""
    trial = _copy(cap)
    if now is not None:
        _charge(trial, now[0], ps, -1)
        _charge(trial, now[1], worker, -1)
    got = place_even(cluster, trial, ps, worker, p, w, prefer)
    if got is not None:
        return got, trial
    ps_nodes, w_nodes = (list(now[0][:p]), list(now[1][:w])) if now else ([], [])
    _charge(trial, tuple(ps_nodes), ps)
    _charge(trial, tuple(w_nodes), worker)
    for role, d, nodes, want in (("w", worker, w_nodes, w), ("ps", ps, ps_nodes, p)):
        while len(nodes) < want:
            n = place_task(cluster, trial, d, tuple(ps_nodes + w_nodes) + prefer)
            if n < 0:
                return None
            trial.take(n, d)
            nodes.append(n)
    return (tuple(ps_nodes), tuple(w_nodes)), trial


def _room(v) -> tuple[float, float, float, float]:
    """A node's free [cpu, mem, bw, gpu] plus _even_servers' fit tolerances."""
    return v[0] + 1e-9, v[1] + 1e-9, v[2] + 1e-3, float(v[3]) + 0.0


def _short(v) -> bool:
    """Some resource's room (_room) is negative: _even_servers then rejects every k whose unused
    candidates (j >= k, holding nothing) include this node. (not min(_room(v)) >= 0.0 for the
    finite values there are: config values are finite, and so are sums of them.)"""
    return v[0] + 1e-9 < 0.0 or v[1] + 1e-9 < 0.0 or v[2] + 1e-3 < 0.0 or v[3] < 0


def _even_servers_py(
    order: Iterator[int], vals: Callable, n: int, rp: list, rw: list, p: int, w: int, rest_ok: bool
) -> tuple[int | None, list[int]]:
    """_even_servers in scalars over the first n candidates of `order` (nodes in _node_order;
    vals(node): its free [cpu, mem, bw, gpu]), read only as far as needed: (the fewest k that
    fits, or None; the nodes read, in order). rp, rw: resource_vec of a PS and of a worker.

    The same sums and comparisons, stopping at the first k that fits (usually k = 1). The array
    version also asks 0 <= room of the candidates j >= k, which hold nothing: with `rest_ok` the
    caller knows no node is short (_short), so candidate k is read only when k + 1 servers are
    tried: a job's trial reads about as many servers as it uses, not max(p, w) (issue 14)."""
    nodes: list[int] = []
    room: list[tuple] = []
    rest = None
    if not rest_ok:
        for x in islice(order, n):
            nodes.append(x)
            room.append(_room(vals(x)))
        rest = [True] * (len(room) + 1)
        for j in range(len(room) - 1, -1, -1):
            rest[j] = rest[j + 1] and min(room[j]) >= 0.0
    for k in range(1, n + 1):
        if rest is not None:
            if not rest[k]:
                continue
        else:  # candidates 0..k-2 were read for k - 1
            x = next(order)
            nodes.append(x)
            room.append(_room(vals(x)))
        qp, mp = divmod(p, k)
        qw, mw = divmod(w, k)
        for j in range(k):
            a, b = qp + (j < mp), qw + (j < mw)
            r = room[j]
            if not (
                a * rp[0] + b * rw[0] <= r[0] and a * rp[1] + b * rw[1] <= r[1]
                and a * rp[2] + b * rw[2] <= r[2] and a * rp[3] + b * rw[3] <= r[3]
            ):
                break
        else:
            return k, nodes
    return None, nodes


class _Plain:
    """allocate()'s free capacity through the plain functions above (the reference for _Free)."""

    def __init__(self, cluster: Cluster, cap: Capacity):
        self.cluster, self.cap = cluster, cap

    def layout(self, job_id, ps, worker, p, w, now, prefer):
        return layout_for(self.cluster, self.cap, ps, worker, p, w, now, prefer)

    def commit(self, job_id: str, got: tuple[Layout, Capacity]) -> None:
        c, left = self.cap, got[1]
        c.cpu[:], c.mem[:], c.bw[:], c.gpu[:] = left.cpu, left.mem, left.bw, left.gpu


class _Trial:
    """A trial over _Free: the values of the nodes it changed (cpu, mem, bw, gpu), the rest read
    through, and the layout's tasks per node (`counts`: PS, workers; set by _Free.layout). Charges
    repeat _charge / Capacity.take's arithmetic in the same order per node, so every value is
    bitwise what the plain version computes on its copy."""

    __slots__ = ("base", "over", "counts")

    def __init__(self, base: "_Free"):
        self.base = base
        self.over: dict[int, list] = {}
        self.counts: tuple[dict[int, int], dict[int, int]] = ({}, {})

    def vals(self, n: int):
        """Node n's [cpu, mem, bw, gpu] under this trial, to read (not to change)."""
        v = self.over.get(n)
        return self.base.free[n] if v is None else v

    def _mut(self, n: int) -> list:
        v = self.over.get(n)
        if v is None:
            v = self.over[n] = list(self.base.free[n])
        return v

    def charge(self, count: dict[int, int], d: Demand, sign: int = 1) -> None:
        """_charge of `count[n]` tasks on each node n (a node's tasks at once, as _charge's
        bincount)."""
        for n, cnt in count.items():
            k = cnt * sign
            v = self._mut(n)
            v[0] -= k * d.cpu
            v[1] -= k * d.mem_gb
            v[2] -= k * d.bw_MBps * 1e6
            v[3] -= k * d.gpu

    def take(self, n: int, d: Demand) -> None:  # as Capacity.take, sign 1
        v = self._mut(n)
        v[0] -= 1 * d.cpu
        v[1] -= 1 * d.mem_gb
        v[2] -= 1 * d.bw_MBps * 1e6
        v[3] -= 1 * d.gpu

    def fits(self, n: int, d: Demand) -> bool:  # as Capacity.fits
        v = self.vals(n)
        return (
            v[0] + 1e-9 >= d.cpu and v[1] + 1e-9 >= d.mem_gb
            and v[2] + 1e-3 >= d.bw_MBps * 1e6 and v[3] >= d.gpu
        )

    def order(self, gpu_first: bool, held: Counter):
        """_node_order under this trial, lazily: the preferred servers (`held`: tasks per server,
        most first), then the base's sorted order with the nodes this trial changed merged in at
        their new keys."""
        over, free = self.over, self.base.free
        first = [  # (-tasks held, *key(vals(n), n, gpu_first)), inline
            (-c, -v[3] if gpu_first else 0, -v[0], -v[1], n)
            for n, c in held.items() for v in (over.get(n) or free[n],)
        ]
        first.sort()
        for h in first:
            yield int(h[-1])
        key = self.base.key
        moved = sorted(
            (key(v, n, gpu_first) for n, v in over.items() if n not in held)
        )
        i = 0
        for k in self.base.sorted(gpu_first):
            n = k[-1]
            if n in held or n in self.over:
                continue
            while i < len(moved) and moved[i] < k:
                yield int(moved[i][-1])
                i += 1
            yield n
        for k in moved[i:]:
            yield int(k[-1])


class _Free:
    """allocate()'s free capacity at scale: `cap` is changed in place, node by node, and the two
    orders of _node_order (GPUs first or not) are kept sorted as nodes change, instead of a copy
    of every array and a sort of every node per trial (seed 002's 4,000 jobs on 16,000 nodes:
    benchmarks/optimus_scale.py). Same layouts as _Plain.

    Incremental per job (issue 14): each job's committed layout is kept as tasks per node, so a
    trial gives it back by touching its servers (not each of its tasks), and the Fig. 10 search
    reads candidates only up to the k it tries while no node is short (`short`). A trial then costs
    about the servers the job uses, not its tasks: the greedy's one-task increments no longer
    re-place the whole job task by task."""

    def __init__(self, cluster: Cluster, cap: Capacity):
        self.cluster, self.cap = cluster, cap
        self._sorted: dict[bool, list] = {}
        # cap's values as Python numbers (the same doubles; cheaper to read one by one)
        self.free = list(zip(cap.cpu.tolist(), cap.mem.tolist(), cap.bw.tolist(), cap.gpu.tolist()))
        self.short = set(np.flatnonzero(  # _short, on the arrays
            (cap.cpu + 1e-9 < 0.0) | (cap.mem + 1e-9 < 0.0) | (cap.bw + 1e-3 < 0.0) | (cap.gpu < 0)
        ).tolist())
        # job -> (its committed layout, its PS and its workers per node)
        self.jobs: dict[str, tuple[Layout, dict[int, int], dict[int, int]]] = {}
        # job -> (prefer, PS demand, worker demand, prefer counted, their resource_vecs)
        self._consts: dict[str, tuple] = {}

    @staticmethod
    def key(v, n: int, gpu_first: bool) -> tuple:
        """_node_order's lexsort keys, first to last: -GPUs (or 0), -CPU, -memory, index."""
        return (-v[3] if gpu_first else 0, -v[0], -v[1], n)

    def sorted(self, gpu_first: bool) -> list:
        s = self._sorted.get(gpu_first)
        if s is None:
            s = self._sorted[gpu_first] = sorted(
                self.key(v, n, gpu_first) for n, v in enumerate(self.free)
            )
        return s

    def _job(self, job_id: str, ps: Demand, worker: Demand, prefer: tuple[int, ...]) -> tuple:
        """What a job's trials reuse: its servers now counted, its demands' resource_vec."""
        rec = self._consts.get(job_id)
        if rec is None or rec[0] is not prefer or rec[1] is not ps or rec[2] is not worker:
            rec = self._consts[job_id] = (
                prefer, ps, worker, Counter(prefer), resource_vec(ps).tolist(),
                resource_vec(worker).tolist(),
            )
        return rec

    def layout(self, job_id, ps, worker, p, w, now, prefer) -> tuple[Layout, _Trial] | None:
        """layout_for on a _Trial; `now`: the layout last committed for job_id (allocate's plan),
        given back from its tasks per node as kept at commit."""
        trial = _Trial(self)
        if now is not None:
            _, cp, cw = self.jobs[job_id]
            trial.charge(cp, ps, -1)
            trial.charge(cw, worker, -1)
        n = min(self.cluster.n_nodes, max(p, w))
        _, _, _, held, rp, rw = self._job(job_id, ps, worker, prefer)
        # a give-back only raises a node's values (Demand's fields are >= 0), so with no node of
        # the base short none of the trial's is either
        rest_ok = not self.short
        order = trial.order(worker.gpu > 0, held)
        kk, order = _even_servers_py(order, trial.vals, n, rp, rw, p, w, rest_ok)
        if kk is not None:
            servers = order[:kk]
            ps_nodes = tuple((servers * (p // kk + 1))[:p])  # PS i on server i mod kk
            w_nodes = tuple((servers * (w // kk + 1))[:w])
            qp, mp = divmod(p, kk)
            qw, mw = divmod(w, kk)
            cp = {x: qp + (j < mp) for j, x in enumerate(servers) if qp + (j < mp)}
            cw = {x: qw + (j < mw) for j, x in enumerate(servers) if qw + (j < mw)}
        else:
            ps_l, w_l = (list(now[0][:p]), list(now[1][:w])) if now else ([], [])
            trial.charge(Counter(ps_l), ps)
            trial.charge(Counter(w_l), worker)
            for d, nodes, want in ((worker, w_l, w), (ps, ps_l, p)):
                while len(nodes) < want:
                    held = Counter(chain(ps_l, w_l, prefer))
                    got = next((x for x in trial.order(d.gpu > 0, held) if trial.fits(x, d)), -1)
                    if got < 0:
                        return None
                    trial.take(got, d)
                    nodes.append(got)
            ps_nodes, w_nodes = tuple(ps_l), tuple(w_l)
            trial.counts = (Counter(ps_nodes), Counter(w_nodes))
            return (ps_nodes, w_nodes), trial
        trial.charge(cp, ps)
        trial.charge(cw, worker)
        trial.counts = (cp, cw)
        return (ps_nodes, w_nodes), trial

    def commit(self, job_id: str, got: tuple[Layout, _Trial]) -> None:
        layout, trial = got
        self.jobs[job_id] = (layout, *trial.counts)
        c = self.cap
        for n, v in trial.over.items():
            old = self.free[n]
            self.free[n] = tuple(v)
            c.cpu[n], c.mem[n], c.bw[n], c.gpu[n] = v
            if _short(v):
                self.short.add(n)
            else:
                self.short.discard(n)
            for gpu_first, s in self._sorted.items():
                del s[bisect_left(s, self.key(old, n, gpu_first))]
                insort(s, self.key(v, n, gpu_first))


# ----------------------------------------------------------------------------- allocation
def marginal_gain(
    remaining: float, f0: float, f1: float, d: Demand, totals: np.ndarray,
    share: float | None = None,
) -> float:
    """Seed 002: (Q/f(p, w) - Q/f(p', w')) / the added task's dominant resource, here its dominant
    share of the cluster (module docstring, item 3). `share`: the divisor when already known (from
    dominant_cost)."""
    if not f0 or not f1:
        return -math.inf
    if share is None:
        share = dominant_share(d, totals)
    return (remaining / f0 - remaining / f1) / share


@dataclass
class AllocJob:
    """What the allocator needs of one job. `speed(p, w, layout)` returns steps/s, or None when
    there is no estimate; the layout is given only when `placed_speed` (the oracle's true speed
    depends on it, the fitted model does not)."""

    job_id: str
    ps: Demand
    worker: Demand
    # Q_j, steps; or a function that gives it, called once when the job's gain first needs it
    # (the loss fit behind it is the costly part at Philly scale, and a job that does not grow,
    # or whose speeds are unknown, never needs it)
    remaining: float | Callable[[], float]
    speed: Callable[[int, int, Layout | None], float | None]
    factor: float = 1.0  # seed 002: 0.95 at the beginning of training
    starts: tuple[tuple[int, int], ...] = ()  # profiling: untried shapes, the first that fits
    grow: bool = True  # False: keeps its first allocation (profiling, or no speed estimate)
    group: str = ""  # jobs of one group (model) pool speed samples: each profiles another shape
    prefer: tuple[int, ...] = ()  # the servers its tasks are on now
    placed_speed: bool = False
    uses_ps: bool = True  # False: an all-reduce job, grown by workers only from (0, 1)

    def work(self) -> float:
        """Q_j, computed on first use when `remaining` is a function."""
        if callable(self.remaining):
            self.remaining = self.remaining()
        return self.remaining


def allocate(
    jobs: list[AllocJob], cluster: Cluster, cap: Capacity, totals: np.ndarray, fast: bool = True,
    gain_per: str = "share",
) -> dict[str, Layout]:
    """Seed 002 "Marginal Gain based Heuristic for Resource Allocation", placing as it grows.

    `jobs` in arrival order; `cap` the free capacity the round may spend (charged). Every job
    first gets 1 PS + 1 worker, then its profiling shape; then the largest gain goes first. A task
    counts as fitting only if the job's new (p, w) can be placed (see layout_for). Returns the
    layout of every job that got at least 1 PS and 1 worker. `fast`: through _Free (the same
    plan as the plain functions, `fast=False`, at any scale). `gain_per`: dominant_cost's `per`."""
    plan: dict[str, Layout] = {}
    free = (_Free if fast else _Plain)(cluster, cap)

    def layout(job: AllocJob, p: int, w: int) -> tuple[Layout, object] | None:
        return free.layout(job.job_id, job.ps, job.worker, p, w, plan.get(job.job_id), job.prefer)

    def commit(job: AllocJob, got: tuple[Layout, object] | None) -> bool:
        if got is None:
            return False
        plan[job.job_id] = got[0]
        free.commit(job.job_id, got)
        return True

    # "First allocate one worker and one parameter server to each active job to avoid starvation"
    # (an all-reduce job: one worker)
    for job in jobs:
        commit(job, layout(job, 1 if job.uses_ps else 0, 1))
    given: dict[str, set[tuple[int, int]]] = {}
    shares: dict[Demand, float] = {}  # dominant_cost per task demand
    seen: dict[tuple[str, int, int], list] = {}  # options of a job at a shape (fitted speeds)
    for job in jobs:  # emulated profiling: the first shape that fits and no job of its group got
        if job.job_id in plan and job.starts:
            mine = given.setdefault(job.group, set())
            for pw in job.starts:
                if pw not in mine and commit(job, layout(job, *pw)):
                    mine.add(pw)
                    break

    def options(job: AllocJob) -> list[tuple[float, tuple[int, int], object]]:
        """(gain, (p', w'), layout or None) of +PS and +worker, larger gain first; with a
        placement-dependent speed only the increments that can be placed."""
        now = plan[job.job_id]
        p, w = len(now[0]), len(now[1])
        if not job.placed_speed:  # depends on (p, w) alone: computed once per shape
            known = seen.get((job.job_id, p, w))
            if known is not None:
                return known
        f0 = job.speed(p, w, now if job.placed_speed else None)
        out = []
        grow = (((p + 1, w), job.ps), ((p, w + 1), job.worker)) if job.uses_ps else (((p, w + 1), job.worker),)
        for pw, d in grow:
            got = layout(job, *pw) if job.placed_speed else None
            if job.placed_speed and got is None:
                continue
            f1 = job.speed(*pw, got[0] if got else None)
            sh = shares.get(d)
            if sh is None:
                sh = shares[d] = dominant_cost(d, totals, gain_per)
            gain = marginal_gain(job.work(), f0, f1, d, totals, sh) if f0 and f1 else -math.inf
            out.append((job.factor * gain, pw, got))
        out.sort(key=lambda o: -o[0])
        if not job.placed_speed:
            seen[(job.job_id, p, w)] = out
        return out

    def gain(job: AllocJob) -> float:
        return max((o[0] for o in options(job)), default=-math.inf)

    order = {j.job_id: i for i, j in enumerate(jobs)}
    heap = [(-gain(j), order[j.job_id], j) for j in jobs if j.job_id in plan and j.grow]
    heapq.heapify(heap)
    # "Iteratively select the job with the largest marginal gain and add one worker or parameter
    # server ... until some resource in the cluster is used up, or marginal gains of all jobs
    # become non-positive."
    while heap and -heap[0][0] > 0:
        _, i, job = heapq.heappop(heap)
        for g, pw, got in options(job):  # again: what fits may have changed since it was queued
            if g <= 0:
                break  # nothing of it gains: the job stops growing
            if heap and g < -heap[0][0]:
                heapq.heappush(heap, (-g, i, job))  # no longer the largest: back in the queue
                break
            if commit(job, got or layout(job, *pw)):
                heapq.heappush(heap, (-gain(job), i, job))
                break
    return plan


# ----------------------------------------------------------------------------- the scheduler
def _task_nodes(job: JobView, role: str) -> list[int]:
    """Node of each of the job's tasks of this role, by task index (-1: unplaced)."""
    n = job.num_ps if role == "ps" else job.num_workers
    out = [-1] * n
    for t in job.tasks:
        if (t.role == "ps") == (role == "ps"):
            out[int(t.task_id.rpartition("/")[2].lstrip("psw"))] = t.node
    return out


def _assign(current: list[int], nodes: tuple[int, ...]) -> list[int]:
    """Nodes for task 0..len(nodes)-1: a task keeps its node when the new layout has it there."""
    left = Counter(nodes)
    out: list[int | None] = [None] * len(nodes)
    for i, n in enumerate(current[: len(nodes)]):
        if n >= 0 and left[n] > 0:
            out[i] = n
            left[n] -= 1
    rest = list(left.elements())
    return [n if n is not None else rest.pop(0) for n in out]


class _Column:
    """One (p, w)'s pooled speeds: the value of each job that measured it, by the job's position
    in its pool, ascending (`pos`), in an array with spare room at the end (`val`)."""

    __slots__ = ("pos", "val")

    def __init__(self) -> None:
        self.pos: list[int] = []
        self.val = np.empty(8)

    def set(self, k: int, f: float) -> None:
        """The value of the job at position k (inserted in position order if it has none)."""
        pos, n = self.pos, len(self.pos)
        i = bisect_left(pos, k)
        if i < n and pos[i] == k:
            self.val[i] = f
            return
        if n == len(self.val):
            self.val = np.concatenate([self.val, np.empty(n)])
        self.val[i + 1 : n + 1] = self.val[i:n].copy()
        self.val[i] = f
        pos.insert(i, k)

    def drop(self, k: int) -> None:
        i = bisect_left(self.pos, k)
        n = len(self.pos)
        self.val[i : n - 1] = self.val[i + 1 : n].copy()
        del self.pos[i]

    def mean(self) -> float:
        """float(np.mean(values in position order)): the same reduction over the same doubles
        as the mean of a list of them."""
        return float(np.mean(self.val[: len(self.pos)]))


class _SpeedPool:
    """One group's measured speeds (Optimus._pooled): each job's {(p, w): steps/s} as last put,
    jobs in the order they were first put. Kept per (p, w) as columns of values in that order, so
    that a decision rewrites only the samples that moved (a running job's current shape) and the
    pooled mean is one numpy reduction, instead of listing every job ever pooled (tens of
    thousands on the whole Philly trace, most of them finished) at every decision. The means and
    their order are those of listing them: values in job order, shapes in the order they first
    appear over the jobs in order (tested equal)."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[int, dict[tuple[int, int], float]]] = {}  # job -> (position, samples)
        self.order: list[str] = []  # job at each position
        self.cols: dict[tuple[int, int], _Column] = {}
        self._keys: list[tuple[int, int]] | None = None  # the shapes in pooled order, while valid

    def put(self, job_id: str, samples: dict[tuple[int, int], float]) -> None:
        """The job's samples now (the pool keeps `samples`; the caller passes a dict of its own)."""
        known = self.jobs.get(job_id)
        if known is None:
            k, old = len(self.order), {}
            self.order.append(job_id)
        else:
            k, old = known
            if old == samples and list(old) == list(samples):
                return
        for pw, f in samples.items():
            if pw not in old:
                col = self.cols.get(pw)
                if col is None:
                    col = self.cols[pw] = _Column()
                if not col.pos or k < col.pos[0]:
                    self._keys = None  # the shape first appears at another job now
                col.set(k, f)
            elif old[pw] != f:
                self.cols[pw].set(k, f)
        for pw in old.keys() - samples.keys():
            col = self.cols[pw]
            col.drop(k)
            if not col.pos:
                del self.cols[pw]
            self._keys = None
        if known is not None and list(old) != list(samples)[: len(old)]:
            self._keys = None  # a shape moved within the job's samples
        self.jobs[job_id] = (k, samples)

    def pooled(self) -> dict[tuple[int, int], float]:
        """Mean measured speed per (p, w) over the jobs that measured it."""
        if self._keys is None:
            rank = {}
            for pw, col in self.cols.items():
                first = self.jobs[self.order[col.pos[0]]][1]
                rank[pw] = (col.pos[0], list(first).index(pw))
            self._keys = sorted(self.cols, key=rank.__getitem__)
        return {pw: self.cols[pw].mean() for pw in self._keys}


@dataclass
class _Estimates:
    """Pooled speed samples per group (_SpeedPool), cached loss fits, and each active job's loss
    points as read so far (the points and their loss_array), extended by the points that came in
    since (a job's observed losses only grow)."""

    speeds: dict[str, _SpeedPool] = field(default_factory=dict)
    loss: dict[str, tuple[int, tuple[float, float, float] | None]] = field(default_factory=dict)
    points: dict[str, tuple[tuple, np.ndarray]] = field(default_factory=dict)

    def loss_points(self, job: JobView) -> np.ndarray:
        """loss_array(job.observed_loss), converting only the points not read before."""
        obs = job.observed_loss
        prev = self.points.get(job.job_id)
        if prev is not None and prev[0] is obs:  # the engine shares a job's history until it grows
            return prev[1]
        m = 0 if prev is None else len(prev[0])
        if prev is None or len(obs) < m or obs[:m] != prev[0]:
            arr = loss_array(obs)
        else:
            arr = np.concatenate([prev[1], loss_array(obs[m:])])
        self.points[job.job_id] = (obs, arr)
        return arr


class Optimus(Scheduler):
    name = "optimus"
    fast = True  # allocate() through _Free; False: the plain functions (same decisions, tested)

    def __init__(
        self,
        interval_s: float = 600.0,
        early_factor: float = 0.95,
        early_epochs: int = 5,
        loss_fit_max_points: int | None = None,
        gain_per: str = "share",
    ):
        """`interval_s` finite: an infinite period would never replan the running jobs. `gain_per`:
        what a marginal gain is divided by, "share" or "amount" (module docstring, item 3)."""
        owner = type(self).__name__
        check_real(interval_s, "interval_s", owner, gt=0)
        check_real(early_factor, "early_factor", owner, gt=0, le=1)
        check_int(early_epochs, "early_epochs", owner, ge=0)
        if loss_fit_max_points is not None:
            check_int(loss_fit_max_points, "loss_fit_max_points", owner, ge=MIN_LOSS_POINTS,
                      note="or None: every point")
        self.interval_s = interval_s
        self.early_factor = early_factor
        self.early_epochs = early_epochs
        self.loss_fit_max_points = loss_fit_max_points
        if gain_per not in GAIN_PER:
            raise ValueError(f"{owner}: gain_per must be one of {GAIN_PER}, got {gain_per!r}")
        self.gain_per = gain_per
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._next_full = 0.0
        self._est = _Estimates()
        self._groups: dict[str, str] = {}  # active job -> its speed group (_group)
        self._models: dict[str, tuple[dict, np.ndarray | None]] = {}
        self._predicted: dict[str, dict[tuple[int, int], float]] = {}

    # ---------------------------------------------------------------- estimates
    @staticmethod
    def _group(job: JobView) -> str:
        """Speed samples pool per model and communication pattern (their speed models differ)."""
        return job.model if job.comm == "ps" else f"{job.model} (all-reduce)"

    def _pooled(self, group: str) -> dict[tuple[int, int], float]:
        pool = self._est.speeds.get(group)
        return {} if pool is None else pool.pooled()

    def remaining_steps(self, view: ClusterView, job: JobView) -> float:
        """Q_j in steps from the fitted convergence model (see the module docstring)."""
        n = len(job.observed_loss)
        cached = self._est.loss.get(job.job_id)
        if cached is None or cached[0] != n:
            pts = self._est.loss_points(job)
            if self.loss_fit_max_points is not None:
                pts = thin_loss_points(pts, self.loss_fit_max_points)
            cached = (n, fit_loss(pts))
            self._est.loss[job.job_id] = cached
        b = cached[1]
        if b is None:
            end = min(job.epochs_done + FALLBACK_EPOCHS, job.max_epochs)
        else:
            end = convergence_epoch(b, job.rel_delta, job.max_epochs)
        end = max(end, job.epochs_done + 1)
        return max(end * job.steps_per_epoch - job.steps_done, 1.0)

    def speed_fn(self, view: ClusterView, job: JobView) -> tuple[Callable, bool]:
        """(speed(p, w, layout) -> steps/s, identifiable): the job's own measurement, else the
        pooled one, else the fitted model; None while the model is not identifiable."""
        group = self._group(job)
        if group not in self._models:
            pooled = self._pooled(group)
            self._models[group] = (pooled, fit_speed(pooled))
        pooled, theta = self._models[group]
        fitted = self._predicted.setdefault(group, {})  # this round's predictions
        own = job.observed_speed
        seen = list(pooled) + list(own)
        p_max = EXTRAPOLATE * max((pw[0] for pw in seen), default=0)
        w_max = EXTRAPOLATE * max((pw[1] for pw in seen), default=0)

        def speed(p: int, w: int, layout: Layout | None) -> float | None:
            if (p, w) in own:
                return own[(p, w)]
            if (p, w) in pooled:
                return pooled[(p, w)]
            if theta is None or p > p_max or w > w_max:
                return None
            f = fitted.get((p, w))
            if f is None:
                f = fitted[(p, w)] = predict_speed(theta, p, w)
            return f

        return speed, theta is not None

    def _alloc_job(self, view: ClusterView, job: JobView) -> AllocJob:
        self._groups[job.job_id] = self._group(job)  # for pooling its speeds without its view
        speed, ready = self.speed_fn(view, job)
        starts: tuple[tuple[int, int], ...] = ()
        if not ready:  # emulated profiling: the design's shapes no job of this model has run
            design = PROFILE_DESIGN if job.comm == "ps" else tuple(
                dict.fromkeys((0, w) for _, w in PROFILE_DESIGN))
            starts = tuple(pw for pw in design if pw not in self._models[self._group(job)][0])
        early = len(job.observed_loss) < self.early_epochs
        return AllocJob(
            job.job_id,
            job.ps_demand,
            job.worker_demand,
            lambda: self.remaining_steps(view, job),
            speed,
            self.early_factor if early else 1.0,
            starts,
            ready,
            job.model,
            tuple(t.node for t in job.tasks if t.node >= 0),
            self.oracle,
            job.comm == "ps",
        )

    # ---------------------------------------------------------------- decide
    def decide(self, view: ClusterView) -> Decision:
        # pool what every job has measured, kept after it finishes, read without building views
        # (a job's group is kept from its view when it was allocated)
        groups = self._groups
        for k, (jid, samples) in enumerate(zip(view.jobs.job_ids(), view.jobs.observed_speeds())):
            if samples:
                group = groups.get(jid)
                if group is None:
                    group = groups[jid] = self._group(view.jobs[k])
                pool = self._est.speeds.get(group)
                if pool is None:
                    pool = self._est.speeds[group] = _SpeedPool()
                pool.put(jid, samples)
        self._models = {}  # this round's speed fits
        self._predicted: dict[str, dict[tuple[int, int], float]] = {}
        full = view.time >= self._next_full - 1e-6
        if full:
            self._next_full = (math.floor(view.time / self.interval_s + 1e-9) + 1) * self.interval_s
        movable = list(view.jobs) if full else list(view.pending)
        if full:  # the loss points of jobs no longer active are not read again
            ids = {j.job_id for j in movable}
            self._est.points = {k: v for k, v in self._est.points.items() if k in ids}
            self._groups = {k: v for k, v in self._groups.items() if k in ids}
        if not movable:
            return Decision()
        c = view.cluster
        cap = Capacity.without(view, movable)  # what is free plus what the movable jobs hold now
        jobs = [self._alloc_job(view, j) for j in movable]
        plan = allocate(jobs, c, cap, cluster_totals(c), self.fast, self.gain_per)
        d = Decision()
        for j in movable:
            if j.job_id not in plan:
                if j.status == "running":  # got nothing this interval: waits, keeping its progress
                    d.preempt.append(j.job_id)
                continue
            ps_nodes, w_nodes = plan[j.job_id]
            cur_ps, cur_w = _task_nodes(j, "ps"), _task_nodes(j, "worker")
            same = sorted(cur_ps) == sorted(ps_nodes) and sorted(cur_w) == sorted(w_nodes)
            if j.status == "running" and same:
                continue  # unchanged: no checkpoint
            if (len(ps_nodes), len(w_nodes)) != (j.num_ps, j.num_workers):
                d.allocate[j.job_id] = (len(ps_nodes), len(w_nodes))
            for prefix, cur, nodes in (("ps", cur_ps, ps_nodes), ("w", cur_w, w_nodes)):
                for i, n in enumerate(_assign(cur, nodes)):
                    if i >= len(cur) or cur[i] != n:  # a task that stays is not named
                        d.place[f"{j.job_id}/{prefix}{i}"] = n
        return d


class OptimusOracle(Optimus):
    """Optimus with the true remaining steps and the true speed alone under the layout it plans."""

    name = "optimus-oracle"
    oracle = True

    def __init__(self, interval_s: float = 600.0):
        super().__init__(interval_s=interval_s, early_factor=1.0)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._true: dict[tuple[str, Layout], float] = {}

    def remaining_steps(self, view: ClusterView, job: JobView) -> float:
        return max(view.oracle.remaining_steps(job.job_id), 1.0)

    def speed_fn(self, view: ClusterView, job: JobView) -> tuple[Callable, bool]:
        def speed(p: int, w: int, layout: Layout | None) -> float | None:
            key = (job.job_id, layout)
            if key not in self._true:
                self._true[key] = view.oracle.speed(job.job_id, list(layout[0]), list(layout[1]))
            # progress per second: steps/s x the true statistical efficiency at w (1.0 without)
            v = self._true[key]
            return v * view.oracle.efficiency(job.job_id, w) if v else None

        return speed, True

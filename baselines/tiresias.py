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
- Demotion is seen at decision points (arrivals, completions, the scenario's tick), not at the
  exact instant a threshold is crossed: the Scheduler API has no way to ask for a wake-up.
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.placers import Capacity, add_placement, get_placer, place_job


@dataclass
class _Queued:
    queue: int
    seq: int  # order of entry into its queue
    gpu_s0: float  # attained service when it last entered Q0
    run_s0: float  # run time when it last entered Q0
    waited_s: float = 0.0  # time waiting since it last entered Q0
    seen_s: float = 0.0  # time of the last decision point that saw it


def gittins_index(sizes: np.ndarray, a: float, delta: float) -> float:
    """§4.2: P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a] over the sizes S seen;
    0 when no size exceeds a."""
    left = sizes[sizes > a] - a
    if not len(left):
        return 0.0
    done = float((left <= delta).mean()) if math.isfinite(delta) else 1.0
    return done / float(np.minimum(left, delta).mean())


class Tiresias(Scheduler):
    name = "tiresias"
    gittins = False

    def __init__(
        self,
        thresholds: tuple[float, ...] = (3250.0, 7200.0),
        starve_limit: float = 0.0,
        placer: str = "pack",
        skew_bytes: float | None = 200e6,
        min_history: int = 1,
    ):
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"thresholds must be positive and increasing, got {thresholds}")
        if starve_limit < 0:
            raise ValueError(f"starve_limit must be >= 0 (0 = off), got {starve_limit}")
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
        self.sizes: list[float] = []  # GPU-seconds of the jobs that finished (2D-Gittins)
        self._last: dict[str, tuple] = {}  # job -> (attained GPU-s, time, GPUs running) last seen

    def queue_of(self, job_id: str) -> int:
        return self.state[job_id].queue

    def sensitive(self, job: JobView) -> bool:
        """§4.3: this job must be consolidated (its model's skew, by the docstring's size proxy)."""
        return self.skew_bytes is not None and job.param_bytes >= self.skew_bytes

    def consolidated(self, view: ClusterView, job: JobView, got) -> bool:
        """A placement acceptable for the job: any, unless it is sensitive and its GPU workers
        are on more servers than they need."""
        if not self.sensitive(job) or not job.worker_demand.gpu:
            return True
        per = int(view.cluster.gpus.max())
        return len(set(got[1])) <= math.ceil(job.num_workers / max(per, 1))

    def index(self, job: JobView) -> float:
        """The job's 2D-Gittins index in its queue (see the module docstring)."""
        st = self.state[job.job_id]
        a = job.attained_gpu_s - st.gpu_s0
        top = self.thresholds[st.queue] if st.queue < len(self.thresholds) else math.inf
        return gittins_index(np.asarray(self.sizes), a, top - a)

    def decide(self, view: ClusterView) -> Decision:
        self._learn(view)
        self._update_queues(view)
        if self.gittins and len(self.sizes) >= self.min_history:
            gi = {j.job_id: self.index(j) for j in view.jobs}
        else:
            gi = {j.job_id: 0.0 for j in view.jobs}  # 2D-LAS: FIFO inside a queue
        order = sorted(
            view.jobs,
            key=lambda j: (self.state[j.job_id].queue, -gi[j.job_id], j.status != "running",
                           self.state[j.job_id].seq),
        )
        d = priority_admit(view, order, self.placer, lambda j, got: self.consolidated(view, j, got))
        self._remember(view, d)
        return d

    def _learn(self, view: ClusterView) -> None:
        """Sizes of the jobs that left the view since last time (they finished, at this decision
        point, which the engine makes at every completion): the service seen last time plus the
        GPUs it was running on since then."""
        present = {j.job_id for j in view.jobs}
        for jid, (a, t, gpus) in self._last.items():
            if jid not in present:
                self.sizes.append(a + gpus * (view.time - t))

    def _remember(self, view: ClusterView, d: Decision) -> None:
        """Each job's service now and the GPUs it runs on after this decision."""
        started = {t.rpartition("/")[0] for t in d.place}
        stopped = set(d.preempt)
        self._last = {
            j.job_id: (j.attained_gpu_s, view.time,
                       j.num_workers * j.worker_demand.gpu
                       if (j.status == "running" or j.job_id in started) and j.job_id not in stopped
                       else 0)
            for j in view.jobs
        }

    def _enter(self, st: _Queued, queue: int) -> None:
        st.queue = queue
        st.seq = self._seq
        self._seq += 1

    def _update_queues(self, view: ClusterView) -> None:
        active = {j.job_id for j in view.jobs}
        self.state = {k: v for k, v in self.state.items() if k in active}
        for job in view.jobs:
            st = self.state.get(job.job_id)
            if st is None:  # a new job enters Q0
                st = _Queued(0, 0, job.attained_gpu_s, job.run_s, 0.0, view.time)
                self._enter(st, 0)
                self.state[job.job_id] = st
            if job.status == "pending" and job.run_s > 0:
                st.waited_s += view.time - st.seen_s
            st.seen_s = view.time
            ran_s = job.run_s - st.run_s0
            if (
                self.starve_limit > 0
                and st.queue > 0
                and job.status == "pending"
                and ran_s > 0
                and st.waited_s >= self.starve_limit * ran_s
            ):  # PromoteKnob: back to Q0, service counter reset
                st.gpu_s0, st.run_s0, st.waited_s = job.attained_gpu_s, job.run_s, 0.0
                self._enter(st, 0)
                continue
            # 2D-LAS: GPUs x time attained since the job last entered Q0, against the thresholds
            attained = job.attained_gpu_s - st.gpu_s0
            queue = sum(attained >= t for t in self.thresholds)
            if queue > st.queue:  # demoted
                self._enter(st, queue)


def priority_admit(view: ClusterView, order: list[JobView], placer, accept=None) -> Decision:
    """Run jobs in priority order (Tiresias' `dlas_sim_jobs` loop, node-aware): running jobs keep
    their nodes; a waiting job starts where the placer fits all its tasks, preempting running jobs
    of lower priority (lowest first, no more than it needs) when that makes room; a job that does
    not fit even so waits, and later jobs still get their turn."""
    c = view.cluster
    cap = Capacity.of(view)
    rank = {j.job_id: k for k, j in enumerate(order)}
    victims: list[JobView] = []
    d = Decision()

    def release(job: JobView, sign: int) -> None:
        for t in job.tasks:
            if t.node >= 0:
                cap.take(t.node, t.demand, -sign)

    def fit(job: JobView):
        got = place_job(
            c, cap, placer, job.ps_demand, job.worker_demand, job.num_ps, job.num_workers
        )
        if got is not None and accept is not None and not accept(job, got):
            unfit(job, got)  # a placement the job does not take (Tiresias: not consolidated)
            return None
        return got

    def unfit(job: JobView, got) -> None:
        for n in got[0]:
            cap.take(n, job.ps_demand, -1)
        for n in got[1]:
            cap.take(n, job.worker_demand, -1)

    for job in order:
        if job.status == "running":
            continue
        got = fit(job)
        if got is None:
            lower = [
                r for r in reversed(order)
                if r.status == "running" and rank[r.job_id] > rank[job.job_id] and r not in victims
            ]
            freed = []
            for r in lower:
                release(r, 1)
                freed.append(r)
                got = fit(job)
                if got is not None:
                    break
            if got is None:
                for r in freed:
                    release(r, -1)
                continue
            unfit(job, got)
            for r in reversed(freed):  # keep running every victim the job does not need
                release(r, -1)
                trial = fit(job)
                if trial is None:
                    release(r, 1)
                else:
                    unfit(job, trial)
                    freed.remove(r)
            victims += freed
            got = fit(job)
        add_placement(d, job.job_id, *got)
    d.preempt = [v.job_id for v in victims]
    return d


class TiresiasGittins(Tiresias):
    """Tiresias with the discretized 2D-Gittins index (module docstring)."""

    name = "tiresias-gittins"
    gittins = True

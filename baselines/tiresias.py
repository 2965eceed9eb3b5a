"""Tiresias: discretized two-dimensional least-attained-service (2D-LAS) (Gu et al., NSDI'19).

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
- Placement: consolidated (`placer="pack"`): Tiresias packs jobs whose model is sensitive to
  consolidation (large, skewed tensors, i.e. PS jobs) onto few machines; the view has no skew
  profile, so every job is consolidated.
- Jobs keep the (p, w) they asked for (Tiresias does not resize).
"""

from __future__ import annotations

from dataclasses import dataclass

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


class Tiresias(Scheduler):
    name = "tiresias"

    def __init__(
        self,
        thresholds: tuple[float, ...] = (3250.0, 7200.0),
        starve_limit: float = 0.0,
        placer: str = "pack",
    ):
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError(f"thresholds must be positive and increasing, got {thresholds}")
        if starve_limit < 0:
            raise ValueError(f"starve_limit must be >= 0 (0 = off), got {starve_limit}")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.starve_limit = starve_limit
        self.placer = get_placer(placer)
        self.state: dict[str, _Queued] = {}
        self._seq = 0

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.state = {}
        self._seq = 0

    def queue_of(self, job_id: str) -> int:
        return self.state[job_id].queue

    def decide(self, view: ClusterView) -> Decision:
        self._update_queues(view)
        order = sorted(
            view.jobs,
            key=lambda j: (self.state[j.job_id].queue, j.status != "running", self.state[j.job_id].seq),
        )
        return priority_admit(view, order, self.placer)

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


def priority_admit(view: ClusterView, order: list[JobView], placer) -> Decision:
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
        return place_job(
            c, cap, placer, job.ps_demand, job.worker_demand, job.num_ps, job.num_workers
        )

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

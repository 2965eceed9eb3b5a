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

Cost (issue 13, bug 9): state is kept from one decision point to the next, so a decision looks at
the running jobs, those that arrived, started or stopped, and the waiting jobs that may start,
not at every waiting job; with PromoteKnob on, every waiting job that has run is visited too
(its waiting time grows). Decisions are those of the full scan (tests/test_overload.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

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
    gpus: int = 0  # GPUs the job asks for (the key of its waiting bucket)
    waiting: bool = False  # in its bucket


def _arrival(job: JobView) -> tuple[float, str]:
    return job.arrival_s, job.job_id


def _gpus(job: JobView) -> int:
    return job.num_ps * job.ps_demand.gpu + job.num_workers * job.worker_demand.gpu


class Tiresias(Scheduler):
    """Kept incrementally, so that a decision costs the running jobs and those that may start,
    not the whole queue: waiting jobs sit in buckets by (queue, GPUs asked for) in queue order,
    and a bucket asking for more GPUs than are free plus those of the running jobs it may
    preempt is not looked at (such a job cannot fit: the round would skip it anyway)."""

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
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.state: dict[str, _Queued] = {}
        self._seq = 0
        self._watch: dict[str, None] = {}  # running at the last decision point or started by it
        self._ran: dict[str, None] = {}  # waiting after having run (starvation candidates)
        # waiting jobs: queue -> GPUs asked for -> [(seq, job id)] in queue order
        self._waiting: dict[int, dict[int, list[tuple[int, str]]]] = {}

    def queue_of(self, job_id: str) -> int:
        return self.state[job_id].queue

    def decide(self, view: ClusterView) -> Decision:
        self._update_queues(view)

        def key(j: JobView) -> tuple[int, bool, int]:
            st = self.state[j.job_id]
            return st.queue, j.status != "running", st.seq

        admission = Admission(view, sorted(view.running, key=key), key, self.placer)
        for job in self._candidates(view, admission):
            if admission.start(job):
                self._watch[job.job_id] = None
        return admission.decision()

    def _candidates(self, view: ClusterView, admission: Admission) -> Iterator[JobView]:
        """Waiting jobs in priority order, leaving out, as the round goes, buckets asking for more
        GPUs than are free plus those held by the running jobs of lower queues."""
        for q in sorted(self._waiting):
            buckets = self._waiting[q]
            pos = dict.fromkeys(buckets, 0)
            while True:
                budget = admission.free_gpus() + admission.preemptible_gpus(
                    lambda r: self.state[r.job_id].queue > q
                )
                best = None
                for gpus, jobs in buckets.items():
                    if gpus <= budget and pos[gpus] < len(jobs):
                        if best is None or jobs[pos[gpus]] < buckets[best][pos[best]]:
                            best = gpus
                if best is None:
                    break
                pos[best] += 1
                yield view.job(buckets[best][pos[best] - 1][1])

    def _enter(self, st: _Queued, queue: int) -> None:
        st.queue = queue
        st.seq = self._seq
        self._seq += 1

    def _wait(self, job_id: str, waiting: bool) -> None:
        """Put a waiting job in its bucket (or take it out)."""
        st = self.state[job_id]
        st.waiting = waiting
        jobs = self._waiting.setdefault(st.queue, {}).setdefault(st.gpus, [])
        if waiting:
            bisect.insort(jobs, (st.seq, job_id))
            return
        del jobs[bisect.bisect_left(jobs, (st.seq, job_id))]
        if not jobs:
            del self._waiting[st.queue][st.gpus]
            if not self._waiting[st.queue]:
                del self._waiting[st.queue]

    def _update_queues(self, view: ClusterView) -> None:
        """What changed since the last decision point: jobs that finished, started or stopped,
        arrived, were demoted (only a job that ran since can cross a threshold) or promoted."""
        now = view.time
        running = {j.job_id: j for j in view.running}
        stopped = []
        for jid in self._watch:
            if jid in running:
                continue
            st = self.state[jid]
            try:
                job = view.job(jid)
            except KeyError:  # finished
                if st.waiting:
                    self._wait(jid, False)
                del self.state[jid]
                self._ran.pop(jid, None)
                continue
            if not st.waiting:
                stopped.append(job)
        for jid in running:
            st = self.state.get(jid)
            if st is not None and st.waiting:  # started
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
        changed = sorted([j for j in running.values() if j.job_id in self.state] + stopped
                         + [view.job(jid) for jid in promoted if jid not in running], key=_arrival)
        for job in changed:
            st = self.state[job.job_id]
            if job.job_id in promoted:  # PromoteKnob: back to Q0, service counter reset
                bucketed = st.waiting  # a job that stopped just now gets its bucket below
                if bucketed:
                    self._wait(job.job_id, False)
                st.gpu_s0, st.run_s0, st.waited_s = job.attained_gpu_s, job.run_s, 0.0
                self._enter(st, 0)
                if bucketed:
                    self._wait(job.job_id, True)
                continue
            # 2D-LAS: GPUs x time attained since the job last entered Q0, against the thresholds
            queue = sum(job.attained_gpu_s - st.gpu_s0 >= t for t in self.thresholds)
            if queue > st.queue:  # demoted
                self._enter(st, queue)
        for job in stopped:
            self._wait(job.job_id, True)
        for job in self._arrivals(view):  # a new job enters Q0
            st = _Queued(0, 0, job.attained_gpu_s, job.run_s, 0.0, now, _gpus(job))
            self.state[job.job_id] = st
            self._enter(st, 0)
            if job.status == "running":
                running[job.job_id] = job
            else:
                self._wait(job.job_id, True)
                if job.run_s > 0:
                    self._ran[job.job_id] = None
        self._watch = dict.fromkeys(running)

    def _arrivals(self, view: ClusterView) -> list[JobView]:
        """Jobs not seen before, in arrival order: the newest active jobs (view.jobs is in
        arrival order), found from the end."""
        new = []
        for k in range(len(view.jobs) - 1, -1, -1):
            job = view.jobs[k]
            if job.job_id in self.state:
                break
            new.append(job)
        return new[::-1]


class Admission:
    """One round of Tiresias' `dlas_sim_jobs` loop, node-aware: running jobs keep their nodes;
    a waiting job (`start`, in priority order) starts where the placer fits all its tasks,
    preempting running jobs of lower priority (lowest first, no more than it needs) when that
    makes room; a job that does not fit even so waits, and later jobs still get their turn.
    `running` is in priority order, `key` orders any job by priority."""

    def __init__(self, view: ClusterView, running: list[JobView], key: Callable, placer):
        self.cluster, self.cap, self.placer = view.cluster, Capacity.of(view), placer
        self.running, self.key = running, key
        self.victims: list[JobView] = []
        self.d = Decision()

    def free_gpus(self) -> int:
        return int(self.cap.gpu.sum())

    def preemptible_gpus(self, lower: Callable[[JobView], bool]) -> int:
        """GPUs held by the running jobs not preempted yet for which `lower` holds: with the free
        ones, an upper bound on the GPUs a job of higher priority can get this round."""
        gone = {v.job_id for v in self.victims}
        return sum(
            t.demand.gpu
            for r in self.running
            if r.job_id not in gone and lower(r)
            for t in r.tasks
            if t.node >= 0
        )

    def _release(self, job: JobView, sign: int) -> None:
        for t in job.tasks:
            if t.node >= 0:
                self.cap.take(t.node, t.demand, -sign)

    def _fit(self, job: JobView):
        return place_job(
            self.cluster, self.cap, self.placer, job.ps_demand, job.worker_demand, job.num_ps,
            job.num_workers,
        )

    def _unfit(self, job: JobView, got) -> None:
        for n in got[0]:
            self.cap.take(n, job.ps_demand, -1)
        for n in got[1]:
            self.cap.take(n, job.worker_demand, -1)

    def start(self, job: JobView) -> bool:
        """Start the job if it fits, preempting if need be; whether it starts."""
        got = self._fit(job)
        if got is None:
            k = self.key(job)
            lower = [
                r for r in reversed(self.running) if self.key(r) > k and r not in self.victims
            ]
            freed = []
            for r in lower:
                self._release(r, 1)
                freed.append(r)
                got = self._fit(job)
                if got is not None:
                    break
            if got is None:
                for r in freed:
                    self._release(r, -1)
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
            got = self._fit(job)
        add_placement(self.d, job.job_id, *got)
        return True

    def decision(self) -> Decision:
        self.d.preempt = [v.job_id for v in self.victims]
        return self.d


def priority_admit(view: ClusterView, order: Iterable[JobView], placer) -> Decision:
    """Run jobs in the priority order `order` (every active job) as one Admission round."""
    order = list(order)
    rank = {j.job_id: k for k, j in enumerate(order)}
    rounds = Admission(
        view, [j for j in order if j.status == "running"], lambda j: rank[j.job_id], placer
    )
    for job in order:
        if job.status != "running":
            rounds.start(job)
    return rounds.decision()

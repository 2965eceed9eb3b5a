"""DRF: Dominant Resource Fairness by progressive filling (Ghodsi et al., NSDI'11; seed 002).

Seed 002, "Dominant Resource Fair (DRF) Scheduling Algorithm" and its Table 1: a user's dominant
share is the largest of its shares of each resource; "DRF repeatedly selects the user with the
lowest dominant share ... to launch a task, until no more tasks can be allocated". Placement is
load-balanced, as in Optimus' evaluation of DRF (seed 002: "DRF applies load balancing when doing
task placement"; "DRF is work-conserving and allocates as many resources to a job as possible").

Choices where the sources leave room (each one is a knob or stated here):
- Who is a "user": each job by default (`per="job"`, as in Optimus' evaluation, where DRF equalises
  jobs); `per="user"` pools the jobs of a JobView.user, picks the user with the lowest dominant
  share and gives the task to that user's job with the lowest dominant share (two-level DRF).
- Resources: CPU, memory and GPUs (GPUs only on clusters that have them), shares of the cluster
  totals, the same dominant share the simulator's fairness metrics use. Bandwidth caps still limit
  where a task fits (placers.Capacity) but are not a DRF share.
- Weighted DRF (`weighted=True`): the dominant share is divided by the job's JobView.weight
  (Ghodsi §5.1 with one weight per user for every resource); with `per="user"` a user's jobs must
  agree on the weight.
- A task that fits nowhere: the job is skipped for the rest of the round and the filling goes on
  with the others (work-conserving). Ghodsi's Algorithm 1 stops ("the cluster is full"), which is
  the same thing on one resource pool, but on many nodes with tasks of different shapes stopping
  would leave free resources that other jobs' tasks fit. A job also stops at `max_tasks` tasks
  (default 64, within the joint env's `max_tasks_per_job`, so every DRF decision is expressible there;
  DL2's DRF by Optimus' authors caps workers per job the same way).
- PS and workers: a task is a PS or a worker (an all-reduce job takes workers only). A job starting from nothing gets a worker, then a PS
  (the smallest runnable job); after that the next task keeps the ratio the job asked for: a PS
  when p / w is below p_req / w_req, else a worker. A pending job that cannot get both a worker and
  a PS gives its task back and the round is filled again without it (it waits, holding nothing).
- Non-preemptive: running jobs keep their tasks; each decision point fills what is free, starting
  from the shares jobs hold now (as Mesos / YARN run DRF). Growing a running job costs the
  simulator's checkpoint pause.
- Ties: the earliest-arrived job (user: its earliest job) first.

Scale (Philly, all VCs: thousands of jobs, issue 14), decisions as the plain filling's
(tests/test_baseline_drf.py pins them): the filling keeps the users in a heap on (dominant share,
order) — only the user that just got a task changes its share, so the heap pops the same user the
scan over every user did; a task demand that fitted nowhere fits nowhere for the rest of the
filling (free capacity only shrinks in it), so later jobs with it are skipped without placing; and
a running job's view is kept from the first decision point that sees it running until this
scheduler changes it (grows it), its held resources summed once: a running job's tasks change only
by a decision (the engine rebuilds a running job's view at every read, its progress moves). A
caller that applies decisions of its own to running jobs between this scheduler's decision points
must call reset().
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_bool, check_int
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity, get_placer


@dataclass(frozen=True)
class Pick:
    """One row of the progressive filling (seed 002, Table 1): who got which task where, the
    picked user's resource shares and the cluster's allocated fractions after it."""

    job_id: str
    user: str  # the DRF user: the job id with per="job"
    role: str  # "ps" | "worker"
    node: int
    share: tuple[float, ...]  # the user's share of each resource (cpu, mem[, gpu])
    used: tuple[float, ...]  # fraction of each resource allocated in the cluster

    @property
    def dominant(self) -> float:
        return max(self.share)


@dataclass
class _Job:
    view: JobView
    order: int
    base: tuple[int, int]  # (p, w) it already runs with; (0, 0) when pending
    held: tuple[float, ...]  # (cpu, mem[, gpu]) its tasks hold, as Python floats
    ps: list[int] = field(default_factory=list)  # nodes of PS added this round
    workers: list[int] = field(default_factory=list)
    open: bool = True

    @property
    def counts(self) -> tuple[int, int]:
        return self.base[0] + len(self.ps), self.base[1] + len(self.workers)

    def next_role(self) -> str:
        """Worker first, then a PS, then the requested PS:worker ratio; all-reduce jobs have
        workers only."""
        p, w = self.counts
        if w == 0 or self.view.comm == "allreduce":
            return "worker"
        p_req, w_req = self.view.requested
        return "ps" if p == 0 or p * w_req < w * p_req else "worker"


class DRF(Scheduler):
    name = "drf"

    def __init__(
        self,
        weighted: bool = False,
        per: str = "job",
        placer: str = "spread",
        max_tasks: int = 64,
    ):
        if per not in ("job", "user"):
            raise ValueError(f"per must be 'job' or 'user', got {per!r}")
        check_bool(weighted, "weighted", type(self).__name__)
        check_int(max_tasks, "max_tasks", type(self).__name__, ge=2, note="a PS and a worker")
        self.weighted = weighted
        self.per = per
        self.placer = get_placer(placer)
        self.max_tasks = max_tasks
        self._seen: dict[str, tuple[JobView, tuple[float, ...]]] = {}  # job id -> (view, held)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._seen = {}

    def decide(self, view: ClusterView) -> Decision:
        d = Decision()
        for job in self._plan(view)[1]:
            if not (job.ps or job.workers):
                continue
            jid, (p0, w0), (p, w) = job.view.job_id, job.base, job.counts
            self._seen.pop(jid, None)  # changed by this decision: read its view again
            if (p, w) != (job.view.num_ps, job.view.num_workers):
                d.allocate[jid] = (p, w)
            for i, n in enumerate(job.ps):
                d.place[f"{jid}/ps{p0 + i}"] = n
            for i, n in enumerate(job.workers):
                d.place[f"{jid}/w{w0 + i}"] = n
        return d

    def fill(self, view: ClusterView) -> list[Pick]:
        """Progressive filling of what is free now: the picks in order (seed 002, Table 1 rows)."""
        return self._plan(view)[0]

    def _plan(self, view: ClusterView) -> tuple[list[Pick], list[_Job]]:
        c = view.cluster
        gpu = c.n_gpus > 0
        totals = np.array([c.cpus.sum(), c.memory.sum()] + ([c.n_gpus] if gpu else []), float)
        active = self._views(view, len(totals), gpu)
        excluded: set[str] = set()
        while True:
            picks, jobs = self._fill(view, active, totals, excluded)
            stuck = {j.view.job_id for j in jobs
                     if (j.ps or j.workers) and min(j.counts) < 1 and j.view.comm == "ps"}
            if not stuck:
                return picks, jobs
            excluded |= stuck  # pending jobs that got a worker but no PS: refill without them

    def _views(self, view: ClusterView, n: int, gpu: bool) -> list[tuple[JobView, tuple[float, ...]]]:
        """(view, resources its placed tasks hold) of every active job in arrival order; a
        running job's kept from the first decision point that sees it running (module docstring),
        a pending job's as long as the engine keeps its view (until the job changes)."""
        running = set(view.running.job_ids())
        prev, self._seen = self._seen, {}
        out = []
        for k, jid in enumerate(view.jobs.job_ids()):
            got = prev.get(jid) if jid in running else None
            if got is None or got[0].status != "running":
                jv = view.jobs[k]
                got = prev.get(jid)
                if got is None or got[0] is not jv:
                    got = (jv, tuple(sum((self._vec(t.demand, gpu) for t in jv.tasks
                                          if t.node >= 0), np.zeros(n)).tolist()))
            self._seen[jid] = got
            out.append(got)
        return out

    @staticmethod
    def _vec(dem: Demand, gpu: bool) -> np.ndarray:
        return np.array([dem.cpu, dem.mem_gb] + ([dem.gpu] if gpu else []), float)

    # ------------------------------------------------------------------ the filling
    def _fill(
        self, view: ClusterView, active: list[tuple[JobView, tuple[float, ...]]],
        totals: np.ndarray, excluded: set[str],
    ) -> tuple[list[Pick], list[_Job]]:
        """The filling. Shares are worked in Python floats, element by element in numpy's order
        (a sum from 0.0, then / totals, then the largest): the same doubles as numpy arrays gave,
        without a numpy call per share of 2-3 numbers (thousands of jobs per decision point at
        Philly scale)."""
        c = view.cluster
        gpu = c.n_gpus > 0
        cap = Capacity.of(view)
        used = (totals - np.array(
            [cap.cpu.sum(), cap.mem.sum()] + ([cap.gpu.sum()] if gpu else []), float
        )).tolist()
        tot = totals.tolist()
        zero = [0.0] * len(tot)
        jobs: list[_Job] = []
        groups: dict[str, list[_Job]] = {}
        for k, (jv, held) in enumerate(active):
            if jv.job_id in excluded:
                continue
            running = jv.status == "running"
            job = _Job(jv, k, (jv.num_ps, jv.num_workers) if running else (0, 0), held)
            jobs.append(job)
            groups.setdefault(jv.job_id if self.per == "job" else jv.user, []).append(job)
        weight = {g: self._weight(g, js) for g, js in groups.items()}

        def share(js: list[_Job]) -> list[float]:
            acc = zero
            for j in js:
                acc = [a + h for a, h in zip(acc, j.held)]
            return [a / t for a, t in zip(acc, tot)]

        def key(g: str) -> tuple[float, int, str]:
            return max(share(groups[g])) / weight[g], groups[g][0].order, g

        # Seed 002 Table 1: the user with the lowest (weighted) dominant share goes next. Only
        # the user served in a round changes, so a heap of the live users (one entry each, keys
        # unique by order) pops what a scan of them all would pick.
        heap = [key(g) for g in groups]
        heapq.heapify(heap)
        full: set[tuple[float, float, float, float]] = set()  # demands that fitted nowhere
        picks: list[Pick] = []
        while heap:
            g = heapq.heappop(heap)[2]
            js = groups[g]
            job = js[0] if len(js) == 1 else min(
                (j for j in js if j.open),
                key=lambda j: (max([h / t for h, t in zip(j.held, tot)]), j.order),
            )
            if sum(job.counts) >= self.max_tasks:
                job.open = False
            else:
                role = job.next_role()
                dem = job.view.ps_demand if role == "ps" else job.view.worker_demand
                need = (dem.cpu, dem.mem_gb, dem.bw_MBps, dem.gpu)
                node = -1 if need in full else self.placer(c, cap, dem, job.ps + job.workers)
                if node < 0:  # fits nowhere: skip this job, keep filling the others
                    full.add(need)
                    job.open = False
                else:
                    cap.take(node, dem)
                    (job.ps if role == "ps" else job.workers).append(node)
                    v = (float(dem.cpu), float(dem.mem_gb)) + ((float(dem.gpu),) if gpu else ())
                    job.held = tuple(h + x for h, x in zip(job.held, v))
                    used = [u + x for u, x in zip(used, v)]
                    picks.append(
                        Pick(
                            job.view.job_id,
                            g,
                            role,
                            node,
                            tuple(share(js)),
                            tuple(u / t for u, t in zip(used, tot)),
                        )
                    )
            if any(j.open for j in js):
                heapq.heappush(heap, key(g))
        return picks, jobs

    def _weight(self, group: str, jobs: list[_Job]) -> float:
        if not self.weighted:
            return 1.0
        ws = {j.view.weight for j in jobs}
        if len(ws) > 1:
            raise ValueError(f"weighted DRF per user: user {group!r} has jobs with weights {sorted(ws)}")
        return ws.pop()

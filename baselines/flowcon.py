"""FlowCon (seed 004): soft CPU limits per container from its growth efficiency, recomputed on a timer
with exponential back-off, and at once when a container arrives or leaves.

Paper -> code:
- Eq. (1) progress score P and Eq. (2) growth efficiency G = P / R per measurement interval (see
  below), from each job's *observed* loss and the CPU it used (`_efficiency`).
- Algorithm 1 (`algorithm1`): lines 2-13 move containers between NL / WL / CL by the threshold alpha;
  line 14-17 everything free (limit 1) and itval doubled when all are in CL; lines 18-26 limits from
  efficiency shares, the CL lower bound 1/(beta * n), WL limits unchanged.
- Algorithm 2 (`decide`): a container arriving (added to NL) or leaving resets itval to its initial
  value and reruns Algorithm 1; otherwise Algorithm 1 runs when itval has elapsed.
- Limits go out as `Decision.cpu_limits` (soft, work-conserving: Sec. 4.1 `docker update --cpus`).
- FlowCon's timer: each decision asks the engine to wake it when the earliest node's itval has
  elapsed (`Decision.wake_at`), so Algorithm 1 runs on time whatever the scenario's tick (before,
  it waited for the next engine decision point: up to a 600 s tick, or the next arrival or exit on
  a tick-less scenario, against itval = 20 s). `wake=False` keeps that (no Gym env can express a
  wake-up, so that is how FlowCon runs through dlclusterenv.adapter).

Choices where the paper is ambiguous (each one is the reading the paper's numbers support):
- E(t) is the loss at the job's current iteration. FlowCon's container monitor reads the loss the
  job logs as it trains; the simulator reports it at epoch ends only, so E(t) is read off the
  observed epoch-end points and the job's iteration counter (steps_done), linearly past the last
  point with the slope of the last two (`_loss_now`). Taking the last point as is would show no
  progress in every interval in which no epoch ended and demote slow-epoch jobs for that alone;
  so a job with one point has no E yet (it read as P = 0 and was demoted, NL -> WL -> CL, between
  its first and second epoch ends). A container's G is measurable once it had an E at the
  previous run.
- G is measured per interval (issue 12): P = |E(t_i) - E(t_{i-1})| / E(t_{i-1}), the loss's relative
  change over the measurement interval t_{i-1}..t_i (the time since Algorithm 1 last ran on the
  worker), and G = P / R with R the container's average share of the node's cores over that
  interval (Eq. 2: "the average resource usage of c_id within the interval"; a fraction, like the
  limits). So alpha = 0.05 reads "the loss fell by 5% of itself in this interval, per whole node",
  the sense in which Eq. 3 maximises the sum of G "in each interval" and Table 2 varies alpha from
  1% to 15%. Eq. 1's division by t_i - t_{i-1} is left out: taken per second, every G measured on
  the zoo's models was below ~0.03, under every alpha in Table 2, and alpha did nothing. Relative,
  not absolute: the models' losses live on different scales (a VAE's reconstruction loss ~100, a
  cross entropy ~0.3), and the paper compares every G with one alpha given in percent and splits
  limits by G / sum(G) across models. Consequences of the per-interval reading: an interval cut
  short by a listener (Alg. 2) measures less growth, and an interval lengthened by the back-off
  more, which can bring a container back to NL.
- A container whose G cannot be measured yet (new, or without two loss points) stays in NL, free:
  limit 1 (Alg. 2 line 7, Sec. 5.3: the new MNIST is set to 1). In the shares of the others it
  counts as "young and quickly growing", G := max(alpha, the largest measured G on the worker), so
  that, as in Sec. 5.3 when MNIST arrives at 40 s, a VAE in CL gets 0.25 = 1/(beta * 2)
  (tests/test_baseline_flowcon.py sets that state; end to end the simulated VAE is not yet in CL
  at 40 s: its loss is known only from its first epoch end on, so it has had one move, NL -> WL).
- beta = 2: the only value consistent with that example (VAE at 1/(beta * n) = 0.25 with n = 2).
- Defaults alpha = 5%, itval = 20 s: the setting of Sec. 5.3 / Fig. 7.
- A "worker" of the paper is a node; each node runs its own lists and timer. A container is a job's
  worker tasks on that node; its limit L is split evenly over them (L / k each). R counts all of the
  job's tasks on the node.
- Arrival and departure are detected as sets of container ids, not only by the count difference of
  Alg. 2 line 4, so a container arriving while another leaves still triggers both listeners.
- Placement is NA's (baselines/na.py): containers start at once where they fit, least-loaded node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlclusterenv.api import ClusterView, Decision, JobView
from dlclusterenv.checks import check_bool, check_real

from .na import NA


@dataclass
class WorkerState:
    """FlowCon's state on one worker node (Alg. 1 line 1, Alg. 2 line 1)."""

    itval: float
    last_run: float = 0.0
    nl: list[str] = field(default_factory=list)
    wl: list[str] = field(default_factory=list)
    cl: list[str] = field(default_factory=list)
    limit: dict[str, float] = field(default_factory=dict)
    e_prev: dict[str, float | None] = field(default_factory=dict)  # E(t_{i-1}) per container
    used: dict[str, float] = field(default_factory=dict)  # integral of R since the last run
    since: dict[str, float] = field(default_factory=dict)  # start of the container's interval

    def members(self) -> list[str]:
        return self.nl + self.wl + self.cl

    def add(self, c: str, now: float) -> None:
        """Alg. 2 lines 6-7: a new container goes to NL, free (limit 1)."""
        self.nl.append(c)
        self.limit[c] = 1.0
        self.e_prev[c] = None
        self.used[c] = 0.0
        self.since[c] = now

    def remove(self, c: str) -> None:
        """Alg. 2 lines 11-15: forget a finished container, releasing its limit."""
        for lst in (self.nl, self.wl, self.cl):
            if c in lst:
                lst.remove(c)
        for d in (self.limit, self.e_prev, self.used, self.since):
            d.pop(c, None)


def algorithm1(
    s: WorkerState, g: dict[str, float], alpha: float, beta: float, young: frozenset[str] = frozenset()
) -> None:
    """FlowCon Algorithm 1 on one worker: move containers between lists, then set their limits.

    `g` holds every container's growth efficiency G (Eq. 2). `young` are containers whose G cannot
    be measured yet (new, no interval of their own behind them): they stay in NL, free (limit 1,
    Alg. 2 line 7 and Sec. 5.3: the new MNIST is set to 1), and count in the shares of the others at
    their presumed G (`presume`). Updates `s` in place."""
    for c in s.members():  # lines 2-13
        if c in young:
            continue
        if g[c] < alpha and c in s.nl:
            s.nl.remove(c)
            s.wl.append(c)
        elif g[c] < alpha and c in s.wl:
            s.wl.remove(c)
            s.cl.append(c)
        elif g[c] >= alpha:
            if c not in s.nl:
                s.nl.append(c)
            if c in s.wl:
                s.wl.remove(c)
            if c in s.cl:
                s.cl.remove(c)
    members = s.members()
    if members and len(s.cl) == len(members):  # lines 14-17: all converging, compete freely
        for c in members:
            s.limit[c] = 1.0
        s.itval *= 2.0
        return
    total = sum(g[c] for c in members)
    floor = 1.0 / (beta * len(members))
    for c in members:  # lines 18-26
        share = float(g[c] / total) if total > 0 else 0.0
        if c in young:
            s.limit[c] = 1.0  # new: unlimited until measured (Sec. 5.3)
        elif c in s.cl:
            s.limit[c] = max(share, floor)  # lines 20-22
        elif c in s.nl:
            s.limit[c] = share  # line 26
        # WL: limit unchanged (line 24)


def presume(measured: dict[str, float | None], alpha: float) -> dict[str, float]:
    """G for every container: one not measurable yet (None) is presumed young and quickly growing,
    at max(alpha, the largest measured G)."""
    presumed = max([alpha, *(v for v in measured.values() if v is not None)])
    return {c: presumed if v is None else v for c, v in measured.items()}


class FlowCon(NA):
    name = "flowcon"

    def __init__(self, alpha: float = 0.05, itval: float = 20.0, beta: float = 2.0, placer: str = "spread",
                 wake: bool = True):
        """`wake=False`: no wake-up asked for (Algorithm 1 runs at the engine's next decision point
        once itval has elapsed), for front doors that cannot express one (the Gym adapter)."""
        for field_, v in (("alpha", alpha), ("itval", itval), ("beta", beta)):
            check_real(v, field_, type(self).__name__, gt=0)
        check_bool(wake, "wake", type(self).__name__)
        super().__init__(placer)
        self.alpha, self.itval0, self.beta, self.wake = alpha, itval, beta, wake

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.workers: dict[int, WorkerState] = {}
        self._last_t = 0.0
        # each running job's tasks by node: node -> (a worker there: a container, its tasks'
        # ids in the job's task order), read from its view once as it starts running (FlowCon
        # never moves or resizes a running job), with the running ids it was kept for
        self._layout: dict[str, dict[int, tuple[bool, list[str]]]] = {}
        self._running_ids: list[str] | None = None

    def decide(self, view: ClusterView) -> Decision:
        d = self.place_pending(view, Decision())
        now = view.time
        containers = self._containers(view, d)
        cpus = view.cluster.cpus
        dt = now - self._last_t
        cores = view.task_cores()
        views: dict[str, JobView] = {}  # the job views read at this decision point
        for node in sorted(set(containers) | set(self.workers)):
            here = containers.get(node, {})
            s = self.workers.setdefault(node, WorkerState(itval=self.itval0, last_run=now))
            for c, tids in here.items():  # integrate R since the last decision point
                if c in s.used:
                    used = sum(cores.get(t, 0.0) for t in tids)
                    s.used[c] += used / cpus[node] * dt
            old = set(s.members())
            arrived, left = [c for c in here if c not in old], old - set(here)
            for c in sorted(left):
                s.remove(c)
            for c in arrived:
                s.add(c, now)
            if arrived or left:  # Alg. 2 lines 8 and 16: reset the back-off, run Alg. 1 now
                s.itval = self.itval0
            elif now - s.last_run < s.itval - 1e-9:
                continue
            if s.members():
                for c in s.members():
                    if c not in views:
                        views[c] = view.job(c)
                jobs = {c: views[c] for c in s.members()}
                self._run(s, jobs, now)
                self._emit(d, node, s, jobs)
        if self.wake:  # Alg. 2's timer: the next run of Alg. 1 on any node
            d.wake_at = min((s.last_run + s.itval for s in self.workers.values() if s.members()),
                            default=None)
        self._last_t = now
        return d

    def _containers(self, view: ClusterView, d: Decision) -> dict[int, dict[str, list[str]]]:
        """node -> {job id: the ids of its tasks there} for every job with a worker task there
        once `d` is applied: the running jobs in arrival order, then the pending ones. (Only the
        order of a node's new containers counts, as they join NL; those are the pending jobs `d`
        places, in arrival order.) A running job's tasks are read once (its layout, kept while
        the running jobs are the same), a pending one's as `d` places it."""
        ids = view.running.job_ids()
        if ids is not self._running_ids:
            known, self._layout = self._layout, {}
            for k, jid in enumerate(ids):
                lay = known.get(jid)
                self._layout[jid] = lay if lay is not None else _layout(view.running[k], {})
            self._running_ids = ids
        placed = []  # (job id, node, its task ids there) of the pending jobs with a worker placed
        for job in view.pending:
            placed += [(job.job_id, n, tids) for n, (w, tids) in _layout(job, d.place).items() if w]
        out: dict[int, dict[str, list[str]]] = {}
        for jid in ids:
            for node, (w, tids) in self._layout[jid].items():
                if w:
                    out.setdefault(node, {})[jid] = tids
        for jid, node, tids in placed:
            out.setdefault(node, {})[jid] = tids
        return out

    def _efficiency(self, s: WorkerState, c: str, job: JobView, now: float) -> float | None:
        """Eq. (1)-(3): G = P / R over the interval since the last run, P the loss's relative change
        in that interval; None if not measurable."""
        e_now = _loss_now(job)
        e_prev = s.e_prev.get(c)
        span = now - s.last_run
        if e_now is None or e_prev is None or span <= 0:
            return None
        p = abs(e_now - e_prev) / e_prev if e_prev > 0 else 0.0
        r = s.used[c] / max(now - s.since[c], 1e-12)
        if r <= 0:
            return None if p > 0 else 0.0
        return float(p / r)

    def _run(self, s: WorkerState, here: dict[str, JobView], now: float) -> None:
        measured = {c: self._efficiency(s, c, here[c], now) for c in s.members()}
        young = frozenset(c for c, v in measured.items() if v is None)
        algorithm1(s, presume(measured, self.alpha), self.alpha, self.beta, young)
        s.last_run = now
        for c in s.members():  # the next interval starts here
            job = here[c]
            s.e_prev[c] = _loss_now(job)
            s.used[c] = 0.0
            s.since[c] = now

    def _emit(self, d: Decision, node: int, s: WorkerState, here: dict[str, JobView]) -> None:
        """Each container's limit L, split evenly over its worker tasks on the node."""
        for c in s.members():
            tasks = [
                t for t in here[c].tasks
                if t.role == "worker" and int(d.place.get(t.task_id, t.node)) == node
            ]
            for t in tasks:
                lim = s.limit[c] / len(tasks)
                if abs(lim - t.cpu_limit) > 1e-12:
                    d.cpu_limits[t.task_id] = lim


def _layout(job: JobView, place: dict) -> dict[int, tuple[bool, list[str]]]:
    """node -> (a worker of the job there, the ids of its tasks there in task order), with the
    tasks `place` moves where it puts them."""
    lay: dict[int, tuple[bool, list[str]]] = {}
    for t in job.tasks:
        node = int(place.get(t.task_id, t.node))
        if node >= 0:
            w, tids = lay.get(node, (False, []))
            lay[node] = (w or t.role == "worker", [*tids, t.task_id])
    return lay


def _loss_now(job: JobView) -> float | None:
    """E(t): the loss at the job's current iteration, read off its observed epoch-end points and its
    iteration counter (linear in epochs past the last point, with the slope of the last two); None
    before two points."""
    pts = job.observed_loss
    if len(pts) < 2:  # no slope yet: the last point would read as no progress (module docstring)
        return None
    k1, l1 = pts[-1]
    k0, l0 = pts[-2]
    x = job.steps_done / job.steps_per_epoch
    return max(l1 + (l1 - l0) / (k1 - k0) * (x - k1), 0.0)

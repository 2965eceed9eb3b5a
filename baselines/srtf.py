"""SRTF (oracle): shortest remaining time first, with the engine's true remaining steps and speed.

Named as an oracle (`srtf-oracle`): it reads view.oracle, which no real scheduler has. It is the
size-based upper bound that Tiresias (Gu et al., NSDI'19, §2 and the authors' simulator
`shortest_first_sim_jobs`) and DL2 (srtf_env.py, by Optimus' authors) compare against: every job
is ranked by its remaining time, and a job with less remaining time preempts running jobs with more.

Choices where the sources leave room:
- Remaining time = oracle local batches left at the job's size (its remaining steps, divided by the
  statistical efficiency where the scenario has one) / oracle speed of the job alone with its placement: the
  placement it runs on, or for a waiting job the one the placer would give it on an empty cluster
  (the speed it would reach; contention with other jobs is left out, as in both references).
- Jobs keep the (p, w) they asked for, as in Tiresias' simulator (DL2's SRTF instead grows jobs to
  a maximum worker count; resizing is left to Optimus-style schedulers here).
- Admission and preemption as Tiresias' loop (tiresias.priority_admit): in rank order, a job that
  does not fit on the nodes is skipped, and a waiting job preempts only lower-ranked running jobs,
  the lowest first and only as many as it needs. `preemptive=False` never preempts (SRPT without
  preemption, i.e. SJF on remaining time), which the Gym envs can express.
- Placement consolidated (`placer="pack"`), as for Tiresias: the authors' simulator gives every
  policy the same placement, and an oracle bound should not lose to a poor one.
- Ties: the earlier arrival.
"""

from __future__ import annotations

import math

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_bool
from dlclusterenv.placers import Capacity, get_placer, place_job

from .tiresias import priority_admit


class SRTFOracle(Scheduler):
    name = "srtf-oracle"
    oracle = True

    def __init__(self, placer: str = "pack", preemptive: bool = True):
        self.preemptive = check_bool(preemptive, "preemptive", type(self).__name__)
        self.placer = get_placer(placer)
        self._speed: dict[tuple, float] = {}

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._speed = {}

    def remaining_s(self, view: ClusterView, job: JobView) -> float:
        if job.status == "running":
            ps = [t.node for t in job.tasks if t.role == "ps"]
            ws = [t.node for t in job.tasks if t.role == "worker"]
        else:
            empty = Capacity(
                view.cluster.cpus.copy(), view.cluster.memory.copy(),
                view.cluster.nic.copy(), view.cluster.gpus.astype(int),
            )
            got = place_job(
                view.cluster, empty, self.placer, job.ps_demand, job.worker_demand,
                job.num_ps, job.num_workers,
            )
            if got is None:  # fits nowhere even alone: it can never run, so it ranks last
                return math.inf
            ps, ws = got
        key = (job.job_id, tuple(ps), tuple(ws))
        if key not in self._speed:  # the true speed of a placement never changes
            self._speed[key] = view.oracle.speed(job.job_id, ps, ws)
        # the true time left: local batches still to process at its size (statistical efficiency
        # included, efficiency.py) over its true speed
        return view.oracle.remaining_batches(job.job_id, len(ws)) / self._speed[key]

    def decide(self, view: ClusterView) -> Decision:
        rank = {j.job_id: (self.remaining_s(view, j), k) for k, j in enumerate(view.jobs)}
        order = sorted(view.jobs, key=lambda j: rank[j.job_id])
        if not self.preemptive:  # running jobs are never displaced: they go first
            order = [j for j in order if j.status == "running"] + [
                j for j in order if j.status != "running"
            ]
        return priority_admit(view, order, self.placer)

"""FAIR: the Hadoop/YARN Fair Scheduler, D²S's comparator (seed 001 §4.1: "two application-aware
schedulers, FIFO and FAIR").

Hadoop's fair scheduler gives every job an equal share of the task slots (Zaharia et al., EuroSys'10,
Algorithm 1, fair sharing without delay scheduling): whenever a slot is free it goes to the job with
the fewest running tasks that still has a task to launch. Jobs that want less than an equal share
keep only what they want and the rest is shared among the others (max-min fairness, capped by
demand).

Choices where the sources leave room:
- A slot is a worker (a GPU on GPU clusters, a worker's cores on CPU ones): a worker is a map task
  that reads one input shard (D²S's applications). PS come with the workers in the ratio the job
  asked for: a job's first slot is a worker plus a PS (the smallest job that can run), each later
  slot a worker plus a PS whenever p falls below ceil(p_req * w / w_req).
- Demand: a job has the (p, w) it asked for and never gets more (Hadoop launches the tasks a job
  has); a job with fewer than it asked for grows as slots free up (costing the simulator's
  checkpoint pause, as a restart with more workers would).
- Ties between jobs with equal running tasks (divided by JobView.weight, Hadoop's job weights) go to
  the earlier arrival.
- A job whose next slot fits nowhere is skipped and the others go on (a free slot is offered to the
  next job in the sorted order); no delay scheduling and no locality preference, which is why D²S
  finds FAIR among the worst at data locality (seed 001 Table 1). Tasks go where the placer puts
  them: by default FIFO's `Heartbeat` (baselines/fifo.py), the node asking for work while it has a
  free slot, else a random node with one; D²S §4.2: "within a smaller cluster, FAIR applies the same
  rule to assign tasks as FIFO". (Hadoop's fair scheduler gives one task per heartbeat unless
  assignmultiple is set; the paper's "same rule" is followed.)
- Non-preemptive: the fair scheduler's preemption timeouts are off by default in Hadoop.
"""

from __future__ import annotations

import math

from dlclusterenv.api import ClusterView, Decision
from dlclusterenv.placers import Capacity

from .fifo import FIFO


class FAIR(FIFO):
    name = "fair"

    def __init__(self, placer: str = "heartbeat"):
        super().__init__(placer)

    def decide(self, view: ClusterView) -> Decision:
        place = self._round()
        c = view.cluster
        cap = Capacity.of(view)
        base, added, order = {}, {}, {}
        for k, job in enumerate(view.jobs):
            running = job.status == "running"
            base[job.job_id] = (job.num_ps, job.num_workers) if running else (0, 0)
            added[job.job_id] = ([], [])  # nodes of new PS, new workers
            order[job.job_id] = k
        jobs = {j.job_id: j for j in view.jobs}
        open_ = {jid for jid, j in jobs.items() if base[jid][1] < j.requested[1]}

        def workers(jid: str) -> int:
            return base[jid][1] + len(added[jid][1])

        while open_:
            # Zaharia et al. Alg. 1: the free slot goes to the job with the fewest running tasks.
            jid = min(open_, key=lambda j: (workers(j) / jobs[j].weight, order[j]))
            job = jobs[jid]
            p_req, w_req = job.requested
            w = workers(jid) + 1
            p_have = base[jid][0] + len(added[jid][0])
            unit = ["worker"] + ["ps"] * max(0, math.ceil(p_req * w / w_req) - p_have)
            nodes = []
            for role in unit:
                dem = job.ps_demand if role == "ps" else job.worker_demand
                n = place(c, cap, dem, nodes)
                if n < 0:
                    break
                cap.take(n, dem)
                nodes.append(n)
            if len(nodes) < len(unit):  # the slot does not fit: give it back, skip this job
                for role, n in zip(unit, nodes):
                    cap.take(n, job.ps_demand if role == "ps" else job.worker_demand, -1)
                open_.discard(jid)
                continue
            for role, n in zip(unit, nodes):
                added[jid][0 if role == "ps" else 1].append(n)
            if w >= w_req:
                open_.discard(jid)
        d = Decision()
        for jid, (ps, ws) in added.items():
            if not ws and not ps:
                continue
            (p0, w0), job = base[jid], jobs[jid]
            p, w = p0 + len(ps), w0 + len(ws)
            if (p, w) != (job.num_ps, job.num_workers):
                d.allocate[jid] = (p, w)
            for i, n in enumerate(ps):
                d.place[f"{jid}/ps{p0 + i}"] = n
            for i, n in enumerate(ws):
                d.place[f"{jid}/w{w0 + i}"] = n
        return d

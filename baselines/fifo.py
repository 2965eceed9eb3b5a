"""FIFO: jobs start in arrival order with the (p, w) they asked for; head-of-line blocking.

The usual comparator of D²S and Optimus. A job that does not fit blocks every later job (strict
FIFO, as in YARN's FIFO scheduler); tasks go where the named placer puts them (default: spread).
"""

from __future__ import annotations

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.placers import Capacity, get_placer, place_job


class FIFO(Scheduler):
    name = "fifo"

    def __init__(self, placer: str = "spread"):
        self.placer = get_placer(placer)

    def decide(self, view: ClusterView) -> Decision:
        cap = Capacity.of(view)
        d = Decision()
        for job in view.pending:
            got = place_job(
                view.cluster, cap, self.placer, job.ps_demand, job.worker_demand,
                job.num_ps, job.num_workers,
            )
            if got is None:
                break
            for i, n in enumerate(got[0]):
                d.place[f"{job.job_id}/ps{i}"] = n
            for i, n in enumerate(got[1]):
                d.place[f"{job.job_id}/w{i}"] = n
        return d

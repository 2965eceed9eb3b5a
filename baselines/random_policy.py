"""Random placement: each pending job in arrival order, each task on a uniformly random node that
fits it (seeded by the episode seed); a job that does not fit waits and later jobs may go first."""

from __future__ import annotations

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.placers import Capacity, place_job


class RandomPlacement(Scheduler):
    name = "random"

    def _choose(self, cluster, cap, demand, job_nodes):
        ok = cap.fits(demand).nonzero()[0]
        return int(self.rng.choice(ok)) if len(ok) else -1

    def decide(self, view: ClusterView) -> Decision:
        cap = Capacity.of(view)
        d = Decision()
        for job in view.pending:
            got = place_job(
                view.cluster, cap, self._choose, job.ps_demand, job.worker_demand,
                job.num_ps, job.num_workers,
            )
            if got is None:
                continue
            for i, n in enumerate(got[0]):
                d.place[f"{job.job_id}/ps{i}"] = n
            for i, n in enumerate(got[1]):
                d.place[f"{job.job_id}/w{i}"] = n
        return d

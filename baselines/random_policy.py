"""Random placement: each pending job in arrival order, each task on a uniformly random node that
fits it (seeded by the episode seed); a job that does not fit waits and later jobs may go first."""

from __future__ import annotations

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.placers import start_pending


class RandomPlacement(Scheduler):
    name = "random"

    def _choose(self, cluster, cap, demand, job_nodes):
        ok = cap.fits(demand).nonzero()[0]
        return int(self.rng.choice(ok)) if len(ok) else -1

    def decide(self, view: ClusterView) -> Decision:
        return start_pending(view, self._choose, Decision(), blocking=False)

"""OTEA, D²S's comparator [16] (seed 001, §2 and §4.1): "optimizes tasks for each application" -
it picks, application by application, the nodes that give that application's tasks the shortest
data transfer, with no balancing across applications ("the time to balance applications is zero").

Per pending job in arrival order, each worker (map task) goes to the free node with the least
transfer time for its input split (D²S Eq. 1), then each PS (reduce task) to the free node with
the least transfer time from the job's workers (D²S Eq. 2). The cost model (bytes over the epoch
budget, path bandwidth, the job -> application mapping) is D²S's, imported from `baselines.d2s`,
so the two differ only in how they decide: greedy per application here, one global flow there.

Choices where the papers leave it open:
- Ties between nodes of equal transfer time are broken at random (episode seed).
- No waiting for a busy data-local node: OTEA takes the best free node now.
- A job is placed whole or not at all (the simulator runs a job only when every task is placed); a
  job that does not fit waits and later jobs may still go.
"""

from __future__ import annotations

import numpy as np

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.placers import Capacity, add_placement, place_job

from .d2s import bandwidth, ps_transfer, worker_transfer


class OTEA(Scheduler):
    name = "otea"

    def _best(self, cost: np.ndarray, ok: np.ndarray) -> int:
        """The free node of least transfer time, a random one among equals; -1 if none fits."""
        if not ok.any():
            return -1
        c = np.where(ok, cost, np.inf)
        best = np.flatnonzero(c <= c.min() * (1 + 1e-12))
        return int(best[0]) if len(best) == 1 else int(self.rng.choice(best))

    def decide(self, view: ClusterView) -> Decision:
        cap = Capacity.of(view)
        band = bandwidth(view.cluster)
        d = Decision()
        for job in view.pending:
            tt = worker_transfer(job, job.input_bytes_per_step, band)  # Eq. (1)
            w = job.num_workers
            got = place_job(
                view.cluster, cap,
                lambda c, cp, dem, nodes, tt=tt: self._best(tt[len(nodes)], cp.fits(dem)),
                job.ps_demand, job.worker_demand, job.num_ps, w,
                # Eq. (2): the PS' fetch time from the workers just placed
                ps_placer=lambda c, cp, dem, nodes, job=job, w=w: self._best(
                    ps_transfer(job, nodes[:w], band), cp.fits(dem)
                ),
            )
            if got is not None:
                add_placement(d, job.job_id, *got)
        return d

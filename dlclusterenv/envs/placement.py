"""DLClusterPlace: one pending PS or worker task per step, placed on a node or deferred.

Jobs keep the (p, w) they asked for; the policy only chooses where each task goes (DLTAP's and the
Kubernetes scheduler's problem). Tasks are offered job by job in arrival order, workers before PS
(the order DLTAP places them). Deferring a task skips it until the next decision point.
Action: Discrete(max_nodes + 1), index max_nodes = defer.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..api import Decision
from ..placers import Capacity
from .core import ClusterEnv


class PlacementEnv(ClusterEnv):
    def __init__(self, scenario="default", **kw):
        super().__init__(scenario, **kw)
        self.action_space = spaces.Discrete(self.max_nodes + 1)
        self.defer = self.max_nodes

    def _begin_round(self) -> None:
        self._queue = [
            (job, t.task_id)
            for job in self.slots()
            for t in job.worker_tasks() + job.ps_tasks()
            if t.node < 0
        ]
        self._queue.reverse()  # pop from the end

    def focal_task(self) -> str | None:
        return self._queue[-1][1] if self._queue else None

    def _focal(self):
        if not self._queue:
            return None, None
        job, tid = self._queue[-1]
        return job, job.tasks[tid].role

    def _round_over(self) -> bool:
        return not self._queue

    def _act(self, a: int) -> None:
        _, tid = self._queue.pop()
        if a != self.defer:
            self.sim.apply(Decision(place={tid: a}))

    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[self.defer] = True
        job, role = self._focal()
        if job is not None:
            d = job.model.ps if role == "ps" else job.model.worker
            mask[: self.cluster.n_nodes] = Capacity.of_sim(self.sim).fits(d)
        return mask

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
from ..jobs import Job
from ..placers import Capacity
from .core import ClusterEnv


class PlacementEnv(ClusterEnv):
    def __init__(self, scenario="default", **kw):
        super().__init__(scenario, **kw)
        self.action_space = spaces.Discrete(self.max_nodes + 1)
        self.defer = self.max_nodes

    def _begin_round(self) -> None:
        self._deferred: set[str] = set()

    def _queue(self) -> list[tuple[Job, str]]:
        out = []
        for job in self.slots():
            for t in job.worker_tasks() + job.ps_tasks():
                if t.node < 0 and t.task_id not in self._deferred:
                    out.append((job, t.task_id))
        return out

    def focal_task(self) -> str | None:
        q = self._queue()
        return q[0][1] if q else None

    def _focal(self):
        q = self._queue()
        if not q:
            return None, None
        job, tid = q[0]
        return job, job.tasks[tid].role

    def _round_over(self) -> bool:
        return not self._queue()

    def _act(self, a: int) -> None:
        tid = self.focal_task()
        if a == self.defer:
            self._deferred.add(tid)
        else:
            self.sim.apply(Decision(place={tid: a}))

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[self.defer] = True
        job, role = self._focal()
        if job is not None:
            d = job.model.ps if role == "ps" else job.model.worker
            mask[: self.cluster.n_nodes] = Capacity.of_sim(self.sim).fits(d)
        return mask

"""DLClusterPlace: one pending PS or worker task per step, placed on a node or deferred.

Jobs keep the (p, w) they asked for; the policy only chooses where each task goes (DLTAP's and the
Kubernetes scheduler's problem). Tasks are offered job by job in arrival order, workers before PS
(the order DLTAP places them). Deferring a task skips it until the next decision point.
Action: Discrete(max_nodes + 1), index max_nodes = defer. With `work_conserving=True` defer is
allowed only when the task fits on no node, as in the Kubernetes scheduler; without it a policy
can hold jobs back (and, rewarded on traffic alone, learns to never start them).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..placers import Capacity
from .core import Bool, ClusterEnv, Options


class PlacementOptions(Options):
    work_conserving: Bool = False


class PlacementEnv(ClusterEnv):
    """DLClusterPlace-v0: where each pending task goes; jobs keep the size they asked for.

    ## Action Space
    `Discrete(max_nodes + 1)`: the node for the focal task (`obs["task"]`), or `max_nodes` = defer
    it to the next decision point. Observation, rewards and episode end: see ClusterEnv.

    ## Arguments
    `work_conserving` (default False): defer only when the task fits on no node.
    """

    extra_options = PlacementOptions

    def __init__(self, scenario="default", work_conserving: bool = False, **kw):
        super().__init__(scenario, **kw)
        self.work_conserving = self._extra(work_conserving=work_conserving).work_conserving
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
            self.sim.place_one(tid, a)

    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        job, role = self._focal()
        if job is not None:
            d = job.model.ps if role == "ps" else job.model.worker
            mask[: self.cluster.n_nodes] = Capacity.of_sim(self.sim).fits(d)
        mask[self.defer] = not (self.work_conserving and mask.any())
        return mask

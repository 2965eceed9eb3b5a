"""NA: FlowCon's comparator (seed 004, Sec. 5.2), the "original Docker system" — every container
starts at once and all compete freely for the node's CPU (equal shares, no limits).

Choices where the paper is silent or the simulator differs:
- A job is one container: all its tasks are placed together (all or nothing) by the load-balancing
  placer (`spread`, the least-loaded node that fits), in arrival order. On FlowCon's single-node
  testbed this puts every job on that node.
- Docker starts a container however full the node is; the simulator reserves each task's CPU and
  memory demand, so a job that does not fit waits. It does not block later jobs (no head-of-line
  blocking: `docker run` does not queue behind other containers).
- No CPU limit is ever set: the engine's max-min fair split of the cores is NA's "uniform resource
  distribution among all containers in the worker" (Sec. 4.2).
"""

from __future__ import annotations

import operator

import numpy as np

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.placers import get_placer, start_pending


class NA(Scheduler):
    name = "na"

    def __init__(self, placer: str = "spread"):
        self.placer = get_placer(placer)
        self._idle: tuple | None = None  # what the last pass that started nothing saw

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._idle = None

    def decide(self, view: ClusterView) -> Decision:
        return self.place_pending(view, Decision())

    def place_pending(self, view: ClusterView, d: Decision) -> Decision:
        """Start every pending job that fits, in arrival order, skipping those that do not.

        A pass that started nothing is not made again while the pending jobs and the free
        resources stay the same: its result depends on those alone (the placers are
        deterministic; a pending job's view is the same object until the job changes). FlowCon's
        timer wakes it about 30x as often as jobs come and go on a Philly window."""
        pending = tuple(view.pending)
        free = (view.free_cpu, view.free_mem, view.free_bw, view.free_gpus)
        idle = self._idle
        if (idle is not None and idle[0] is view.cluster and len(idle[1]) == len(pending)
                and all(map(operator.is_, idle[1], pending))
                and all(map(np.array_equal, idle[2], free))):
            return d
        placed = len(d.place)
        start_pending(view, self.placer, d, blocking=False)
        self._idle = (view.cluster, pending, free) if len(d.place) == placed else None
        return d

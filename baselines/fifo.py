"""FIFO: jobs start in arrival order with the (p, w) they asked for; head-of-line blocking.

The usual comparator of D²S and Optimus. A job that does not fit blocks every later job (strict
FIFO, as in YARN's FIFO scheduler).

Placement (default `placer="heartbeat"`, `Heartbeat`): Hadoop's FIFO scheduler hands tasks to
whichever node asks for work with a free slot. D²S (seed 001 §4.2): "FIFO assigns tasks when there
is a node to issue a request for tasks ... the random manner makes it possible to get the optimal
assignment"; "within a smaller cluster, FAIR applies the same rule". A node that heartbeats is
given tasks, the head job's first, as long as it has a free slot for them (Hadoop 1
JobQueueTaskScheduler.assignTasks and YARN FifoScheduler.assignContainers fill the heartbeating node
before moving on); the next node to heartbeat is any node with a free slot, at random. So a small
job's PS lands beside its worker when the node has room, and jobs are not spread by design.
Choices: the order of heartbeats is drawn from the episode seed (`reset`); "a free slot" is a node
where the task's demand fits; no locality preference when picking which of a job's workers goes to
the node (the D²S paper has FIFO and FAIR as the worst at locality, Table 1).
Other placers by name (`spread`, `pack`, `consolidate`) remain available, e.g. to match the
allocation env's placer.
"""

from __future__ import annotations

import numpy as np

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.cluster import Cluster
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity, get_placer, start_pending


class Heartbeat:
    """Hadoop's task assignment on heartbeats: keep filling the node that asked for work while the
    task fits there, else move to a random node with a free slot. A placer (same call signature as
    dlclusterenv.placers); `start()` begins a new round of heartbeats (each decision point)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.node = -1

    def start(self) -> None:
        self.node = -1

    def __call__(self, cluster: Cluster, cap: Capacity, d: Demand, job_nodes: list[int]) -> int:
        ok = cap.fits(d)
        if self.node >= 0 and ok[self.node]:
            return self.node
        free = np.flatnonzero(ok)
        if len(free) == 0:
            return -1
        self.node = int(free[0] if len(free) == 1 else self.rng.choice(free))
        return self.node


def make_placer(name: str):
    """The named placer; None for "heartbeat", which the scheduler builds on its episode rng in
    reset() (see `Heartbeat`)."""
    if name == "heartbeat":
        return None  # built in reset(), once the episode's rng exists
    return get_placer(name, also=("heartbeat",))


class FIFO(Scheduler):
    name = "fifo"

    def __init__(self, placer: str = "heartbeat"):
        self.placer_name = placer
        self.placer = make_placer(placer)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        if self.placer_name == "heartbeat":
            self.placer = Heartbeat(self.rng)

    def _round(self):
        """The placer for this decision point (a new round of heartbeats)."""
        if self.placer is None:  # decide() without reset(): seed 0
            self.reset(0)
        if isinstance(self.placer, Heartbeat):
            self.placer.start()
        return self.placer

    def decide(self, view: ClusterView) -> Decision:
        return start_pending(view, self._round(), Decision(), blocking=True)

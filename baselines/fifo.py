"""FIFO: jobs start in arrival order with the (p, w) they asked for; head-of-line blocking.

The usual comparator of D²S and Optimus. A job that does not fit blocks every later job (strict
FIFO, as in YARN's FIFO scheduler); tasks go where the named placer puts them (default: spread).
"""

from __future__ import annotations

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.placers import get_placer, start_pending


class FIFO(Scheduler):
    name = "fifo"

    def __init__(self, placer: str = "spread"):
        self.placer = get_placer(placer)

    def decide(self, view: ClusterView) -> Decision:
        return start_pending(view, self.placer, Decision(), blocking=True)

"""Constant rules: every job started whole at one shape (p PS, w workers) by one placer.

Not a paper baseline: the reference row of a benchmark suite (issue 15). A scheduler that wins only
by picking a good constant size is not deciding; the suite compares heuristics and learned policies
with the best of a grid of these. Generalises `fixed-8x8` of benchmarks/learned_scheduler.py.

Choices: jobs start in arrival order, skipping one that does not fit now (backfill, like that
reference row); an all-reduce job has no PS, so it gets (0, w); a job is never resized or moved.
"""

from __future__ import annotations

from dlclusterenv.api import Decision, Scheduler
from dlclusterenv.checks import check_int
from dlclusterenv.placers import Capacity, add_placement, get_placer, place_job

PREFIX = "fixed-"


class FixedShape(Scheduler):
    """Start each pending job at (p, w) (all-reduce: (0, w)) where `placer` puts its tasks."""

    def __init__(self, p: int, w: int, placer: str = "consolidate"):
        check_int(p, "p", type(self).__name__, ge=1)
        check_int(w, "w", type(self).__name__, ge=1)
        self.p, self.w, self.placer = p, w, get_placer(placer)
        self.name = f"{PREFIX}{p}x{w}-{placer}"

    def decide(self, view) -> Decision:
        d, cap = Decision(), Capacity.of(view)
        for j in view.pending:
            p = self.p if j.comm == "ps" else 0
            got = place_job(view.cluster, cap, self.placer, j.ps_demand, j.worker_demand, p, self.w)
            if got is not None:
                d.allocate[j.job_id] = (p, self.w)
                add_placement(d, j.job_id, *got)
        return d


def parse(name: str) -> FixedShape:
    """`fixed-PxW-PLACER` -> FixedShape; anything else is a ValueError naming it."""
    try:
        shape, placer = name[len(PREFIX):].split("-", 1)
        p, w = (int(x) for x in shape.split("x"))
    except ValueError:
        raise ValueError(f"constant rule {name!r}: expected fixed-PxW-PLACER, e.g. fixed-2x8-spread") from None
    return FixedShape(p, w, placer)

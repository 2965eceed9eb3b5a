"""DRF lecture example (seed 002, Table 1): progressive filling on 9 CPUs / 18 GB with users A <1 CPU, 4 GB>
and B <3 CPU, 1 GB>. Claims: the pick order B, A, A, B, A; A ends with 3 tasks and B with 2; both dominant
shares are 2/3. The scenario is configs/scenarios/drf.yaml; the figures are read from the simulator after it
applied DRF's first decision (tasks placed per job), not from DRF's own bookkeeping.

Testbed observable besides the claims (issue 12): the table's last two columns, "CPU total alloc." 1
and "RAM total alloc." 14/18, read from the cluster's own accounting (its free CPUs and memory after
the decision, `ClusterView.free_cpu` / `free_mem`), not from the tasks' demands as the rows above:
a cluster preset or engine that counts capacity differently from 9 CPUs / 18 GB shows here."""

from __future__ import annotations

from fractions import Fraction

from dlclusterenv import make_sim

from ..drf import DRF
from . import Claim


def _frac(x: float) -> str:
    return str(Fraction(x).limit_denominator(1000))


def _used(free, total) -> str:
    """Share of a resource allocated, by the cluster's own count of what is free."""
    return _frac(1.0 - float(free.sum()) / float(total.sum()))


def _once(seed: int) -> dict[str, str]:
    sim = make_sim("drf", seed)
    drf = DRF(per="user")
    drf.reset(seed)
    view = sim.view()
    order = ", ".join(p.user for p in drf.fill(view))
    sim.decide(drf)
    after = sim.view()
    c = after.cluster
    out = {"order": order}
    for job in after.jobs:
        placed = [t for t in job.tasks if t.node >= 0]
        cpu = sum(t.demand.cpu for t in placed) / c.cpus.sum()
        mem = sum(t.demand.mem_gb for t in placed) / c.memory.sum()
        out[f"tasks {job.user}"] = str(len(placed))
        out[f"share {job.user}"] = _frac(max(cpu, mem))
    out["total"] = f"{_used(after.free_cpu, c.cpus)} / {_used(after.free_mem, c.memory)}"
    return out


def run(seeds: int = 3) -> list[Claim]:
    runs = [_once(s) for s in range(max(seeds, 1))]
    got = {k: runs[0][k] if all(r[k] == runs[0][k] for r in runs) else "varies" for k in runs[0]}
    paper = {
        "order": "B, A, A, B, A",
        "tasks A": "3",
        "tasks B": "2",
        "share A": "2/3",
        "share B": "2/3",
        "total": "1 / 7/9",
    }
    words = {
        "order": "users picked, in order (Table 1 rows)",
        "tasks A": "user A's tasks <1 CPU, 4 GB>",
        "tasks B": "user B's tasks <3 CPU, 1 GB>",
        "share A": "user A's dominant share (memory)",
        "share B": "user B's dominant share (CPU)",
        "total": "testbed: CPU / RAM total allocated, from the cluster's free capacity (Table 1, 1 / 14/18)",
    }
    return [Claim(words[k], paper[k], got[k], got[k] == paper[k], kind="testbed" if k == "total" else "claim")
            for k in paper]

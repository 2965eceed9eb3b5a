"""Why one constant wins suite v1 and why optimus-oracle is no upper bound (issue 15, README
"Benchmark suite"): counter-experiments on v1's instances, test split, the suite's own scenarios.

    nice python benchmarks/suite_diagnosis.py [--workers 2]

1. Scaling: a job's true speed alone (view.oracle.speed) at w workers on one 8-GPU node (PS jobs:
   p = w PS on the same node), per GPU, relative to w = 1; and at 16 workers over two nodes. Work is
   fixed in local batches (weak scaling, jobs.Job.total_steps) and no statistical-efficiency cost
   is modelled, so speed per GPU near 1 means a GPU given to a job is never wasted.
2. Load sweep on philly-6c71a0-nov (and `default`): the constant 8x8 vs DRF, Optimus and the two
   oracles at 0.5x-8x offered load: avg JCT, avg queueing delay and GPU utilisation. If the
   constant wins because the cluster is idle, its lead must shrink as the load rises.
3. Oracle objective: optimus-oracle's marginal gain (Q/f0 - Q/f1) / share grows with the remaining
   work Q, so at equal speed-up it feeds the *longest* job first, the opposite of SRPT; printed is
   the avg JCT of the shorter and the longer half of the jobs (by work alone on one GPU) under each
   policy, which shows whether short jobs pay for it.
About 33 CPU-s on main 6bedb58 (branch rerun8: 32.6 s wall with --workers 1 at load under 2);
70-85 CPU-s at branch hyg4 (43 s wall with 2 workers at load under 1, 153 s at load 6-8; 8.7 min
wall at 57d67e4).
"""

from __future__ import annotations

import argparse
import multiprocessing

import numpy as np

from dlclusterenv import make_sim
from dlclusterenv.api import Decision, Scheduler
from dlclusterenv.benchmark import instances, load_suite, make_scheduler

POLICIES = ("fixed-8x8-consolidate", "drf", "optimus", "srtf-oracle", "optimus-oracle")
SWEEP = {"philly-6c71a0-nov": (0.5, 1, 2, 4, 8), "default": (1, 4)}


class ScalingProbe(Scheduler):
    """fixed-8x8-consolidate, reading as an oracle each job's speed alone at several shapes when it
    is first pending."""

    name, oracle = "scaling-probe", True

    def __init__(self):
        self.rows: list[tuple[str, str, dict[int, float]]] = []
        self.seen: set[str] = set()
        self.inner = make_scheduler("fixed-8x8-consolidate")

    def decide(self, view) -> Decision:
        for j in view.pending:
            if j.job_id in self.seen:
                continue
            self.seen.add(j.job_id)
            ps = j.comm == "ps"
            speeds = {w: view.oracle.speed(j.job_id, [0] * w if ps else [], [0] * w) for w in (1, 2, 4, 8)}
            speeds[16] = view.oracle.speed(j.job_id, [0] * 8 + [1] * 8 if ps else [], [0] * 8 + [1] * 8)
            self.rows.append((j.model, j.comm, speeds))
        return self.inner.decide(view)


def scaling(inst) -> None:
    probe = ScalingProbe()
    _, sc, seed = inst.runs("test")[0]
    make_sim(sc, seed).run(probe)
    eff = {w: [] for w in (2, 4, 8, 16)}
    for _, _, s in probe.rows:
        for w in eff:
            eff[w].append(s[w] / (w * s[1]))
    print(f"\n1. scaling, {inst.key} (test seed {seed}, first window, {len(probe.rows)} jobs): speed per GPU "
          "relative to 1 worker, median [min, max]")
    for w, v in eff.items():
        where = "2 nodes" if w == 16 else "1 node"
        print(f"   w={w:>2} ({where}): {np.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]")


def _run(args):
    key, policy, sc, seed = args
    sim = make_sim(sc, seed)
    m = sim.run(make_scheduler(policy))
    work = {}  # seconds the job needs alone on one GPU (one PS on its node for a PS job)
    for r in m.jobs:
        j = sim.jobs[r.job_id]
        work[r.job_id] = j.total_steps / sim.isolated_speed(r.job_id, [0] if j.uses_ps else [], [0])
    return key, policy, m.summary(), [(work[r.job_id], r.jct_s) for r in sorted(m.jobs, key=lambda r: r.job_id)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    suite, path = load_suite("v1")
    base = {i.entry.name: i for i in instances(suite, path, say=lambda m: None) if i.load == 1}
    scaling(base["philly-6c71a0-nov"])
    scaling(base["default"])

    tasks = []
    for name, loads in SWEEP.items():
        b = base[name]
        for load in loads:
            inst = type(b)(f"{name}@{load:g}x", b.entry, load, b.base)
            for _, sc, seed in inst.runs("test"):
                tasks.extend((inst.key, p, sc, seed) for p in POLICIES)
    with multiprocessing.get_context("fork").Pool(a.workers) as pool:
        out = pool.map(_run, tasks)
    print("\n2. load sweep (test split; avg JCT s / avg queue s / GPU util; means over the split's runs)")
    keys = list(dict.fromkeys(k for k, *_ in out))
    print(f"   {'instance':<24}" + "".join(f"{p:>26}" for p in POLICIES))
    for k in keys:
        cells = []
        for p in POLICIES:
            ms = [m for kk, pp, m, _ in out if kk == k and pp == p]
            jct, q, u = (np.mean([m[f] for m in ms]) for f in ("avg_jct_s", "avg_queue_s", "gpu_util"))
            unf = sum(m["jobs_unfinished"] for m in ms)
            cells.append(f"{jct:>8,.0f}/{q:>6,.0f}/{u:>4.0%}" + ("*" if unf else " "))
        print(f"   {k:<24}" + "".join(f"{c:>26}" for c in cells))
    print("   (* some jobs unfinished at the horizon)")

    print("\n3. avg JCT (s) of the shorter / the longer half of the jobs, halves by work alone on one GPU")
    for k in keys:
        line = []
        for p in POLICIES:
            short, long_ = [], []
            for run in [jobs for kk, pp, _, jobs in out if kk == k and pp == p]:
                run = sorted(run)
                half = len(run) // 2
                short += [jct for _, jct in run[:half]]
                long_ += [jct for _, jct in run[half:]]
            line.append(f"{np.mean(short):>8,.0f}/{np.mean(long_):>8,.0f}")
        print(f"   {k:<24}" + "".join(f"{c:>26}" for c in line))


if __name__ == "__main__":
    main()

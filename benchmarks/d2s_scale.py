"""One D²S decision at 10,000 tasks x 1,000 nodes (issue 14 target: under 1 s).

    python benchmarks/d2s_scale.py [--jobs 1000] [--workers 9] [--nodes 1000] [--no-merge] [--profile]

Cluster: 1,000 copies of the default preset's server (8 GPUs), 25 to a rack (40 racks). Jobs:
1,000 pending jobs at t = 0, the default scenario's model mix in turn, each asking 1 PS and 9
workers (10,000 tasks), input shards on 3 nodes drawn per job (seeded). Prints the wall and CPU
time of that one decide() call, the Task -> Node arcs of its flows, and what it placed.
`--no-merge` builds the paper's graph with one vertex per task (issue 14: 10M arcs, 6.5 CPU-s).
"""

from __future__ import annotations

import argparse
import pstats

import numpy as np

import baselines.d2s as d2s_mod
from baselines.d2s import D2S
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator
from dlclusterenv.workload import build

from optimus_scale import MODELS, scale_cluster, timed_decide  # same cluster, model mix and timing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=9)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--no-merge", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    cluster = scale_cluster(a.nodes, per_rack=25)
    _, _, zoo, _ = build("default", 0)
    rng = np.random.default_rng(0)
    jobs = [JobSpec(f"j{i}", MODELS[i % len(MODELS)], 0.0, 1, a.workers,
                    shard_nodes=tuple(int(x) for x in rng.choice(cluster.n_nodes, 3, replace=False)))
            for i in range(a.jobs)]
    sim = Simulator(cluster, jobs, zoo, seed=0, tick_s=600)
    view = sim.view()
    arcs = []
    solve_flow = d2s_mod.solve_flow

    def counting(g, solver="auto"):
        arcs.append(len(g.arc_task))
        return solve_flow(g, solver)

    d2s_mod.solve_flow = counting
    sched = D2S(merge=not a.no_merge)
    d, dt, cpu, prof = timed_decide(sched, view, a.profile)
    print(f"{a.jobs} jobs, {a.jobs * (a.workers + 1):,} tasks, {cluster.n_nodes} nodes, "
          f"merge={sched.merge}: one decision in {dt:.2f} s wall, {cpu:.2f} s CPU; "
          f"{len(arcs)} flows, {sum(arcs):,} Task -> Node arcs (largest {max(arcs):,}); "
          f"{len({t.rpartition('/')[0] for t in d.place})} jobs started, {len(d.place):,} tasks placed")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(20)


if __name__ == "__main__":
    main()

"""One Optimus decision at the scale seed 002 claims: "Can schedule 4,000 jobs (about 100,000
tasks) within 5 seconds on a cluster of 16,000 nodes".

    python benchmarks/optimus_scale.py [--jobs 4000] [--nodes 16000] [--profile] [--check]

Cluster: 16,000 copies of the default preset's server (8 V100, 64 cores, 512 GB, 25 Gb/s), 32 to
a rack. Jobs: 4,000 pending jobs at t = 0, the default scenario's model mix in turn, each asking
1 PS + 1 worker. Optimus' speed estimates are seeded as if every model had run for a while: the
true speed of each model alone at p, w in {1, 2, 4, 8} (its Fig. 10 layout on empty servers), so
every job takes part in the marginal-gain loop from the first decision (no profiling round) and
the fit may be used up to p, w = 16 (EXTRAPOLATE). Remaining work: 20 epochs (no loss points yet,
[code]'s fallback). Prints the wall time of that one decide() call
(allocation and placement), the jobs and tasks it placed and the nodes it used.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

import baselines
from baselines.optimus import Capacity, Optimus, _SpeedPool, place_even
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import ClusterConfig
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator
from dlclusterenv.workload import build

SHAPES = tuple((p, w) for p in (1, 2, 4, 8) for w in (1, 2, 4, 8))  # measured shapes
MODELS = ("ResNet-50", "ResNet-50", "VGG-16", "ResNeXt-110", "ResNeXt-110", "AlexNet",
          "Inception-V3", "LSTM-Video", "SuperResolution", "RHN", "MI-LSTM")  # default.yaml's mix


def scale_cluster(nodes: int, per_rack: int = 32):
    c = build_cluster("default").config.model_dump()
    rack = c["racks"][0]
    node = dict(rack["nodes"][0], count=per_rack)
    c["racks"] = [dict(rack, count=nodes // per_rack, nodes=[node])]
    c["name"] = f"scale{nodes}"
    return build_cluster(ClusterConfig.model_validate(c))


def seeded_optimus(cluster, zoo) -> Optimus:
    """An Optimus whose pooled speed samples already identify every model (see the docstring)."""
    opt = baselines.make("optimus")
    opt.reset(0)
    for model in set(MODELS):
        probe = Simulator(cluster, [JobSpec("probe", model, 0.0, 1, 1)], zoo, seed=0)
        j = probe.view().jobs[0]
        samples = {}
        for p, w in SHAPES:
            free = Capacity(cluster.cpus.astype(float), cluster.memory.astype(float),
                            cluster.nic.astype(float), cluster.gpus.astype(np.int64))
            ps, wk = place_even(cluster, free, j.ps_demand, j.worker_demand, p, w)
            samples[(p, w)] = probe.isolated_speed("probe", list(ps), list(wk))
        opt._est.speeds[model] = _SpeedPool()
        opt._est.speeds[model].put("profile", samples)
    return opt


def timed_decide(scheduler, view, profile: bool):
    """One decision: (decision, wall s, CPU s, the cProfile.Profile or None)."""
    prof = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    d = scheduler.decide(view)
    if prof:
        prof.disable()
    return d, time.perf_counter() - t0, time.process_time() - c0, prof


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--nodes", type=int, default=16000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--plain", action="store_true", help="the plain placement functions (fast=False)")
    ap.add_argument("--check", action="store_true", help="also decide with fast=False; compare")
    a = ap.parse_args()
    cluster = scale_cluster(a.nodes)
    _, _, zoo, _ = build("default", 0)
    jobs = [JobSpec(f"j{i}", MODELS[i % len(MODELS)], 0.0, 1, 1) for i in range(a.jobs)]
    sim = Simulator(cluster, jobs, zoo, seed=0, tick_s=600)
    opt = seeded_optimus(cluster, zoo)
    opt.fast = not a.plain
    view = sim.view()
    d, dt, cpu, prof = timed_decide(opt, view, a.profile)
    jobs_placed = {tid.rpartition("/")[0] for tid in d.place}
    print(
        f"{a.jobs} jobs, {cluster.n_nodes} nodes, fast={opt.fast}: one decision in {dt:.2f} s "
        f"wall, {cpu:.2f} s CPU; "
        f"{len(jobs_placed)} jobs placed, {len(d.place)} tasks, "
        f"{len(set(d.place.values()))} nodes used"
    )
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
    if a.check:
        ref = seeded_optimus(cluster, zoo)
        ref.fast = opt.fast is False
        t0 = time.perf_counter()
        d2 = ref.decide(view)
        same = (d.allocate, d.place, d.preempt) == (d2.allocate, d2.place, d2.preempt)
        print(f"fast={ref.fast}: {time.perf_counter() - t0:.2f} s, decisions equal: {same}")


if __name__ == "__main__":
    main()

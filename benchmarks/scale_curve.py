"""CPU seconds per simulated job from 100 to 100,000 jobs at constant offered load (issue 14).

    python benchmarks/scale_curve.py                      # 100, 1,000, 10,000 jobs (minutes)
    python benchmarks/scale_curve.py --max-jobs 100000    # adds 100,000 (much longer)
    python benchmarks/scale_curve.py --policy tiresias --load 1.0 --seed 0

Workload: the `default` scenario (256 GPUs) with N Poisson arrivals at `load` x its own mean rate
and no horizon; every job runs to completion. Why this and not Philly windows of growing length or
a cluster that grows with N: the cluster and the arrival rate stay fixed, so the system is
stationary (the same mix of queued and running jobs at any time) and only the length of history
grows. The default load, 0.5, is chosen by that stationarity, not by the cost: under FIFO at 0.5
the mean number of active jobs is 7 at 100 jobs and 11 at 1,000, whereas at 1.0 the queue grows
with N (mean active 13, 67 and 797 at 100, 1,000 and 10,000 jobs: 1.0 is past what FIFO
sustains on this cluster); a cost per job that grows with N then exposes work that scales
with what happened before (lists of finished jobs, per-event walks of every job), which is what
the target ("flat within 2x from 100 to 100,000 jobs") is about. Philly windows change load from
day to day (1% to 70% of the cluster), and a growing cluster measures how an event's cost grows
with the running jobs instead (benchmarks/philly_replay.py covers that scale). Overload, where the
queue itself grows with N, is benchmarks/overload.py.

Per size: CPU seconds of the run (process time, the scenario build apart), per job, the ratio to
the smallest size's per-job cost, decision points, the mean and peak number of active jobs, and
the process's peak RSS so far.
"""

from __future__ import annotations

import argparse
import math
import resource
import time

import baselines
import dlclusterenv
from dlclusterenv.workload import load_scenario

SIZES = (100, 1_000, 10_000, 100_000)


def poisson_default(num_jobs: int, load: float) -> dict:
    """`default` with `num_jobs` Poisson arrivals at `load` x its own mean rate, no horizon."""
    d = load_scenario("default")[0].model_dump()
    w = d["workload"]
    w.update(kind="poisson", num_jobs=num_jobs, rate_per_s=load * w["num_jobs"] / w["window_s"], window_s=0.0)
    d["engine"]["horizon_s"] = math.inf
    d["name"] = f"scale_{num_jobs}"
    return d


def run(num_jobs: int, policy: str, load: float, seed: int) -> dict:
    sim = dlclusterenv.make_sim(poisson_default(num_jobs, load), seed)
    sched = baselines.make(policy)
    sim.reset()
    sched.reset(sim.seed)
    active = peak = decisions = 0
    t0 = time.process_time()
    while not sim.done:
        n = len(sim.active_jobs())
        active += n
        peak = max(peak, n)
        decisions += 1
        sim.decide(sched)
        sim.advance()
    cpu = time.process_time() - t0
    m = sim.metrics()
    if m.jobs_finished != num_jobs:
        raise SystemExit(f"{policy} at {num_jobs} jobs: {m.jobs_unfinished} jobs unfinished")
    return {"jobs": num_jobs, "cpu": cpu, "decisions": decisions, "mean_active": active / decisions,
            "peak_active": peak, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-jobs", type=int, default=10_000, help="largest size run (of 100, 1,000, 10,000, 100,000)")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--load", type=float, default=0.5, help="x the default scenario's arrival rate")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sizes = [n for n in SIZES if n <= a.max_jobs]
    if not sizes:
        ap.error(f"--max-jobs {a.max_jobs}: the smallest size is {SIZES[0]}")
    print(f"{a.policy}, Poisson arrivals at {a.load:g}x the default scenario's rate, seed {a.seed}")
    print(f"{'jobs':>7s} {'CPU s':>8s} {'ms/job':>7s} {'x first':>7s} {'decisions':>9s} "
          f"{'mean active':>11s} {'peak active':>11s} {'peak RSS MB':>11s}")
    first = None
    for n in sizes:
        r = run(n, a.policy, a.load, a.seed)
        per_job = r["cpu"] / n
        first = first or per_job
        print(f"{n:7,d} {r['cpu']:8.1f} {1e3 * per_job:7.2f} {per_job / first:7.2f} {r['decisions']:9,d} "
              f"{r['mean_active']:11.1f} {r['peak_active']:11,d} {r['rss_mb']:11.0f}", flush=True)


if __name__ == "__main__":
    main()

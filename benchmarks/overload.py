"""Cost per job of an overloaded cluster: Poisson arrivals at `load` x the `default` scenario's rate.

    python benchmarks/overload.py [--jobs 10000] [--policies fifo,tiresias] [--seed 0] [--load 10]
    python benchmarks/overload.py --jobs 10000,100000     # the large size takes much longer

The default workload (60 jobs over 4,000 s on the 256-GPU cluster) arrives at 0.015 jobs/s; with
the grounded speed model its jobs finish fast enough that this rate keeps a queue of only 40-160
(1,000 jobs), so the benchmark runs 10x that rate by default (as tests/test_overload.py): the
queue then grows with the number of jobs (about 9,000 active at once for 10,000 jobs). Every job
is run to completion (no horizon). Issue 13 (bug 9):
the cost of a decision must not grow with the queued jobs that cannot start, so CPU time per job
should stay roughly flat from one size to the next.
"""

from __future__ import annotations

import argparse
import math
import resource
import time

import baselines
import dlclusterenv
from dlclusterenv.workload import load_scenario


def overloaded(num_jobs: int, load: float = 1.0) -> dict:
    """`default` with `num_jobs` Poisson arrivals at `load` x its own mean rate, and no horizon.
    (With the speed model and clusters of main after baselines12b, jobs run faster and `load` 1
    no longer keeps a long queue: tests/test_overload.py uses 10.)"""
    sc, _ = load_scenario("default")
    d = sc.model_dump()
    w = d["workload"]
    rate = load * w["num_jobs"] / w["window_s"]
    w.update(kind="poisson", num_jobs=num_jobs, rate_per_s=rate, window_s=0.0)
    d["engine"]["horizon_s"] = math.inf
    d["name"] = f"overload_{num_jobs}"
    return d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="10000", help="comma-separated job counts")
    ap.add_argument("--policies", default="fifo,tiresias")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--load", type=float, default=10.0, help="x the default scenario's arrival rate")
    a = ap.parse_args()
    print(f"{'policy':9s} {'jobs':>7s} {'decisions':>9s} {'peak active':>11s} {'CPU s':>8s} "
          f"{'ms/decision':>11s} {'ms/job':>7s} {'max RSS MB':>10s}")
    for n in (int(x) for x in a.jobs.split(",")):
        for name in a.policies.split(","):
            sim = dlclusterenv.make_sim(overloaded(n, a.load), a.seed)
            sched = baselines.make(name)
            sim.reset()
            sched.reset(sim.seed)
            peak = 0
            t0 = time.process_time()
            while not sim.done:
                peak = max(peak, len(sim.active_jobs()))
                sim.decide(sched)
                sim.advance()
            cpu = time.process_time() - t0
            m = sim.metrics()
            assert m.jobs_finished == n, f"{name}: {m.jobs_unfinished} jobs unfinished"
            k = len(sim.totals.decision_s)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{name:9s} {n:7,d} {k:9,d} {peak:11,d} {cpu:8.1f} {1e3 * cpu / k:11.2f} "
                  f"{1e3 * cpu / n:7.2f} {rss:10.0f}", flush=True)


if __name__ == "__main__":
    main()

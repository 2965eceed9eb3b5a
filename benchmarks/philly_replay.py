"""Wall time of replaying one week of one Philly virtual cluster with every baseline.

    python benchmarks/philly_replay.py [--scenario philly] [--policies all]
    python benchmarks/philly_replay.py --policies fifo --vc all --start 2017-10-01 --end 2017-11-01
    python benchmarks/philly_replay.py --policies fifo --vc all --start 2017-09-01 --end 2018-01-01

The `philly` scenario replays VC 11cb48 from 2017-10-09 for a week (1,694 jobs) on the
Philly-scale cluster preset; needs ../shared/traces/philly_jobs.csv. --vc/--start/--end replace
its trace window (--vc all: every virtual cluster; the second line is October, 47,161 jobs, the
third the whole trace, 82,182 jobs). For peak memory of the whole process run it under
`/usr/bin/time -v`. --optimus-loss-fit-max-points N runs Optimus (and only it) with its opt-in
loss-fit cap (baselines/optimus.py, `loss_fit_max_points`; the Philly-scale rows use 100).
--cpu-budget S stops a policy's run after S CPU-seconds and prints how far it got (simulated
time, jobs finished), for runs that do not finish in the time there is; --progress P (with it)
prints the same every P CPU-seconds, so a run stopped from outside still says how far it got.
Per policy: wall and CPU time of the run (the scenario's build, trace reading included, apart),
jobs per CPU-second of the run, and the process's peak RSS so far; then the loss points the jobs
reported (one per epoch ended: what Optimus fits), mean and max per job, counted after the run.
"""

from __future__ import annotations

import argparse
import inspect
import math
import resource
import time

import baselines
import dlclusterenv
from dlclusterenv.workload import load_scenario


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="philly")
    ap.add_argument("--policies", default="all")
    ap.add_argument("--vc", help="a virtual cluster, or 'all'")
    ap.add_argument("--start", help="first submit date, e.g. 2017-10-01")
    ap.add_argument("--end", help="end date (exclusive)")
    ap.add_argument("--optimus-loss-fit-max-points", type=int,
                    help="Optimus' loss_fit_max_points (default: every point)")
    ap.add_argument("--no-wake", action="store_true",
                    help="the baselines that take `wake` (FlowCon, Tiresias) without their wake-ups"
                    " (wake=False: decisions at the engine's decision points only, as before"
                    " 2026-11-28)")
    ap.add_argument("--cpu-budget", type=float,
                    help="stop a run after this many CPU-seconds and report how far it got")
    ap.add_argument("--progress", type=float,
                    help="with --cpu-budget: also print how far it got every this many CPU-seconds")
    a = ap.parse_args()
    scenario: str | dict = a.scenario
    if a.vc or a.start or a.end:
        sc, _ = load_scenario(a.scenario)
        scenario = sc.model_dump()
        window = scenario["workload"]["trace"]
        if a.vc:
            window["vc"] = None if a.vc == "all" else a.vc
        window.update({k: v for k, v in (("start", a.start), ("end", a.end)) if v})
    names = baselines.names() if a.policies == "all" else a.policies.split(",")
    for name in names:
        load = time.process_time()
        sim = dlclusterenv.make_sim(scenario, 0)
        t, cpu = time.perf_counter(), time.process_time()
        kw = {}
        if name == "optimus" and a.optimus_loss_fit_max_points is not None:
            kw["loss_fit_max_points"] = a.optimus_loss_fit_max_points
        cls = baselines.REGISTRY.get(name)  # (an unknown name: make's error below)
        if a.no_wake and cls is not None and "wake" in inspect.signature(cls).parameters:
            kw["wake"] = False
        sched = baselines.make(name, **kw)
        if a.cpu_budget is None:
            m = sim.run(sched)
        else:  # sim.run's loop, stopped when the budget is spent
            sim.reset()
            sched.reset(sim.seed)
            report = cpu + (a.progress or math.inf)
            while not sim.done and time.process_time() - cpu < a.cpu_budget:
                sim.decide(sched)
                sim.advance()
                if time.process_time() >= report:
                    _how_far(f"{name:15s} at", sim, cpu, t)
                    report += a.progress
            if not sim.done:
                _how_far(f"{name:15s} stopped after", sim, cpu, t)
                _loss_points(name, sim)
                continue
            m = sim.metrics()
        run_cpu = time.process_time() - cpu
        print(
            f"{name:15s} {time.perf_counter() - t:8.1f} s ({run_cpu:.1f} CPU-s, "
            f"{len(sim.specs) / max(run_cpu, 1e-9):,.0f} jobs per CPU-s; building it "
            f"{cpu - load:.1f} CPU-s)  finished {m.jobs_finished:5d}  "
            f"unfinished {m.jobs_unfinished:4d}  avg JCT {m.avg_jct_s:12,.1f} s  "
            f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB",
            flush=True,
        )
        _loss_points(name, sim)


def _how_far(what: str, sim, cpu: float, t: float) -> None:
    """CPU-s and wall so far, simulated days, jobs finished, peak RSS."""
    done = sum(j.status == "done" for j in sim.jobs.values())
    print(
        f"{what} {time.process_time() - cpu:.1f} CPU-s ({time.perf_counter() - t:.1f} s): "
        f"simulated {sim.now / 86400:.2f} days, {done:,} of {len(sim.specs):,} jobs finished  "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB",
        flush=True,
    )


def _loss_points(name: str, sim) -> None:
    """Loss points per job of the jobs that arrived (read after the timed run)."""
    n = [len(j.obs_loss) for j in sim.jobs.values()]
    if n:
        print(f"{name:15s} loss points per job: mean {sum(n) / len(n):,.1f}, max {max(n):,} "
              f"({sum(n):,} in all, {len(n):,} jobs)", flush=True)


if __name__ == "__main__":
    main()

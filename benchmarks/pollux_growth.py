"""The growth constant (issue 15, branch pgrow13): Pollux with one growth cap for every job
(`Pollux.max_growth`: a job gets at most that many times the largest worker count it was measured
at), the grid below run on an instance's TRAIN split with extra seeds; the train-best value is
"the best growth constant", which the learned growth limit (DLClusterGrow-v0) is compared with on
the test split (`benchmarks/learned_suite.py --compare benchmarks.pollux_growth:GrowthG`).

    python -m benchmarks.pollux_growth [--suite v5] [--instance philly-103959@0.5x] [--seeds 0,1,2]
        [--workers 2] [--out runs/pollux_growth.json] [--hindsight --extra-seeds 9]

The grid is never run on the test split to choose: that would tune the constant on what it is
scored on. `--hindsight` is a bound, not a choice: the grid on the TEST split's runs (test seed ..
+ extra-seeds), and the best growth of each run picked after the fact, over Pollux (x2) per run.
It bounds what any policy that sets ONE growth for all jobs of a run can reach; below it only a
per-job (or per-round) choice can go.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from baselines.pollux import Pollux
from dlclusterenv import make_sim
from dlclusterenv.benchmark import instances, load_suite
from dlclusterenv.metrics import ci95

GRID = (2.0, 4.0, 8.0, 64.0)  # 2: Pollux's own ([ref] max_replicas); 64: max_workers caps


def _fixed(growth: float) -> type[Pollux]:
    """Pollux with `max_growth` = growth, as a class without constructor arguments (a policy
    spec `module:Class` needs one)."""
    return type(f"Growth{growth:g}", (Pollux,), {
        "name": f"pollux-growth{growth:g}", "__module__": __name__,
        "__init__": lambda self: Pollux.__init__(self, max_growth=growth)})


Growth2, Growth4, Growth8, Growth64 = (_fixed(g) for g in GRID)


def run_one(args: tuple) -> dict:
    """avg JCT of one (growth, window, seed) run, and its process CPU time."""
    growth, window, scenario, seed = args
    t0 = time.process_time()
    s = make_sim(scenario, seed).run(Pollux(max_growth=growth)).summary()
    return {"growth": growth, "window": window, "seed": seed, "avg_jct_s": s["avg_jct_s"],
            "jobs_unfinished": s["jobs_unfinished"], "cpu_s": time.process_time() - t0}


def hindsight(rows: list[dict]) -> dict:
    """Per run (window, seed): each growth's avg JCT over Pollux's own (x2), and the best of the
    grid picked after the fact; mean and 95% interval over the runs."""
    runs: dict[tuple, dict[float, float]] = {}
    for r in rows:
        runs.setdefault((r["window"], r["seed"]), {})[r["growth"]] = r["avg_jct_s"]
    ratios = {g: [v[g] / v[2.0] for v in runs.values()] for g in GRID}
    ratios["best"] = [min(v.values()) / v[2.0] for v in runs.values()]
    return {k: {"mean": float(np.mean(x)), "ci95": ci95(np.asarray(x)), "n": len(x)} for k, x in ratios.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="v5")
    ap.add_argument("--instance", default="philly-103959@0.5x")
    ap.add_argument("--seeds", default="0,1,2", help="train seeds (the split's own, then more)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="runs/pollux_growth.json")
    ap.add_argument("--hindsight", action="store_true", help="the bound on the test split (see above)")
    ap.add_argument("--extra-seeds", type=int, default=9, help="with --hindsight: test seeds after the split's")
    a = ap.parse_args(argv)
    suite, where = load_suite(a.suite)
    every = {i.key: i for i in instances(suite, where)}
    if a.instance not in every:
        raise SystemExit(f"--instance: {a.instance!r} is not an instance of {a.suite} here "
                         f"(one whose trace file is absent is skipped); valid: {', '.join(every)}")
    inst = every[a.instance]
    if a.hindsight:
        first = inst.entry.test.seeds[0]
        tasks = [(g, k, sc, first + i) for g in GRID for k, sc, seed in inst.runs("test") if seed == first
                 for i in range(a.extra_seeds + 1)]
        with ProcessPoolExecutor(a.workers) as pool:
            rows = list(pool.map(run_one, tasks))
        h = hindsight(rows)
        for k, v in h.items():
            name = "best of the grid per run" if k == "best" else f"x{k:g} for every job"
            print(f"{name:>26} / Pollux (x2): {v['mean']:.3f} +- {v['ci95']:.3f} over {v['n']} test runs")
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"instance": a.instance, "split": "test", "hindsight": h,
                                           "runs": rows}, indent=1))
        return
    seeds = [int(s) for s in a.seeds.split(",")]
    windows = {k: sc for k, sc, _ in inst.runs("train")}
    if set(seeds) & set(inst.entry.test.seeds):
        raise SystemExit(f"--seeds: {sorted(set(seeds) & set(inst.entry.test.seeds))} are test seeds")
    tasks = [(g, k, sc, s) for g in GRID for k, sc in windows.items() for s in seeds]
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(run_one, tasks))
    table = {}
    for g in GRID:
        x = [r["avg_jct_s"] for r in rows if r["growth"] == g]
        table[g] = float(np.mean(x))
        print(f"max_growth {g:>4g}: train avg JCT {table[g]:9,.0f} s over {len(x)} runs "
              f"(unfinished {sum(r['jobs_unfinished'] for r in rows if r['growth'] == g)})", flush=True)
    best = min(GRID, key=table.get)
    print(f"best growth constant on train: {best:g} (spec benchmarks.pollux_growth:Growth{best:g}); "
          f"{sum(r['cpu_s'] for r in rows):,.0f} CPU-s in runs")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"instance": a.instance, "seeds": seeds, "means": table,
                                       "best": best, "runs": rows}, indent=1))


if __name__ == "__main__":
    main()

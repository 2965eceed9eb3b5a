"""The growth constant (issue 15, branch pgrow13): Pollux with one growth cap for every job
(`Pollux.max_growth`: a job gets at most that many times the largest worker count it was measured
at), the grid below run on an instance's TRAIN split with extra seeds; the train-best value is
"the best growth constant", which the learned growth limit (DLClusterGrow-v0) is compared with on
the test split (`benchmarks/learned_suite.py --compare benchmarks.pollux_growth:GrowthG`).

    python -m benchmarks.pollux_growth [--suite v5] [--instance philly-103959@0.5x] [--seeds 0,1,2]
        [--workers 2] [--out runs/pollux_growth.json] [--hindsight --extra-seeds 9] [--rules]

The grid is never run on the test split to choose: that would tune the constant on what it is
scored on. `--hindsight` is a bound, not a choice: the grid on the TEST split's runs (test seed ..
+ extra-seeds), and the best growth of each run picked after the fact, over Pollux (x2) per run.
It bounds what any policy that sets ONE growth for all jobs of a run can reach; below it only a
per-job (or per-round) choice can go.

`--rules` asks whether a simple state signal is worth learning, on the TRAIN split only: each
`GrowthRule` of RULES (a growth limit per job, set at its arrival from the state then, as
DLClusterGrow-v0's agent sets it) against Pollux (x2) and the growth constant x64 on the same runs.
`--by-size` splits the avg JCT of x2, x64 and the two mixed size rules by job size (train split).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from baselines.pollux import Pollux, PolluxGrowth
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


class GrowthRule(PolluxGrowth):
    """A growth limit per job from one feature of the state at the job's arrival (the first
    decision point that sees it: where DLClusterGrow-v0's agent chooses): `hi` where the feature is
    <= `tau`, else `lo`; Pollux allocates under it. Features: "load", the GPUs every active job
    asked for over the cluster's GPUs (is the cluster about to be busy?); "size", the workers the
    job asked for (does a small job gain more from growing?). A reference for the learned growth
    limit, not a baseline: it says whether such a signal pays on train before RL is asked to find it."""

    FEATURES = ("load", "size")

    def __init__(self, feature: str, tau: float, hi: float = 64.0, lo: float = 2.0):
        if feature not in self.FEATURES:
            raise ValueError(f"feature must be one of {self.FEATURES}, got {feature!r}")
        for field, v in (("tau", tau), ("hi", hi), ("lo", lo)):
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ValueError(f"{field} must be a finite number > 0, got {v!r}")
        self.feature, self.tau, self.hi, self.lo = feature, float(tau), float(hi), float(lo)
        super().__init__()
        self.name = f"pollux-growth-{feature}<={tau:g}?x{hi:g}:x{lo:g}"

    def decide(self, view):
        new = [j for j in view.jobs if j.job_id not in self.growth]
        if new:
            if self.feature == "load":
                asked = sum(j.requested[1] * j.worker_demand.gpu * j.gpu_milli / 1000 for j in view.jobs)
                value = [asked / view.cluster.n_gpus] * len(new)
            else:
                value = [j.requested[1] for j in new]
            for j, v in zip(new, value):
                self.growth[j.job_id] = self.hi if v <= self.tau else self.lo
        return super().decide(view)


# (feature, tau, hi, lo): lift the cap while the cluster is light; for small jobs only; for big only
RULES = (*(("load", t, 64.0, 2.0) for t in (0.125, 0.25, 0.5)),
         *(("size", t, 64.0, 2.0) for t in (1, 2, 4)),
         *(("size", t, 2.0, 64.0) for t in (1, 2, 4)))


def _policy(spec: float | tuple) -> Pollux:
    """A growth constant (a number) or a GrowthRule (its arguments)."""
    return GrowthRule(*spec) if isinstance(spec, tuple) else Pollux(max_growth=spec)


def _name(spec: float | tuple) -> str:
    return _policy(spec).name if isinstance(spec, tuple) else f"x{spec:g} for every job"


def _write(a, runs: list[dict], **fields) -> None:
    """--out: the instance, `fields` and every run (a rule's spec as a list)."""
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    runs = [{**r, "growth": list(r["growth"]) if isinstance(r["growth"], tuple) else r["growth"]} for r in runs]
    Path(a.out).write_text(json.dumps({"instance": a.instance, **fields, "runs": runs}, indent=1))


def _pool(a, tasks: list[tuple]) -> list[dict]:
    """run_one over `tasks` on --workers processes, in task order."""
    with ProcessPoolExecutor(a.workers) as pool:
        return list(pool.map(run_one, tasks))


SMALL = 2  # --by-size: a job asking for at most this many workers is "small"


def run_one(args: tuple) -> dict:
    """avg JCT of one (growth or rule, window, seed) run, the avg JCT of its small and of its other
    jobs (SMALL), and its process CPU time."""
    growth, window, scenario, seed = args
    t0 = time.process_time()
    sim = make_sim(scenario, seed)
    m = sim.run(_policy(growth))
    s = m.summary()
    small = {spec.job_id for spec in sim.specs if spec.num_workers <= SMALL}
    by = {k: [r.jct_s for r in m.jobs if (r.job_id in small) == (k == "small")] for k in ("small", "big")}
    return {"growth": growth, "window": window, "seed": seed, "avg_jct_s": s["avg_jct_s"],
            **{f"avg_jct_{k}_s": float(np.mean(v)) if v else float("nan") for k, v in by.items()},
            "jobs_small": len(by["small"]), "jobs_big": len(by["big"]),
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


def _seeds(a) -> list[int]:
    return [int(s) for s in a.seeds.split(",")]


def train_tasks(inst, seeds: list[int], specs) -> list[tuple]:
    """(spec, window, scenario, seed) for every spec on every train window and seed; SystemExit if a
    seed is one of the test split's."""
    if set(seeds) & set(inst.entry.test.seeds):
        raise SystemExit(f"--seeds: {sorted(set(seeds) & set(inst.entry.test.seeds))} are test seeds")
    windows = {k: sc for k, sc, _ in inst.runs("train")}
    return [(g, k, sc, s) for g in specs for k, sc in windows.items() for s in seeds]


def by_size(inst, a) -> None:
    """--by-size: x2, x64 and the two mixed size rules at SMALL on the train runs; the avg JCT of the
    small jobs and of the others under each (who gains and who pays when the limits differ)."""
    specs = (2.0, 64.0, ("size", SMALL, 64.0, 2.0), ("size", SMALL, 2.0, 64.0))
    rows = _pool(a, train_tasks(inst, _seeds(a), specs))
    n = {k: sum(r[f"jobs_{k}"] for r in rows if r["growth"] == 2.0) for k in ("small", "big")}
    print(f"jobs asking for <= {SMALL} workers: {n['small']}, more: {n['big']} (over the runs)")
    table = {}
    for spec in specs:
        name = _name(spec)
        mine = [r for r in rows if r["growth"] == spec]
        table[name] = {k: float(np.mean([r[key] for r in mine]))
                       for k, key in (("all", "avg_jct_s"), ("small", "avg_jct_small_s"), ("big", "avg_jct_big_s"))}
        print(f"{name:>36}: avg JCT all {table[name]['all']:9,.0f} s, small jobs {table[name]['small']:9,.0f} s, "
              f"others {table[name]['big']:9,.0f} s ({len(mine)} runs)", flush=True)
    _write(a, rows, split="train", small=SMALL, by_size=table)


def rules(inst, a) -> None:
    """--rules: each rule's train avg JCT and its avg JCT over x2's and x64's per run."""
    rows = _pool(a, train_tasks(inst, _seeds(a), (2.0, 64.0, *RULES)))
    per = {}
    for r in rows:
        per.setdefault(r["growth"], {})[(r["window"], r["seed"])] = r["avg_jct_s"]
    table = {}
    for spec, runs in per.items():
        name = _name(spec)
        ratio = {ref: np.array([v / per[ref][k] for k, v in runs.items()]) for ref in (2.0, 64.0)}
        table[name] = {"train_avg_jct_s": float(np.mean(list(runs.values()))),
                       **{f"over_x{ref:g}": {"mean": float(x.mean()), "ci95": ci95(x)} for ref, x in ratio.items()}}
        print(f"{name:>36}: train avg JCT {table[name]['train_avg_jct_s']:9,.0f} s; / x2 "
              f"{ratio[2.0].mean():.3f} +- {ci95(ratio[2.0]):.3f}; / x64 {ratio[64.0].mean():.3f} +- "
              f"{ci95(ratio[64.0]):.3f} ({len(runs)} runs)", flush=True)
    print(f"{sum(r['cpu_s'] for r in rows):,.0f} CPU-s in runs")
    _write(a, rows, split="train", rules=table)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="v5")
    ap.add_argument("--instance", default="philly-103959@0.5x")
    ap.add_argument("--seeds", default="0,1,2", help="train seeds (the split's own, then more)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="runs/pollux_growth.json")
    ap.add_argument("--hindsight", action="store_true", help="the bound on the test split (see above)")
    ap.add_argument("--extra-seeds", type=int, default=9, help="with --hindsight: test seeds after the split's")
    ap.add_argument("--rules", action="store_true", help="RULES against x2 and x64 on the train seeds (see above)")
    ap.add_argument("--by-size", action="store_true",
                    help="small and other jobs' avg JCT under x2, x64 and the mixed size rules (train seeds)")
    a = ap.parse_args(argv)
    suite, where = load_suite(a.suite)
    every = {i.key: i for i in instances(suite, where)}
    if a.instance not in every:
        raise SystemExit(f"--instance: {a.instance!r} is not an instance of {a.suite} here "
                         f"(one whose trace file is absent is skipped); valid: {', '.join(every)}")
    inst = every[a.instance]
    if a.rules:
        return rules(inst, a)
    if a.by_size:
        return by_size(inst, a)
    if a.hindsight:
        first = inst.entry.test.seeds[0]
        tasks = [(g, k, sc, first + i) for g in GRID for k, sc, seed in inst.runs("test") if seed == first
                 for i in range(a.extra_seeds + 1)]
        rows = _pool(a, tasks)
        h = hindsight(rows)
        for k, v in h.items():
            name = "best of the grid per run" if k == "best" else f"x{k:g} for every job"
            print(f"{name:>26} / Pollux (x2): {v['mean']:.3f} +- {v['ci95']:.3f} over {v['n']} test runs")
        _write(a, rows, split="test", hindsight=h)
        return
    seeds = _seeds(a)
    rows = _pool(a, train_tasks(inst, seeds, GRID))
    table = {}
    for g in GRID:
        x = [r["avg_jct_s"] for r in rows if r["growth"] == g]
        table[g] = float(np.mean(x))
        print(f"max_growth {g:>4g}: train avg JCT {table[g]:9,.0f} s over {len(x)} runs "
              f"(unfinished {sum(r['jobs_unfinished'] for r in rows if r['growth'] == g)})", flush=True)
    best = min(GRID, key=table.get)
    print(f"best growth constant on train: {best:g} (spec benchmarks.pollux_growth:Growth{best:g}); "
          f"{sum(r['cpu_s'] for r in rows):,.0f} CPU-s in runs")
    _write(a, rows, seeds=seeds, means=table, best=best)


if __name__ == "__main__":
    main()

"""Pollux beside Optimus, optimus-oracle and the best constant on suite instances (README, Baselines).

    python benchmarks/pollux_vs.py [--suite v3] [--instances default@1x,philly-6c71a0-nov@1x]

Runs each instance's test split (its seeds and windows) and prints the mean avg JCT per policy; the
best constant is the best of the suite's constant grid on the same runs. Pollux is among v3's
heuristics (not v1's or v2's); this script scores a few instances without running the whole suite.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dlclusterenv import make_sim
from dlclusterenv.benchmark import instances, load_suite, make_scheduler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="v3")
    ap.add_argument("--instances", default="default@1x,philly-6c71a0-nov@1x")
    ap.add_argument("--policies", default="pollux,optimus,optimus-oracle")
    ap.add_argument("--no-constants", action="store_true", help="skip the constant grid")
    args = ap.parse_args()
    suite, where = load_suite(args.suite)
    wanted = args.instances.split(",")
    insts = {i.key: i for i in instances(suite, where) if i.key in wanted}
    missing = [k for k in wanted if k not in insts]
    if missing:
        raise SystemExit(f"--instances: not in suite {suite.name}: {missing}")
    for key in wanted:
        runs = insts[key].runs("test")
        jct: dict[str, float] = {}
        constants = [] if args.no_constants else suite.constants.names()
        for policy in [*args.policies.split(","), *constants]:
            t0, vals, unfinished = time.perf_counter(), [], 0
            for _, sc, seed in runs:
                s = make_sim(sc, seed).run(make_scheduler(policy)).summary()
                vals.append(s["avg_jct_s"])
                unfinished += s["jobs_unfinished"]
            jct[policy] = float(np.mean(vals))
            if not policy.startswith("fixed-"):
                print(f"{key}  {policy:16s} avg JCT {jct[policy]:9.0f} s  unfinished {unfinished}  "
                      f"({len(runs)} runs, {time.perf_counter() - t0:.0f} s)", flush=True)
        if not constants:
            continue
        best = min(constants, key=jct.get)
        print(f"{key}  best constant {best} avg JCT {jct[best]:9.0f} s", flush=True)


if __name__ == "__main__":
    main()

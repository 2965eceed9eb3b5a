"""Wall time of replaying one week of one Philly virtual cluster with every baseline.

    python benchmarks/philly_replay.py [--scenario philly] [--policies all]

The `philly` scenario replays VC 11cb48 from 2017-10-09 for a week (1,694 jobs) on the
Philly-scale cluster preset; needs ../shared/traces/philly_jobs.csv.
"""

from __future__ import annotations

import argparse
import time

import baselines
import dlclusterenv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="philly")
    ap.add_argument("--policies", default="all")
    a = ap.parse_args()
    names = baselines.names() if a.policies == "all" else a.policies.split(",")
    for name in names:
        t = time.perf_counter()
        m = dlclusterenv.make_sim(a.scenario, 0).run(baselines.make(name))
        print(
            f"{name:15s} {time.perf_counter() - t:8.1f} s  finished {m.jobs_finished:5d}  "
            f"unfinished {m.jobs_unfinished:4d}  avg JCT {m.avg_jct_s:10,.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()

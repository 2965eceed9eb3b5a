"""Issue 15: how much of a job's time is queueing, per instance of a benchmark run. A scheduler that
reads the state wins by whom it starts and when, and at what shape; where jobs hardly wait, only the
shape is left, and a constant shape can match it. Per instance (test split, means over its runs): for
the best heuristic, the best constant on test and the best oracle (as `--check` names them), the
mean queueing delay as a share of the mean JCT, and the mean GPU utilisation.

    python -m benchmarks.queue_share OUT [--suite v4]

OUT is a `dlcluster benchmark` output folder (its runs.csv).
"""

from __future__ import annotations

import numpy as np

from benchmarks.window_check import benchmark_run
from dlclusterenv.benchmark import score

ROLES = (("heuristic", "best_heuristic"), ("constant", "best_constant_test"), ("oracle", "best_oracle"))


def queue_share(suite, insts, rows: list[dict]) -> list[dict]:
    """One row per instance: each role's policy, its queue share (mean avg_queue_s / mean avg_jct_s
    over the test runs) and mean gpu_util; with the check's gap and headroom."""
    out = []
    for c in score(suite, insts, rows)["check"]:
        row = {"instance": c["instance"], "constant_gap": c["constant_gap"], "oracle_headroom": c["oracle_headroom"]}
        for role, key in ROLES:
            mine = [r for r in rows if r["instance"] == c["instance"] and r["split"] == "test" and r["policy"] == c[key]]
            row[role] = c[key]
            row[f"{role}_queue_share"] = float(np.mean([r["avg_queue_s"] for r in mine])
                                               / np.mean([r["avg_jct_s"] for r in mine]))
            row[f"{role}_gpu_util"] = float(np.mean([r["gpu_util"] for r in mine]))
        out.append(row)
    return out


def main(argv=None) -> None:
    suite, insts, rows = benchmark_run(argv, __doc__)
    print("instance               gap    headroom  queue share / GPU util: best heuristic | best constant | best oracle")
    for r in queue_share(suite, insts, rows):
        cells = " | ".join(f"{r[role]} {r[f'{role}_queue_share']:.0%} / {r[f'{role}_gpu_util']:.0%}" for role, _ in ROLES)
        print(f"{r['instance']:<22} {r['constant_gap']:+6.1%} {r['oracle_headroom']:+7.1%}   {cells}")


if __name__ == "__main__":
    main()

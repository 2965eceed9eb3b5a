"""Issue 15: the validity check of a benchmark run, test window by test window. A suite judges an
instance on the mean over its test windows; this shows how far the windows agree: per window the
best heuristic, the best constant's gap to it and the oracle's headroom over it, as `--check`
computes them for the mean (`dlclusterenv.benchmark.score` on that window's test runs; the constant
is tuned on the whole train split, as in the suite).

    python -m benchmarks.window_check OUT [--suite v4]

OUT is a `dlcluster benchmark` output folder (its runs.csv); instances without trace windows are
left out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dlclusterenv.benchmark import instances, load_suite, read_runs, score


def per_window(suite, insts, rows: list[dict]) -> list[dict]:
    """The check rows of `score`, one per (instance, test window), with `window` (its index) and
    `dates` ("start..end") added."""
    out = []
    for inst in insts:
        mine = [r for r in rows if r["instance"] == inst.key]
        train = [r for r in mine if r["split"] == "train"]
        for k, w in enumerate(inst.entry.test.windows):
            test = [r for r in mine if r["split"] == "test" and r["window"] == k]
            c = score(suite, [inst], train + test)["check"][0]
            out.append({**c, "window": k, "dates": f"{w.start}..{w.end}"})
    return out


def benchmark_run(argv, doc: str) -> tuple:
    """(suite, its instances here, the rows of runs.csv) of the `dlcluster benchmark` output folder
    named on the command line (OUT [--suite v4]); shared by the scripts that read one."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="a benchmark's --out folder")
    ap.add_argument("--suite", default="v4")
    a = ap.parse_args(argv)
    suite, where = load_suite(a.suite)
    return suite, instances(suite, where, say=lambda m: None), read_runs(a.out / "runs.csv")


def main(argv=None) -> None:
    suite, insts, rows = benchmark_run(argv, __doc__)
    insts = [i for i in insts if i.entry.test.windows]
    checks = per_window(suite, insts, rows)
    q = suite.qualify
    print(f"per test window: constant gap (> {q.constant_gap:.0%}) / oracle headroom (>= {q.oracle_headroom:.0%})")
    for inst in insts:
        mine = [c for c in checks if c["instance"] == inst.key]
        cells = "  ".join(f"{c['dates'][5:10]} {c['best_heuristic'][:8]} {c['constant_gap']:+.1%} / "
                          f"{c['oracle_headroom']:.1%}{' Q' if c['qualifies'] else ''}" for c in mine)
        gaps = [c["constant_gap"] for c in mine]
        print(f"{inst.key:<22} gap min / median / max {min(gaps):+.1%} / {float(np.median(gaps)):+.1%} / "
              f"{max(gaps):+.1%}; gap > {q.constant_gap:.0%} on {sum(g > q.constant_gap for g in gaps)}, "
              f"qualify {sum(c['qualifies'] for c in mine)} of {len(mine)}:  {cells}")


if __name__ == "__main__":
    main()

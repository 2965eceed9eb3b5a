"""Where a suite run's time goes (issue 15: the full run of every baseline under 15 minutes).

    python benchmarks/suite_cost.py OUT/runs.csv [--workers 2] [--top 10] [--replace NEW.csv]

Reads the runs.csv that `dlcluster benchmark SUITE --out OUT` writes (one row per run with its
wall_s) and prints the run-seconds per policy and per instance, the share of the heaviest policy,
the longest single runs, and the least wall time the rest of the suite needs on `--workers`
processes (its run-seconds / workers, or its longest run if that is more): what dropping or
speeding up one policy would buy. `--replace NEW.csv`: rows of NEW.csv (same columns, e.g. one
policy re-run after a change, `benchmarks/optimus_fit.py suite`) take the place of the rows with
the same instance, split, window, policy and seed, so the estimate is that of the changed suite.
"""

from __future__ import annotations

import argparse

import pandas as pd


KEY = ["instance", "split", "window", "policy", "seed"]


def replace(runs: pd.DataFrame, new: pd.DataFrame, where: str) -> pd.DataFrame:
    """runs with each row whose KEY is in `new` swapped for new's row (every new row must match)."""
    missing = set(KEY) - set(new.columns)
    if missing:
        raise SystemExit(f"{where}: no column {sorted(missing)[0]!r}")
    keys = lambda df: pd.MultiIndex.from_frame(df[KEY].fillna({"window": -1}))  # noqa: E731
    hit = keys(runs).isin(keys(new))
    if hit.sum() != len(new):
        raise SystemExit(f"{where}: {len(new) - hit.sum()} of its {len(new)} rows match no run of the suite")
    print(f"{where}: {len(new)} runs replaced ({runs[hit].wall_s.sum():,.0f} -> {new.wall_s.sum():,.0f} run-seconds)")
    return pd.concat([runs[~hit], new[runs.columns.intersection(new.columns)]], ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs_csv")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--replace", metavar="NEW_CSV")
    a = ap.parse_args()
    if a.workers < 1:
        ap.error(f"--workers: {a.workers}: must be >= 1")
    runs = pd.read_csv(a.runs_csv)
    missing = {"instance", "policy", "wall_s"} - set(runs.columns)
    if missing:
        raise SystemExit(f"{a.runs_csv}: no column {sorted(missing)[0]!r} (a `dlcluster benchmark` runs.csv?)")
    if a.replace:
        runs = replace(runs, pd.read_csv(a.replace), a.replace)
    total = runs.wall_s.sum()
    print(f"{len(runs)} runs, {total:,.0f} run-seconds, at least {total / a.workers:,.0f} s wall on "
          f"{a.workers} workers (longest run {runs.wall_s.max():,.0f} s)")
    by_policy = runs.groupby("policy").wall_s.sum().sort_values(ascending=False)
    print(f"\nrun-seconds per policy (top {a.top}):")
    for p, s in by_policy.head(a.top).items():
        rest = runs[runs.policy != p].wall_s
        print(f"  {p:24s} {s:9,.0f}  {s / total:6.1%}   suite without it: >= "
              f"{max(rest.sum() / a.workers, rest.max() if len(rest) else 0.0):,.0f} s wall")
    print(f"\nrun-seconds per instance (top {a.top}), and its heaviest policy:")
    for inst, grp in sorted(runs.groupby("instance"), key=lambda kv: -kv[1].wall_s.sum())[: a.top]:
        heavy = grp.groupby("policy").wall_s.sum().sort_values(ascending=False)
        print(f"  {inst:28s} {grp.wall_s.sum():9,.0f}   {heavy.index[0]} {heavy.iloc[0]:,.0f}")
    cols = [c for c in ("instance", "split", "window", "policy", "seed", "wall_s") if c in runs.columns]
    print(f"\nlongest runs (top {a.top}):")
    print(runs.sort_values("wall_s", ascending=False)[cols].head(a.top).to_string(index=False))


if __name__ == "__main__":
    main()

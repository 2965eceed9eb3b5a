"""Issue 15: is there headroom over Pollux when a scheduler knows the truth? Runs `pollux-oracle`
(baselines/pollux.py `PolluxOracle`) on the test split of chosen instances of a finished suite run,
through the suite's own run function (`dlclusterenv.benchmark.run_task`, decision logs included),
and prints per instance and per test window the best heuristic (from the run's runs.csv),
optimus-oracle, pollux-oracle and the headroom of the best oracle (the suite's oracles plus
pollux-oracle) over the best heuristic, against the suite's bar (`qualify.oracle_headroom`).

    nice python -m benchmarks.oracle_headroom /tmp/poll11_v4 [--suite v4] [--instances A,B]
        [--workers 2] [--out DIR]

The new runs' rows go to DIR/runs.csv and their logs under DIR/logs (default DIR: SUITE_RUN/oracle).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from dlclusterenv.benchmark import Task, execute, instances, load_suite, read_runs, score

from .window_check import per_window

ORACLE = "pollux-oracle"
DEFAULT = "philly-6c71a0@0.5x,philly-6c71a0@1x,philly-6c71a0@2x,philly-6c71a0@3x,philly-6c71a0@7x,default@1x"


def tasks(insts, out: Path) -> list[Task]:
    """pollux-oracle on every test run of `insts`, logged as `dlcluster benchmark` logs them."""
    return [Task(i.key, "test", k, ORACLE, sc, seed,
                 str(out / "logs" / i.key / "test" / f"{ORACLE}-s{seed}{'' if k is None else f'-w{k}'}.jsonl"))
            for i in insts for k, sc, seed in i.runs("test")]


def _jct(rows, inst: str, policy: str, window=None) -> float:
    sel = [r["avg_jct_s"] for r in rows if r["instance"] == inst and r["split"] == "test"
           and r["policy"] == policy and (window is None or r["window"] == window)]
    return sum(sel) / len(sel)


def report(suite, insts, rows: list[dict]) -> list[str]:
    """One line per instance (mean over its test runs, as `--check`), then one per test window."""
    wide = suite.model_copy(update={"oracles": [*suite.oracles, ORACLE]})
    bar = suite.qualify.oracle_headroom
    lines = [f"headroom = 1 - best oracle / best heuristic (test split); bar >= {bar:.0%}",
             f"{'instance':<22} {'window':<22} {'best heuristic':>22} {'optimus-oracle':>14} {'pollux-oracle':>13}"
             f" {'best oracle':>14} {'headroom':>8}  >= bar"]

    def line(inst, where, c, window=None):
        h = f"{c['best_heuristic']} {c['best_heuristic_jct_s']:,.0f}"
        return (f"{inst.key:<22} {where:<22} {h:>22} {_jct(rows, inst.key, 'optimus-oracle', window):>14,.0f}"
                f" {_jct(rows, inst.key, ORACLE, window):>13,.0f} {c['best_oracle']:>14} {c['oracle_headroom']:>+8.1%}"
                f"  {'yes' if c['oracle_headroom'] >= bar else 'no'}")

    for inst in insts:
        lines.append(line(inst, "mean", score(wide, [inst], rows)["check"][0]))
        if inst.entry.test.windows:
            for c in per_window(wide, [inst], rows):
                lines.append(line(inst, f"w{c['window']} {c['dates']}", c, c["window"]))
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished `dlcluster benchmark` --out folder")
    ap.add_argument("--suite", default="v4")
    ap.add_argument("--instances", default=DEFAULT, help="comma-separated instance keys")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    suite, where = load_suite(a.suite)
    every = {i.key: i for i in instances(suite, where)}
    want = [k for k in a.instances.split(",") if k]
    missing = [k for k in want if k not in every]
    if missing:
        raise SystemExit(f"--instances: not in suite {suite.name}: {', '.join(missing)}")
    insts = [every[k] for k in want]
    out = a.out or a.run / "oracle"
    new = execute(tasks(insts, out), a.workers)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(new[0]))
        w.writeheader()
        w.writerows(new)
    rows = [r for r in read_runs(a.run / "runs.csv") if r["instance"] in want and r["policy"] != ORACLE] + new
    print("\n".join(report(suite, insts, rows)))


if __name__ == "__main__":
    main()

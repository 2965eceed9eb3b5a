"""Score a suite whose runs were made in parts, in several `dlcluster benchmark --out` folders.

    python benchmarks/suite_merge.py SUITE OUT [OUT ...] [--write DIR]

Why: `--resume` reuses a run only while its fingerprint (scenario + the trace file's size and mtime)
matches, so when the trace file is re-stamped between two parts (same bytes, new mtime) the earlier
part is not reused and a whole-suite rerun may not fit the time there is (issue 15: v3's eight
Philly instances). This scores the union instead: every planned run of SUITE (instance, split,
window, policy, seed) must be in exactly one OUT's runs.csv (a missing or duplicated run is an
error naming it; rows the suite does not plan are ignored and counted). Per OUT it prints how many
of its rows still match today's fingerprint; the others (stale) are trustworthy only after
`dlcluster benchmark --validate OUT/logs/INSTANCE` replays their logs to identical metrics here.
Then the validity report and the leaderboard, as `dlcluster benchmark` prints them (`benchmark.score`);
`--write DIR` also writes check.csv and leaderboard.csv there.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from dlclusterenv import benchmark
from dlclusterenv.evaluate import write_csv


def merge(suite_name: str, outs: list[Path], say=print) -> tuple[object, dict]:
    """(suite, score result) over the runs of `outs`; raises SystemExit on a missing/duplicate run."""
    suite, path = benchmark.load_suite(suite_name)
    insts = benchmark.instances(suite, path, say)
    tasks = {(t.instance, t.split, t.window, t.policy, t.seed): t for t in benchmark.plan(suite, insts, Path("."))}
    found: dict[tuple, tuple[dict, Path]] = {}
    for out in outs:
        runs = out / "runs.csv"
        if not runs.is_file():
            raise SystemExit(f"{out}: no runs.csv (a `dlcluster benchmark --out` folder?)")
        fresh = stale = ignored = 0
        with open(runs, newline="") as f:
            for r in csv.DictReader(f):
                row = {k: benchmark._cell(v) for k, v in r.items()}
                row["seed"] = int(row["seed"])
                key = benchmark._key(row)
                t = tasks.get(key)
                if t is None:
                    ignored += 1
                    continue
                if key in found:
                    raise SystemExit(f"run {key} is in both {found[key][1]} and {out}")
                found[key] = (row, out)
                if row.get("fingerprint") == benchmark.fingerprint(t.scenario, t.policy):
                    fresh += 1
                else:
                    stale += 1
        say(f"{out}: {fresh + stale} runs used ({fresh} match today's fingerprint, {stale} stale), "
            f"{ignored} not in suite {suite.name}")
    missing = [k for k in tasks if k not in found]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(tasks)} runs of suite {suite.name} are in no OUT, "
                         f"e.g. {missing[0]}")
    return suite, benchmark.score(suite, insts, [found[k][0] for k in tasks])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite", help="configs/benchmarks/NAME.yaml or a path")
    ap.add_argument("outs", nargs="+", type=Path, help="benchmark --out folders (each with runs.csv)")
    ap.add_argument("--write", type=Path, help="folder for check.csv and leaderboard.csv")
    a = ap.parse_args(argv)
    suite, res = merge(a.suite, a.outs, say=lambda m: print(m, file=sys.stderr))
    print(benchmark.check_table(res, suite))
    print()
    print(benchmark.board_table(res, suite))
    if a.write:
        a.write.mkdir(parents=True, exist_ok=True)
        write_csv(a.write / "check.csv", res["check"])
        write_csv(a.write / "leaderboard.csv", res["board"])


if __name__ == "__main__":
    main()

"""Score a suite whose runs were made in parts, in several `dlcluster benchmark --out` folders.

    python benchmarks/suite_merge.py SUITE OUT [OUT ...] [--policies SPEC,...] [--write DIR]

Why: a whole-suite rerun may not fit the time there is (issue 15: v3's eight Philly instances),
and `--resume` reuses a run only while its fingerprint matches (scenario, trace file content, the
policy's and the engine's source, a learned policy's files: `evaluate.run_key`, `policy_key`);
before that key held the trace file's size and mtime, so a trace re-stamped between two parts
(same bytes) made the earlier part stale. This scores the union instead: every planned run of SUITE
(instance, split, window, policy, seed) must be in exactly one OUT's runs.csv (a missing or
duplicated run is an error naming it; rows the suite does not plan are ignored and counted).
`--policies` adds to the plan the policies `dlcluster benchmark --policies` ran (learned
`KIND:PATH` or your own schedulers, validated as there; baselines are the suite's): their rows
are kept and scored on the leaderboard, while rows of any other such policy are ignored, as
without the flag. Per OUT it prints how many of its rows still match today's fingerprint; the
others (stale) are trustworthy only after `dlcluster benchmark --validate OUT/logs/INSTANCE`
replays their logs to identical metrics here. Then the validity report and the leaderboard, as
`dlcluster benchmark` prints them (`benchmark.score`); `--write DIR` also writes check.csv and
leaderboard.csv there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlclusterenv import benchmark, schedulers
from dlclusterenv.evaluate import resolve_policies, write_csv
from dlclusterenv.schedulers import PolicyError


def merge(suite_name: str, outs: list[Path], say=print, extra: list[str] = ()) -> tuple[object, dict]:
    """(suite, score result) over the runs of `outs`, with the policies `extra` (`--policies`) too;
    raises SystemExit on a missing/duplicate run."""
    suite, path = benchmark.load_suite(suite_name)
    insts = benchmark.instances(suite, path, say)
    tasks = {(t.instance, t.split, t.window, t.policy, t.seed): t
             for t in benchmark.plan(suite, insts, Path("."), extra)}
    found: dict[tuple, tuple[dict, Path]] = {}
    for out in outs:
        runs = out / "runs.csv"
        if not runs.is_file():
            raise SystemExit(f"{out}: no runs.csv (a `dlcluster benchmark --out` folder?)")
        fresh = stale = ignored = 0
        try:
            rows = benchmark.read_runs(runs)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        for row in rows:
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
            f"{ignored} not in suite {suite.name}" + (f" with {', '.join(extra)}" if extra else ""))
    missing = [k for k in tasks if k not in found]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(tasks)} runs of suite {suite.name} are in no OUT, "
                         f"e.g. {missing[0]}")
    return suite, benchmark.score(suite, insts, [found[k][0] for k in tasks], extra)


def policies(spec: str) -> list[str]:
    """`--policies`: as `dlcluster benchmark --policies` takes them (`evaluate.resolve_policies`: a
    learned model file must exist, a scheduler must import); a baseline is refused, since the
    suite sets those. SystemExit naming the bad one."""
    try:
        names = resolve_policies(spec)
    except PolicyError as e:
        raise SystemExit(f"--policies: {e}") from None
    bad = [p for p in names if schedulers.kind(p) == "baseline"]
    if bad:
        raise SystemExit(f"--policies: {bad[0]!r} is a baseline, which the suite plans itself; give learned "
                         "policies KIND:PATH or your own schedulers (module:Class, path/file.py:Class, an entry point)")
    return names


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite", help="configs/benchmarks/NAME.yaml or a path")
    ap.add_argument("outs", nargs="+", type=Path, help="benchmark --out folders (each with runs.csv)")
    ap.add_argument("--policies", help="the learned policies (KIND:PATH) or own schedulers that "
                    "`dlcluster benchmark --policies` ran, comma-separated: their rows are kept and scored")
    ap.add_argument("--write", type=Path, help="folder for check.csv and leaderboard.csv")
    a = ap.parse_args(argv)
    extra = policies(a.policies) if a.policies is not None else []
    suite, res = merge(a.suite, a.outs, say=lambda m: print(m, file=sys.stderr), extra=extra)
    print(benchmark.check_table(res, suite))
    print()
    print(benchmark.board_table(res, suite))
    if a.write:
        a.write.mkdir(parents=True, exist_ok=True)
        write_csv(a.write / "check.csv", res["check"])
        write_csv(a.write / "leaderboard.csv", res["board"])


if __name__ == "__main__":
    main()

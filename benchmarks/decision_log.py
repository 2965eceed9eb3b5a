"""Every decision and every job's finish time of one run, to check that a speed-up decides alike.

    python benchmarks/decision_log.py --policy drf --scenario default --seed 0 --out a.log
    python benchmarks/decision_log.py --policy optimus --vc all --start 2017-10-01 --end 2017-10-02 --out b.log
    cmp a.log b.log    # the same run on main and on a branch: the files are equal

One line per decision point (time, allocations, placements, preemptions, CPU limits, GPU modes,
wake-up, all sorted and printed with repr, so floats are exact), then one line per job (its finish
time, or "unfinished"), then the run's summary. The last line is the SHA-256 of the lines above
(tests keep it to pin a run's decisions).
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import baselines
import dlclusterenv
from dlclusterenv.api import Scheduler
from dlclusterenv.workload import load_scenario


def scenario_of(name: str, vc: str | None, start: str | None, end: str | None) -> str | dict:
    """The scenario, with its trace window replaced as benchmarks/philly_replay.py does."""
    if not (vc or start or end):
        return name
    sc, _ = load_scenario(name)
    s = sc.model_dump()
    window = s["workload"]["trace"]
    if vc:
        window["vc"] = None if vc == "all" else vc
    window.update({k: v for k, v in (("start", start), ("end", end)) if v})
    return s


def decision_log(scenario: str | dict, policy: str | Scheduler, seed: int = 0) -> list[str]:
    """The run's lines (see the module docstring), without the digest. `policy`: a registered
    name or a scheduler (a variant with options)."""
    sim = dlclusterenv.make_sim(scenario, seed)
    sched = baselines.make(policy) if isinstance(policy, str) else policy
    sim.reset()
    sched.reset(seed)
    out = []
    while not sim.done:
        view = sim.view(oracle=sched.oracle)
        d = sched.decide(view)
        out.append(repr((
            view.time, sorted(d.allocate.items()), sorted((k, repr(v)) for k, v in d.place.items()),
            list(d.preempt), sorted(d.cpu_limits.items()), sorted(d.gpu_mode.items()), d.wake_at,
        )))
        sim.apply(d)
        sim.advance()
    for jid in sorted(sim.jobs):
        j = sim.jobs[jid]
        out.append(f"{jid} {j.status} {j.finish_s!r}" if j.status == "done" else f"{jid} unfinished")
    out.append(repr(sorted(sim.metrics().summary().items())))
    return out


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vc")
    ap.add_argument("--start")
    ap.add_argument("--end")
    ap.add_argument("--out", help="file for the log (default: stdout)")
    a = ap.parse_args()
    lines = decision_log(scenario_of(a.scenario, a.vc, a.start, a.end), a.policy, a.seed)
    lines.append(digest(lines))
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        print(f"{a.policy} {a.scenario} seed {a.seed}: {len(lines) - 1} lines, {lines[-1]}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

"""How large Optimus grows jobs: per seed, the largest p + w any running job reached (with its p and
w) and the mean over jobs of each job's largest, after every decision (README "Baselines",
optspd5's before -> after; run on main and on a branch in turn).

    python benchmarks/optimus_job_sizes.py [--scenario default] [--seeds 3]
"""

from __future__ import annotations

import argparse

import baselines
import dlclusterenv


def job_sizes(scenario: str, seed: int) -> dict[str, tuple[int, int, int]]:
    """Job id -> the largest (p + w, p, w) it ran with."""
    sim = dlclusterenv.make_sim(scenario, seed)
    sched = baselines.make("optimus")
    sim.reset()
    sched.reset(seed)
    most: dict[str, tuple[int, int, int]] = {}
    while not sim.done:
        sim.apply(sched.decide(sim.view()))
        for j in sim.jobs.values():
            if j.status == "running":
                size = (j.num_ps + j.num_workers, j.num_ps, j.num_workers)
                most[j.job_id] = max(most.get(j.job_id, (0, 0, 0)), size)
        sim.advance()
    return most


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    for seed in range(a.seeds):
        most = job_sizes(a.scenario, seed)
        n, p, w = max(most.values())
        mean = sum(v[0] for v in most.values()) / len(most)
        print(f"seed {seed}: largest job {n} tasks ({p} PS, {w} workers); mean of each job's largest {mean:.1f}")


if __name__ == "__main__":
    main()

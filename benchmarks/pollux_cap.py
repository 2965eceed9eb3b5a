"""What stands between Pollux and the truth's headroom (issue 15, README "A stronger oracle?"):
Pollux and pollux-oracle on the same test runs, each with and without Pollux's growth cap (a job
gets at most 2x the largest size it was measured at: [ref] max_replicas, `Pollux.max_growth`), and
under Pollux's fitness (p = -1) and the plain mean of speedups (p = 1).

    python -m benchmarks.pollux_cap [--suite v4] [--instances philly-6c71a0@1x,philly-103959@1x]
        [--windows 2]

Columns, avg JCT s: `pollux` (as its paper: capped), `pollux uncapped` (max_growth 64, so
`max_workers` caps), `oracle capped` (pollux-oracle with Pollux's cap kept, as it was before this
benchmark), `oracle` (pollux-oracle: no growth cap). With the cap kept, exact goodput barely
moves Pollux's avg JCT; without it the truth and the fit part ways.
"""

from __future__ import annotations

import argparse

from baselines.pollux import Pollux, PolluxOracle
from dlclusterenv import make_sim
from dlclusterenv.benchmark import instances, load_suite

UNCAPPED = 64.0  # max_growth at which max_workers (64) is the only cap for any job measured once


class CappedOracle(PolluxOracle):
    """pollux-oracle with Pollux's growth cap kept."""

    cap = Pollux.cap


def variants(p: float) -> dict:
    """The four schedulers compared, under fitness power `p`."""
    return {"pollux": Pollux(p=p), "pollux uncapped": Pollux(p=p, max_growth=UNCAPPED),
            "oracle capped": CappedOracle(p=p), "oracle": PolluxOracle(p=p)}


def run(scenario, seed: int, p: float) -> dict[str, float]:
    """avg JCT s of each variant on one run."""
    return {name: make_sim(scenario, seed).run(s).summary()["avg_jct_s"] for name, s in variants(p).items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="v4")
    ap.add_argument("--instances", default="philly-6c71a0@1x,philly-103959@1x")
    ap.add_argument("--windows", type=int, default=2, help="test runs per instance (first N)")
    ap.add_argument("--p", default="-1,1", help="fitness powers to run")
    a = ap.parse_args(argv)
    suite, where = load_suite(a.suite)
    every = {i.key: i for i in instances(suite, where)}
    names = list(variants(-1.0))
    print(f"{'instance':<20} {'run':<6} {'p':>3} " + " ".join(f"{n:>16}" for n in names)
          + "  oracle / pollux")
    for key in a.instances.split(","):
        for k, sc, seed in every[key].runs("test")[: a.windows]:
            for p in (float(x) for x in a.p.split(",")):
                r = run(sc, seed, p)
                print(f"{key:<20} {'w' + str(k) if k is not None else 's' + str(seed):<6} {p:>3.0f} "
                      + " ".join(f"{r[n]:>16,.0f}" for n in names)
                      + f"  {r['oracle'] / r['pollux']:.3f}", flush=True)


if __name__ == "__main__":
    main()

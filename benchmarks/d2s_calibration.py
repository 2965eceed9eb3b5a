"""Calibrate the d2s scenarios' volume on the paper's traffic per experiment (issue 12, item 4).

    python benchmarks/d2s_calibration.py [--seeds 3]

D²S (seed 001) Fig. 7-8: about 5 GB of network traffic per experiment under D²S, 7-15 GB under the
other schedulers. This is an observable of the testbed other than the makespans that
`dlcluster reproduce d2s` tests, so the scenarios' two volume knobs are chosen on it alone:
`data_fraction` (the share of its data set an application, a training phase, reads per epoch) and
`exchange_every` (k: the map tasks reduce to the PS once per k steps). For each pair of the grid it
runs the four d2s scenarios under D²S, OTEA, FIFO and FAIR and prints the cross-node GB per
experiment; the pick minimises (ln(D²S / 5))^2 + (ln(mean of the others / 11))^2, 11 GB being the
middle of 7-15. Makespans are deliberately not printed. Three seeds by default: on seed 0 alone the
pick moved (0.03 / 100 -> 0.05 / 1,000) when an engine fix changed D²S's own seed-0 traffic by
1 GB, a change the three-seed mean does not follow (README, "Reproducing the seeds"). About a
minute on one core.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import yaml

import baselines
from dlclusterenv import make_sim

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("d2s_ic", "d2s_fr", "d2s_vc", "d2s_mixed")
POLICIES = ("d2s", "otea", "fifo", "fair")
FRACTIONS = (0.02, 0.03, 0.05, 0.08)
EVERY = (10, 30, 100, 300, 1000)
TARGET_D2S, TARGET_OTHERS = 5.0, 11.0  # GB, Fig. 7-8


def traffic(fraction: float, every: int, seeds: int) -> dict[str, float]:
    """Cross-node GB per experiment (one scenario, one seed), averaged, per policy."""
    out = {}
    for p in POLICIES:
        gb = []
        for sc in SCENARIOS:
            data = yaml.safe_load((ROOT / "configs" / "scenarios" / f"{sc}.yaml").read_text())
            data["workload"].update(exchange_every=every, data_fraction=fraction)
            for s in range(seeds):
                m = make_sim(data, s).run(baselines.make(p))
                assert m.jobs_unfinished == 0, (sc, p, s)
                gb.append(sum(r.cross_node_gb for r in m.jobs))
        out[p] = float(np.mean(gb))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    best = None
    print(f"{'fraction':>8} {'k':>5} " + " ".join(f"{p:>7}" for p in POLICIES) + f" {'others':>7} {'err':>6}")
    for f in FRACTIONS:
        for k in EVERY:
            t = traffic(f, k, args.seeds)
            others = float(np.mean([t[p] for p in POLICIES if p != "d2s"]))
            err = math.log(t["d2s"] / TARGET_D2S) ** 2 + math.log(others / TARGET_OTHERS) ** 2
            print(f"{f:>8} {k:>5} " + " ".join(f"{t[p]:>7.1f}" for p in POLICIES) + f" {others:>7.1f} {err:>6.3f}",
                  flush=True)
            if best is None or err < best[0]:
                best = (err, f, k)
    print(f"\nclosest to ~{TARGET_D2S:g} GB (D2S) and {TARGET_OTHERS:g} GB (others): "
          f"data_fraction {best[1]}, exchange_every {best[2]}")


if __name__ == "__main__":
    main()

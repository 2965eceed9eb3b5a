"""Optimus' shipped speed model against seed 003's fixed-global-batch form (audit5 finding, fixed).

    python benchmarks/optimus_speed_features.py

Seed 003's sync model 1/f = t . [M/w, 1, w/p, w, p] assumes "the global batch M fixed per job"; the
engine scales weakly (each worker computes its own local batch; speeds are local batches/s), so
`baselines/optimus.py` now fits seed 003's per-iteration terms in the engine's units, w/f = t .
[1, w/p, w, p] (`speed_features`, with the derivation). This script takes each sync PS model of the
`optimus` scenario alone on an empty cluster, the true speed of every (p, w) in 1..8 at Optimus'
own Fig. 10 placement (`place_even`), fits both forms (nnls, relative residuals, as `fit_speed`) on
the first 5 and the first 9 shapes of PROFILE_DESIGN, and prints the error on the held-out shapes:
"before" is the fixed-M form, "after" the shipped `fit_speed` / `predict_speed`. It exits 1 if the
shipped model's median held-out error is above the fixed-M form's for any model. A few seconds.
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.optimize import nnls

import dlclusterenv
from baselines.optimus import PROFILE_DESIGN, fit_speed, place_even, predict_speed
from dlclusterenv.placers import Capacity


def fixed_batch_features(p: int, w: int) -> np.ndarray:
    """Seed 003's sync features in iterations/s with M fixed (t0*M one coefficient): the "before"."""
    return np.array([1.0 / w, 1.0, w / p, w, p])


def fit_fixed_batch(train: dict[tuple[int, int], float]) -> np.ndarray:
    a = np.array([fixed_batch_features(*pw) for pw in train])
    y = np.array([1.0 / f for f in train.values()])
    theta, _ = nnls(a / y[:, None], np.ones(len(y)))
    return theta


def true_speeds(sim, spec) -> dict[tuple[int, int], float]:
    """The job alone on the empty cluster, at each (p, w) that Fig. 10's placement fits."""
    sim.specs = [spec]
    view = sim.view(oracle=True)
    while not view.jobs:
        sim.advance()
        view = sim.view(oracle=True)
    job = view.jobs[0]
    out = {}
    for p in range(1, 9):
        for w in range(1, 9):
            lay = place_even(view.cluster, Capacity.of(view), job.ps_demand, job.worker_demand, p, w)
            if lay is not None:
                out[(p, w)] = view.oracle.speed(job.job_id, list(lay[0]), list(lay[1]))
    return out


def main() -> int:
    done, worse = set(), []
    for spec in dlclusterenv.make_sim("optimus", 0).specs:
        model = dlclusterenv.make_sim("optimus", 0).zoo.models[spec.model]
        if spec.model in done or not model.sync or model.comm != "ps":
            continue
        done.add(spec.model)
        truth = true_speeds(dlclusterenv.make_sim("optimus", 0), spec)
        for n_fit in (5, 9):
            train = {pw: truth[pw] for pw in PROFILE_DESIGN[:n_fit] if pw in truth}
            before = fit_fixed_batch(train)
            after = fit_speed(train)
            held = [(pw, f) for pw, f in truth.items() if pw not in train]
            e_before = [abs(1.0 / float(fixed_batch_features(*pw) @ before) / f - 1) for pw, f in held]
            e_after = [abs(predict_speed(after, *pw) / f - 1) for pw, f in held]
            print(f"{spec.model:12s} fit on {n_fit} shapes, {len(held)} held out: "
                  f"before (fixed M) median {np.median(e_before):.1%} p90 {np.percentile(e_before, 90):.1%} | "
                  f"after (shipped) median {np.median(e_after):.1%} p90 {np.percentile(e_after, 90):.1%}")
            if np.median(e_after) > np.median(e_before):
                worse.append((spec.model, n_fit))
    if worse:
        print(f"shipped model worse than the fixed-M form on {worse}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

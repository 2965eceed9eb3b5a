"""Optimus' sync speed model against the engine's weak scaling (audit5 finding, not a fix).

    python benchmarks/optimus_speed_features.py

`baselines/optimus.py` fits seed 003's sync model 1/f = t . [M/w, 1, w/p, w, p] with "the global
batch M fixed per job". The engine scales weakly: every worker computes its own local batch, and
speeds are local batches per second, f = w x (iterations per second). With the per-iteration time
t0*m + t1 + t2*w/p + t3*w + t4*p (m the local batch), the model in the engine's units is
1/f = [t0*m + t1, t2, t3, t4] . [1/w, 1/p, 1, p/w]. This script takes each sync PS model of the
`optimus` scenario alone on an empty cluster, the true speed of every (p, w) in 1..8 at Optimus'
own Fig. 10 placement (`place_even`), fits both feature sets (nnls, relative residuals, as
`fit_speed`) on the first 5 and the first 9 shapes of PROFILE_DESIGN, and prints the error on the
held-out shapes. A few seconds.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

import dlclusterenv
from baselines.optimus import PROFILE_DESIGN, fit_speed, place_even, predict_speed
from dlclusterenv.placers import Capacity


def weak_features(p: int, w: int) -> np.ndarray:
    """Seed 003's per-iteration terms divided by w: the model in local batches per second."""
    return np.array([1.0 / w, 1.0 / p, 1.0, p / w])


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


def main() -> None:
    done = set()
    for spec in dlclusterenv.make_sim("optimus", 0).specs:
        model = dlclusterenv.make_sim("optimus", 0).zoo.models[spec.model]
        if spec.model in done or not model.sync or model.comm != "ps":
            continue
        done.add(spec.model)
        truth = true_speeds(dlclusterenv.make_sim("optimus", 0), spec)
        for n_fit in (5, 9):
            train = {pw: truth[pw] for pw in PROFILE_DESIGN[:n_fit] if pw in truth}
            theta = fit_speed(train, True)
            a = np.array([weak_features(*pw) for pw in train])
            y = np.array([1.0 / f for f in train.values()])
            tw, _ = nnls(a / y[:, None], np.ones(len(y)))
            held = [(pw, f) for pw, f in truth.items() if pw not in train]
            seed = [abs(predict_speed(theta, True, *pw) / f - 1) for pw, f in held]
            weak = [abs(1.0 / float(weak_features(*pw) @ tw) / f - 1) for pw, f in held]
            print(f"{spec.model:12s} fit on {n_fit} shapes, {len(held)} held out: "
                  f"seed-003 features median {np.median(seed):.1%} p90 {np.percentile(seed, 90):.1%} | "
                  f"weak-scaling features median {np.median(weak):.1%} p90 {np.percentile(weak, 90):.1%}")


if __name__ == "__main__":
    main()

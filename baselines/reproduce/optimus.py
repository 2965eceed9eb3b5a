"""Optimus vs DRF (seed 002, "Job Completion Time (JCT) and Makespan"): Optimus cuts the average JCT
by 2.39x and the makespan by 1.63x against DRF (4.1 vs 6.7 hours to finish all jobs), jobs arriving
at random in [0, 12000] s. The scenario is configs/scenarios/optimus.yaml (Optimus' testbed and job
repository); ratios are of the means over the seeds. optimus-oracle (true convergence and speed) is
printed beside them as the upper bound on better prediction, not as a claim of the paper. Tetris
(seed 002: "Optimus, DRF and Tetris use 4.1, 6.7 and 5.0 hours to finish all jobs") is run on the
same scenario for the makespan ordering.

Testbed observable besides the claims (issue 12): the error of Optimus' fitted speed model f(p, w)
(seed 003's sync model in the engine's units, fitted by `baselines.optimus.fit_speed` to the speeds
its jobs measured, pooled per model) against the engine's true speed, on this scenario, whose jobs
are all synchronous (seed 002 "Sync and Async": "both convergence estimation error and speed
estimation error are small with synchronous"). `speed_error`: at every full reallocation, for every running job, the model is
refitted without the samples of the job's own (p, w) (leave-that-shape-out, so the error is a
prediction, as where Optimus uses the fit: for shapes not measured) and its prediction compared with
the job's true speed alone on the cluster at its actual placement (`Simulator.isolated_speed`).

"Small" is read as a median absolute relative error of at most SMALL_ERROR = 10%. The seed gives no
number; 10% is a round band fixed before measuring, not fitted to any claim (the makespan/JCT rows
do not depend on it). The measured samples are taken under contention and the truth is the job
alone, so the error includes what sharing the cluster costs a job, as an online estimate would.
"""

from __future__ import annotations

import numpy as np

from dlclusterenv import make_sim

from .. import make
from ..optimus import Optimus, fit_speed, predict_speed
from . import Claim

SMALL_ERROR = 0.10  # "small" speed-estimation error: median |predicted - true| / true (docstring)


class _Probe(Optimus):
    """Optimus unchanged, recording its fitted speed model's error at every full reallocation."""

    def __init__(self, sim):
        super().__init__()
        self.sim, self.errors = sim, []

    def decide(self, view):
        full = view.time >= self._next_full - 1e-6
        d = super().decide(view)  # pools the speeds measured so far
        for j in view.running if full else ():
            ps = [t.node for t in j.tasks if t.role == "ps"]
            wk = [t.node for t in j.tasks if t.role != "ps"]
            held_out = {pw: f for pw, f in self._pooled(self._group(j)).items() if pw != (len(ps), len(wk))}
            theta = fit_speed(held_out)
            if theta is not None:
                true = self.sim.isolated_speed(j.job_id, ps, wk)
                self.errors.append(abs(predict_speed(theta, len(ps), len(wk)) - true) / true)
        return d


def speed_error(seeds: int) -> np.ndarray:
    """Relative errors of the fitted speed model against the true speed (module docstring)."""
    errors = []
    for s in range(max(seeds, 1)):
        sim = make_sim("optimus", s)
        probe = _Probe(sim)
        sim.run(probe)
        errors += probe.errors
    return np.array(errors)


def _means(policy: str, seeds: int) -> tuple[float, float]:
    runs = [make_sim("optimus", s).run(make(policy)) for s in range(max(seeds, 1))]
    return float(np.mean([m.avg_jct_s for m in runs])), float(np.mean([m.makespan_s for m in runs]))


def run(seeds: int = 3) -> list[Claim]:
    opt_jct, opt_span = _means("optimus", seeds)
    drf_jct, drf_span = _means("drf", seeds)
    ora_jct, ora_span = _means("optimus-oracle", seeds)
    _, tet_span = _means("tetris", seeds)
    print(
        f"optimus-oracle vs DRF (not a paper claim): avg JCT {drf_jct / ora_jct:.2f}x, "
        f"makespan {drf_span / ora_span:.2f}x"
    )
    err = speed_error(seeds)
    med = 100 * float(np.median(err)) if len(err) else float("nan")
    print(f"fitted speed model vs true speed, sync jobs: {len(err)} predictions, median error "
          f"{med:.1f}%, 90th percentile {100 * float(np.percentile(err, 90)) if len(err) else float('nan'):.1f}%")
    return [
        Claim(
            "testbed: Optimus' fitted speed model f(p, w), error against the true speed, sync jobs "
            "(seed 002 \"Sync and Async\": small; median, held-out shape)",
            f"small (<= {100 * SMALL_ERROR:.0f}%, our band)",
            f"{med:.1f}%",
            bool(len(err) and med <= 100 * SMALL_ERROR),
            kind="testbed",
        ),
        Claim(
            "Optimus vs DRF: avg JCT reduction",
            "2.39x",
            f"{drf_jct / opt_jct:.2f}x",
            drf_jct > opt_jct,
        ),
        Claim(
            "Optimus vs DRF: makespan reduction",
            "1.63x",
            f"{drf_span / opt_span:.2f}x",
            drf_span > opt_span,
        ),
        Claim(
            "hours to finish all jobs, Optimus / DRF",
            "4.1 / 6.7",
            f"{opt_span / 3600:.1f} / {drf_span / 3600:.1f}",
            opt_span < drf_span,
        ),
        Claim(
            "hours to finish all jobs, Optimus / Tetris / DRF (Tetris between)",
            "4.1 / 5.0 / 6.7",
            f"{opt_span / 3600:.1f} / {tet_span / 3600:.1f} / {drf_span / 3600:.1f}",
            opt_span < tet_span < drf_span,
        ),
    ]

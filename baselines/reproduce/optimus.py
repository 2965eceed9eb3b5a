"""Optimus vs DRF (seed 002, "Job Completion Time (JCT) and Makespan"): Optimus cuts the average JCT
by 2.39x and the makespan by 1.63x against DRF (4.1 vs 6.7 hours to finish all jobs), jobs arriving
at random in [0, 12000] s. The scenario is configs/scenarios/optimus.yaml (Optimus' testbed and job
repository); ratios are of the means over the seeds. optimus-oracle (true convergence and speed) is
printed beside them as the upper bound on better prediction, not as a claim of the paper. Tetris
(seed 002: "Optimus, DRF and Tetris use 4.1, 6.7 and 5.0 hours to finish all jobs") is run on the
same scenario for the makespan ordering.
"""

from __future__ import annotations

import numpy as np

from dlclusterenv import make_sim

from .. import make
from . import Claim


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
    return [
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

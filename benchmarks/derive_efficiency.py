"""Derive the statistical-efficiency figures of configs/efficiency.yaml from Pollux's measured
gradient statistics (issue 11), so that every number there can be re-derived.

    python benchmarks/derive_efficiency.py ADAPTDL/simulator/traces [--buckets 5]

ADAPTDL is a checkout of github.com/petuum/adaptdl (Apache-2.0; the figures in the config were
derived at commit de25dcc90c350b8ade3a710e437a651a8d2efae6). Its files
`<model>/validation-<B>.csv` hold, per epoch of a run at global batch B, the scale-invariant
progress (AdaScale iterations at the model's initial batch M0), the real iterations, the
validation metric and the gradient statistics grad_sqr / grad_var, with grad_var normalised to a
batch of M0 (Pollux, Qiao et al. OSDI'21, Eq. 6-7; adaptdl simulator/goodput.py `efficiency`:
PGNS = M0 * grad_var / grad_sqr and E(M) = (PGNS + M0) / (PGNS + M)).

What is derived, per model, from ONE declared file (FIT: the run at the smallest batch):
- M0: the progress unit. Where iterations equal progress the run was at M0 (imagenet 200, bert 12,
  ncf 256, yolov3 8); otherwise the run's per-epoch gain (progress / iterations) is AdaScale's
  r = (nu + 1) / (nu / s + 1) with nu = grad_var / grad_sqr, solved for the scale s = B / M0
  (median over epochs), and M0 = B / s rounded to a power of two (cifar10 128, deepspeech2 20).
- phi(progress): the gradient noise scale phi_e = M0 * nu per epoch, summarised over each of
  `--buckets` slices of equally many epochs (equal progress) by 1 / (phi + M0) = mean over its epochs of
  1 / (phi_e + M0). Why: a slice costs samples in proportion to the mean of (phi_e + M) / (phi_e + M0)
  over its epochs (epochs are equal progress), which for large M tends to M times that mean, so the
  summary keeps the slice's exact cost at large batches (and at M0 every summary gives 1); a median
  or plain mean would hide the early epochs' small noise scale, which is where big batches waste
  the most samples.
What is scored (item 2, `dlcluster fidelity`), from the OTHER file of the model (SCORED):
- the samples the run at batch B needed, over the samples the FIT run needed, to (a) complete the
  same scale-invariant schedule (all epochs both files have) and (b) first reach the target metric
  (the worse of the two runs' best values), with the fraction of the FIT run's progress at (b).
  The engine's prediction of this ratio (dlclusterenv.efficiency) uses only the FIT file's table.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path

FIT = {"imagenet": 200, "cifar10": 256, "bert": 12, "ncf": 256, "yolov3": 8, "deepspeech2": 160}
SCORED = {"imagenet": 800, "cifar10": 1024, "bert": 96, "ncf": 1024, "yolov3": 32, "deepspeech2": 640}
INCREASING = {"imagenet": True, "cifar10": True, "bert": True, "ncf": True, "yolov3": False,
              "deepspeech2": False}  # top-1 / F1 / hit rate up; yolov3 loss and WER down


def read(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def infer_m0(rows: list[dict[str, float]], batch: int) -> int:
    """The progress unit M0 (module docstring)."""
    prev_p = prev_i = 0.0
    scales = []
    for r in rows:
        gain = (r["progress"] - prev_p) / max(r["iteration"] - prev_i, 1.0)
        prev_p, prev_i = r["progress"], r["iteration"]
        nu = r["grad_var"] / r["grad_sqr"]
        denom = (nu + 1.0) / gain - 1.0
        if gain > 1.0 + 1e-3 and denom > 0:
            scales.append(nu / denom)
    if not scales:
        return batch
    s = statistics.median(scales)
    return int(batch / 2 ** round(math.log2(s)))


def phi_table(rows: list[dict[str, float]], m0: int, buckets: int) -> list[tuple[float, float]]:
    """(start fraction, phi) per slice of `buckets` (nearly) equal runs of epochs (module
    docstring); a slice starts where the epoch before it ended."""
    total = rows[-1]["progress"]
    n = min(buckets, len(rows))
    table = []
    for b in range(n):
        lo, hi = b * len(rows) // n, (b + 1) * len(rows) // n
        start = rows[lo - 1]["progress"] / total if lo else 0.0
        inv = statistics.fmean(1.0 / (m0 * r["grad_var"] / r["grad_sqr"] + m0) for r in rows[lo:hi])
        table.append((start, 1.0 / inv - m0))
    return table


def first_reach(rows: list[dict[str, float]], target: float, up: bool) -> int:
    best = None
    for k, r in enumerate(rows):
        m = r["metric"]
        best = m if best is None else (max(best, m) if up else min(best, m))
        if (best >= target) if up else (best <= target):
            return k
    raise ValueError("target not reached")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", type=Path, help="adaptdl's simulator/traces folder")
    ap.add_argument("--buckets", type=int, default=5)
    args = ap.parse_args()
    for model, b_fit in FIT.items():
        fit = read(args.traces / model / f"validation-{b_fit}.csv")
        b_sc = SCORED[model]
        sc = read(args.traces / model / f"validation-{b_sc}.csv")
        m0 = infer_m0(fit, b_fit)
        table = phi_table(fit, m0, args.buckets)
        n = min(len(fit), len(sc))
        up = INCREASING[model]
        bests = [max(r["metric"] for r in rows[:n]) if up else min(r["metric"] for r in rows[:n])
                 for rows in (fit, sc)]
        target = min(bests) if up else max(bests)
        k_fit, k_sc = first_reach(fit[:n], target, up), first_reach(sc[:n], target, up)
        whole = sc[n - 1]["iteration"] * b_sc / (fit[n - 1]["iteration"] * b_fit)
        reach = sc[k_sc]["iteration"] * b_sc / (fit[k_fit]["iteration"] * b_fit)
        print(f"{model}: M0 {m0} (fit validation-{b_fit}.csv, {len(fit)} epochs)")
        print("  phi: " + ", ".join(f"[{lo:.4f}, {phi:.4g}]" for lo, phi in table))
        print(f"  scored validation-{b_sc}.csv: whole schedule ({n} epochs) samples ratio {whole:.4f}; "
              f"target {target:.5g} reached at epoch {k_fit + 1} (fit, fraction "
              f"{fit[k_fit]['progress'] / fit[-1]['progress']:.4f}) / {k_sc + 1} (scored), "
              f"samples ratio {reach:.4f}")


if __name__ == "__main__":
    main()

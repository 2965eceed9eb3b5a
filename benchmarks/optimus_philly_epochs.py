"""Why Optimus' avg JCT on v2's Philly test runs rose after replayed jobs got their own epochs
(branch phil6): its remaining-work estimate, logged at every decision, and counter-experiments.

For each chosen v2 Philly test run, three schedulers run on the same scenario and seed:
  optimus          Optimus as shipped, instrumented (decisions unchanged: it only records);
  fallback=truth   Optimus whose remaining steps are the truth while it has < 3 loss points (where
                   it would use its fallback, end = min(epochs done + 20, max_epochs)), its fit after;
  remaining=truth  Optimus whose remaining steps are always the truth (speeds still its own
                   estimates), which isolates the remaining-work estimate from everything else;
  early=1          Optimus without its discount of a job with < 5 loss points (early_factor 0.95:
                   5 points took 5 minutes before phil6, now 5 of a job's K epochs), alone and
                   with remaining=truth (then nothing Optimus reads depends on the epochs);
and optimus-oracle for reference. Everything runs twice, under two streams of the 2% speed-
measurement bias of each (job, p, w): as shipped since branch bias7 (a generator of its own per
(job, p, w), Job.draw_bias), and the loss stream it replaced (_bias_from_loss_stream: drawn from the
job's loss generator after the losses of the epochs ended so far, so that a job with more epochs
ended before a resize draws a different bias; main had it until bias7, and it is what made
Optimus' Philly JCT move x1.139 with phil6, branch optdiag6). At every call of remaining_steps the
instrumented runs record the job's loss points, fit or fallback, the predicted and the true
remaining steps (the oracle's), and each decision's allocation (p, w) per job. Printed per run:
share of (decision, job) estimates on the fallback, mean |ln(pred / true)| and mean ln(pred / true)
for fit and fallback estimates, the share of running-job workers held by jobs on the fallback, and
avg JCT of each scheduler.

    PYTHONPATH=. python benchmarks/optimus_philly_epochs.py [--suite]

(optdiag6 ran this script's version at 9c985a2 on main and on the tree before phil6, 1626296, with
a bias drawn apart seeded by a CRC of the job id; its figures are in the README.) Subclasses and the
old stream live here, not in baselines/ or the engine: they are experiments, not policies.
"""

from __future__ import annotations

import argparse
import math
import time
from contextlib import contextmanager

from baselines.optimus import Optimus, OptimusOracle
from dlclusterenv import make_sim
from dlclusterenv import jobs
from dlclusterenv.benchmark import instances, load_suite

RUNS = (  # (instance, test window): the three Optimus runs that moved most (x1.35-1.46)
    ("philly-103959-oct@1x", 0),
    ("philly-6c71a0-nov@0.5x", 0),
    ("philly-6c71a0-nov@0.5x", 1),
)


class LoggedOptimus(Optimus):
    """Optimus that records its remaining-work estimates; `truth` picks what it returns:
    None (its own estimate), "fallback" (the truth where it has no fit), "all" (always the truth)."""

    def __init__(self, truth: str | None = None, early_factor: float = 0.95):
        super().__init__(early_factor=early_factor)
        self.truth = truth
        self.sim = None  # set before a run: the truth is read from the engine, not the view, so
        # that `oracle` stays False (allocate() reads it) and plain Optimus' decisions are unchanged
        self.name = ", ".join(["optimus"] + ([f"{truth}=truth"] if truth else [])
                              + ([f"early={early_factor:g}"] if early_factor != 0.95 else []))

    def reset(self, seed=None) -> None:
        super().reset(seed)
        self.est: dict[tuple[float, str], tuple[int, bool, float, float]] = {}
        self.alloc: dict[tuple[float, str], int] = {}

    def remaining_steps(self, view, job) -> float:
        own = super().remaining_steps(view, job)
        fallback = self._est.loss[job.job_id][1] is None
        truth = self.sim.job(job.job_id)
        true = max(truth.total_steps - truth.steps_done, 1.0)  # as OptimusOracle reads it
        self.est[(view.time, job.job_id)] = (len(job.observed_loss), fallback, own, true)
        if self.truth == "all" or (self.truth == "fallback" and fallback):
            return true
        return own

    def decide(self, view):
        d = super().decide(view)
        gone = set(d.preempt)
        for j in view.jobs:
            if (view.time, j.job_id) in self.est:
                w = d.allocate.get(j.job_id, (j.num_ps, j.num_workers))[1]
                self.alloc[(view.time, j.job_id)] = 0 if j.job_id in gone or (
                    j.status != "running" and j.job_id not in d.allocate) else w
        return d


def _bias_from_loss_stream(self) -> None:
    """Job.draw_bias as it was until branch bias7: the bias drawn from the job's loss generator,
    after the loss points of the epochs ended before. Every later loss then comes one draw later,
    so a job's losses (what Optimus fits) and its biases both move with the epochs ended before
    each resize. An ended job's history replayed after the run (obs_loss) skips no draw here, so
    it is not the one the job held; this script reads avg JCTs only, which do not read it."""
    self._draw_losses()
    key = (self.num_ps, self.num_workers)
    self._bias[key] = self.ledger.bias[self.row] = 1.0 + 0.02 * float(self.generator().standard_normal())


def stats(s: LoggedOptimus) -> dict:
    out = {"n": len(s.est)}
    fb = [k for k, v in s.est.items() if v[1]]
    out["fallback_share"] = len(fb) / max(len(s.est), 1)
    for tag, want in (("fit", False), ("fallback", True)):
        r = [math.log(v[2] / v[3]) for v in s.est.values() if v[1] == want]
        out[f"{tag}_abs"] = sum(map(abs, r)) / len(r) if r else float("nan")
        out[f"{tag}_signed"] = sum(r) / len(r) if r else float("nan")
    w_all = sum(s.alloc.values())
    out["fallback_workers"] = sum(w for k, w in s.alloc.items() if s.est[k][1]) / max(w_all, 1)
    pts = [v[0] for v in s.est.values()]
    out["points_median"] = sorted(pts)[len(pts) // 2] if pts else 0
    return out


@contextmanager
def bias_drawn(how):
    """Job.draw_bias replaced by `how` (None: as shipped) inside the block, restored after."""
    shipped = jobs.Job.draw_bias
    jobs.Job.draw_bias = how or shipped
    try:
        yield
    finally:
        jobs.Job.draw_bias = shipped


MODES = (("bias from its own generator (shipped)", None),
         ("bias from the loss stream (before bias7)", _bias_from_loss_stream))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=len(RUNS), help="how many of RUNS (default all)")
    ap.add_argument("--suite", action="store_true",
                    help="instead: plain Optimus on all 16 v2 Philly test runs under both bias "
                         "streams, with the geometric mean of avg JCT (about 30 CPU-s)")
    a = ap.parse_args()
    suite, where = load_suite("v2")
    insts = {i.key: i for i in instances(suite, where, say=lambda m: None)}
    t0 = time.process_time()
    for mode, how in MODES:
        with bias_drawn(how):
            if a.suite:
                run_suite(insts, mode)
            else:
                print(f"#### speed bias: {mode}")
                run_all(insts, a.runs)
    print(f"CPU {time.process_time() - t0:.1f} s")


def run_suite(insts, mode: str) -> None:
    """Plain Optimus on every Philly test run of v2, and the geometric mean of its avg JCT."""
    logs = []
    for key in sorted(k for k in insts if k.startswith("philly")):
        for window, sc, seed in insts[key].runs("test"):
            jct = make_sim(sc, seed).run(Optimus()).summary()["avg_jct_s"]
            logs.append(math.log(jct))
            print(f"{mode}: {key} window {window} seed {seed}: avg JCT {jct:.1f} s", flush=True)
    print(f"{mode}: geometric mean over {len(logs)} runs {math.exp(sum(logs) / len(logs)):.1f} s")


def run_all(insts, n: int) -> None:
    for key, window in RUNS[:n]:
        _, sc, seed = [r for r in insts[key].runs("test") if r[0] == window][0]
        print(f"== {key} test window {window} seed {seed}")
        for pol in (LoggedOptimus(), LoggedOptimus("fallback"), LoggedOptimus("all"),
                    LoggedOptimus(early_factor=1.0), LoggedOptimus("all", early_factor=1.0),
                    OptimusOracle()):
            sim = make_sim(sc, seed)
            pol.sim = sim
            summ = sim.run(pol).summary()
            line = f"  {pol.name:26s} avg JCT {summ['avg_jct_s']:10.1f} s"
            if isinstance(pol, LoggedOptimus):
                st = stats(pol)
                line += (f" | estimates {st['n']:6d}, median points {st['points_median']:3d}, on fallback "
                         f"{st['fallback_share']:6.1%} (holding {st['fallback_workers']:6.1%} of workers)"
                         f" | mean |ln pred/true| fit {st['fit_abs']:.3f} (signed {st['fit_signed']:+.3f})"
                         f", fallback {st['fallback_abs']:.3f} (signed {st['fallback_signed']:+.3f})")
            print(line, flush=True)


if __name__ == "__main__":
    main()

"""Why knowing the truth buys Pollux nothing (issue 15, README "A stronger oracle?"): at every
round of a Pollux run, the goodput table Pollux decides on (its throughput fit x the efficiency at
the phi measured so far) beside the one pollux-oracle reads (the true speed alone x the true
efficiency over the remaining work), for every job Pollux has measured and every (workers, one
node / several) its cap allows. Reports the error of the level (fit / truth - 1) and of the shape
(both tables divided by their own value at one worker on one node: Pollux's speedups are ratios of
goodputs, so an error common to all sizes of a job cannot move its decisions).

    python -m benchmarks.pollux_fit_error [--suite v4] [--instances default@1x,philly-6c71a0@7x]
        [--windows 1]

The probe reads the tables beside the run; Pollux's decisions are its own (the same run as the
suite's: its decision log is unchanged by the probe, tests/test_pollux_fit_error.py).

Measured (README, "A stronger oracle? pollux-oracle"): default@1x, 6c71a0@1x / 7x, 103959@1x, two
test runs each, 76 CPU-s, 285 MB.
"""

from __future__ import annotations

import argparse

import numpy as np

from baselines.pollux import Pollux, PolluxOracle
from dlclusterenv import make_sim
from dlclusterenv.benchmark import instances, load_suite


class Probe(Pollux):
    """Pollux that, at each goodput table it builds, also asks pollux-oracle's for the same job
    (so it is handed the oracle view; Pollux itself reads nothing of it)."""

    oracle = True

    def reset(self, seed=None):
        super().reset(seed)
        self.truth = PolluxOracle()
        self.truth.reset(seed)
        self.pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def goodput_table(self, job, w_max, view=None):
        fit = super().goodput_table(job, w_max, view)
        if self._samples.get(job.job_id):  # measured: the fit, not the linear first guess
            cap = self.cap(job)
            true = self.truth.goodput_table(job, cap, view)
            seen = np.zeros((cap, 2), bool)  # the (workers, several nodes) it has run at
            for w, multi in self._samples[job.job_id]:
                if 1 <= w <= cap:
                    seen[w - 1, int(multi)] = True
            self.pairs.append((fit[1: cap + 1].copy(), true[1:], seen))
        return fit


def errors(pairs) -> dict[str, np.ndarray]:
    """fit / truth - 1 per cell: `seen` at the layouts the job ran at, `unseen` elsewhere (the
    fit's extrapolation), `shape` of the tables scaled by their one-worker value."""
    seen, unseen, shape = [], [], []
    for fit, true, ran in pairs:
        ok = (true > 0) & (fit > 0)
        seen.append(fit[ok & ran] / true[ok & ran] - 1)
        unseen.append(fit[ok & ~ran] / true[ok & ~ran] - 1)
        if fit[0, 0] > 0 and true[0, 0] > 0:
            f, t = fit / fit[0, 0], true / true[0, 0]
            ok = (t > 0) & (f > 0)
            shape.append((f[ok] / t[ok] - 1).ravel())
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)  # noqa: E731
    return {"seen": cat(seen), "unseen": cat(unseen), "shape": cat(shape)}


def run(scenario, seed: int) -> tuple[int, dict, dict]:
    """One Pollux run with the probe: (tables compared, `errors`, the run's metrics)."""
    sched = Probe()
    summary = make_sim(scenario, seed).run(sched).summary()
    return len(sched.pairs), errors(sched.pairs), summary


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="v4")
    ap.add_argument("--instances", default="default@1x,philly-6c71a0@7x")
    ap.add_argument("--windows", type=int, default=1, help="test runs per instance (first N)")
    a = ap.parse_args(argv)
    suite, where = load_suite(a.suite)
    every = {i.key: i for i in instances(suite, where)}
    q = lambda x, p: float(np.percentile(np.abs(x), p)) if len(x) else float("nan")  # noqa: E731
    print("|fit / truth - 1| of Pollux's goodput table, median / p90 over cells (cells: count)")
    print(f"{'instance':<22} {'run':<6} {'tables':>7} {'at sizes run':>22} {'at sizes not run':>22}"
          f" {'shape':>22} {'avg JCT s':>10}")
    for key in a.instances.split(","):
        for k, sc, seed in every[key].runs("test")[: a.windows]:
            n, e, m = run(sc, seed)
            cols = [f"{q(e[c], 50):.1%} / {q(e[c], 90):.1%} ({len(e[c])})" for c in ("seen", "unseen", "shape")]
            print(f"{key:<22} {'w' + str(k) if k is not None else 's' + str(seed):<6} {n:>7}"
                  f" {cols[0]:>22} {cols[1]:>22} {cols[2]:>22} {m['avg_jct_s']:>10,.0f}", flush=True)


if __name__ == "__main__":
    main()

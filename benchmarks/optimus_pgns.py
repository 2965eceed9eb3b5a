"""Why Optimus' avg JCT on suite v3's Philly instances (`efficiency: pgns`) is x1.25-2 of v2's
(issue 15, branch optpgns9): a diagnosis with counter-experiments; baselines/optimus.py untouched.

Each scheduler runs one run of the instance (scenario, window, seed) twice: with the instance's
`efficiency: pgns` (v3) and with `efficiency: none` (the same run as v2):
  optimus              Optimus as shipped, instrumented (it only records; decisions unchanged);
  remaining=truth      Optimus whose remaining steps Q_j are the truth (its speeds its own):
                       isolates the loss-curve fit;
  E-aware              Optimus whose speed f(p, w) is multiplied by JobView.efficiency(w), Pollux's
                       Eq. 7 at the job's gradient noise scale measured now (what Pollux reads;
                       not an oracle): Q_j / f then counts the samples a larger batch wastes;
  optimus-oracle       the truth for Q_j and for f, f times the true efficiency at w;
  oracle, E-blind      optimus-oracle without that factor: true Q_j and true speed, blind to E.
Printed per run: avg JCT and queueing; over time (engine intervals, running jobs): workers held,
the share of held worker-time paused for a checkpoint, the share that is goodput (w E(w), E at the
job's phi now, outside pauses) and workers per running job; per job, shape changes and moves of a
running job (each a checkpoint) and preemptions. For the instrumented Optimus: mean
|ln(predicted / true remaining steps)| of its loss fit and of its fallback (< 3 loss points), and
the speed fit's error at shapes it predicted from the fit and a job then ran (ln of the fitted f
over the f measured there). The E-blind oracle measures what the blindness costs with true
estimates; --draws measures what one draw of the 2% speed-measurement bias does to one run.

    PYTHONPATH=. python benchmarks/optimus_pgns.py [--instance philly-103959-oct@1x] [--window 1]
    PYTHONPATH=. python benchmarks/optimus_pgns.py --suite   # 4 schedulers, the 16 v3 Philly test runs
    PYTHONPATH=. python benchmarks/optimus_pgns.py --draws 3 --instance philly [--aware]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter

import numpy as np

from baselines.optimus import Optimus, OptimusOracle
from dlclusterenv import make_sim
from dlclusterenv.benchmark import instances, load_suite
from dlclusterenv import jobs
from dlclusterenv.jobs import RUNNING


class LoggedOptimus(Optimus):
    """Optimus recording its estimates; `truth`: remaining steps are the engine's truth;
    `aware`: its speeds times JobView.efficiency(w)."""

    def __init__(self, truth: bool = False, aware: bool = False):
        super().__init__()
        self.truth, self.aware = truth, aware
        self.sim = None  # set before a run: the truth is read from the engine (oracle stays False)
        self.name = "E-aware" if aware else "remaining=truth" if truth else "optimus"

    def reset(self, seed=None) -> None:
        super().reset(seed)
        self.rem: list[tuple[bool, float, float]] = []  # (fallback, predicted, true) per estimate
        self.fitted: dict[tuple[str, int, int], float] = {}  # first fitted f of a shape it got

    def remaining_steps(self, view, job) -> float:
        own = super().remaining_steps(view, job)
        t = self.sim.job(job.job_id)
        true = max(t.total_steps - t.steps_done, 1.0)  # as OptimusOracle reads it
        self.rem.append((self._est.loss[job.job_id][1] is None, own, true))
        return true if self.truth else own

    def speed_fn(self, view, job):
        speed, ready = super().speed_fn(view, job)
        own, pooled = dict(job.observed_speed), self._models[self._group(job)][0]

        def logged(p, w, layout):
            f = speed(p, w, layout)
            if f is not None and (p, w) not in own and (p, w) not in pooled:
                self.fitted.setdefault((job.job_id, p, w), f)  # kept if the job gets (p, w)
            return f * job.efficiency(w) if self.aware and f else f

        return logged, ready


class BlindOracle(OptimusOracle):
    """optimus-oracle without the statistical efficiency: true Q_j over the true steps/s."""

    name = "oracle, E-blind"

    def speed_fn(self, view, job):
        def speed(p, w, layout):
            key = (job.job_id, layout)
            if key not in self._true:
                self._true[key] = view.oracle.speed(job.job_id, list(layout[0]), list(layout[1]))
            return self._true[key] or None

        return speed, True


def bias_stream(k: int):
    """Job.draw_bias with the (p, w) child's spawn key extended by k: the 2% measurement bias
    of every (job, p, w) redrawn, all else equal (one more draw of the noise Optimus reads)."""
    def draw_bias(self) -> None:
        key = (self.num_ps, self.num_workers)
        entropy, spawn_key = self.seed_key()
        child = np.random.SeedSequence(entropy, spawn_key=(*spawn_key, *key, k))
        self._bias[key] = self.ledger.bias[self.row] = 1.0 + 0.02 * float(np.random.default_rng(child).standard_normal())

    return draw_bias


def run(sc, seed: int, pol) -> dict:
    """One run, stepped as Simulator.run, with what each decision changes and the running jobs'
    workers and efficiency over each engine interval."""
    sim = make_sim(sc, seed)
    if isinstance(pol, LoggedOptimus):
        pol.sim = sim
    sim.reset()
    pol.reset(sim.seed)
    resize, move, preempt = Counter(), Counter(), Counter()
    held = good = njob = paused = 0.0
    while not sim.done:
        running = {j.job_id for j in sim.active_jobs() if j.status == RUNNING}
        d = pol.decide(sim.view(oracle=pol.oracle))
        for jid in d.allocate:
            resize[jid] += jid in running
        for jid in {t.rpartition("/")[0] for t in d.place} - set(d.allocate):
            move[jid] += jid in running
        for jid in d.preempt:
            preempt[jid] += 1
        sim.apply(d)
        t0 = sim.now
        jobs = [(j.num_workers, j.efficiency(), j.paused_until) for j in sim.active_jobs() if j.status == RUNNING]
        sim.advance()
        dt = sim.now - t0
        for w, e, until in jobs:  # a checkpoint pause holds the workers without progress
            z = min(max(until - t0, 0.0), dt)
            held += dt * w
            good += (dt - z) * w * e
            paused += z * w
        njob += dt * len(jobs)
    m = sim.metrics()
    fin = [r for r in m.jobs if r.finished]
    out = {"jct": m.avg_jct_s, "queue": m.avg_queue_s, "span": m.makespan_s, "workers": held / m.makespan_s,
           "goodput": good / held if held else math.nan, "paused": paused / held if held else math.nan, "w_per_job": held / njob if njob else math.nan,
           "resize": sum(resize.values()) / len(fin), "move": sum(move.values()) / len(fin),
           "preempt": sum(preempt.values()) / len(fin), "n": len(fin)}
    if isinstance(pol, LoggedOptimus):
        for tag, fb in (("fit", False), ("fallback", True)):
            r = [math.log(p / t) for f, p, t in pol.rem if f == fb]
            out[tag] = (float(np.mean(np.abs(r))), float(np.mean(r)), len(r)) if r else (math.nan, math.nan, 0)
        errs = []
        for (jid, p, w), f in pol.fitted.items():
            got = sim.job(jid).obs_speed.get((p, w))
            if got:
                errs.append(math.log(f / got))
        out["speed_fit"] = (float(np.mean(np.abs(errs))), float(np.mean(errs)), len(errs)) if errs else (math.nan,) * 2 + (0,)
    return out


def line(name: str, r: dict) -> str:
    s = (f"  {name:16s} avg JCT {r['jct']:9.1f} s, queue {r['queue']:8.1f} s, makespan {r['span']:8.0f} s | "
         f"workers held {r['workers']:5.1f}, paused {r['paused']:.3f}, goodput {r['goodput']:.3f}, workers/running job "
         f"{r['w_per_job']:5.2f} | per job: resizes {r['resize']:.2f}, moves {r['move']:.2f}, "
         f"preemptions {r['preempt']:.2f}")
    if "fit" in r:
        s += (f"\n{'':18s}|ln pred/true Q| fit {r['fit'][0]:.3f} (signed {r['fit'][1]:+.3f}, n {r['fit'][2]}), "
              f"fallback {r['fallback'][0]:.3f} (signed {r['fallback'][1]:+.3f}, n {r['fallback'][2]}); "
              f"speed fit |ln fitted/measured| {r['speed_fit'][0]:.3f} (signed {r['speed_fit'][1]:+.3f}, "
              f"n {r['speed_fit'][2]})")
    return s


def policies():
    return [LoggedOptimus(), LoggedOptimus(truth=True), LoggedOptimus(aware=True), OptimusOracle(), BlindOracle()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instance", default="philly-103959-oct@1x", help="an instance key; with --draws also "
                    "'philly': every Philly instance of v3")
    ap.add_argument("--window", type=int, default=None, help="test window index (default: every one)")
    ap.add_argument("--suite", action="store_true",
                    help="instead: optimus, E-aware and both oracles on the 16 v3 Philly test runs, geometric means")
    ap.add_argument("--draws", type=int, default=0,
                    help="instead: plain Optimus on the instance's test runs under the shipped bias and N redraws")
    ap.add_argument("--aware", action="store_true", help="with --draws: the E-aware Optimus, under pgns only")
    a = ap.parse_args()
    suite, where = load_suite("v3")
    insts = {i.key: i for i in instances(suite, where, say=lambda m: None)}
    t0 = time.process_time()
    if a.draws:
        shipped = jobs.Job.draw_bias
        keys = sorted(k for k in insts if k.startswith("philly")) if a.instance == "philly" else [a.instance]
        logs: dict[tuple[str, int], list[float]] = {}
        for key in keys:
            for window, sc, seed in insts[key].runs("test"):
                for eff in ("pgns",) if a.aware else ("pgns", "none"):  # under none E-aware is Optimus
                    got = []
                    for k in range(a.draws + 1):
                        jobs.Job.draw_bias = bias_stream(k) if k else shipped
                        try:
                            r = run(sc.model_copy(update={"efficiency": eff}), seed, LoggedOptimus(aware=a.aware))
                        finally:
                            jobs.Job.draw_bias = shipped
                        got.append(r["jct"])
                        logs.setdefault((eff, k), []).append(math.log(r["jct"]))
                        print(line(f"w{window} {eff} draw {k}", r), flush=True)
                    print(f"{key} window {window} efficiency {eff}: avg JCT over {len(got)} bias draws "
                          f"{', '.join(f'{x:.0f}' for x in got)}; geometric mean "
                          f"{math.exp(np.mean(np.log(got))):.1f} s", flush=True)
        for (eff, k), v in sorted(logs.items()):
            print(f"efficiency {eff}, draw {k}: geometric mean of avg JCT over {len(v)} runs "
                  f"{math.exp(np.mean(v)):.1f} s")
    elif a.suite:
        logs: dict[str, list[float]] = {}
        for key in sorted(k for k in insts if k.startswith("philly")):
            for window, sc, seed in insts[key].runs("test"):
                for eff in ("pgns", "none"):
                    print(f"== {key} window {window} seed {seed} efficiency {eff}", flush=True)
                    for pol in (LoggedOptimus(), LoggedOptimus(aware=True), OptimusOracle(), BlindOracle()):
                        r = run(sc.model_copy(update={"efficiency": eff}), seed, pol)
                        logs.setdefault(f"{pol.name} efficiency {eff}", []).append(math.log(r["jct"]))
                        print(line(pol.name, r), flush=True)
        for k, v in logs.items():
            print(f"{k}: geometric mean of avg JCT over {len(v)} runs {math.exp(sum(v) / len(v)):.1f} s")
    else:
        for window, sc, seed in insts[a.instance].runs("test"):
            if a.window is not None and window != a.window:
                continue
            for eff in ("pgns", "none"):
                print(f"== {a.instance} test window {window} seed {seed} efficiency {eff}", flush=True)
                for pol in policies():
                    print(line(pol.name, run(sc.model_copy(update={"efficiency": eff}), seed, pol)), flush=True)
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()

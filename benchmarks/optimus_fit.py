"""Optimus' loss-curve fit: its cost in a run and whether a change to it keeps Optimus' decisions.

    python benchmarks/optimus_fit.py record OUT.pkl [RUN ...]   # run Optimus, keep what matters
    python benchmarks/optimus_fit.py compare A.pkl B.pkl         # same decisions? same fits?
    python benchmarks/optimus_fit.py refit A.pkl                 # A's fit inputs, this tree's fit
    python benchmarks/optimus_fit.py suite OUT.csv [--workers 2] # every Optimus run of suite v2

A RUN is `default:SEED`, `optimus:SEED` (a scenario at a seed) or `INSTANCE:I` (the I-th run of a
v2 suite instance's test split: its test windows in order at its test seed, e.g.
`philly-6c71a0-nov@1x:0`, or its test seeds); default: the runs issue 15
names (default and optimus seed 0, the 6c71a0@1x and 103959@1x test windows). `record` keeps per run
the decision log, every job's finish time and true epoch count, the CPU-seconds of the run and of
`fit_loss`, and every fit's input points, result and job; `compare` reports identical decisions per
run and the largest relative difference of the fitted parameters (fits of the same points only);
`refit` fits a record's inputs again with this tree's `fit_loss` (see its docstring). Run `record`
once with PYTHONPATH at the old tree and once at the new one, then `compare`. `suite` runs only Optimus' runs
of `dlcluster benchmark v2` (its test split, decision logs beside OUT.csv) and writes their rows,
for `benchmarks/suite_cost.py RUNS.csv --replace OUT.csv`.
"""

from __future__ import annotations

import argparse
import pickle
import time

import numpy as np

DEFAULT_RUNS = ("default:0", "optimus:0", "philly-6c71a0-nov@1x:0", "philly-6c71a0-nov@1x:1",
                "philly-103959-oct@1x:0", "philly-103959-oct@1x:1")


def scenario_of(run: str):
    """(scenario, seed) of a RUN string."""
    from dlclusterenv.benchmark import instances, load_suite
    from dlclusterenv.workload import load_scenario

    name, _, arg = run.rpartition(":")
    if "@" not in name:
        return load_scenario(name)[0], int(arg)
    suite, where = load_suite("v2")
    inst = next((i for i in instances(suite, where, say=lambda s: None) if i.key == name), None)
    if inst is None:
        raise SystemExit(f"{run}: no v2 instance {name!r}")
    runs = inst.runs("test")
    if not 0 <= int(arg) < len(runs):
        raise SystemExit(f"{run}: instance {name} has {len(runs)} test runs")
    _, sc, seed = runs[int(arg)]
    return sc, seed


def record_run(run: str) -> dict:
    from baselines import optimus
    from dlclusterenv import make_sim
    from dlclusterenv.benchmark import Recorder

    fits: list[tuple[np.ndarray, tuple | None, tuple]] = []  # points, result, (job, rel_delta, budget)
    fit_s = [0.0]
    asking: list[tuple] = [()]
    plain, plain_remaining = optimus.fit_loss, optimus.Optimus.remaining_steps

    def timed(points):
        t0 = time.process_time()
        out = plain(points)
        fit_s[0] += time.process_time() - t0
        fits.append((np.array(points, dtype=float), out, asking[0]))
        return out

    def remaining(self, view, job):
        asking[0] = (job.job_id, job.rel_delta, job.max_epochs)
        return plain_remaining(self, view, job)

    sc, seed = scenario_of(run)
    optimus.fit_loss, optimus.Optimus.remaining_steps = timed, remaining
    try:
        rec = Recorder(optimus.Optimus())
        t0 = time.process_time()
        sim = make_sim(sc, seed)
        summary = sim.run(rec).summary()
        cpu = time.process_time() - t0
    finally:
        optimus.fit_loss, optimus.Optimus.remaining_steps = plain, plain_remaining
    return {"run": run, "decisions": rec.lines, "finish": {jid: j.finish_s for jid, j in sim.jobs.items()},
            "epochs": {jid: j.total_epochs for jid, j in sim.jobs.items()}, "summary": summary,
            "cpu_s": cpu, "fit_s": fit_s[0], "fits": fits}


def refit(a: dict) -> None:
    """Refit a record's inputs with this tree's fit_loss: time per fit, how the fitted curves and
    weighted squared errors compare, how often the predicted convergence epoch moves, and how far
    each prediction is from the job's true epoch count (mean |ln(predicted / true)|)."""
    from baselines.optimus import convergence_epoch, fit_loss, loss_curve

    for run, r in a.items():
        rows = [(p, b, who) for p, b, who in r["fits"] if b is not None and who]
        if not rows:
            continue
        t0 = time.process_time()
        new = [fit_loss(tuple(map(tuple, p))) for p, _, _ in rows]
        dt = (time.process_time() - t0) / len(rows)
        lower = higher = same_err = moved = 0
        err_old, err_new, curve = [], [], 0.0
        for (p, b, (jid, delta, budget)), nb in zip(rows, new):
            k, y = p[:, 0], p[:, 1]
            wt = 16.0 ** (np.arange(len(k)) // -(-len(k) // 3))
            e0, e1 = (float(wt @ (loss_curve(k, *x) - y) ** 2) for x in (b, nb))
            if e1 < e0 * (1 - 1e-9) - 1e-15:
                lower += 1
            elif e1 > e0 * (1 + 1e-9) + 1e-15:
                higher += 1
            else:
                same_err += 1
                curve = max(curve, float(np.max(np.abs(loss_curve(k, *nb) / loss_curve(k, *b) - 1))))
            c0, c1 = convergence_epoch(b, delta, budget), convergence_epoch(nb, delta, budget)
            moved += c0 != c1
            true = r["epochs"][jid]
            done = int(k.max())
            err_old.append(abs(np.log(max(c0, done + 1) / true)))
            err_new.append(abs(np.log(max(c1, done + 1) / true)))
        print(f"{run:26s} {len(rows)} fits: {1000 * dt:.2f} ms/fit here (recorded {1000 * r['fit_s'] / len(r['fits']):.2f} "
              f"over all {len(r['fits'])}); error lower {lower}, higher {higher}, equal {same_err} (curves "
              f"within {curve:.1e} there); convergence epoch moved {moved}; |ln(pred/true)| mean "
              f"{np.mean(err_old):.3f} recorded, {np.mean(err_new):.3f} refit")


def compare(a: dict, b: dict) -> None:
    for run in a:
        if run not in b:
            continue
        x, y = a[run], b[run]
        same_dec = x["decisions"] == y["decisions"]
        same_fin = x["finish"] == y["finish"]
        worst, n, changed = 0.0, 0, 0
        by_points = {p.tobytes(): r for p, r, _ in x["fits"]}
        for p, r, _ in y["fits"]:
            r0 = by_points.get(p.tobytes(), "absent")
            if r0 == "absent":
                continue
            n += 1
            if (r0 is None) != (r is None):
                changed += 1
                continue
            if r is not None:
                d = np.abs(np.subtract(r, r0)) / np.maximum(np.abs(r0), 1e-12)
                worst = max(worst, float(d.max()))
        print(f"{run:26s} decisions {'identical' if same_dec else 'DIFFER'}, finish times "
              f"{'identical' if same_fin else 'DIFFER'}; avg JCT {x['summary'].get('avg_jct_s')} / "
              f"{y['summary'].get('avg_jct_s')}; fits {len(x['fits'])} / {len(y['fits'])}, {n} shared: "
              f"max rel diff {worst:.2e}, {changed} None-changed; CPU-s {x['cpu_s']:.1f} / {y['cpu_s']:.1f}, "
              f"in fit_loss {x['fit_s']:.1f} / {y['fit_s']:.1f}")


def suite_rows(out: str, workers: int) -> None:
    from pathlib import Path

    import pandas as pd

    from dlclusterenv.benchmark import execute, instances, load_suite, plan

    suite, where = load_suite("v2")
    logs = Path(out).with_suffix("")
    tasks = [t for t in plan(suite, instances(suite, where), logs) if t.policy == "optimus"]
    t0 = time.perf_counter()
    rows = execute(tasks, workers)
    pd.DataFrame(rows).drop(columns="fingerprint").to_csv(out, index=False)
    print(f"{len(rows)} Optimus runs of v2 in {time.perf_counter() - t0:,.0f} s wall on {workers} workers, "
          f"{sum(r['wall_s'] for r in rows):,.0f} run-seconds -> {out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    f = sub.add_parser("refit")
    f.add_argument("a")
    u = sub.add_parser("suite")
    u.add_argument("out")
    u.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    if a.cmd == "record":
        out = {}
        for run in a.runs:
            out[run] = record_run(run)
            res = out[run]
            print(f"{run}: {res['cpu_s']:.1f} CPU-s, {res['fit_s']:.1f} in {len(res['fits'])} fits, "
                  f"avg JCT {res['summary'].get('avg_jct_s')}", flush=True)
            with open(a.out, "wb") as f:
                pickle.dump(out, f)
    elif a.cmd == "suite":
        suite_rows(a.out, a.workers)
    elif a.cmd == "refit":
        with open(a.a, "rb") as f:
            refit(pickle.load(f))
    else:
        with open(a.a, "rb") as f, open(a.b, "rb") as g:
            compare(pickle.load(f), pickle.load(g))


if __name__ == "__main__":
    main()

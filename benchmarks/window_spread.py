"""Issue 15, counter-experiment: do a trace instance's two test windows stand for its VC? The
learned policy that beat every constant did it by the order in which it starts jobs, and scripted
start orders (benchmarks/shape_rules.py) beat the best heuristic on the test split while losing to
arrival order on the train split. This replays many windows of the same VC, load and job count,
to see which split is the exception.

    python -m benchmarks.window_spread [--instance philly-6c71a0-nov@7x] [--start 2017-10-01]
        [--end 2017-12-21] [--every 3] [--days 2] [--shape 8x8] [--versus gandiva] [--seed 0]

Windows: [d, d + --days) for d = --start, --start + --every, ... before --end; each replays the
first jobs of that window as the instance's own windows do (the scenario's `first_n`, the
instance's load and PS / all-reduce mix), with --seed. Per window: the constant --shape started in
arrival order (the reference), the same shape with each other start order of shape_rules.ORDERS,
and --versus (a heuristic); each as a ratio to the reference. A window that overlaps one of the
instance's train or test windows is marked. The summary gives the geometric mean of each ratio
over the windows that overlap no split window, over the test-split ones, and the share of windows
where the order rule beats the reference by more than 1%.
"""

from __future__ import annotations

import argparse
import datetime as dt

import numpy as np

import baselines
from agents.learned import env_for
from agents.train import load_config
from benchmarks.shape_rules import ORDERS, Rule, instance_of, rule_episode
from dlclusterenv import make_sim
from dlclusterenv.benchmark import Window, day_windows


def _day(x: str, where: str) -> dt.date:
    try:
        return dt.date.fromisoformat(x)
    except ValueError:
        raise SystemExit(f"{where}: {x!r} is not a date (YYYY-MM-DD)") from None


def split_of(w: tuple[dt.date, dt.date], entry) -> str:
    """'train' / 'test' if w overlaps a window of that split of the suite entry, else ''."""
    for split in ("train", "test"):
        for sw in getattr(entry, split).windows:
            a, b = dt.date.fromisoformat(str(sw.start)), dt.date.fromisoformat(str(sw.end))
            if w[0] < b and a < w[1]:
                return split
    return ""


def gmean(x) -> float:
    return float(np.exp(np.mean(np.log(x)))) if len(x) else float("nan")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="v2")
    ap.add_argument("--instance", default="philly-6c71a0-nov@7x")
    ap.add_argument("--config", default="configs/agents/suite_6c71a0_grow_noprogress.yaml",
                    help="the learned policy's training config: its env is the rules' env")
    ap.add_argument("--start", default="2017-10-01")
    ap.add_argument("--end", default="2017-12-21")
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--shape", default="8x8", help="PxW: the constant shape every rule starts jobs at")
    ap.add_argument("--versus", default="gandiva", help="a heuristic, or '' for none")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.every < 1 or a.days < 1:
        raise SystemExit(f"--every {a.every}, --days {a.days}: both must be >= 1")
    parts = a.shape.split("x")
    if len(parts) != 2 or not all(x.isdigit() for x in parts):
        raise SystemExit(f"--shape: {a.shape!r} is not PxW (e.g. 8x8)")
    shape = (int(parts[0]), int(parts[1]))
    inst = instance_of(a.suite, a.instance)
    cfg = load_config(a.config)
    cfg.env.kwargs.update(shapes=[list(shape)], grow_running=False)
    orders = [o for o in ORDERS if o != "arrival"]
    names = orders + ([a.versus] if a.versus else [])
    print(f"{inst.key}: {a.shape} in arrival order (s) and each rule's avg JCT / it; seed {a.seed}")
    print(f"  {'window':23s} {'split':5s} {'arrival':>9s} " + " ".join(f"{n[:14]:>14s}" for n in names))
    rows = []
    for w in day_windows(_day(a.start, "--start"), _day(a.end, "--end"), a.every, a.days):
        sc = inst.scenario(Window(start=w[0].isoformat(), end=w[1].isoformat()))
        ref = rule_episode(env_for(cfg, sc), a.seed, Rule(shape, shape))["avg_jct_s"]
        r = {o: rule_episode(env_for(cfg, sc), a.seed, Rule(shape, shape, order=o))["avg_jct_s"] / ref
             for o in orders}
        if a.versus:
            r[a.versus] = make_sim(sc, a.seed).run(baselines.make(a.versus)).summary()["avg_jct_s"] / ref
        rows.append((split_of(w, inst.entry), r))
        print(f"  {w[0]} .. {w[1]} {rows[-1][0]:5s} {ref:9,.0f} " + " ".join(f"{r[n]:14.3f}" for n in names),
              flush=True)
    print("  geometric mean of the ratios (windows): " + "; ".join(
        f"{label} ({len(sel)}): " + ", ".join(f"{n} {gmean([r[n] for r in sel]):.3f}" for n in names)
        for label, sel in (("outside the splits", [r for s, r in rows if not s]),
                           ("overlapping the test split", [r for s, r in rows if s == "test"]),
                           ("overlapping the train split", [r for s, r in rows if s == "train"]))))
    out = [r for s, r in rows if not s]
    print("  windows outside the splits where a rule beats arrival order by > 1% / loses by > 1%: " + ", ".join(
        f"{n} {sum(r[n] < 0.99 for r in out)} / {sum(r[n] > 1.01 for r in out)}" for n in names))
    if a.versus:  # arrival order's ratio to itself is 1
        print(f"  windows outside the splits where a rule is <= 0.85x {a.versus}: " + ", ".join(
            f"{o} {sum(r.get(o, 1.0) / r[a.versus] <= 0.85 for r in out)} of {len(out)}" for o in ORDERS))


if __name__ == "__main__":
    main()

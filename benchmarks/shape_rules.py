"""Issue 15, counter-experiment: can a rule in the learned policy's own action space (a grid shape
when a job starts, optionally growing running jobs) beat the suite's constants or its best
heuristic, and how do the heuristics that win size jobs?

    python benchmarks/shape_rules.py [--instance philly-6c71a0-nov@7x] [--config configs/agents/suite_6c71a0.yaml]
        [--extra-seeds 4] [--extra-train-seeds 0] [--heuristics optimus-oracle,gandiva,optimus]
        [--match RULE ...] [--versus gandiva]

1. Scripted rules through the env of --config (its kwargs, `grow_running` set to true so growth
   is an action), on the instance's train split (as the suite plans it) and its test windows with
   the test seed and --extra-seeds more (the learned policy's extended test): start a pending job
   at `small`, or at `big` while at most `q_big` jobs wait; with `grow`, grow running jobs to that
   shape while no job waits. The env is work conserving: where the rule's shape does not fit but a
   smaller one does, the end of the round is masked, and the rule starts the job at the largest
   shape that fits (counted as `forced`). A rule never growing is the constant of its shape under
   the env's work conservation.
2. --heuristics: each heuristic's test-split runs (frozen seeds), watched at every decision: the
   shape a job first runs at (against its trace request) and how often a running job's shape
   changes, with its avg JCT.
3. Gandiva (the instance's best heuristic) with each of its mechanisms off in turn
   (`Gandiva(oversubscription=False)`: Algorithm 1's lines 11-12, time-slicing a job onto busy GPUs
   instead of queueing it; packing, migration, grow-shrink), on the same train and test runs: which
   mechanism its lead over the constants comes from.
Start orders (`Rule.order`): which waiting job a rule starts first, by a key its observation shows
(requested workers, model size, arrival); --versus HEURISTIC adds each rule's per-run ratio to
that heuristic on both splits.
Rules are not tuned on the test split: the table reports both splits, and the rule a train-split
choice would pick is marked.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass

import numpy as np

import baselines
from agents.learned import env_for
from agents.train import load_config
from dlclusterenv import make_sim
from dlclusterenv.api import Decision, Scheduler
from dlclusterenv.benchmark import Instance, instances, load_suite
from dlclusterenv.metrics import ci95


@dataclass(frozen=True)
class Rule:
    small: tuple[int, int]
    big: tuple[int, int]
    q_big: int = -1  # big while at most this many jobs wait (-1: never)
    grow: tuple[int, int] | None = None  # grow running jobs to this while no job waits
    shrink: bool = False  # while a waiting job does not fit, shrink the largest grown job to small
    order: str = "arrival"  # which waiting job starts first: a key of ORDERS

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"order: {self.order!r}: expected one of {', '.join(ORDERS)}")

    @property
    def name(self) -> str:
        s = f"{self.small[0]}x{self.small[1]}"
        if self.order != "arrival":
            s += f" ({self.order} first)"
        if self.q_big >= 0 and self.big != self.small:
            s += f" | {self.big[0]}x{self.big[1]} if <= {self.q_big} waiting"
        if self.grow:
            s += f", grow to {self.grow[0]}x{self.grow[1]} when none waits"
        if self.shrink:
            s += ", shrink back while one waits"
        return s


# Start order of the waiting jobs, from what a job row of the learned policy's observation shows
# (core._job_row: requested workers, arrival, model size); sorted() is stable, so ties keep arrival
# order. The learned queue-order policy starts jobs that asked for fewer workers (README).
ORDERS = {
    "arrival": None,
    "fewest workers": lambda j: j.spec.num_workers,
    "most workers": lambda j: -j.spec.num_workers,
    "smallest model": lambda j: j.model.param_bytes,
    "newest": lambda j: -j.spec.arrival_s,
}

RULES = (
    Rule((2, 4), (2, 4)), Rule((8, 8), (8, 8)), Rule((2, 4), (8, 8), 1), Rule((2, 4), (4, 8), 1),
    Rule((2, 4), (2, 4), grow=(8, 8)), Rule((2, 4), (2, 4), grow=(4, 8)),
    Rule((2, 4), (8, 8), 1, grow=(8, 8)), Rule((1, 2), (1, 2), grow=(8, 8)),
    Rule((2, 4), (2, 4), grow=(8, 8), shrink=True), Rule((2, 4), (2, 4), grow=(4, 8), shrink=True),
    Rule((1, 2), (1, 2), grow=(8, 8), shrink=True), Rule((1, 2), (1, 2), grow=(4, 8), shrink=True),
    Rule((4, 8), (4, 8)), *(Rule(s, s, order=o) for s in ((4, 8), (8, 8), (2, 4)) for o in ORDERS if o != "arrival"),
)


def rule_episode(env, seed: int, rule: Rule) -> dict:
    """One episode of `rule` on `env` (an allocation env with shapes; with `shrink_running` for a
    rule that shrinks): avg JCT, starts forced to a smaller shape by work conservation, growths
    and shrinks of running jobs."""
    u = env.unwrapped
    shapes, end = u.shapes, env.action_space.n - 1
    for s in (rule.small, rule.big, rule.grow):
        if s is not None and s not in shapes:
            raise ValueError(f"rule {rule.name!r}: {s} is not one of the env's shapes {shapes}")
    if rule.shrink and not getattr(u, "shrink_running", False):
        raise ValueError(f"rule {rule.name!r} shrinks jobs: the env needs shrink_running")
    obs, _ = env.reset(seed=seed)
    forced = grown = shrunk = 0
    while True:
        mask = u.action_masks()
        q = float(obs["global"][5])  # waiting / (waiting + max_jobs), as learned_suite reads it
        waiting = round(u.max_jobs * q / (1 - q))
        a, stuck = end, False
        slots = u.slots()
        key, order = ORDERS[rule.order], range(len(slots))
        if key:  # running jobs (growth) first in slot order, then the waiting ones by the rule's key
            order = sorted(order, key=lambda i: (0, 0) if slots[i].status == "running" else (1, key(slots[i])))
        for slot in order:
            job = slots[slot]
            if job.status == "running":  # grow (never a resize: that is the shrink below)
                grow = rule.grow and waiting == 0 and not u.is_shrink(job, *rule.grow)
                k = slot * u.per_job + shapes.index(rule.grow) if grow else -1
            else:
                want = rule.big if waiting <= rule.q_big else rule.small
                k = slot * u.per_job + shapes.index(want)
                stuck = stuck or (not mask[k] and u.proposed(job) == (0, 0))
            if k >= 0 and mask[k]:
                a = k
                grown += job.status == "running"
                break
        if a == end and stuck and rule.shrink:  # shrink the largest job grown past `small`
            k = shapes.index(rule.small)
            grown_jobs = [i for i, j in enumerate(slots) if j.status == "running"
                          and u.proposed(j)[1] > rule.small[1] and mask[i * u.per_job + k]]
            if grown_jobs:
                i = max(grown_jobs, key=lambda i: (u.proposed(slots[i])[1], -i))
                a, shrunk = i * u.per_job + k, shrunk + 1
        if a == end and not mask[end]:  # work conserving: start a job at the largest shape that fits
            pending = [k for k in np.flatnonzero(mask[:end]) if slots[k // u.per_job].status != "running"]
            a = int(max(pending, key=lambda k: (shapes[k % u.per_job][1], shapes[k % u.per_job][0], -k)))
            forced += 1
        obs, _, te, tr, info = env.step(a)
        if info["invalid_action"]:
            raise RuntimeError(f"rule {rule.name!r} chose masked action {a}")
        if te or tr:
            return {"avg_jct_s": u.sim.metrics().summary()["avg_jct_s"], "forced": forced, "grown": grown,
                    "shrunk": shrunk}


class _Watch(Scheduler):
    """Runs `inner`; at each decision notes every running job's shape: the first one (with the
    job's request) and each change since the last decision."""

    def __init__(self, inner: Scheduler):
        self.inner, self.name, self.oracle = inner, inner.name, inner.oracle
        self.starts: Counter = Counter()
        self.changes = 0
        self.seen: dict[str, tuple[int, int]] = {}

    def reset(self, seed=None) -> None:
        self.inner.reset(seed)
        self.seen = {}

    def decide(self, view) -> Decision:
        for j in view.jobs:
            if j.status == "running":
                shape = (j.num_ps, j.num_workers)
                old = self.seen.get(j.job_id)
                if old is None:
                    self.starts["as requested" if shape == tuple(j.requested) else "other"] += 1
                    self.starts[shape] += 1
                elif old != shape:
                    self.changes += 1
                self.seen[j.job_id] = shape
        return self.inner.decide(view)


def sizing(inst: Instance, policy: str) -> dict:
    """`policy` on the instance's frozen test runs, watched: avg JCTs, start shapes, changes."""
    w = _Watch(baselines.make(policy))
    jct = [make_sim(sc, s).run(w).summary()["avg_jct_s"] for _, sc, s in inst.runs("test")]
    started = sum(v for k, v in w.starts.items() if isinstance(k, tuple))
    return {"avg_jct_s": jct, "starts": w.starts, "changes": w.changes, "started": started}


ABLATIONS = {"gandiva (paper)": {}, "no over-subscription": {"oversubscription": False},
             "no packing": {"packing": False}, "no migration": {"migration": False},
             "no grow-shrink": {"grow_shrink": False}}


def ablation(runs: list, **kw) -> list[float]:
    """Gandiva(**kw)'s avg JCT on each (scenario, seed) of `runs`."""
    return [make_sim(sc, s).run(baselines.make("gandiva", **kw)).summary()["avg_jct_s"] for sc, s in runs]


def instance_of(suite_name: str, key: str) -> Instance:
    """The instance `key` of suite `suite_name`; SystemExit naming --instance if it has none."""
    suite, where = load_suite(suite_name)
    found = {i.key: i for i in instances(suite, where, say=lambda m: None)}
    if key not in found:
        raise SystemExit(f"--instance: {key!r} not in suite {suite.name} (it has {', '.join(found)})")
    return found[key]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="v2")
    ap.add_argument("--instance", default="philly-6c71a0-nov@7x")
    ap.add_argument("--config", default="configs/agents/suite_6c71a0.yaml",
                    help="the learned policy's training config: its env is the rules' env")
    ap.add_argument("--extra-seeds", type=int, default=4)
    ap.add_argument("--extra-train-seeds", type=int, default=0,
                    help="train runs with this many more seeds per train window (after the suite's)")
    ap.add_argument("--heuristics", default="optimus-oracle,gandiva,optimus")
    ap.add_argument("--rules", type=int, default=len(RULES), help="the first N rules only")
    ap.add_argument("--match", action="append", help="only the rules whose name is this (repeatable)")
    ap.add_argument("--versus", default="", help="a heuristic run on the same train and test runs: "
                    "each rule's per-run avg JCT ratio to it, mean +- 95%% interval")
    ap.add_argument("--no-ablations", action="store_true", help="skip Gandiva's ablations (3)")
    a = ap.parse_args(argv)
    inst = instance_of(a.suite, a.instance)
    unknown = sorted(set(a.match or ()) - {r.name for r in RULES})
    if unknown:
        raise SystemExit(f"--match: no rule is named {', '.join(map(repr, unknown))}")
    cfg = load_config(a.config)
    cfg.env.kwargs.update(grow_running=True, shrink_running=True)
    train = [(sc, s) for _, sc, _ in inst.runs("train")[:: len(inst.entry.train.seeds)]
             for s in range(min(inst.entry.train.seeds), max(inst.entry.train.seeds) + 1 + a.extra_train_seeds)]
    base = max(inst.entry.test.seeds)
    test = [(sc, s) for _, sc, _ in inst.runs("test")[:: len(inst.entry.test.seeds)]
            for s in range(min(inst.entry.test.seeds), base + 1 + a.extra_seeds)]
    print(f"{inst.key}: rules in {cfg.env.id}'s action space (grow_running, shrink_running true); "
          f"train {len(train)} runs, test {len(test)} runs (avg JCT s, mean over runs)")
    rows = []
    for rule in [r for r in RULES[: a.rules] if not a.match or r.name in a.match]:
        res = {k: [rule_episode(env_for(cfg, sc), s, rule) for sc, s in runs] for k, runs in
               (("train", train), ("test", test))}
        rows.append((rule, res))
    ref = {k: [make_sim(sc, s).run(baselines.make(a.versus)).summary()["avg_jct_s"] for sc, s in runs]
           for k, runs in (("train", train), ("test", test))} if a.versus else None
    if ref:
        print(f"  {a.versus}: train {np.mean(ref['train']):9,.0f}  test {np.mean(ref['test']):9,.0f}")
    pick = min(rows, key=lambda r: np.mean([x["avg_jct_s"] for x in r[1]["train"]]))[0] if rows else None
    for rule, res in rows:
        tr, te = ([x["avg_jct_s"] for x in res[k]] for k in ("train", "test"))
        fo, gr, sh = (sum(x[c] for split in res.values() for x in split) for c in ("forced", "grown", "shrunk"))
        mark = "  <- best on train" if rule is pick else ""
        if ref:
            r = {k: np.array([x["avg_jct_s"] for x in res[k]]) / ref[k] for k in res}
            mark = "".join(f"  {k} / {a.versus} {v.mean():.3f} +- {ci95(v):.3f}" for k, v in r.items()) + mark
        print(f"  {rule.name:52s} train {np.mean(tr):9,.0f}  test {np.mean(te):9,.0f}  "
              f"forced starts {fo:4d}  growths {gr:4d}  shrinks {sh:4d}{mark}")
    for h in filter(None, a.heuristics.split(",")):
        r = sizing(inst, h)
        shapes = {f"{k[0]}x{k[1]}": v for k, v in r["starts"].most_common() if isinstance(k, tuple)}
        print(f"  {h}: test avg JCT {', '.join(f'{x:,.0f}' for x in r['avg_jct_s'])} s; "
              f"{r['started']} jobs started, {r['starts']['as requested']} at their request; "
              f"first shapes {dict(list(shapes.items())[:8])}; shape changes of running jobs {r['changes']}")
    if not a.no_ablations:
        print("  Gandiva's mechanisms, each off in turn (avg JCT s, mean over runs):")
        for name, kw in ABLATIONS.items():
            tr, te = ablation(train, **kw), ablation(test, **kw)
            print(f"    {name:24s} train {np.mean(tr):9,.0f}  test {np.mean(te):9,.0f}")


if __name__ == "__main__":
    main()

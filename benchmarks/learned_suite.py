"""Issue 15 item 5: a learned policy on one benchmark-suite instance's test split, against the
suite's best heuristic and best constant, and the shapes it chooses across states.

    dlcluster train --config configs/agents/suite_6c71a0.yaml --out runs/agents/suite_6c71a0
    python benchmarks/learned_suite.py --model runs/agents/suite_6c71a0/model.zip \
        [--suite v2] [--instance philly-6c71a0-nov@7x] [--extra-seeds 9] \
        [--out runs/bench_learned_suite]

1. Frozen split: the instance's runs as `dlcluster benchmark SUITE --policies maskableppo:MODEL`
   plans them (constant grid on train and test, heuristics, oracles and the learned policy on
   test), scored by dlclusterenv.benchmark.score: best heuristic, train-tuned best constant.
2. Extended test (NOT the frozen suite; reported apart): the test windows with seeds test seed + 1
   .. + extra-seeds, for the learned policy, that best heuristic and that tuned constant (and the
   best constant of the grid in hindsight on the frozen test split, if another), so the interval
   has more than the frozen split's window x seed runs. Neither a window nor a seed of these is
   seen in training (configs/agents/suite_6c71a0.yaml trains on the train windows).
3. Shapes: every decision of the learned policy on the frozen and extended test runs, with the
   jobs waiting and the free GPUs it saw (its observation's global features), drawn by
   plots.shape_choices (shapes.png) and counted in the JSON, also among the decisions where every
   shape fit (so the choice was not forced by the mask).

Intervals: 95% Student t over the runs (window x seed); learned / other ratios are per run
(paired on the same jobs), mean and interval of the per-run ratios. Output: results.json,
shapes.png under --out; scheduler runs are kept in scheduler_runs.jsonl there and reused.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

from agents.learned import load_learned, parse_spec
from dlclusterenv.benchmark import Task, instances, load_suite, plan, run_task, score
from dlclusterenv.metrics import ci95


def stats(x) -> dict:
    x = np.asarray(x, dtype=float)
    return {"mean": float(x.mean()), "ci95": ci95(x), "n": int(len(x))}


def cached_execute(tasks: list[Task], cache: Path) -> list[dict]:
    """benchmark.execute() in one process, keeping scheduler runs (not learned ones) in `cache`
    (JSON lines, one written as each run ends) across invocations: a run is a pure function of
    its task, so a rerun for a new model reuses them."""
    key = lambda r: (r["instance"], r["split"], r["window"], r["policy"], r["seed"])  # noqa: E731
    kept = {key(r): r for r in map(json.loads, cache.read_text().splitlines())} if cache.exists() else {}
    todo = [t for t in tasks if ":" in t.policy or key(vars(t)) not in kept]
    got = {}
    for t in todo:  # one at a time, each kept as it ends, so an interrupted call loses one run
        r = got[key(vars(t))] = run_task(t)
        if ":" not in r["policy"]:
            with open(cache, "a") as f:
                f.write(json.dumps(r) + "\n")
    return [got.get(key(vars(t))) or kept[key(vars(t))] for t in tasks]


def decisions(spec: str, scenario, seed: int) -> list[dict]:
    """The learned policy's shape decisions on one run: jobs waiting (including the one sized)
    and free GPUs as its observation showed them, and the shape index chosen."""
    _, model, env = load_learned(spec, scenario)
    u = env.unwrapped
    obs, _ = env.reset(seed=seed)
    out = []
    while True:
        mask = u.action_masks()
        a, _ = model.predict(obs, action_masks=mask, deterministic=True)
        a = int(a)
        if a != env.action_space.n - 1:
            q, slot = obs["global"][5], a // u.per_job
            out.append({"waiting": round(u.max_jobs * q / (1 - q)),
                        "free_gpus": round(float(obs["global"][3]) * u.cluster.n_gpus),
                        "shape": a % u.per_job,
                        "every_shape_fit": bool(mask[slot * u.per_job:(slot + 1) * u.per_job].all())})
        obs, _, te, tr, _ = env.step(a)
        if te or tr:
            return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--suite", default="v2")
    ap.add_argument("--instance", default="philly-6c71a0-nov@7x")
    ap.add_argument("--extra-seeds", type=int, default=9)
    ap.add_argument("--out", default="runs/bench_learned_suite")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = f"maskableppo:{a.model}"
    suite, path = load_suite(a.suite)
    inst = next(i for i in instances(suite, path) if i.key == a.instance)
    t0 = time.perf_counter()

    cache = out / "scheduler_runs.jsonl"
    rows = cached_execute(plan(suite, [inst], out, [spec]), cache)
    res = score(suite, [inst], rows, [spec])
    chk = res["check"][0]
    frozen_wall = time.perf_counter() - t0

    def per_run(rs, policy):
        return {(r["window"], r["seed"]): r["avg_jct_s"] for r in rs if r["policy"] == policy and r["split"] == "test"}

    names = {"learned": spec, "best heuristic": chk["best_heuristic"], "best constant": chk["tuned_constant"]}
    if chk["best_constant_test"] != chk["tuned_constant"]:
        names["best constant (hindsight)"] = chk["best_constant_test"]
    frozen = {k: per_run(rows, p) for k, p in names.items()}

    base = max(inst.entry.test.seeds)
    seeds = list(range(base + 1, base + 1 + a.extra_seeds))
    runs = [(k, sc, s) for k, sc, _ in inst.runs("test")[:: len(inst.entry.test.seeds)] for s in seeds]
    tasks = [Task(inst.key, "test", k, p, sc, s, None if ":" in p else str(out / "logs" / f"{p}-s{s}-w{k}.jsonl"))
             for k, sc, s in runs for p in names.values()]
    ext_rows = cached_execute(tasks, cache)
    ext = {k: {**frozen[k], **per_run(ext_rows, p)} for k, p in names.items()}

    result = {"suite": suite.name, "instance": inst.key, "model": a.model,
              "training": json.loads((Path(a.model).parent / "run.json").read_text()),
              "named": names, "frozen_wall_s": frozen_wall, "wall_s": time.perf_counter() - t0}
    for label, table in (("frozen", frozen), ("extended", ext)):
        keys = sorted(table["learned"])
        block = {k: {**stats([table[k][r] for r in keys]), "per_run": [table[k][r] for r in keys]} for k in names}
        for k in names:
            if k != "learned":
                block[f"learned / {k}"] = stats([table["learned"][r] / table[k][r] for r in keys])
        block["runs"] = [list(r) for r in keys]
        result[label] = block

    every = inst.runs("test") + runs
    recs = [d for _, sc, s in every for d in decisions(spec, sc, s)]
    _, _, cfg = parse_spec(spec)
    shapes = [tuple(s) for s in cfg.env.kwargs["shapes"]]
    result["shapes"] = {f"{p}x{w}": n for (p, w), n in
                        zip(shapes, (Counter(r["shape"] for r in recs)[i] for i in range(len(shapes))))}
    result["decisions"] = len(recs)
    free = [r for r in recs if r["every_shape_fit"]]  # a choice, not forced by what fits
    result["shapes_when_every_shape_fit"] = {f"{p}x{w}": sum(r["shape"] == i for r in free)
                                             for i, (p, w) in enumerate(shapes)}
    from dlclusterenv.plots import shape_choices

    shape_choices(recs, shapes, f"{inst.key} test windows: shapes the learned policy chose "
                  f"({len(recs)} decisions, {len(every)} runs)").savefig(out / "shapes.png", dpi=110)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    for label in ("frozen", "extended"):
        b = result[label]
        print(f"{label} test split ({len(b['runs'])} runs: window, seed):")
        for k in names:
            print(f"  {k:<28} {names[k][:40]:<40} avg JCT {b[k]['mean']:9,.0f} +- {b[k]['ci95']:7,.0f} s")
        for k in names:
            if k != "learned":
                r = b[f"learned / {k}"]
                print(f"  learned / {k:<24} {r['mean']:.3f} +- {r['ci95']:.3f}")
    print("shapes chosen:", result["shapes"], f"over {len(recs)} decisions; where every shape fit:",
          result["shapes_when_every_shape_fit"])
    print(f"wall {result['wall_s']:.0f} s; {out / 'results.json'}, {out / 'shapes.png'}")


if __name__ == "__main__":
    main()

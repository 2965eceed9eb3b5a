"""Issue 15 item 5: a learned policy on benchmark-suite instances' test splits, against the
suite's best heuristic and best constant, and the shapes it chooses across states.

    dlcluster train --config configs/agents/suite_6c71a0.yaml --out runs/agents/suite_6c71a0
    python benchmarks/learned_suite.py --model runs/agents/suite_6c71a0/model.zip \
        [--suite v2] [--instances philly-6c71a0-nov@7x,philly-6c71a0-nov@2x,...] [--extra-seeds 9] \
        [--compare pollux] [--skip optimus] [--out runs/bench_learned_suite]

Every step below is done for each instance of --instances (default: the one the model was trained
on; others are where it was never trained: other loads of the VC, another VC's windows), each on
its TEST split only. --compare names schedulers to compare against in the extended test too
(e.g. `optimus,pollux`); one that is not among the suite's heuristics (pollux in v2) becomes a
heuristic of this evaluation: planned on the test split and eligible as the best heuristic.
--skip leaves suite heuristics out (where their runs do not fit the time; say so with the result).

1. Frozen split: the instance's runs as `dlcluster benchmark SUITE --policies maskableppo:MODEL`
   plans them (constant grid on train and test, heuristics, oracles and the learned policy on
   test), scored by dlclusterenv.benchmark.score: best heuristic, train-tuned best constant.
2. Extended test (NOT the frozen suite; reported apart): the test windows with seeds test seed + 1
   .. + extra-seeds, for the learned policy, that best heuristic and that tuned constant (and the
   best constant of the grid in hindsight on the frozen test split, if another; the --compare
   schedulers too), so the interval has more than the frozen split's window x seed runs. Neither a window nor a seed of these is
   seen in training (configs/agents/suite_6c71a0.yaml trains on the train windows).
3. Shapes: every decision of the learned policy on the frozen and extended test runs, with the
   jobs waiting and the free GPUs it saw (its observation's global features), drawn by
   plots.shape_choices (shapes-INSTANCE.png) and counted in the JSON (also by jobs waiting, and
   among the decisions where every shape fit, so the choice was not forced by the mask). A
   DLClusterGrow-v0 model's decisions are growth limits (its env's `growths`; "shape" holds the
   index), also by the GPUs the job asked for (a third panel) and by free GPUs. Its growth
   constant (Pollux with one max_growth, tuned on train by benchmarks/pollux_growth.py) is
   compared by --compare benchmarks.pollux_growth:GrowthG (a heuristic of this evaluation only).

Intervals: 95% Student t over the runs (window x seed); learned / other ratios are per run
(paired on the same jobs), mean and interval of the per-run ratios. Output: results.json (one
block per instance, rewritten as each ends; blocks of other instances from an earlier call with the
same suite and model are kept) and shapes-INSTANCE.png under --out; scheduler runs are kept in
scheduler_runs.jsonl there and reused (keyed with the scenario's fingerprint), the
learned policy's in learned_runs.jsonl (its fingerprint also holds the SHA-256 of the model file
and config.yaml, `evaluate.policy_key`). Calls running at once share these files through locks
beside them (`*.lock`); a line torn by a killed call is rerun, and results.json is replaced whole.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np

from agents.learned import load_learned, parse_spec
from dlclusterenv import schedulers
from dlclusterenv.benchmark import (Instance, Suite, Task, fingerprint, instances, load_suite, plan,
                                    run_task, score)
from dlclusterenv.config import ConfigError
from dlclusterenv.envs.grow import GROWTHS, GrowEnv
from dlclusterenv.evaluate import atomic_write
from dlclusterenv.metrics import ci95


def stats(x) -> dict:
    x = np.asarray(x, dtype=float)
    return {"mean": float(x.mean()), "ci95": ci95(x), "n": int(len(x))}


@contextmanager
def _locked(path: Path, shared: bool = False) -> Iterator[None]:
    """A lock beside `path` (`path.lock`) held for a read (`shared`) or a write of it: calls for
    other instances at once share the caches and results.json."""
    with open(path.with_name(path.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield


def _read_jsonl(path: Path) -> list[dict]:
    """The whole records of a JSON-lines cache; a line torn by a call killed while appending it
    (not JSON) is left out, so that run is simply run again."""
    if not path.exists():
        return []
    with _locked(path, shared=True):
        text = path.read_text()
    out = []
    for line in text.split("\n")[:-1]:  # the part after the last newline is not a whole line
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _append_jsonl(path: Path, record: dict) -> None:
    """One record as a line, after a newline that closes a torn last line if there is one."""
    line = (json.dumps(record) + "\n").encode()
    with _locked(path), open(path, "ab+") as f:
        if f.seek(0, 2):
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)


def cached_execute(tasks: list[Task], cache: Path) -> list[dict]:
    """benchmark.execute() in one process for scheduler runs, kept in `cache` (JSON lines, one
    written as each run ends, keyed with the scenario's fingerprint) across invocations: a run is a
    pure function of its task, so a rerun for a new model or another instance reuses them, and
    calls that run at once (other instances) share what each has run so far."""
    def key(r, fp):
        return r["instance"], r["split"], r["window"], r["policy"], r["seed"], fp

    def read():
        return {key(r, r["fingerprint"]): r for r in _read_jsonl(cache)}

    kept = read()
    keys = [key(vars(t), fingerprint(t.scenario, t.policy)) for t in tasks]
    for t, k in zip(tasks, keys):  # one at a time, each kept as it ends: an interrupt loses one run
        if k not in kept:
            kept.update(read())  # another call may have appended it meanwhile
        if k not in kept:
            r = kept[k] = run_task(t)
            _append_jsonl(cache, r)
    return [kept[k] for k in keys]


def learned_episode(task: Task) -> tuple[dict, list[dict]]:
    """The learned policy's run (the row run_task would give, from the same deterministic episode
    as `agents.learned.episode`) and its shape decisions: jobs waiting (including the one sized) and
    free GPUs as its observation showed them, the shape index chosen, whether every shape fit, and
    for a start the job's place among the jobs still waiting in arrival order (`queue_pos`, 0 = the
    oldest; None for a running job's resize): which job it starts is a decision too."""
    t0 = time.perf_counter()
    _, model, env = load_learned(task.policy, task.scenario)
    u = env.unwrapped
    obs, _ = env.reset(seed=task.seed)
    out = []
    while True:
        mask = u.action_masks()
        a, _ = model.predict(obs, action_masks=mask, deterministic=True)
        a = int(a)
        if a != env.action_space.n - 1:
            q, slot = obs["global"][5], a // u.per_job
            rec = {"waiting": round(u.max_jobs * q / (1 - q)),
                   "free_gpus": round(float(obs["global"][3]) * u.cluster.n_gpus), "shape": a % u.per_job}
            slots = u.slots()
            if isinstance(u, GrowEnv):  # "shape": the growth's index; every growth is offered
                job = slots[slot]
                rec.update(job_gpus=job.spec.num_workers * job.model.worker.gpu, every_shape_fit=True,
                           queue_pos=None)
            else:
                waiting = [i for i, j in enumerate(slots) if j.status != "running" and u.proposed(j) == (0, 0)]
                rec.update(queue_pos=waiting.index(slot) if slot in waiting else None,
                           every_shape_fit=bool(mask[slot * u.per_job:(slot + 1) * u.per_job].all()))
            out.append(rec)
        obs, _, te, tr, info = env.step(a)
        if info["invalid_action"]:
            raise RuntimeError(f"{task.instance} seed {task.seed}: the policy chose masked action {a}")
        if te or tr:
            row = {"instance": task.instance, "split": task.split, "window": task.window, "policy": task.policy,
                   "seed": task.seed, **u.sim.metrics().summary(), "wall_s": time.perf_counter() - t0,
                   "fingerprint": fingerprint(task.scenario, task.policy)}
            return row, out


def cached_episode(task: Task, cache: Path) -> tuple[dict, list[dict]]:
    """learned_episode, kept in `cache` (JSON lines) keyed with the run's fingerprint (scenario, and
    the content of the model file and its config), so a rerun with other seeds or extended policies
    reuses it and a retrained model is run again."""
    key = [task.instance, task.split, task.window, task.policy, task.seed,
           fingerprint(task.scenario, task.policy)]
    for r in _read_jsonl(cache):
        if r["key"] == key:
            return r["row"], r["decisions"]
    row, recs = learned_episode(task)
    _append_jsonl(cache, {"key": key, "row": row, "decisions": recs})
    return row, recs


def _learned(policy: str) -> bool:
    """A learned KIND:PATH, not a scheduler of --compare written module:Class (both have a colon)."""
    return schedulers.kind(policy) == "learned"


def run_all(tasks: list[Task], cache: Path) -> tuple[list[dict], list[dict]]:
    """Rows in task order (learned runs first, here; then scheduler runs through the cache, which
    meanwhile another call may have filled) and the learned policy's decisions over all its runs."""
    learned = {i: cached_episode(t, cache.with_name("learned_runs.jsonl")) for i, t in enumerate(tasks)
               if _learned(t.policy)}
    sched = iter(cached_execute([t for t in tasks if not _learned(t.policy)], cache))
    rows = [learned[i][0] if i in learned else next(sched) for i in range(len(tasks))]
    return rows, [d for _, ds in learned.values() for d in ds]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--suite", default="v2")
    ap.add_argument("--instances", default="philly-6c71a0-nov@7x",
                    help="comma-separated suite instances (entry@LOADx) to evaluate on, each on its test split")
    ap.add_argument("--extra-seeds", type=int, default=9,
                    help="seeds after the test split's last one, for the extended test (0: frozen split only)")
    ap.add_argument("--compare", default="",
                    help="comma-separated schedulers outside the suite's heuristics to add as heuristics")
    ap.add_argument("--skip", default="",
                    help="comma-separated suite heuristics left out of this evaluation (e.g. optimus where its "
                         "runs do not fit the time); the best heuristic is then the best of the rest")
    ap.add_argument("--out", default="runs/bench_learned_suite")
    a = ap.parse_args(argv)
    if a.extra_seeds < 0:
        ap.error(f"--extra-seeds: {a.extra_seeds} is negative")
    return a


def select(suite: Suite, where: Path, keys: str, compare: str, skip: str = "") -> tuple[Suite, list[Instance]]:
    """The suite with --compare's schedulers among its heuristics and --skip's left out, and the
    --instances asked for, in that order; ConfigError naming an unknown instance or heuristic."""
    extra = [p for p in compare.split(",") if p and p not in suite.heuristics]
    drop = [p for p in skip.split(",") if p]
    if bad := [p for p in drop if p not in suite.heuristics or p in compare.split(",")]:
        raise ConfigError(f"--skip: {bad} not among suite {suite.name}'s heuristics, or also in --compare")
    suite = suite.model_copy(update={"heuristics": [*(h for h in suite.heuristics if h not in drop), *extra]})
    known = {i.key: i for i in instances(suite, where)}
    wanted = [k for k in keys.split(",") if k]
    missing = [k for k in wanted if k not in known]
    if missing or not wanted:
        raise ConfigError(f"--instances: {missing or keys!r} not in suite {suite.name} "
                          f"(it has {', '.join(known)})")
    return suite, [known[k] for k in wanted]


def extended_tasks(inst: Instance, policies: list[str], extra_seeds: int, out: Path) -> list[Task]:
    """The extended test: the instance's test windows with the `extra_seeds` seeds after its test
    seeds, for each of `policies` (held out: the test windows, and seeds a training run never had)."""
    base = max(inst.entry.test.seeds)
    seeds = list(range(base + 1, base + 1 + extra_seeds))
    runs = [(k, sc, s) for k, sc, _ in inst.runs("test")[:: len(inst.entry.test.seeds)] for s in seeds]
    return [Task(inst.key, "test", k, p, sc, s,
                 None if _learned(p) else str(out / "logs" / inst.key / f"{quote(p, safe='')}-s{s}-w{k}.jsonl"))
            for k, sc, s in runs for p in policies]


def evaluate(suite: Suite, inst: Instance, spec: str, compare: list[str], extra_seeds: int,
             out: Path, cache: Path) -> dict:
    """Frozen split, extended test and shapes of one instance (see the module docstring)."""
    t0 = time.perf_counter()
    rows, recs = run_all(plan(suite, [inst], out, [spec]), cache)
    chk = score(suite, [inst], rows, [spec])["check"][0]
    frozen_wall = time.perf_counter() - t0

    def per_run(rs, policy):
        return {(r["window"], r["seed"]): r["avg_jct_s"] for r in rs if r["policy"] == policy and r["split"] == "test"}

    names = {"learned": spec, "best heuristic": chk["best_heuristic"]}
    for p in compare:
        if p not in names.values():
            names[p] = p
    names["best constant"] = chk["tuned_constant"]
    if chk["best_constant_test"] != chk["tuned_constant"]:
        names["best constant (hindsight)"] = chk["best_constant_test"]
    frozen = {k: per_run(rows, p) for k, p in names.items()}
    tasks = extended_tasks(inst, list(names.values()), extra_seeds, out)
    ext_rows, ext_recs = run_all(tasks, cache)
    recs += ext_recs
    ext = {k: {**frozen[k], **per_run(ext_rows, p)} for k, p in names.items()}

    result = {"instance": inst.key, "load": inst.load, "heuristics": suite.heuristics, "named": names,
              "frozen_wall_s": frozen_wall,
              "unfinished_jobs": {k: sum(r["jobs_unfinished"] for r in rows + ext_rows if r["policy"] == p)
                                  for k, p in names.items()}}
    for label, table in (("frozen", frozen), ("extended", ext)):
        keys = sorted(table["learned"])
        block = {k: {**stats([table[k][r] for r in keys]), "per_run": [table[k][r] for r in keys]} for k in names}
        for k in names:
            if k != "learned":
                block[f"learned / {k}"] = stats([table["learned"][r] / table[k][r] for r in keys])
        block["runs"] = [list(r) for r in keys]
        result[label] = block

    n_runs = len(frozen["learned"]) + len([t for t in tasks if t.policy == spec])
    _, _, cfg = parse_spec(spec)
    growths = cfg.env.kwargs.get("growths", GROWTHS) if cfg.env.id == "DLClusterGrow-v0" else None
    shapes = [tuple(s) for s in cfg.env.kwargs["shapes"]] if growths is None else []
    label = [f"{p}x{w}" for p, w in shapes] if growths is None else [f"growth x{g:g}" for g in growths]
    result["decisions"] = len(recs)
    result["shapes"] = {label[i]: n for i, n in sorted(Counter(r["shape"] for r in recs).items())}
    free = [r for r in recs if r["every_shape_fit"]]  # a choice, not forced by what fits
    result["shapes_when_every_shape_fit"] = {label[i]: n for i, n in sorted(Counter(r["shape"] for r in free).items())}
    def by(key: str, edges: tuple[int, ...]) -> dict:
        """Choices counted per bin of a record field (bins [lo, hi) between `edges`)."""
        return {f"{lo}-{hi - 1}": {label[i]: n for i, n in sorted(Counter(
            r["shape"] for r in recs if lo <= r[key] < hi).items())} for lo, hi in zip(edges[:-1], edges[1:])}

    result["shapes_by_waiting"] = by("waiting", (0, 2, 5, 10, 20, 10**6))
    if growths is not None:  # by the GPUs the job asked for, and by the free GPUs
        result["shapes_by_job_gpus"] = by("job_gpus", (0, 2, 3, 5, 9, 17, 10**6))
        result["shapes_by_free_gpus"] = by("free_gpus", (0, 4, 8, 16, 32, 10**6))
    # which waiting job a start took, where 2+ were waiting (records before this field: left out)
    picks = [r["queue_pos"] for r in recs if r.get("queue_pos") is not None and r["waiting"] >= 2]
    result["starts_by_queue_position"] = {k: n for k, n in sorted(Counter(
        "0 (oldest)" if x == 0 else "1" if x == 1 else "2-4" if x < 5 else "5+" for x in picks).items())}
    from dlclusterenv.plots import shape_choices

    what = "shapes" if growths is None else "growth limits"
    shape_choices(recs, shapes, f"{inst.key} test windows: {what} the learned policy chose "
                  f"({len(recs)} decisions, {n_runs} runs)",
                  labels=label if growths is not None else None).savefig(out / f"shapes-{inst.key}.png", dpi=110)
    result["wall_s"] = time.perf_counter() - t0
    return result


def report(r: dict) -> None:
    names = r["named"]
    for label in ("frozen", "extended"):
        b = r[label]
        print(f"{r['instance']}: {label} test split ({len(b['runs'])} runs: window, seed):")
        for k in names:
            print(f"  {k:<28} {names[k][:40]:<40} avg JCT {b[k]['mean']:9,.0f} +- {b[k]['ci95']:7,.0f} s")
        for k in names:
            if k != "learned":
                x = b[f"learned / {k}"]
                print(f"  learned / {k:<24} {x['mean']:.3f} +- {x['ci95']:.3f}")
    print("  shapes chosen:", r["shapes"], f"over {r['decisions']} decisions; where every shape fit:",
          r["shapes_when_every_shape_fit"], "; by jobs waiting:", r["shapes_by_waiting"])
    print("  starts with 2+ waiting, by the started job's place in the queue:", r.get("starts_by_queue_position"))
    if "shapes_by_job_gpus" in r:
        print("  by the GPUs the job asked for:", r["shapes_by_job_gpus"], "; by free GPUs:", r["shapes_by_free_gpus"])


def main(argv=None) -> None:
    a = parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = f"maskableppo:{a.model}"
    suite, insts = select(*load_suite(a.suite), a.instances, a.compare, a.skip)
    compare = [p for p in a.compare.split(",") if p]
    t0 = time.perf_counter()
    result = {"suite": suite.name, "model": a.model,
              "training": json.loads((Path(a.model).parent / "run.json").read_text()), "instances": {}}
    for inst in insts:
        r = evaluate(suite, inst, spec, compare, a.extra_seeds, out, out / "scheduler_runs.jsonl")
        path = out / "results.json"
        with _locked(path):  # read, merged and replaced whole while no other call writes it
            old = json.loads(path.read_text()) if path.exists() else {}
            if (old.get("suite"), old.get("model")) == (suite.name, a.model):  # calls for other instances add up
                result["instances"] = {**old["instances"], **result["instances"]}
            result["instances"][inst.key] = r
            result["wall_s"] = time.perf_counter() - t0
            text = json.dumps(result, indent=1)
            atomic_write(path, lambda tmp: tmp.write_text(text))
        report(r)
    print(f"wall {result['wall_s']:.0f} s; {out / 'results.json'}, {out}/shapes-*.png")


if __name__ == "__main__":
    main()

"""Env steps per CPU-second on a scenario against CartPole-v1 in the same run (goal: >= 0.3x on
`default`), and the native batched envs' env steps per CPU-second (goal: >= 50,000 for
DLClusterPlace-v0 on `default`).

    python benchmarks/env_speed.py [--scenario default] [--steps 5000] [--num-envs 16 64]
        [--repeats 2] [--ids DLClusterPlace-v0 ...] [--batched-ids ...] [--no-sync]
        (--ids defaults to every env id but DLClusterGrow-v0, see SLOW_IDS; --num-envs with no
        number skips the batched part)
    python benchmarks/env_speed.py --profile 20000 [--top 15] [--ids ...]   (where a step's time goes)

Both envs take uniformly random actions (ours: among the actions its mask allows, so the
simulator does real work); resets are included in the time. Times are CPU seconds of this process
(`time.process_time`), the best of `--repeats` runs: the machine is shared, and wall time counts
the other processes' turns. Batched: gym.make_vec(id, N, vectorization_mode="vector_entry_point")
beside gymnasium's SyncVectorEnv of the same id and CartPole's own vector env, each stepped
`steps` env steps in all (steps / N calls). To compare two trees, run this script with each on
PYTHONPATH in turn (it uses only `dlclusterenv.ENV_IDS` and gym ids).

`--profile N` runs N random masked steps of each id (the same loop, resets included) under
cProfile instead and lists the functions with the most own time, in microseconds per step, with
their time including callees and their calls per step. The profiler adds a cost per call (a
profiled step takes about 1.5-2x an unprofiled one), so read the shares, not the absolute times.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import dlclusterenv

# Measured only when named: a DLClusterGrow-v0 step that ends a round runs Pollux's decision over
# every active job (about 0.1 s), so the default call would not end in useful time (README row
# "DLClusterGrow-v0's step cost").
SLOW_IDS = ("DLClusterGrow-v0",)


def run_steps(env: gym.Env, steps: int, masked: bool, rng: np.random.Generator) -> None:
    for _ in range(steps):
        if masked:
            good = np.flatnonzero(env.unwrapped.action_masks())
            a = int(good[rng.integers(len(good))])
        else:
            a = env.action_space.sample()
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()


def masked_choice(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row of `masks` (envs x actions), uniform over the row's valid ones: the j-th
    valid action, j uniform below the row's count. `rng.choice(np.flatnonzero(row))` per row cost
    about 10 us a row more, counted against the env steps being measured (CartPole's
    `action_space.sample()`: 3-5 us). Up to 256 actions the whole batch at once (64 x 33:
    35 us a batch against 360 for a loop); wider masks (the share env's 10,259) row by row, where
    the batch's cumulative sums cost 6x the loop's scans."""
    count = masks.sum(axis=1)
    if not count.all():
        raise ValueError(f"env {int(np.argmin(count))} has no valid action")
    j = (rng.random(len(masks)) * count).astype(np.int64)
    if masks.shape[1] <= 256:
        return (np.cumsum(masks, axis=1) > j[:, None]).argmax(axis=1)
    return np.array([np.flatnonzero(m)[k] for m, k in zip(masks, j)], dtype=np.int64)


def steps_per_s(env: gym.Env, steps: int, masked: bool) -> float:
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.process_time()
    run_steps(env, steps, masked, rng)
    return steps / (time.process_time() - t0)


def profile(env: gym.Env, steps: int, top: int) -> list[tuple[str, float, float, float]]:
    """(function, own us, us including callees, calls) per step of the `top` functions with the
    most own time over `steps` random masked steps under cProfile."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    prof = cProfile.Profile()
    prof.runcall(run_steps, env, steps, True, rng)
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (prim calls, calls, own, incl, callers)
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [(f"{Path(f).name}:{line}({name})" if line else name, tt / steps * 1e6, ct / steps * 1e6, nc / steps)
            for (f, line, name), (_, nc, tt, ct, _) in rows]


def vector_steps_per_s(vec, steps: int, masked: bool) -> float:
    rng = np.random.default_rng(0)
    vec.reset(seed=0)
    n = vec.num_envs
    t0 = time.process_time()
    for _ in range(max(steps // n, 1)):
        if masked:
            masks = vec.action_masks() if hasattr(vec, "action_masks") else np.stack(
                vec.call("action_masks"))
            a = masked_choice(masks, rng)
        else:
            a = vec.action_space.sample()
        vec.step(a)  # autoreset: ended episodes restart on the next step
    return max(steps // n, 1) * n / (time.process_time() - t0)


def best(make, run, repeats: int) -> float:
    """The best of `repeats` runs, each on a freshly made env."""
    return max(run(make()) for _ in range(repeats))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--num-envs", type=int, nargs="*", default=[16],
                    help="batched sizes (none given: no batched part)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--ids", nargs="+", default=[i for i in dlclusterenv.ENV_IDS if i not in SLOW_IDS],
                    help=f"env ids (default: every id but {', '.join(SLOW_IDS)})")
    ap.add_argument("--batched-ids", nargs="+", help="ids of the batched part (default: --ids)")
    ap.add_argument("--no-sync", action="store_true", help="skip the SyncVectorEnv comparison")
    ap.add_argument("--profile", type=int, metavar="N", help="profile N steps of each id instead")
    ap.add_argument("--top", type=int, default=15, help="functions listed per id with --profile")
    a = ap.parse_args(argv)
    for name, v in (("--steps", [a.steps]), ("--repeats", [a.repeats]), ("--num-envs", a.num_envs),
                    ("--profile", [1 if a.profile is None else a.profile]), ("--top", [a.top])):
        if v and min(v) < 1:
            ap.error(f"{name}: {min(v)} is not a positive whole number")
    r, sc = a.repeats, a.scenario
    if a.profile is not None:
        for eid in a.ids:
            rows = profile(gym.make(eid, scenario=sc), a.profile, a.top)
            print(f"{eid} on {sc}, {a.profile} random masked steps under cProfile (us per step)")
            print(f"  {'own':>8}{'incl':>9}{'calls':>8}  function")
            for fn, own, incl, calls in rows:
                print(f"  {own:8.1f}{incl:9.1f}{calls:8.2f}  {fn}")
        return
    cart = best(lambda: gym.make("CartPole-v1"), lambda e: steps_per_s(e, a.steps, False), r)
    print(f"{'CartPole-v1':<22}{cart:>12,.0f} steps/CPU-s")
    for eid in a.ids:
        s = best(lambda: gym.make(eid, scenario=sc), lambda e: steps_per_s(e, a.steps, True), r)
        print(f"{eid:<22}{s:>12,.0f} steps/CPU-s  {s / cart:6.3f}x CartPole  {1e6 / s:7.1f} us/step")
    for n in a.num_envs:
        vcart = best(lambda: gym.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point"),
                     lambda v: vector_steps_per_s(v, a.steps, False), r)
        print(f"\nbatched, {n} envs (env steps/CPU-s)\n{'CartPole-v1 (native)':<30}{vcart:>12,.0f}")
        for eid in a.batched_ids or a.ids:
            nat = best(lambda: gym.make_vec(eid, n, vectorization_mode="vector_entry_point", scenario=sc),
                       lambda v: vector_steps_per_s(v, a.steps, True), r)
            line = f"{eid + ' native':<30}{nat:>12,.0f}"
            if not a.no_sync:
                sync = best(lambda: gym.make_vec(eid, n, vectorization_mode="sync", scenario=sc),
                            lambda v: vector_steps_per_s(v, a.steps, True), r)
                line += f"   sync {sync:>10,.0f}   native/sync {nat / sync:5.2f}"
            print(line)


if __name__ == "__main__":
    main()

"""Env steps/s on a scenario against CartPole-v1 in the same run (goal: >= 0.3x on `default`),
and the native batched envs' env steps/s (goal: >= 50,000 for DLClusterPlace-v0 on `default`).

    python benchmarks/env_speed.py [--scenario default] [--steps 5000] [--num-envs 16]

Both envs take uniformly random actions (ours: among the actions its mask allows, so the
simulator does real work); resets are included in the time. Batched: gym.make_vec(id, N,
vectorization_mode="vector_entry_point") beside gymnasium's SyncVectorEnv of the same id and
CartPole's own vector env, each stepped `steps` env steps in all (steps / N calls).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import dlclusterenv


def steps_per_s(env: gym.Env, steps: int, masked: bool) -> float:
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        if masked:
            a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
        else:
            a = env.action_space.sample()
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t0)


def vector_steps_per_s(vec, steps: int, masked: bool) -> float:
    rng = np.random.default_rng(0)
    vec.reset(seed=0)
    n = vec.num_envs
    t0 = time.perf_counter()
    for _ in range(max(steps // n, 1)):
        if masked:
            masks = vec.action_masks() if hasattr(vec, "action_masks") else np.stack(
                vec.call("action_masks"))
            a = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        else:
            a = vec.action_space.sample()
        vec.step(a)  # autoreset: ended episodes restart on the next step
    return max(steps // n, 1) * n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--num-envs", type=int, default=16)
    a = ap.parse_args()
    cart = steps_per_s(gym.make("CartPole-v1"), a.steps, masked=False)
    print(f"{'CartPole-v1':<22}{cart:>12,.0f} steps/s")
    for eid in dlclusterenv.ENV_IDS:
        s = steps_per_s(gym.make(eid, scenario=a.scenario), a.steps, masked=True)
        print(f"{eid:<22}{s:>12,.0f} steps/s  {s / cart:6.3f}x CartPole")
    n = a.num_envs
    vcart = vector_steps_per_s(gym.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point"),
                               a.steps, masked=False)
    print(f"\nbatched, {n} envs (env steps/s)\n{'CartPole-v1 (native)':<30}{vcart:>12,.0f}")
    for eid in dlclusterenv.ENV_IDS:
        nat = vector_steps_per_s(gym.make_vec(eid, n, vectorization_mode="vector_entry_point",
                                              scenario=a.scenario), a.steps, masked=True)
        sync = vector_steps_per_s(gym.make_vec(eid, n, vectorization_mode="sync", scenario=a.scenario),
                                  a.steps, masked=True)
        print(f"{eid + ' native':<30}{nat:>12,.0f}   sync {sync:>10,.0f}   native/sync {nat / sync:5.2f}")


if __name__ == "__main__":
    main()

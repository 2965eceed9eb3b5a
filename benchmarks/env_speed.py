"""Env steps/s on a scenario against CartPole-v1 in the same run (goal: >= 0.3x on `default`).

    python benchmarks/env_speed.py [--scenario default] [--steps 5000]

Both envs take uniformly random actions (ours: among the actions its mask allows, so the
simulator does real work); resets are included in the time.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--steps", type=int, default=5000)
    a = ap.parse_args()
    cart = steps_per_s(gym.make("CartPole-v1"), a.steps, masked=False)
    print(f"{'CartPole-v1':<22}{cart:>12,.0f} steps/s")
    for eid in dlclusterenv.ENV_IDS:
        s = steps_per_s(gym.make(eid, scenario=a.scenario), a.steps, masked=True)
        print(f"{eid:<22}{s:>12,.0f} steps/s  {s / cart:6.3f}x CartPole")


if __name__ == "__main__":
    main()

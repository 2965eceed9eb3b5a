"""Learnability: a short MaskablePPO run on DLClusterPlace-v0 beats random placement on
cross-node traffic in the default scenario (issue #2; at most 10 minutes on 2 cores).

    python benchmarks/learnability.py [--timesteps 200000] [--eval-seeds 3] [--policy node|mlp]

Reward: minus cross-node GB, scaled by 1e-4 so returns are O(100), with potential-based shaping
(the env option `shaping`) so each placement is charged its future traffic when it is made. The env is work-conserving (defer only when a task fits nowhere), so
the policy cannot cut traffic by never starting jobs — an earlier run without that learned exactly
this. Evaluation on held-out seeds (1000+); both policies only ever take
actions their masks allow; the random policy picks uniformly among them. Prints both figures.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
from sb3_contrib import MaskablePPO

import dlclusterenv  # noqa: F401  (registers the envs)
from agents.policies import NodeScoringPolicy

ENV = "DLClusterPlace-v0"
KW = {"scenario": "default", "reward": {"traffic": 1e-4}, "work_conserving": True, "shaping": True}


def episode(env, act) -> dict:
    obs, _ = env.reset(seed=env.unwrapped._seed)
    while True:
        obs, _, term, trunc, info = env.step(act(obs, env.unwrapped.action_masks()))
        if term or trunc:
            return info["metrics"]


def evaluate(model, seeds: list[int]) -> tuple[list[dict], list[dict]]:
    env = gym.make(ENV, **KW)
    rng = np.random.default_rng(0)
    learned, rand = [], []
    for s in seeds:
        env.unwrapped._seed = s
        learned.append(
            episode(env, lambda o, m: int(model.predict(o, action_masks=m, deterministic=True)[0]))
        )
        rand.append(episode(env, lambda o, m: int(rng.choice(np.flatnonzero(m)))))
    return learned, rand


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timesteps", type=int, default=200_000)
    ap.add_argument("--eval-seeds", type=int, default=3)
    ap.add_argument("--policy", choices=("node", "mlp"), default="node",
                    help="node: agents.policies.NodeScoringPolicy; mlp: SB3's MultiInputPolicy")
    a = ap.parse_args()
    env = gym.make(ENV, **KW)
    model = MaskablePPO(
        NodeScoringPolicy if a.policy == "node" else "MultiInputPolicy", env, n_steps=2048, batch_size=256, n_epochs=4, gamma=0.999,
        learning_rate=3e-4, ent_coef=0.01, seed=0, device="cpu", verbose=0,
    )
    t0 = time.perf_counter()
    model.learn(total_timesteps=a.timesteps)
    train_s = time.perf_counter() - t0
    learned, rand = evaluate(model, [1000 + i for i in range(a.eval_seeds)])
    for name, ms in (("MaskablePPO", learned), ("random", rand)):
        x = np.array([m["cross_node_gb"] for m in ms])
        j = np.array([m["avg_jct_s"] for m in ms])
        u = sum(m["jobs_unfinished"] for m in ms)
        print(f"{name:<12} cross-node {x.mean():12,.0f} GB  avg JCT {j.mean():10,.0f} s  unfinished {u}")
    print(f"trained {a.timesteps} steps in {train_s:.0f} s")


if __name__ == "__main__":
    main()

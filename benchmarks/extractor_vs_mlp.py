"""The size-agnostic entity policy (agents.policies, agents.extractor) against SB3's default
MultiInputPolicy MLP: same MaskablePPO hyperparameters, steps and seed; final metrics on held-out
episode seeds (1000+): the argmax of the masked logits, and (rows marked ~) seeded draws from
them; uniformly random masked actions for scale. The argmax matters in the round-based envs: when
"end of round" is the likeliest single action, argmax always ends the round even if most of the
probability mass is on starting jobs.
An evaluation episode is cut off at 3x the random policy's decisions on the same seed (its
unfinished jobs are counted): a policy that ends every round at once otherwise idles, decision
point by decision point, to the scenario's horizon.

    python benchmarks/extractor_vs_mlp.py [--timesteps 20000] [--setups tiny-alloc,placement]
                                          [--eval-seeds 3] [--seed 0]

Setups (the MLP's input and output layers are sized to the env, the entity policy's are not):
  tiny-alloc  DLClusterAlloc-v0 on `tiny` (4 nodes, 16 job slots), reward jct: minus total JCT.
  tiny-joint  DLClusterJoint-v0 on `tiny`, reward jct.
  placement   DLClusterPlace-v0 on `default` (32 nodes), reward minus cross-node GB x 1e-4 with
              potential-based shaping, work-conserving (the learnability benchmark's setting).
The entity policy trained on each setup is also run, with the same weights
(agents.policies.transfer), where the MLP cannot run at all, with 24 job slots: tiny-alloc on the
`default` scenario (32 nodes, 60 jobs), tiny-joint on the tiny workload over the default cluster,
placement on the `default` workload over the Philly-scale cluster (384 nodes in 39 racks).
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym
import numpy as np
import pandas as pd
import torch as th
from sb3_contrib import MaskablePPO

import dlclusterenv  # noqa: F401  (registers the envs)
from agents.policies import policy_for, transfer
from dlclusterenv.config import read_yaml
from dlclusterenv.workload import CONFIG_DIR

SETUPS = {
    "tiny-alloc": ("DLClusterAlloc-v0", {"scenario": "tiny", "reward": "jct"}),
    "tiny-joint": ("DLClusterJoint-v0", {"scenario": "tiny", "reward": "jct"}),
    "placement": ("DLClusterPlace-v0", {"scenario": "default", "reward": {"traffic": 1e-4},
                                        "work_conserving": True, "shaping": True}),
}
# Where the trained entity policy is also run: a bigger cluster and / or more job slots.
_ON_PHILLY = {**read_yaml(CONFIG_DIR / "scenarios" / "default.yaml"), "name": "default-on-philly",
              "cluster": "philly"}
# Joint on `default`: a random policy takes ~95,000 decisions (releases undo its work), so the
# joint setup moves to the tiny workload on the default cluster (~5,700).
_TINY_ON_DEFAULT = {**read_yaml(CONFIG_DIR / "scenarios" / "tiny.yaml"), "name": "tiny-on-default",
                    "cluster": "default"}
TRANSFER = {"tiny-alloc": {"scenario": "default", "max_jobs": 24},
            "tiny-joint": {"scenario": _TINY_ON_DEFAULT, "max_jobs": 24},
            "placement": {"scenario": _ON_PHILLY, "max_jobs": 24}}
CAP = 3  # evaluation episodes are cut off at 3x the random policy's decisions on the same seed
PPO = {"n_steps": 1024, "batch_size": 128, "n_epochs": 4, "gamma": 0.999, "learning_rate": 3e-4,
       "ent_coef": 0.01, "device": "cpu", "verbose": 0}


def episode(env, act, seed: int, max_steps: int | None = None) -> dict:
    env.unwrapped.max_steps = max_steps or 1_000_000
    obs, _ = env.reset(seed=seed)
    ret, steps = 0.0, 0
    while True:
        obs, r, term, trunc, info = env.step(act(obs, env.unwrapped.action_masks()))
        ret, steps = ret + r, steps + 1
        if term or trunc:
            return {**info["metrics"], "return": ret, "steps": steps}


KEYS = ("return", "avg_jct_s", "makespan_s", "cross_node_gb", "gpu_util", "jobs_unfinished", "steps")


def evaluate(env, act, seeds: list[int], caps: list[int] | None = None) -> dict:
    """Mean metrics over the seeds; with `caps`, episode i is cut off after caps[i] decisions."""
    rows = [episode(env, act, s, c) for s, c in zip(seeds, caps or [None] * len(seeds))]
    return {k: float(np.mean([r[k] for r in rows])) for k in KEYS}


def random_caps(env, seeds: list[int], seed: int) -> tuple[dict, list[int]]:
    """The random policy's metrics, and CAP times its decision count per seed."""
    rows = [episode(env, random_act(seed), s) for s in seeds]
    return ({k: float(np.mean([r[k] for r in rows])) for k in KEYS},
            [CAP * r["steps"] for r in rows])


def policy_act(model, sample: bool = False, seed: int = 0):
    """Argmax of the masked logits, or (sample) a draw from them, seeded for reproducibility."""
    if sample:
        model.set_random_seed(seed)
    return lambda o, m: int(model.predict(o, action_masks=m, deterministic=not sample)[0])


def random_act(seed: int):
    rng = np.random.default_rng(seed)
    return lambda o, m: int(rng.choice(np.flatnonzero(m)))


def run(setup: str, timesteps: int, seeds: list[int], seed: int) -> list[dict]:
    env_id, kw = SETUPS[setup]
    env, test = gym.make(env_id, **kw), gym.make(env_id, **kw)
    rand, caps = random_caps(test, seeds, seed)
    rows = [{"setup": setup, "env": "train", "policy": "random", "train_s": 0.0, **rand}]
    entity = None
    for name, policy in (("entity", policy_for(env)), ("mlp", "MultiInputPolicy")):
        model = MaskablePPO(policy, env, seed=seed, **PPO)
        t0 = time.perf_counter()
        model.learn(total_timesteps=timesteps)
        train_s = time.perf_counter() - t0
        print(f"{setup}: {name} trained in {train_s:.0f} s", file=sys.stderr, flush=True)
        for sample in (False, True):
            rows.append({"setup": setup, "env": "train", "policy": name + "~" * sample,
                         "train_s": train_s, **evaluate(test, policy_act(model, sample, seed),
                                                        seeds, caps)})
        entity = model if name == "entity" else entity
    big = gym.make(env_id, **{**kw, **TRANSFER[setup]})
    rand, caps = random_caps(big, seeds, seed)
    rows.append({"setup": setup, "env": "transfer", "policy": "random", "train_s": 0.0, **rand})
    moved = transfer(entity, big)
    for sample in (False, True):
        rows.append({"setup": setup, "env": "transfer", "policy": "entity" + "~" * sample,
                     "train_s": 0.0, **evaluate(big, policy_act(moved, sample, seed), seeds, caps)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timesteps", type=int, default=20_000)
    ap.add_argument("--setups", default="tiny-alloc,placement",
                    help=f"comma-separated, from {', '.join(SETUPS)}")
    ap.add_argument("--eval-seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="training seed (both policies)")
    ap.add_argument("--csv", help="also write the table here")
    a = ap.parse_args()
    setups = a.setups.split(",")
    for s in setups:
        if s not in SETUPS:
            ap.error(f"--setups: unknown {s!r}; choose from {', '.join(SETUPS)}")
    th.set_num_threads(1)  # two cores shared with other work
    seeds = [1000 + i for i in range(a.eval_seeds)]
    rows = [r for s in setups for r in run(s, a.timesteps, seeds, a.seed)]
    table = pd.DataFrame(rows).set_index(["setup", "env", "policy"])
    with pd.option_context("display.width", 200, "display.max_columns", None,
                           "display.float_format", "{:,.2f}".format):
        print(f"MaskablePPO, {a.timesteps} steps, seed {a.seed}; eval seeds {seeds[0]}-{seeds[-1]}")
        print(table)
    if a.csv:
        table.to_csv(a.csv)


if __name__ == "__main__":
    main()

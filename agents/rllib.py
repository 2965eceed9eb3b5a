"""Ray RLlib on the DLCluster envs: `register()` puts every id of dlclusterenv.ENV_IDS in Ray's
tune registry, so `PPOConfig().environment("DLClusterPlace-v0", env_config={...})` works on one
machine or across a Ray cluster (the registry lives in the cluster's key-value store, so remote
env runners find the creator; each machine needs dlclusterenv installed). `ppo_config()` is a
ready PPO setup on that.

    pip install -c constraints-cpu.txt -e ".[rllib]"     # ray[rllib]==2.60.0 (pins gymnasium 1.2.2)

Observations: RLlib's default PPO model (new API stack) takes a flat Box, not our Dict, so the
registered creator flattens it (gymnasium's FlattenObservation: all features stay in [0, 1]).
Action masks are optional here: an action outside `action_masks()` is a no-op costing
`invalid_penalty` (default 1) in every DLCluster env, so a plain PPO learns to avoid them. With
`mask=True` the observation becomes {"action_mask", "observations"}, the layout RLlib's
ActionMaskingTorchRLModule (ray.rllib.examples.rl_modules.classes.action_masking_rlm) expects, and
`ppo_config(mask=True)` uses that module so invalid actions are never sampled.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation

import dlclusterenv

try:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env
except ImportError as e:  # an optional extra: say how to get it
    raise ImportError("agents.rllib needs Ray RLlib: pip install -e '.[rllib]'") from e

MASKED_SUFFIX = "-masked"


class ActionMaskObservation(gym.ObservationWrapper):
    """{"action_mask": the env's valid actions, "observations": the flattened observation}."""

    def __init__(self, env: gym.Env):
        super().__init__(FlattenObservation(env))
        n = int(env.action_space.n)
        self.observation_space = spaces.Dict({
            "action_mask": spaces.Box(0.0, 1.0, (n,), np.float32),
            "observations": self.env.observation_space,
        })

    def observation(self, obs):
        return {"action_mask": self.env.unwrapped.action_masks().astype(np.float32),
                "observations": obs}


def make_env(env_id: str, env_config: dict | None = None, mask: bool = False) -> gym.Env:
    """A DLCluster env as RLlib gets it; env_config holds the env's keyword arguments."""
    if env_id not in dlclusterenv.ENV_IDS:
        raise ValueError(f"env id: unknown {env_id!r}; choose from {dlclusterenv.ENV_IDS}")
    env = gym.make(env_id, **dict(env_config or {}))
    return ActionMaskObservation(env) if mask else FlattenObservation(env)


def register() -> list[str]:
    """Register every env id (flat observations) and id + "-masked" (with the action mask)
    with Ray's tune registry; returns the registered names."""
    names = []
    for env_id in dlclusterenv.ENV_IDS:
        for mask in (False, True):
            name = env_id + (MASKED_SUFFIX if mask else "")
            register_env(name, lambda cfg, i=env_id, m=mask: make_env(i, cfg, m))
            names.append(name)
    return names


def ppo_config(env_id: str, env_config: dict | None = None, mask: bool = False,
               num_env_runners: int = 0, seed: int = 0) -> PPOConfig:
    """PPO on a registered env id (call register() first). num_env_runners=0 samples in the
    driver process; raise it to spread sampling over the Ray cluster's CPUs or machines."""
    cfg = (
        PPOConfig()
        .environment(env_id + (MASKED_SUFFIX if mask else ""), env_config=dict(env_config or {}))
        .env_runners(num_env_runners=num_env_runners)
        .debugging(seed=seed)
    )
    if mask:
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec
        from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (
            ActionMaskingTorchRLModule,
        )

        cfg = cfg.rl_module(rl_module_spec=RLModuleSpec(module_class=ActionMaskingTorchRLModule))
    return cfg

"""agents.rllib: one PPO training iteration with Ray RLlib, in one local Ray process on 2 CPUs,
on the tiny scenario, with flat observations and with the action mask."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.rllib.algorithms.ppo",
                    reason="Ray RLlib is the optional extra `rllib` (in `dev`): pip install -e '.[dev]'")
import ray

import dlclusterenv
from agents import rllib


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    rllib.register()
    yield
    ray.shutdown()


def test_registered_env_is_the_flattened_dlcluster_env():
    env = rllib.make_env("DLClusterAlloc-v0", {"scenario": "tiny"})
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape and obs.ndim == 1
    assert env.observation_space.contains(obs)
    masked = rllib.make_env("DLClusterAlloc-v0", {"scenario": "tiny"}, mask=True)
    obs, _ = masked.reset(seed=0)
    assert np.array_equal(obs["action_mask"], masked.unwrapped.action_masks().astype(np.float32))
    assert masked.observation_space.contains(obs)
    with pytest.raises(ValueError, match="env id: unknown 'CartPole-v1'"):
        rllib.make_env("CartPole-v1")


@pytest.mark.parametrize("mask", [False, True])
def test_one_ppo_iteration_on_the_tiny_scenario(ray_local, mask):
    cfg = (
        rllib.ppo_config("DLClusterPlace-v0", {"scenario": "tiny"}, mask=mask)
        .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=1)
        .learners(num_learners=0)
    )
    algo = cfg.build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
    steps = result["env_runners"]["num_env_steps_sampled_lifetime"]
    assert steps >= 256
    assert np.isfinite(result["learners"]["default_policy"]["total_loss"])


def test_every_env_id_is_registered(ray_local):
    from ray.tune.registry import ENV_CREATOR, _global_registry

    for env_id in dlclusterenv.ENV_IDS:
        for name in (env_id, env_id + rllib.MASKED_SUFFIX):
            assert _global_registry.contains(ENV_CREATOR, name)

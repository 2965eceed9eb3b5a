"""agents.policies: the node-scoring policy trains, and its node logits are permutation-equivariant
(the same scorer for every node), which is what lets it generalise over node order and count."""

from __future__ import annotations

import gymnasium as gym
import torch as th
from sb3_contrib import MaskablePPO

import dlclusterenv  # noqa: F401
from agents.policies import NodeFeatures, NodeScoringPolicy


def test_trains_on_the_placement_env():
    env = gym.make("DLClusterPlace-v0", scenario="tiny", work_conserving=True)
    model = MaskablePPO(NodeScoringPolicy, env, n_steps=128, batch_size=64, n_epochs=1, seed=0,
                        device="cpu")
    model.learn(256)
    obs, _ = env.reset(seed=1)
    a, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.unwrapped.action_masks()[int(a)]


def test_node_scores_follow_their_nodes():
    env = gym.make("DLClusterPlace-v0", scenario="tiny")
    obs, _ = env.reset(seed=0)
    ext = NodeFeatures(env.observation_space)
    t = {k: th.as_tensor(v).unsqueeze(0) for k, v in obs.items()}
    t["nodes"][0, :, 1] = th.linspace(0.1, 0.9, t["nodes"].shape[1])  # make nodes differ
    perm = th.tensor([2, 0, 3, 1])
    out = ext(t)
    p = dict(t)
    p["nodes"], p["node_mask"] = t["nodes"][:, perm], t["node_mask"][:, perm]
    out_p = ext(p)
    n = t["nodes"].shape[1]
    assert th.allclose(out_p[0, :n], out[0, :n][perm], atol=1e-6)
    assert th.allclose(out_p[0, n:], out[0, n:], atol=1e-6)  # defer score and context unchanged

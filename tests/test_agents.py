"""agents.policies and agents.extractor: the policies train on every env id, their entity logits
are permutation-equivariant (one shared scorer per node / job / pair), padding never changes the
logits of real entities, and one set of weights runs on clusters and job counts of other sizes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO

import dlclusterenv
from agents.extractor import EntityScorer
from agents.policies import (
    AllocPolicy,
    JointPolicy,
    NodeFeatures,
    NodeScoringPolicy,
    PlacePolicy,
    action_logits,
    policy_for,
    transfer,
)

LAYOUT_ENV = {"place": "DLClusterPlace-v0", "alloc": "DLClusterAlloc-v0", "joint": "DLClusterJoint-v0"}


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


# ---------------------------------------------------------------- entity policies


def _busy_obs(env_id: str, steps: int = 36, seed: int = 0) -> tuple[gym.Env, dict]:
    """An observation at least `steps` into an episode of random valid actions on `tiny`, taken
    once 3 or more jobs are in view and one runs, as a batch of one."""
    env = gym.make(env_id, scenario="tiny")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for i in range(2000):
        if i >= steps and obs["job_mask"].sum() >= 3 and obs["jobs"][:, 1].sum() >= 1:
            break
        obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        assert not (term or trunc), "episode ended before the state got busy"
    return env, {k: th.as_tensor(v).unsqueeze(0) for k, v in obs.items()}


def _vary(t: dict, seed: int = 0) -> dict:
    """Make every node and job slot distinct so a permutation test cannot pass by symmetry."""
    g = th.Generator().manual_seed(seed)
    t = dict(t)
    t["nodes"] = t["nodes"].clone()
    t["nodes"][..., 1:4] = th.rand(t["nodes"][..., 1:4].shape, generator=g)
    t["jobs"] = t["jobs"].clone()
    t["jobs"][..., 4:7] = th.rand(t["jobs"][..., 4:7].shape, generator=g)
    t["job_mask"] = th.ones_like(t["job_mask"])
    t["jobs"][..., 0] = 1.0
    return t


@pytest.mark.parametrize("layout", ["place", "alloc", "joint"])
def test_entity_logits_are_permutation_equivariant(layout):
    env, t = _busy_obs(LAYOUT_ENV[layout])
    t = _vary(t)
    t["task"] = th.zeros_like(t["task"])  # no focal slot index, which would pin a job order
    th.manual_seed(0)
    ext = EntityScorer(env.observation_space, layout=layout, dim=32).eval()
    n, j = t["nodes"].shape[1], t["jobs"].shape[1]
    pn, pj = th.randperm(n), th.randperm(j)
    p = dict(t)
    p["nodes"], p["node_mask"] = t["nodes"][:, pn], t["node_mask"][:, pn]
    p["jobs"], p["job_mask"] = t["jobs"][:, pj], t["job_mask"][:, pj]
    with th.no_grad():
        out, out_p = ext(t)[0], ext(p)[0]
    a = ext.n_actions
    assert th.allclose(out_p[a - 1 :], out[a - 1 :], atol=1e-5)  # end / defer logit and context
    assert not th.allclose(out[: a - 1], out[: a - 1].mean().expand(a - 1), atol=1e-4)
    if layout == "place":
        assert th.allclose(out_p[:n], out[:n][pn], atol=1e-5)
    elif layout == "alloc":
        assert th.allclose(out_p[: 2 * j].view(j, 2), out[: 2 * j].view(j, 2)[pj], atol=1e-5)
    else:
        add, add_p = out[: 2 * j * n].view(j, 2, n), out_p[: 2 * j * n].view(j, 2, n)
        assert th.allclose(add_p, add[pj][:, :, pn], atol=1e-5)
        rel = slice(2 * j * n, 2 * j * n + j)
        assert th.allclose(out_p[rel], out[rel][pj], atol=1e-5)


@pytest.mark.parametrize("layout", ["place", "alloc", "joint"])
def test_padding_leaves_real_entities_logits_unchanged(layout):
    """The same state padded with 3 more (masked) node slots and 5 more job slots."""
    env, t = _busy_obs(LAYOUT_ENV[layout])
    th.manual_seed(0)
    small = EntityScorer(env.observation_space, layout=layout, dim=32).eval()
    n, j = t["nodes"].shape[1], t["jobs"].shape[1]
    pad = dict(t)
    for key, extra in (("nodes", 3), ("node_mask", 3), ("jobs", 5), ("job_mask", 5)):
        x = t[key]
        pad[key] = th.cat([x, th.zeros((1, extra, *x.shape[2:]))], dim=1)
    pad["task"] = t["task"].clone()
    pad["task"][0, 5] = t["task"][0, 5] * j / (j + 5)  # the focal slot index, rescaled
    big_env = gym.make(LAYOUT_ENV[layout], scenario="tiny", max_nodes=n + 3, max_jobs=j + 5)
    big = EntityScorer(big_env.observation_space, layout=layout, dim=32).eval()
    big.load_state_dict(small.state_dict())
    with th.no_grad():
        out, out_p = small(t)[0], big(pad)[0]
    a, a_p = small.n_actions, big.n_actions
    nv, jv = int(t["node_mask"].sum()), int(t["job_mask"].sum())
    assert jv >= 3 and t["jobs"][0, :, 1].sum() >= 1  # several jobs, one running at least
    assert th.allclose(out_p[a_p - 1 :], out[a - 1 :], atol=1e-5)  # end logit and context
    if layout == "place":
        assert th.allclose(out_p[:nv], out[:nv], atol=1e-5)
    elif layout == "alloc":
        assert th.allclose(out_p[: 2 * jv], out[: 2 * jv], atol=1e-5)
    else:
        add = out[: 2 * j * n].view(j, 2, n)[:jv, :, :nv]
        add_p = out_p[: 2 * (j + 5) * (n + 3)].view(j + 5, 2, n + 3)[:jv, :, :nv]
        assert th.allclose(add_p, add, atol=1e-5)
        assert th.allclose(out_p[2 * (j + 5) * (n + 3) :][:jv], out[2 * j * n :][:jv], atol=1e-5)


@pytest.mark.parametrize("env_id", dlclusterenv.ENV_IDS)
def test_trains_on_each_env_id(env_id):
    env = gym.make(env_id, scenario="tiny")
    if env_id == "DLClusterShare-v0":  # no entity layout for its GPU-slot / CPU-limit actions yet
        policy, kwargs = "MultiInputPolicy", {}
    else:
        policy, kwargs = policy_for(env), {"features_extractor_kwargs": {"dim": 32}}
    model = MaskablePPO(policy, env, n_steps=128, batch_size=64, n_epochs=2, seed=0,
                        device="cpu", policy_kwargs=kwargs)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(128)  # one rollout and its update: the weights move (below)
    assert model.num_timesteps >= 128
    assert any(not th.equal(a, b) for a, b in zip(before, model.policy.parameters()))
    obs, _ = env.reset(seed=3)
    a, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.unwrapped.action_masks()[int(a)]


def test_same_seed_same_weights():
    def train():
        env = gym.make("DLClusterAlloc-v0", scenario="tiny")
        model = MaskablePPO(AllocPolicy, env, n_steps=64, batch_size=32, n_epochs=1, seed=7,
                            device="cpu")
        model.learn(128)
        return model.policy.state_dict()

    a, b = train(), train()
    assert all(th.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("layout", ["place", "alloc", "joint"])
def test_one_set_of_weights_runs_on_another_cluster_and_job_count(layout, tmp_path):
    env_id = LAYOUT_ENV[layout]
    small = gym.make(env_id, scenario="tiny", max_jobs=8)  # 4 nodes, 8 job slots
    model = MaskablePPO(policy_for(small), small, n_steps=64, batch_size=32, n_epochs=1, seed=0,
                        device="cpu", policy_kwargs={"features_extractor_kwargs": {"dim": 32}})
    model.learn(64)
    model.save(tmp_path / "m.zip")
    big = gym.make(env_id, scenario="default", max_jobs=24)  # 32 nodes, 24 job slots
    moved = transfer(tmp_path / "m.zip", big)
    sd, sd_moved = model.policy.state_dict(), moved.policy.state_dict()
    assert sd.keys() == sd_moved.keys() and all(th.equal(sd[k], sd_moved[k]) for k in sd)
    assert moved.action_space.n != model.action_space.n
    obs, _ = big.reset(seed=0)
    assert action_logits(moved, obs).shape == (big.action_space.n,)
    for _ in range(100):
        mask = big.unwrapped.action_masks()
        a, _ = moved.predict(obs, action_masks=mask, deterministic=False)
        assert mask[int(a)]
        obs, _, term, trunc, info = big.step(int(a))
        assert not info.get("invalid_action", False)
        if term or trunc:
            break


def test_transfer_refuses_what_cannot_transfer():
    place = gym.make("DLClusterPlace-v0", scenario="tiny")
    mlp = MaskablePPO("MultiInputPolicy", place, n_steps=64, device="cpu")
    with pytest.raises(ValueError, match="size-dependent"):
        transfer(mlp, place)
    with pytest.raises(ValueError, match="expected a MaskablePPO model or its .zip path, got PPO"):
        transfer(PPO("MultiInputPolicy", place, n_steps=64, device="cpu"), place)
    model = MaskablePPO(PlacePolicy, place, n_steps=64, device="cpu")
    with pytest.raises(ValueError, match="JointPolicy"):
        transfer(model, gym.make("DLClusterJoint-v0", scenario="tiny"))
    with pytest.raises(ValueError, match="145 actions .* the env has 33"):  # wrong layout
        MaskablePPO(JointPolicy, gym.make("DLClusterAlloc-v0", scenario="tiny"), device="cpu")
    with pytest.raises(ValueError, match="layout: unknown 'flat'"):
        EntityScorer(place.observation_space, layout="flat")


def test_alloc_policy_with_shapes_has_a_logit_per_shape_and_transfers():
    shapes = [[1, 1], [2, 4], [4, 4], [8, 8]]
    small = gym.make("DLClusterAlloc-v0", scenario="tiny", max_jobs=8, shapes=shapes)
    model = MaskablePPO(AllocPolicy, small, n_steps=64, batch_size=32, n_epochs=1, seed=0,
                        device="cpu", policy_kwargs={"features_extractor_kwargs": {"dim": 32}})
    model.learn(64)
    assert model.policy.features_extractor.job_score[-1].out_features == len(shapes)
    big = gym.make("DLClusterAlloc-v0", scenario="default_2x", max_jobs=16, shapes=shapes)
    moved = transfer(model, big)
    obs, _ = big.reset(seed=0)
    assert action_logits(moved, obs).shape == (len(shapes) * 16 + 1,)
    a, _ = moved.predict(obs, action_masks=big.unwrapped.action_masks(), deterministic=True)
    assert big.unwrapped.action_masks()[int(a)]


def test_a_learned_policy_on_a_bigger_cluster_gets_a_proportionally_bigger_job_window():
    from agents.learned import env_for
    from agents.train import load_config

    cfg = load_config("configs/agents/alloc_default.yaml")  # default: 32 nodes, 16 job slots
    assert env_for(cfg, None).unwrapped.max_jobs == 16
    big = env_for(cfg, "default_2x").unwrapped  # 64 nodes
    assert (big.cluster.n_nodes, big.max_jobs) == (64, 32)
    assert env_for(cfg, "tiny").unwrapped.max_jobs == 16  # smaller clusters keep the window

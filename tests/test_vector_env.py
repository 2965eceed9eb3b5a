"""Issue 14 item 5: the native batched envs (gym.make_vec(..., vectorization_mode=
"vector_entry_point")) equal N single envs step by step under each Gymnasium autoreset mode, and
SB3 trains on them through agents.vec.BatchedVecEnv (`vec: batched`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import dlclusterenv
from dlclusterenv import ConfigError

KW = {"scenario": "tiny", "max_steps": 40}  # truncation ends episodes often
IDS = ("DLClusterPlace-v0", "DLClusterAlloc-v0", "DLClusterJoint-v0", "DLClusterShare-v0")


def batched(env_id, n, **kw):
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point", **KW, **kw)


def assert_obs_equal(batch, i, obs, where):
    for k, v in obs.items():
        assert np.array_equal(batch[k][i], v), f"{where}: {k}"


@pytest.mark.parametrize("env_id", IDS)
def test_next_step_equals_single_envs(env_id):
    n, steps = 3, 150
    vec = batched(env_id, n)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    singles = [gym.make(env_id, **KW) for _ in range(n)]
    assert vec.single_observation_space == singles[0].observation_space
    obs, _ = vec.reset(seed=10)
    ended = [False] * n
    for i, e in enumerate(singles):
        assert_obs_equal(obs, i, e.reset(seed=10 + i)[0], f"reset {i}")
    rng = np.random.default_rng(0)
    resets = 0
    for t in range(steps):
        masks = vec.action_masks()
        actions = np.zeros(n, dtype=np.int64)
        for i, e in enumerate(singles):
            assert np.array_equal(masks[i], e.unwrapped.action_masks()), f"step {t} env {i}"
            actions[i] = rng.choice(np.flatnonzero(masks[i]))
        obs, rew, term, trunc, _ = vec.step(actions)
        for i, e in enumerate(singles):
            if ended[i]:  # NEXT_STEP: this step resets env i, its action ignored
                o, r, te, tr = e.reset()[0], 0.0, False, False
                ended[i] = False
                resets += 1
            else:
                o, r, te, tr, _ = e.step(int(actions[i]))
                ended[i] = te or tr
            assert_obs_equal(obs, i, o, f"step {t} env {i}")
            assert (rew[i], term[i], trunc[i]) == (r, te, tr), f"step {t} env {i}"
    assert resets > 0


def test_same_step_returns_final_obs_and_resets():
    n = 2
    vec = batched("DLClusterPlace-v0", n, autoreset_mode="SameStep")
    singles = [gym.make("DLClusterPlace-v0", **KW) for _ in range(n)]
    vec.reset(seed=3)
    for i, e in enumerate(singles):
        e.reset(seed=3 + i)
    ends = 0
    for t in range(120):
        actions = np.array([e.unwrapped.action_space.n - 1 for e in singles])  # defer: always valid
        obs, rew, term, trunc, info = vec.step(actions)
        for i, e in enumerate(singles):
            o, r, te, tr, inf = e.step(int(actions[i]))
            assert (rew[i], term[i], trunc[i]) == (r, te, tr)
            if te or tr:
                ends += 1
                assert info["_final_obs"][i]
                for k, v in o.items():  # final_obs: an object array of per-env observations
                    assert np.array_equal(info["final_obs"][i][k], v), f"final {t}: {k}"
                assert info["final_info"]["time"][i] == inf["time"]
                o = e.reset()[0]
            assert_obs_equal(obs, i, o, f"step {t} env {i}")
    assert ends > 0


def test_disabled_resets_only_the_masked_envs():
    vec = batched("DLClusterPlace-v0", 2, autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    defer = vec.single_action_space.n - 1
    while True:
        _, _, term, trunc, _ = vec.step(np.array([defer, defer]))
        if (term | trunc).any():
            break
    before = {k: v.copy() for k, v in vec.batch_obs().items()}
    obs, _ = vec.reset(seed=[7, None], options={"reset_mask": np.array([True, False])})
    single = gym.make("DLClusterPlace-v0", **KW)
    assert_obs_equal(obs, 0, single.reset(seed=7)[0], "reset env 0")
    assert_obs_equal(obs, 1, {k: v[1] for k, v in before.items()}, "env 1 untouched")


def test_every_id_has_a_vector_entry_point():
    for env_id in dlclusterenv.ENV_IDS:
        vec = batched(env_id, 2)
        obs, _ = vec.reset(seed=0)
        assert obs in vec.observation_space
        assert vec.action_masks().shape == (2, vec.single_action_space.n)


@pytest.mark.parametrize(("kw", "field"), [({"num_envs": 0}, "num_envs"),
                                          ({"autoreset_mode": "sometimes"}, "autoreset_mode")])
def test_bad_options_name_the_field(kw, field):
    n = kw.pop("num_envs", 2)
    with pytest.raises(ConfigError, match=field):
        batched("DLClusterPlace-v0", n, **kw)


def test_sb3_adapter_equals_dummy_vec_env():
    from stable_baselines3.common.env_util import make_vec_env

    from agents.vec import BatchedVecEnv

    n = 3
    ours = BatchedVecEnv("DLClusterPlace-v0", n, **KW)
    ref = make_vec_env(lambda: gym.make("DLClusterPlace-v0", **KW), n_envs=n)
    ours.seed(4)
    ref.seed(4)
    a, b = ours.reset(), ref.reset()
    rng = np.random.default_rng(1)
    dones_seen = 0
    for t in range(150):
        for k in a:
            assert np.array_equal(a[k], b[k]), f"step {t}: {k}"
        masks = np.stack(ours.env_method("action_masks"))
        assert np.array_equal(masks, np.stack(ref.env_method("action_masks")))
        act = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        a, ra, da, ia = ours.step(act)
        b, rb, db, ib = ref.step(act)
        assert np.array_equal(ra, rb) and np.array_equal(da, db), f"step {t}"
        for i in np.flatnonzero(da):
            dones_seen += 1
            for k in a:
                assert np.array_equal(ia[i]["terminal_observation"][k], ib[i]["terminal_observation"][k])
            assert ia[i]["TimeLimit.truncated"] == ib[i]["TimeLimit.truncated"]
            assert ia[i]["metrics"] == ib[i]["metrics"]
    assert dones_seen > 0


def test_maskable_ppo_learns_on_the_batched_env():
    """A few hundred MaskablePPO steps through the adapter: it runs, updates the weights and
    only ever takes valid actions (an invalid one would cost invalid_penalty and show in info)."""
    import torch as th
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.vec import BatchedVecEnv

    env = VecMonitor(BatchedVecEnv("DLClusterPlace-v0", 4, **KW))
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=2, seed=0,
                        device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(512)
    assert model.num_timesteps >= 512
    assert any(not th.equal(p, q) for p, q in zip(before, model.policy.parameters()))
    assert len(model.ep_info_buffer) > 0  # VecMonitor saw episodes end


def test_dlcluster_train_with_vec_batched(tmp_path):
    import yaml

    from agents.train import checkpoints, load_config, train

    cfg = {
        "env": {"id": "DLClusterPlace-v0", "kwargs": {"scenario": "tiny", "max_steps": 100}},
        "algo": "maskable_ppo", "policy": "MultiInputPolicy", "n_envs": 2, "vec": "batched",
        "seed": 0, "total_timesteps": 128,
        "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
        "checkpoint_every": 128,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    model = train(load_config(path), tmp_path / "run", progress_bar=False)
    assert model.num_timesteps == 128
    assert [t for t, _ in checkpoints(tmp_path / "run")] == [128]


def _assert_infos_equal(a, b, where):
    assert a.keys() == b.keys(), where
    for k in a:
        if isinstance(a[k], dict):
            _assert_infos_equal(a[k], b[k], f"{where}.{k}")
        elif k == "final_obs":
            for x, y in zip(a[k], b[k]):
                assert (x is None) == (y is None), where
                if x is not None:
                    assert all(np.array_equal(x[o], y[o]) for o in x), where
        else:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), f"{where}.{k}"


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_batched_infos_equal_gymnasium_add_info(mode):
    """step() merges the per-env infos a key at a time; the result equals Gymnasium's
    `_add_info` applied env by env, also on steps where some episodes end (metrics, final_obs)."""
    n = 4
    vec = batched("DLClusterPlace-v0", n, autoreset_mode=mode)
    vec.reset(seed=5)
    rng = np.random.default_rng(1)
    ends = 0
    for t in range(150):
        masks = vec.action_masks()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        rewards, terms, truncs, per_env = vec.unwrapped.step_raw(actions)
        ref: dict = {}
        for i, info in enumerate(per_env):
            ref = vec.unwrapped._add_info(ref, info, i)
        _assert_infos_equal(vec.unwrapped._merge_infos(per_env), ref, f"step {t}")
        ends += int((terms | truncs).sum())
    assert ends > 0
    mixed = [{"x": 1}, {"x": 2.5}, {"y": "s"}, {}]  # types differ: the first env's type wins
    ref = {}
    for i, info in enumerate(mixed):
        ref = vec.unwrapped._add_info(ref, info, i)
    _assert_infos_equal(vec.unwrapped._merge_infos(mixed), ref, "mixed")

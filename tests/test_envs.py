"""The Gym envs: API conformance, determinism, episode end, rendering, YAML configuration, rewards,
the invalid-action rule and a short training run of each env with (Maskable)PPO."""

from __future__ import annotations

import hashlib
import json
import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import yaml
from conftest import ENV_IDS, end_action, make_env, random_valid_action, run_random_episode

import dlclusterenv
from dlclusterenv import ConfigError
from dlclusterenv.envs.core import REWARDS

METRIC_KEYS = {
    "avg_jct_s", "median_jct_s", "p95_jct_s", "makespan_s", "avg_queue_s", "cross_node_gb",
    "cross_rack_gb", "data_local_frac", "rack_local_frac", "off_switch_frac", "gpu_util",
    "cpu_util", "net_util", "jain_index", "jobs_finished", "jobs_unfinished",
    "decision_latency_ms",
}


# --------------------------------------------------------------------------- API conformance
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env(env_id):
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make_env(env_id).unwrapped)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_check_env(env_id):
    from stable_baselines3.common.env_checker import check_env

    check_env(make_env(env_id))  # SB3 may warn about 2-D Box observations: fine


def test_all_ids_registered():
    assert set(ENV_IDS) == {
        "DLCluster-v0", "DLClusterPlace-v0", "DLClusterAlloc-v0", "DLClusterJoint-v0", "DLClusterShare-v0",
    }
    for env_id in ENV_IDS:
        assert env_id in gym.registry


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_observation_in_space_and_mask_shape(env_id):
    env = make_env(env_id)
    obs, info = env.reset(seed=3)
    rng = np.random.default_rng(3)
    for _ in range(50):
        assert env.observation_space.contains(obs)
        mask = env.unwrapped.action_masks()
        assert mask.dtype == bool and mask.shape == (env.action_space.n,)
        assert mask[-1], "the end-of-round / defer action is always valid"
        np.testing.assert_array_equal(info["action_mask"], mask)
        obs, _, term, trunc, info = env.step(random_valid_action(env, rng))
        if term or trunc:
            break


def test_info_mask_is_a_copy():
    """info["action_mask"] is the caller's to keep: later steps and edits never alias the env's."""
    env = make_env("DLClusterJoint-v0")
    _, info0 = env.reset(seed=0)
    _, _, _, _, info1 = env.step(env.action_space.n + 5)  # invalid: the state, and mask, stay
    assert info1["invalid_action"]
    assert not np.shares_memory(info0["action_mask"], info1["action_mask"])
    np.testing.assert_array_equal(info0["action_mask"], info1["action_mask"])
    info1["action_mask"][:] = False
    assert env.unwrapped.action_masks()[-1] and env.unwrapped.action_masks().any()
    np.testing.assert_array_equal(env.unwrapped.action_masks(), info0["action_mask"])


# --------------------------------------------------------------------------- determinism
def _hash_episode(env_id: str, seed: int, action_seed: int = 123, max_steps: int = 600) -> str:
    env = make_env(env_id)
    rng = np.random.default_rng(action_seed)
    h = hashlib.sha256()

    def add_obs(obs):
        for k in sorted(obs):
            h.update(k.encode())
            h.update(np.ascontiguousarray(obs[k]).tobytes())

    def add_info(info):
        scalars = {k: v for k, v in info.items() if isinstance(v, (bool, int, float, str))}
        h.update(json.dumps(scalars, sort_keys=True).encode())
        h.update(np.asarray(info["action_mask"]).tobytes())
        if "metrics" in info:  # decision latency is wall-clock time: not part of the trajectory
            m = {k: v for k, v in info["metrics"].items() if k != "decision_latency_ms"}
            h.update(json.dumps(m, sort_keys=True).encode())

    obs, info = env.reset(seed=seed)
    add_obs(obs)
    add_info(info)
    for _ in range(max_steps):
        a = random_valid_action(env, rng)
        obs, r, term, trunc, info = env.step(a)
        h.update(np.int64(a).tobytes())
        h.update(np.float64(r).tobytes())
        h.update(bytes([term, trunc]))
        add_obs(obs)
        add_info(info)
        if term or trunc:
            break
    return h.hexdigest()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_determinism(env_id):
    a = _hash_episode(env_id, seed=7)
    b = _hash_episode(env_id, seed=7)
    assert a == b
    assert _hash_episode(env_id, seed=8) != a


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_same_env_is_deterministic(env_id):
    """Resetting one env instance with a seed replays the same episode as a fresh env."""
    env = make_env(env_id)
    first = run_random_episode(env, seed=5)
    run_random_episode(env, seed=6)
    again = run_random_episode(env, seed=5)
    assert first[0] == again[0]
    assert first[2] == again[2]


# --------------------------------------------------------------------------- episode end
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episode_end_reports_metrics(env_id):
    env = make_env(env_id)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    steps = 0
    while True:
        _, _, term, trunc, info = env.step(random_valid_action(env, rng))
        steps += 1
        if term or trunc:
            break
        assert "metrics" not in info
        assert steps < 100_000
    assert term and not trunc
    assert METRIC_KEYS <= set(info["metrics"])
    m = info["metrics"]
    assert m["jobs_finished"] + m["jobs_unfinished"] == len(env.unwrapped.sim.jobs)
    assert m["jobs_finished"] == len(env.unwrapped.sim.jobs)  # tiny finishes with valid actions
    assert math.isfinite(m["avg_jct_s"]) and m["avg_jct_s"] > 0
    assert m["makespan_s"] > 0
    assert info["jobs_active"] == 0
    # the env's metrics are the simulator's
    summary = env.unwrapped.sim.metrics().summary()
    assert {k: v for k, v in m.items() if k != "decision_latency_ms"} == summary


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_truncation_at_max_steps(env_id):
    env = make_env(env_id, max_steps=25)
    env.reset(seed=0)
    for i in range(1, 26):
        _, _, term, trunc, info = env.step(end_action(env))
        if term or trunc:
            break
    assert i == 25 and trunc and not term
    assert "metrics" in info and info["metrics"]["jobs_unfinished"] > 0


def test_step_before_reset_raises():
    env = make_env("DLClusterPlace-v0").unwrapped
    with pytest.raises(RuntimeError):
        env.step(0)


# --------------------------------------------------------------------------- render
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_render_ansi(env_id):
    env = make_env(env_id, render_mode="ansi")
    env.reset(seed=0)
    out = env.render()
    assert isinstance(out, str) and out
    rng = np.random.default_rng(0)
    for _ in range(20):
        env.step(random_valid_action(env, rng))
    out = env.render()
    assert isinstance(out, str) and "t=" in out


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_render_rgb_array(env_id):
    env = make_env(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        img = env.render()
        assert isinstance(img, np.ndarray)
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        assert img.shape[0] > 0 and img.shape[1] > 0
        _, _, term, trunc, _ = env.step(random_valid_action(env, rng))
        if term or trunc:
            break


def test_render_mode_unknown_raises():
    from dlclusterenv.envs import PlacementEnv

    with pytest.raises(ConfigError, match="render_mode"):
        PlacementEnv("tiny", render_mode="human")


# --------------------------------------------------------------------------- YAML configuration
def _write(tmp_path, data) -> str:
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_yaml_config(env_id, tmp_path):
    path = _write(tmp_path, {"scenario": "tiny", "reward": "traffic", "max_jobs": 8})
    env = gym.make(env_id, config=path)
    u = env.unwrapped
    assert u.scenario.name == "tiny"
    assert u.reward_weights == {"traffic": 1.0}
    assert u.max_jobs == 8
    assert env.observation_space["jobs"].shape == (8, u.observation_space["jobs"].shape[1])
    assert env.observation_space["job_mask"].shape == (8,)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_yaml_config_alloc_placer(tmp_path):
    path = _write(tmp_path, {"scenario": "tiny", "placer": "pack"})
    env = gym.make("DLClusterAlloc-v0", config=path)
    assert env.unwrapped.placer_name == "pack"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_yaml_unknown_key(env_id, tmp_path):
    path = _write(tmp_path, {"scenario": "tiny", "bogus_option": 3})
    with pytest.raises(ConfigError, match="bogus_option"):
        gym.make(env_id, config=path)


def test_yaml_placer_only_for_alloc(tmp_path):
    path = _write(tmp_path, {"scenario": "tiny", "placer": "pack"})
    with pytest.raises(ConfigError, match="placer"):
        gym.make("DLClusterPlace-v0", config=path)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_yaml_unknown_reward(env_id, tmp_path):
    path = _write(tmp_path, {"scenario": "tiny", "reward": "happiness"})
    with pytest.raises(ConfigError, match="happiness"):
        gym.make(env_id, config=path)


def test_unknown_reward_kwarg():
    with pytest.raises(ConfigError, match="reward"):
        make_env("DLClusterJoint-v0", reward="nope")
    with pytest.raises(ConfigError, match="nope"):
        make_env("DLClusterJoint-v0", reward={"jct": 1.0, "nope": 2.0})


def test_weighted_reward_is_the_weighted_sum_of_terms(tmp_path):
    """A dict of reward weights pays the weighted sum of the single-term rewards, step by step."""
    weights = {"jct": 1.0, "traffic": 0.5, "utilisation": 2.0}
    path = _write(tmp_path, {"scenario": "tiny", "reward": weights})
    per_term = {k: run_random_episode(make_env("DLClusterPlace-v0", reward=k), seed=3)[0] for k in weights}
    mixed = run_random_episode(gym.make("DLClusterPlace-v0", config=path), seed=3)[0]
    expected = [sum(w * per_term[k][i] for k, w in weights.items()) for i in range(len(mixed))]
    assert mixed == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_yaml_not_a_mapping(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError):
        gym.make("DLClusterPlace-v0", config=str(path))


def test_max_nodes_too_small():
    with pytest.raises(ConfigError, match="max_nodes"):
        make_env("DLClusterPlace-v0", max_nodes=2)


def test_max_nodes_padding():
    env = make_env("DLClusterJoint-v0", max_nodes=6)
    obs, _ = env.reset(seed=0)
    assert obs["nodes"].shape[0] == 6
    np.testing.assert_array_equal(obs["node_mask"], [1, 1, 1, 1, 0, 0])
    mask = env.unwrapped.action_masks()
    # no action may name a padded node
    for a in np.flatnonzero(mask[:-1]):
        assert a % 6 < 4


# --------------------------------------------------------------------------- rewards
@pytest.mark.parametrize("reward", REWARDS)
@pytest.mark.parametrize("env_id", ["DLClusterPlace-v0", "DLClusterJoint-v0"])
def test_every_reward_runs_an_episode(env_id, reward):
    env = make_env(env_id, reward=reward)
    rewards, info, _ = run_random_episode(env, seed=2)
    assert all(math.isfinite(r) for r in rewards)
    sim, scale = env.unwrapped.sim, env.unwrapped.time_scale_s
    total = sum(rewards)
    # the rewards are differences of running totals: they sum to the episode's total
    if reward == "jct":
        assert all(r <= 0 for r in rewards)
        assert total == pytest.approx(-sim.totals.job_seconds / scale, rel=1e-9)
        n = info["metrics"]["jobs_finished"]
        assert -total * scale == pytest.approx(info["metrics"]["avg_jct_s"] * n, rel=1e-6)
    elif reward == "makespan":
        assert all(r <= 0 for r in rewards)
        assert total == pytest.approx(-sim.now / scale, rel=1e-9)
    elif reward == "traffic":
        assert all(r <= 0 for r in rewards)
        assert total == pytest.approx(-sim.totals.cross_node_bytes / 1e9, rel=1e-9)
    else:
        assert all(r >= 0 for r in rewards)
        assert total == pytest.approx(
            sim.totals.gpu_busy_s / sim.cluster.n_gpus / scale, rel=1e-9
        )


@pytest.mark.parametrize("env_id", ["DLCluster-v0", "DLClusterAlloc-v0"])
def test_rewards_other_envs(env_id):
    for reward in REWARDS:
        rewards, _, _ = run_random_episode(make_env(env_id, reward=reward), seed=4)
        assert all(math.isfinite(r) for r in rewards)


# --------------------------------------------------------------------------- invalid actions
def _snapshot(sim):
    return (
        sim.now,
        sim.used_cpu.copy().tolist(),
        sim.used_mem.copy().tolist(),
        sim.used_bw.copy().tolist(),
        [list(o) for o in sim.gpu_tasks],
        {
            t.task_id: (t.node, t.gpu)
            for j in sim.jobs.values()
            for t in j.tasks.values()
        },
        {jid: (j.status, j.num_ps, j.num_workers) for jid, j in sim.jobs.items()},
    )


def _find_masked_state(env, rng, limit=2000):
    """Step with random valid actions until some in-range action is masked out."""
    for _ in range(limit):
        mask = env.unwrapped.action_masks()
        if not mask.all():
            return int(rng.choice(np.flatnonzero(~mask)))
        _, _, term, trunc, _ = env.step(random_valid_action(env, rng))
        assert not (term or trunc), "episode ended before any action was masked"
    raise AssertionError("no masked action found")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_invalid_action_is_a_penalised_noop(env_id):
    penalty = 2.5
    env = make_env(env_id, invalid_penalty=penalty)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    sim = env.unwrapped.sim
    checked = 0
    for _ in range(5):
        bad = _find_masked_state(env, rng)
        before = _snapshot(sim)
        mask_before = env.unwrapped.action_masks().copy()
        _, r, term, trunc, info = env.step(bad)
        assert info["invalid_action"] is True
        assert r == pytest.approx(-penalty)  # no time passes: the penalty is the whole reward
        assert _snapshot(sim) == before
        np.testing.assert_array_equal(env.unwrapped.action_masks(), mask_before)
        assert not (term or trunc)
        checked += 1
        # move on with a few valid actions
        for _ in range(3):
            _, _, term, trunc, info = env.step(random_valid_action(env, rng))
            assert info["invalid_action"] is False
            assert not (term or trunc)
    assert checked == 5


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("offset", [0, 1, 1000])
def test_out_of_range_action_is_invalid(env_id, offset):
    env = make_env(env_id, invalid_penalty=1.0)
    env.reset(seed=1)
    sim = env.unwrapped.sim
    for a in (env.action_space.n + offset, -1 - offset):
        before = _snapshot(sim)
        _, r, _, _, info = env.step(a)
        assert info["invalid_action"] is True
        assert r == pytest.approx(-1.0)
        assert _snapshot(sim) == before


def test_valid_action_penalty_free():
    env = make_env("DLClusterPlace-v0", invalid_penalty=100.0, reward="traffic")
    env.reset(seed=0)
    _, r, _, _, info = env.step(0)  # an empty cluster: node 0 fits the first task
    assert info["invalid_action"] is False
    assert r > -100.0


# --------------------------------------------------------------------------- training
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_maskable_ppo_learns(env_id):
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from sb3_contrib.common.wrappers import ActionMasker

    env = make_env(env_id)
    if env_id == "DLClusterAlloc-v0":  # one env through the explicit wrapper, the rest by method
        env = ActionMasker(env, lambda e: e.unwrapped.action_masks())
    model = MaskablePPO(
        "MultiInputPolicy", env, n_steps=256, batch_size=64, n_epochs=2, seed=0, device="cpu"
    )
    model.learn(2048)
    assert model.num_timesteps >= 2048
    venv = model.get_env()
    obs = venv.reset()
    for _ in range(20):
        masks = get_action_masks(venv)
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        assert masks[0][int(action[0])]
        obs, _, _, infos = venv.step(action)
        assert infos[0]["invalid_action"] is False


def test_plain_ppo_learns_on_placement():
    from stable_baselines3 import PPO

    env = make_env("DLClusterPlace-v0")
    model = PPO("MultiInputPolicy", env, n_steps=256, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(1024)
    assert model.num_timesteps >= 1024


def test_env_ids_match_package():
    assert tuple(ENV_IDS) == dlclusterenv.ENV_IDS

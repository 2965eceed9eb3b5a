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
from test_properties import state_of

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
        "DLClusterGrow-v0",
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
    # stepped again with its one valid action, a finished episode stays finished, unchanged
    before = state_of(env.unwrapped.sim)
    _, r, term, _, info = env.step(random_valid_action(env, rng))
    assert (r, term, info["invalid_action"]) == (0.0, True, False)
    assert state_of(env.unwrapped.sim) == before


def _end_rounds(env, n: int):
    """Ends rounds (the end action) until the episode ends, at most n steps: (steps taken,
    terminated, truncated, last info)."""
    for i in range(1, n + 1):
        _, _, term, trunc, info = env.step(end_action(env))
        if term or trunc:
            break
    return i, term, trunc, info


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_truncation_at_max_steps(env_id):
    env = make_env(env_id, max_steps=25)
    env.reset(seed=0)
    i, term, trunc, info = _end_rounds(env, 25)
    assert i == 25 and trunc and not term
    assert "metrics" in info and info["metrics"]["jobs_unfinished"] > 0
    assert info["episode_end"] == "max_steps"


def _tiny_with(**engine) -> dict:
    sc = yaml.safe_load(open("configs/scenarios/tiny.yaml"))
    sc["engine"] = {**sc["engine"], **engine}
    return sc


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_horizon_truncates_not_terminates(env_id):
    """A horizon that cuts the episode with jobs unfinished is a truncation (the learner must
    bootstrap there); the same episode without the horizon terminates with every job done."""
    env = gym.make(env_id, scenario=_tiny_with(horizon_s=900.0))
    _, info, _ = run_random_episode(env, seed=0)
    u = env.unwrapped
    assert info["episode_end"] == "horizon" and u.sim.now == pytest.approx(900.0)
    assert info["metrics"]["jobs_finished"] < 8
    rng = np.random.default_rng(0)
    _, _, term, trunc, _ = env.step(random_valid_action(env, rng))
    assert trunc and not term  # stepped again, it stays cut
    full = gym.make(env_id, scenario=_tiny_with(horizon_s=2.0e6))
    _, info, _ = run_random_episode(full, seed=0)
    assert info["episode_end"] == "finished" and info["metrics"]["jobs_finished"] == 8


def test_stalled_episode_truncates():
    """Without ticks, a policy that defers every task leaves nothing that could ever start a job:
    the simulator stops with jobs pending, and that is a truncation too, not a termination."""
    env = gym.make("DLClusterPlace-v0", scenario=_tiny_with(tick_s=None, horizon_s=math.inf))
    env.reset(seed=0)
    _, term, trunc, info = _end_rounds(env, 10_000)
    assert trunc and not term and info["episode_end"] == "stalled"
    assert info["metrics"]["jobs_unfinished"] > 0


def test_time_limit_wrapper_truncates():
    """The ids register no max_episode_steps (the env's own max_steps option is the cap), but
    gymnasium's TimeLimit still works when asked for."""
    assert gym.spec("DLCluster-v0").max_episode_steps is None
    env = gym.make("DLClusterPlace-v0", scenario="tiny", max_episode_steps=7)
    env.reset(seed=0)
    i, term, trunc, _ = _end_rounds(env, 7)
    assert i == 7 and trunc and not term


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
    """Frames of one size a video shows (>= 480 px wide and high) for the whole episode, and the
    picture follows the episode: a frame a few decision points later differs."""
    env = make_env(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    frames = [env.render()]
    for _ in range(3):
        start = env.unwrapped.decision_index
        for _ in range(5000):
            _, _, term, trunc, _ = env.step(random_valid_action(env, rng))
            if term or trunc or env.unwrapped.decision_index > start:
                break
        frames.append(env.render())
    for img in frames:
        assert isinstance(img, np.ndarray)
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert {f.shape for f in frames} == {frames[0].shape}
    assert frames[0].shape[0] >= 480 and frames[0].shape[1] >= 480
    assert all(not np.array_equal(a, b) for a, b in zip(frames, frames[1:]))


def test_render_frame_shows_jobs_in_their_colours():
    """A GPU cell holding a job is drawn in that job's colour (envs.render.job_colour)."""
    from dlclusterenv.envs.render import job_colour

    env = make_env("DLClusterPlace-v0", render_mode="rgb_array", work_conserving=True)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    while not any(env.unwrapped.sim.gpu_tasks):
        env.step(random_valid_action(env, rng))
    sim = env.unwrapped.sim
    img = env.render().reshape(-1, 3).astype(int)
    order = list(sim.jobs)
    on_gpu = {t[0].rpartition("/")[0] for t in sim.gpu_tasks if t}
    for jid in on_gpu:
        want = np.round(np.array(job_colour(order.index(jid))) * 255)
        assert (np.abs(img - want).max(1) <= 1).sum() > 100, jid  # a cell plus the legend swatch


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
        # move on with a few valid actions; an episode that ends (DLClusterGrow-v0 takes a step
        # per job: a few on tiny) starts again
        for _ in range(3):
            _, _, term, trunc, info = env.step(random_valid_action(env, rng))
            assert info["invalid_action"] is False
            if term or trunc:
                env.reset(seed=checked)
                sim = env.unwrapped.sim
                break
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
    before = [t.detach().clone() for t in model.policy.parameters()]
    model.learn(512)  # two rollouts and updates: the second samples from a trained policy
    assert model.num_timesteps >= 512
    assert any(not (a == b).all() for a, b in zip(before, model.policy.parameters()))  # it updated
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
    before = [t.detach().clone() for t in model.policy.parameters()]
    model.learn(1024)
    assert model.num_timesteps >= 1024
    assert any(not (a == b).all() for a, b in zip(before, model.policy.parameters()))


def test_env_ids_match_package():
    assert tuple(ENV_IDS) == dlclusterenv.ENV_IDS


# --------------------------------------------------------------------------- DLClusterShare
def _two_pending(**kw):
    """The share env on tiny once two jobs wait (j0: 2 PS 1 worker, j1: 2 PS 2 workers, both
    ResNeXt-110 with 4 GB on the GPU; tiny's GPUs have 16 GB)."""
    env = make_env("DLClusterShare-v0", **kw)
    u = env.unwrapped
    env.reset(seed=0)
    while len(u.slots()) < 2:
        env.step(u.end)
    assert [j.status for j in u.slots()] == ["pending", "pending"]
    return env, u


def _do(env, *actions):
    for a in actions:
        assert env.unwrapped.action_masks()[a], a
        obs, _, _, _, info = env.step(a)
        assert not info["invalid_action"]
    return obs


def test_share_env_shares_packs_and_sets_exact_limits():
    from dlclusterenv.adapter import _limit_digits

    env, u = _two_pending()
    sim = u.sim
    j0, j1 = (j.job_id for j in u.slots())
    pack, timeslice = u.encode_mode(0, 1, "pack"), u.encode_mode(0, 1, "timeslice")
    _do(env, u.encode_ps(0, 0), u.encode_worker(0, 0, 1))
    assert not u.action_masks()[pack]  # one worker: nothing to pack
    obs = _do(env, u.encode_ps(1, 1), u.encode_worker(1, 0, 1))  # shares GPU 1 of node 0
    assert obs["gpus"][1, 1] == pytest.approx(0.5)  # two workers (of 4 in the scale)
    assert u.action_masks()[pack] and not u.action_masks()[timeslice]
    obs = _do(env, pack)
    assert obs["gpus"][1, 2] == 1.0
    assert u.action_masks()[timeslice] and not u.action_masks()[pack]
    digits = _limit_digits("x", 1 / 3)
    assert len(digits) == 5
    obs = _do(env, u.encode_limit(1, 1), *(u.encode_digit(d) for d in digits))  # j1's w0
    assert obs["tasks"][u.max_tasks + 1, 5] == pytest.approx(1 / 3)
    assert obs["cursor"][0] == 1.0 and obs["cursor"][4] == pytest.approx(1 / 3)
    _do(env, u.end)
    assert sim.gpu_tasks[1] == [f"{j0}/w0", f"{j1}/w0"]  # in the order they were added
    assert sim.gpu_mode[1] == 1
    assert sim.jobs[j1].tasks[f"{j1}/w0"].cpu_limit == 1 / 3  # exactly
    assert (sim.jobs[j0].num_ps, sim.jobs[j0].num_workers) == (1, 1)
    assert {sim.jobs[j].status for j in (j0, j1)} == {"running"}


def test_share_env_release_readds_task_by_index():
    """Re-adding a released job: the i-th worker added is w_i, so moving w0 to another GPU of the
    same node is a migration (checkpoint pause) while its PS, re-added where it is, stays."""
    env, u = _two_pending()
    sim = u.sim
    j1 = u.slots()[1].job_id
    _do(env, u.encode_ps(1, 1), u.encode_worker(1, 0, 1), u.end)
    assert sim.jobs[j1].status == "running"
    slot = [j.job_id for j in u.slots()].index(j1)
    obs = _do(env, u.encode_release(slot))
    assert obs["gpus"][1, 1] == 0.0 and not obs["tasks"][slot * u.max_tasks :, 0][:2].any()
    now = sim.now
    _do(env, u.encode_ps(slot, 1), u.encode_worker(slot, 0, 0), u.end)
    job = sim.jobs[j1]
    assert (job.tasks[f"{j1}/ps0"].node, job.tasks[f"{j1}/w0"].gpu) == (1, 0)
    assert job.paused_until > now and sim.gpu_tasks[1] == []


def test_share_env_limit_digit_masks():
    env, u = _two_pending()
    _do(env, u.encode_ps(0, 0), u.encode_worker(0, 0, 0), u.end)
    digits = slice(u.encode_digit(0), u.end)
    assert not u.action_masks()[digits].any()  # no limit open
    _do(env, u.encode_limit(0, 1))
    assert u.action_masks()[digits].all()  # 0..4096 (4096 / 4096 = 1.0)
    _do(env, u.encode_digit(4096))
    assert not u.action_masks()[digits].any()  # 1.0 is complete
    _do(env, u.encode_limit(0, 0), *[u.encode_digit(0)] * 5)
    m = u.action_masks()[digits]
    assert not m[0] and m[1:4096].all() and not m[4096]  # the sixth digit must make it positive
    _do(env, u.encode_digit(7))
    assert not u.action_masks()[digits].any()
    _do(env, u.end)
    task = u.sim.jobs[u.slots()[0].job_id].tasks
    assert [t.cpu_limit for t in task.values()] == [7 / 2**72, 1.0]


def test_share_env_options():
    with pytest.raises(ConfigError, match="max_tasks"):
        make_env("DLClusterShare-v0", max_tasks=1)
    with pytest.raises(ConfigError, match="max_gpus"):
        make_env("DLClusterShare-v0", max_gpus=1)  # tiny's nodes have 2 GPUs
    env = make_env("DLClusterShare-v0", max_gpus=3, max_nodes=5)
    obs, _ = env.reset(seed=0)
    assert obs["gpus"].shape == (15, 5)
    np.testing.assert_array_equal(obs["gpus"][:, 0], [1, 1, 0] * 4 + [0, 0, 0])
    u = env.unwrapped
    while not u.slots():
        env.step(u.end)
    mask = u.action_masks()
    assert mask[u.encode_worker(0, 0, 1)] and not mask[u.encode_worker(0, 0, 2)]
    assert not mask[u.encode_ps(0, 4)]


@pytest.mark.parametrize("env_id", ["DLClusterAlloc-v0", "DLClusterPlace-v0"])
def test_job_progress_false_zeroes_only_the_progress_and_loss_columns(env_id):
    """`job_progress: false` (the ablation of README "Retrained on the current engine"): the jobs
    rows' progress (column 4) and last / first loss (column 6) are 0; every other array and column,
    the masks and the rewards are those of the default env on the same actions."""
    full, ablated = make_env(env_id), make_env(env_id, job_progress=False)
    rng = np.random.default_rng(0)
    (a, _), (b, _) = full.reset(seed=3), ablated.reset(seed=3)
    seen_progress = seen_loss = False
    for _ in range(400):
        assert (full.unwrapped.action_masks() == ablated.unwrapped.action_masks()).all()
        for key in a:
            if key == "jobs":
                assert (b[key][:, [4, 6]] == 0).all()
                keep = [c for c in range(a[key].shape[1]) if c not in (4, 6)]
                assert (a[key][:, keep] == b[key][:, keep]).all()
                seen_progress |= bool((a[key][:, 4] > 0).any())
                seen_loss |= bool((a[key][:, 6] > 0).any())
            else:
                assert (a[key] == b[key]).all(), key
        action = random_valid_action(full, rng)
        a, ra, ta, ua, _ = full.step(action)
        b, rb, tb, ub, _ = ablated.step(action)
        assert (ra, ta, ua) == (rb, tb, ub)
        if ta or ua:
            (a, _), (b, _) = full.reset(seed=4), ablated.reset(seed=4)
    assert seen_progress and seen_loss  # the default env shows both columns


def test_job_progress_must_be_a_bool():
    with pytest.raises(ConfigError, match="job_progress"):
        make_env("DLClusterAlloc-v0", job_progress="no")


def test_time_scale_s_scales_the_rewards_and_the_clock_features():
    """`time_scale_s` is the unit of the jct reward (job-hours at 3600 s) and of the age / time
    observation features: doubling it halves every reward of the same trajectory and changes the
    clock columns only (the masks, hence the actions, stay the same)."""
    hour, two = make_env("DLClusterPlace-v0"), make_env("DLClusterPlace-v0", time_scale_s=7200.0)
    (a, _), (b, _) = hour.reset(seed=1), two.reset(seed=1)
    rng = np.random.default_rng(1)
    paid = aged = 0.0
    for _ in range(200):
        mask = hour.unwrapped.action_masks()
        assert (mask == two.unwrapped.action_masks()).all()
        action = int(rng.choice(np.flatnonzero(mask)))
        a, ra, ta, _, _ = hour.step(action)
        b, rb, tb, _, _ = two.step(action)
        assert rb == pytest.approx(ra / 2, rel=1e-12, abs=1e-15)
        paid += abs(ra)
        if hour.unwrapped.sim.now > 0:
            assert a["global"][0] > b["global"][0]  # 1 - exp(-t / (100 s)) grows slower
            aged = max(aged, float(np.abs(a["jobs"][:, 5] - b["jobs"][:, 5]).max()))
        if ta:
            break
    assert paid > 0 and aged > 0


def test_placement_work_conserving_masks_defer_while_the_task_fits():
    """`work_conserving=True`: the placement env's defer action is masked whenever the focal task
    fits on some node (and allowed again when it fits nowhere); by default defer is always open."""
    plain = make_env("DLClusterPlace-v0")
    plain.reset(seed=0)
    assert plain.unwrapped.action_masks()[:-1].any() and plain.unwrapped.action_masks()[-1]
    env = make_env("DLClusterPlace-v0", work_conserving=True)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    masked = opened = 0
    for _ in range(300):
        mask = env.unwrapped.action_masks()
        fits = mask[:-1].any()
        assert mask[-1] == (not fits)
        masked, opened = masked + fits, opened + (not fits)
        *_, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            break
    assert masked and opened


def test_share_env_max_tasks_sets_the_task_rows_per_job_slot():
    """`max_tasks` is the number of `tasks` rows (and CPU-limit actions) per job slot: with 4, a
    job slot's rows start at slot * 4 and hold what the default's rows at slot * 64 hold."""
    big, small = _two_pending(), _two_pending(max_tasks=4)
    (env_b, u_b), (env_s, u_s) = big, small
    J = u_b.max_jobs
    assert (u_b.max_tasks, u_s.max_tasks) == (64, 4)
    assert env_s.observation_space["tasks"].shape == (J * 4, 7)
    assert env_b.action_space.n - env_s.action_space.n == J * 60
    ob = _do(env_b, u_b.encode_ps(1, 1), u_b.encode_worker(1, 0, 1))
    os_ = _do(env_s, u_s.encode_ps(1, 1), u_s.encode_worker(1, 0, 1))
    assert ob["tasks"].shape == (J * 64, 7) and os_["tasks"].shape == (J * 4, 7)
    assert ob["tasks"][64:68, 0].any()
    np.testing.assert_array_equal(os_["tasks"][4:8], ob["tasks"][64:68])
    np.testing.assert_array_equal(os_["tasks"][:4], ob["tasks"][:4])
    assert u_s.encode_limit(1, 0) == u_s._o_lim + 4

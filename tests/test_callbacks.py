"""Using the envs from your own RL code: policy_for on vectorised envs, and SimMetricsCallback
logging the simulator's metrics through any SB3 logger."""

from __future__ import annotations

import csv

import gymnasium as gym
import pytest
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import SubprocVecEnv

from agents.callbacks import SIM_METRICS, SimMetricsCallback
from agents.policies import AllocPolicy, JointPolicy, PlacePolicy, policy_for

KW = {"scenario": "tiny"}
LAYOUTS = {"DLClusterPlace-v0": PlacePolicy, "DLClusterAlloc-v0": AllocPolicy,
           "DLCluster-v0": JointPolicy}


@pytest.mark.parametrize("env_id", LAYOUTS)
def test_policy_for_vector_envs(env_id):
    sync = gym.make_vec(env_id, 2, vectorization_mode="sync", **KW)
    sb3 = make_vec_env(env_id, 2, env_kwargs=KW)
    assert policy_for(sync) is policy_for(sb3) is policy_for(gym.make(env_id, **KW)) is LAYOUTS[env_id]
    sync.close()
    sb3.close()


def test_policy_for_subprocess_vector_envs():
    a = gym.make_vec("DLClusterAlloc-v0", 2, vectorization_mode="async", **KW)
    # the "module:id" form registers the ids in the subprocesses too
    b = make_vec_env("dlclusterenv:DLClusterPlace-v0", 2, env_kwargs=KW, vec_env_cls=SubprocVecEnv)
    try:
        assert (policy_for(a), policy_for(b)) == (AllocPolicy, PlacePolicy)
    finally:
        a.close()
        b.close()
    with pytest.raises(ValueError, match="not a DLCluster env"):
        policy_for(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"))


def _learn(tmp_path, callback) -> list[dict]:
    """A short MaskablePPO run whose episodes (max_steps=60) end several times; the CSV log."""
    venv = make_vec_env("DLClusterPlace-v0", 2, seed=0, env_kwargs={**KW, "max_steps": 60})
    model = MaskablePPO(policy_for(venv), venv, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                        device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(256, callback=callback)
    with open(tmp_path / "progress.csv") as f:
        return list(csv.DictReader(f))


def test_sim_metrics_callback_logs_metrics(tmp_path):
    rows = _learn(tmp_path / "a", SimMetricsCallback())
    for k in SIM_METRICS + ("reward", "truncated"):
        vals = [float(r[f"episode/{k}"]) for r in rows if r.get(f"episode/{k}")]
        assert vals, k
    jct = [float(r["episode/avg_jct_s"]) for r in rows if r["episode/avg_jct_s"]]
    assert all(v > 0 for v in jct)
    done = [float(r["episode/jobs_finished"]) + float(r["episode/jobs_unfinished"])
            for r in rows if r["episode/jobs_finished"]]
    assert all(0 < d <= 8 for d in done)
    # `keys` chooses what is logged
    rows = _learn(tmp_path / "b", SimMetricsCallback(keys=["p95_jct_s"]))
    assert "episode/p95_jct_s" in rows[0] and "episode/avg_jct_s" not in rows[0]


def test_sim_metrics_callback_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown \\['avg_jct'\\]"):
        SimMetricsCallback(keys=["avg_jct"])
    with pytest.raises(ValueError, match="expected a list"):
        SimMetricsCallback(keys="avg_jct_s")

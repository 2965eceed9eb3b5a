"""Issue 15 item 5: what the allocation env needs for state-dependent decisions: the queue and the
cluster's load in the observation, and jct shaping that stays exact under the learner's discount."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import dlclusterenv  # noqa: F401
from dlclusterenv.config import ConfigError
from dlclusterenv.workload import load_scenario

SHAPES = [[1, 1], [1, 2], [2, 2]]
FREE_GPU, QUEUE, DEMAND, PENDING = 3, 5, 6, 1


def _crowded() -> dict:
    """tiny's cluster with 30 jobs arriving in 60 s: a queue far longer than the job window."""
    sc = load_scenario("tiny")[0].model_dump()
    sc["workload"].update(num_jobs=30, window_s=60)
    return sc


def _alloc(**kw):
    return gym.make("DLClusterAlloc-v0", scenario=_crowded(), placer="consolidate", shapes=SHAPES,
                    work_conserving=True, grow_running=False, max_jobs=8, **kw)


def test_queue_beyond_the_job_window_and_the_round_so_far_show_in_global():
    env = _alloc()
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(1)
    long_queue, within_round = [], []
    while True:
        before, d0 = obs, env.unwrapped.decision_index
        a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
        obs, _, te, tr, _ = env.step(a)
        if before["global"][PENDING] == 1.0:  # the capped count cannot tell 8 from 28 waiting
            long_queue.append(before["global"][QUEUE])
        if env.unwrapped.decision_index == d0 and a != env.action_space.n - 1:
            within_round.append((before["global"], obs["global"]))
        if te or tr:
            break
    assert long_queue and max(long_queue) > 0.7  # q / (q + 8) > 0.7: more than 18 jobs wait
    assert len(set(np.round(long_queue, 6))) > 3
    assert within_round  # a job given its shape leaves the queue and takes GPUs, in the same round
    for g0, g1 in within_round:
        assert g1[QUEUE] < g0[QUEUE] and g1[DEMAND] < g0[DEMAND] and g1[FREE_GPU] < g0[FREE_GPU]


def test_queue_features_read_the_simulator():
    """At the first decision point (no proposal yet) they are the waiting jobs and their asks."""
    env = _alloc()
    obs, _ = env.reset(seed=3)
    sim, J = env.unwrapped.sim, 8
    waiting = [j for j in sim.active_jobs() if j.status != "running"]
    gpus = sum(j.spec.num_workers * j.model.worker.gpu for j in waiting)
    assert obs["global"][QUEUE] == pytest.approx(len(waiting) / (len(waiting) + J))
    assert obs["global"][DEMAND] == pytest.approx(gpus / (gpus + env.unwrapped.cluster.n_gpus))


def _discounted(env, gamma: float, seed: int = 1) -> tuple[float, float]:
    """(discounted return, Phi(s_0) in reward units) of one finished episode of seeded random
    valid actions (the actions do not depend on the reward, so every variant sees the same run)."""
    env.reset(seed=seed)
    phi0 = env.unwrapped._mark[5] / env.unwrapped.time_scale_s
    rng = np.random.default_rng(seed)
    ret, k = 0.0, 0
    while True:
        a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
        _, r, te, tr, info = env.step(a)
        ret += gamma**k * r
        k += 1
        if te or tr:
            assert info["episode_end"] == "finished"
            return ret, phi0


def test_gamma_shaping_changes_the_discounted_return_only_by_minus_phi_s0():
    gamma = 0.9
    plain, _ = _discounted(_alloc(reward="jct"), gamma)
    shaped, phi0 = _discounted(_alloc(reward="jct", shaping=True, shaping_gamma=gamma), gamma)
    assert shaped - plain == pytest.approx(-phi0, abs=1e-9 * max(1.0, abs(plain)))
    # the undiscounted rule (shaping_gamma 1) under the same discount is not exact
    old, _ = _discounted(_alloc(reward="jct", shaping=True), gamma)
    assert abs(old - plain - -phi0) > 1e-3


def test_shaping_from_a_nonzero_potential():
    """Phi(s_0) != 0: start the return's count at a state where jobs already run."""
    gamma = 0.8
    envs = {k: _alloc(reward="jct", **kw) for k, kw in
            {"plain": {}, "shaped": {"shaping": True, "shaping_gamma": gamma}}.items()}
    out = {}
    for name, env in envs.items():
        env.reset(seed=2)
        rng = np.random.default_rng(2)
        for _ in range(6):  # a few jobs sized and started: Phi < 0 from here on
            env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        phi0 = env.unwrapped._mark[5] / env.unwrapped.time_scale_s
        ret, k = 0.0, 0
        while True:
            _, r, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
            ret += gamma**k * r
            k += 1
            if te or tr:
                break
        out[name] = (ret, phi0)
    phi0 = out["shaped"][1]
    assert phi0 < 0
    assert out["shaped"][0] - out["plain"][0] == pytest.approx(-phi0, rel=1e-9)


@pytest.mark.parametrize("kw, match", [({"shaping_gamma": 0.9}, "applies only with shaping"),
                                       ({"shaping": True, "shaping_gamma": 0.0}, "shaping_gamma"),
                                       ({"shaping": True, "shaping_gamma": 1.5}, "shaping_gamma")])
def test_bad_shaping_gamma_is_refused_by_name(kw, match):
    with pytest.raises(ConfigError, match=match):
        _alloc(**kw)

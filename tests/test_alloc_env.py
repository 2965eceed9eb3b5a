"""The proposal envs' round state: what the policy has added shows in the observation, and the
work-conserving allocation env starts every job that fits."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import dlclusterenv  # noqa: F401


def _first_add(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask[:-1])[0])


def test_observation_shows_the_round_so_far():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack")
    obs, _ = env.reset(seed=0)
    a = _first_add(env.unwrapped.action_masks())
    slot, role = divmod(a, 2)
    obs2, *_ = env.step(a)
    col = 2 + role  # p or w of the slot
    assert obs2["jobs"][slot, col] > obs["jobs"][slot, col]
    assert obs2["nodes"][:, 1:4].sum() < obs["nodes"][:, 1:4].sum()  # capacity spent


def test_work_conserving_alloc_never_ends_a_round_with_a_startable_job_waiting():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", work_conserving=True)
    env.reset(seed=0)
    done = False
    while not done:
        m = env.unwrapped.action_masks()
        # end the round whenever allowed, else add the first worker (a PS once there is one)
        workers = np.flatnonzero(m[1:-1:2]) * 2 + 1
        a = len(m) - 1 if m[-1] else int(workers[0]) if len(workers) else _first_add(m)
        *_, te, tr, info = env.step(a)
        done = te or tr
    assert info["metrics"]["jobs_unfinished"] == 0
    plain = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack")
    plain.reset(seed=0)
    m = plain.unwrapped.action_masks()
    assert m[-1]  # without the option, ending at once is allowed
    env.reset(seed=0)
    assert not env.unwrapped.action_masks()[-1]


def test_max_adds_per_round_bounds_one_jobs_growth():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", max_adds_per_round=2)
    env.reset(seed=0)
    m = env.unwrapped.action_masks()
    slot = _first_add(m) // 2
    for role in (0, 1):  # one PS, one worker: the bound is reached
        assert env.unwrapped.action_masks()[2 * slot + role]
        env.step(2 * slot + role)
    # the round closed by itself (nothing else could be added): the job runs with exactly 2 tasks
    job = env.unwrapped.sim.active_jobs()[slot]
    assert job.status == "running" and job.num_ps + job.num_workers == 2
    free = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack")
    free.reset(seed=0)
    free.step(2 * slot)
    free.step(2 * slot + 1)
    assert free.unwrapped.action_masks()[2 * slot + 1]  # unbounded: it could still grow


def test_max_adds_per_round_must_not_be_negative():
    import pytest

    with pytest.raises(ValueError, match="max_adds_per_round"):
        gym.make("DLClusterAlloc-v0", scenario="tiny", max_adds_per_round=-1)

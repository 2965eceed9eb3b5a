"""Issue 14 (branch env5): the speed work on the envs must leave every trajectory bit-identical.
Each case runs random masked actions (and an out-of-range action every 97th step, the invalid
path) on `default`, across rounds, engine events and episode ends, and hashes everything a
learner sees: observations, `action_masks()`, rewards, terminated / truncated and the infos
(the metrics at an episode's end without `decision_latency_ms`, which is wall-clock time). The
digests were recorded on main at 7c85e8d, before the change; a digest that moves means a
trajectory changed. The Share env's digest was re-recorded at gts5: the engine's default
time-slicing became server-wide (`Overheads.time_slice: server`, Gandiva's Fig. 9), which changes
the speeds of its time-sliced jobs; the other envs do not time-slice and kept theirs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

import gymnasium as gym
import numpy as np
import pytest

import baselines
import dlclusterenv

SHAPED = {"reward": {"jct": 1.0, "traffic": 0.5, "utilisation": 0.25, "makespan": 0.1},
          "shaping": True, "shaping_gamma": 0.99}

# (id, options, steps) -> sha256 recorded on main 7c85e8d
PINS = {
    ("DLCluster-v0", '{"max_steps": 500}', 1500): "91ad77dde194d33cdc64c8e3e7f6500aa00f8ed0ef17ca113894dc2176f7250f",
    ("DLClusterPlace-v0", "{}", 2000): "42a7d11e2a64998010da1a6832c6efeb6444c2a5f6502235bec0046d7618f2e1",
    ("DLClusterPlace-v0", '{"work_conserving": true}', 1000): "6d5bd8cdfa367c4d86098045bfecff8722a92fcaa7352e739400b0b16502d81d",
    ("DLClusterPlace-v0", json.dumps(SHAPED), 1000): "bf5d4e9bc8d0c62b2c9a8fe6c218bbe9649bb553363d5952b2b33343228755fe",
    ("DLClusterAlloc-v0", '{"max_steps": 400}', 1000): "19193a8139c499b2f18a8dfe0da105161aaf27f54878ab7816390a72b4411c94",
    ("DLClusterAlloc-v0", '{"shapes": [[1, 1], [2, 4], [4, 8]]}', 600): "31d3a8aad4b75a3fca983bbbbcfc1ad7dbcb81584e8c010dc3fa137e11747201",
    ("DLClusterJoint-v0", json.dumps({**SHAPED, "max_steps": 600}), 1500): "7976759380f0447b62b6fa0cda7528262fb98ef9a1109a6cfa16684c76404030",
    ("DLClusterShare-v0", '{"max_steps": 400}', 1500): "8de6607979f497d389902c5ce75682423260912ba974d8aa4b5a3db9947a6991"  # gts5,
}
VEC_PINS = {
    ("DLClusterPlace-v0", 4, 400): "fc8f527d27c2851fced25605e8cd729ed84ec0485e07416a60182097d673e62c",
    ("DLClusterJoint-v0", 3, 300): "d4ae583e5829a717291eb8494c9673fbcb89aacae61e87fec5931e86995cbcc5",
}


def _add_obs(h, obs: dict) -> None:
    for k in sorted(obs):
        h.update(k.encode())
        v = np.ascontiguousarray(obs[k])
        h.update(str((v.dtype, v.shape)).encode())
        h.update(v.tobytes())


def _add_info(h, info: dict) -> None:
    for k in sorted(info):
        v = info[k]
        h.update(k.encode())
        if isinstance(v, np.ndarray):
            h.update(str((v.dtype, v.shape)).encode())  # an object array's bytes are addresses
            h.update(repr(v.tolist()).encode() if v.dtype == object else np.ascontiguousarray(v).tobytes())
        elif isinstance(v, dict):
            if k in ("final_obs",):
                _add_obs(h, v)
            elif k == "final_info":
                _add_info(h, v)
            else:  # metrics: decision latency is wall-clock time, not part of the trajectory
                h.update(json.dumps({m: x for m, x in v.items() if m != "decision_latency_ms"},
                                    sort_keys=True, default=repr).encode())
        else:
            h.update(repr((type(v).__name__, v)).encode())


def single_digest(env_id: str, options: str, steps: int) -> str:
    env = gym.make(env_id, scenario="default", **json.loads(options))
    u = env.unwrapped
    rng = np.random.default_rng(5)
    h = hashlib.sha256()
    obs, info = env.reset(seed=21)
    _add_obs(h, obs)
    _add_info(h, info)
    resets = 0
    for step in range(steps):
        mask = u.action_masks()
        h.update(mask.tobytes())
        a = env.action_space.n if step % 97 == 96 else int(rng.choice(np.flatnonzero(mask)))
        obs, r, term, trunc, info = env.step(a)
        h.update(np.float64(r).tobytes())
        h.update(bytes([bool(term), bool(trunc)]))
        _add_obs(h, obs)
        _add_info(h, info)
        if term or trunc:
            resets += 1
            obs, info = env.reset(seed=21 + resets) if resets % 2 else env.reset()
            _add_obs(h, obs)
            _add_info(h, info)
    return h.hexdigest()


def vector_digest(env_id: str, n: int, steps: int) -> str:
    vec = gym.make_vec(env_id, n, vectorization_mode="vector_entry_point", scenario="default",
                       max_steps=150)
    rng = np.random.default_rng(6)
    h = hashlib.sha256()
    obs, info = vec.reset(seed=30)
    _add_obs(h, obs)
    _add_info(h, info)
    for _ in range(steps):
        masks = vec.action_masks()
        h.update(masks.tobytes())
        a = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, r, term, trunc, info = vec.step(a)
        h.update(np.asarray(r, np.float64).tobytes())
        h.update(np.asarray(term).tobytes() + np.asarray(trunc).tobytes())
        _add_obs(h, obs)
        _add_info(h, info)
    return h.hexdigest()


@pytest.mark.parametrize("case", list(PINS), ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_single_env_trajectory_pinned(case):
    assert single_digest(*case) == PINS[case]


@pytest.mark.parametrize("case", list(VEC_PINS), ids=lambda c: f"{c[0]}-{c[1]}")
def test_batched_env_trajectory_pinned(case):
    assert vector_digest(*case) == VEC_PINS[case]


if __name__ == "__main__":  # print the digests (to record them on a base commit)
    for c in PINS:
        print(c, single_digest(*c))
    for c in VEC_PINS:
        print(c, vector_digest(*c))


def test_metrics_summary_equals_asdict_without_rows():
    """`Metrics.summary` (an episode end's info["metrics"]) reads the scalar fields directly; it
    equals `asdict` with the per-job rows, timeline and latency popped, key order included."""
    m = dlclusterenv.make_sim("default", 3).run(baselines.make("fifo"))
    want = asdict(m)
    for k in ("jobs", "timeline", "decision_latency_ms"):
        want.pop(k)
    got = m.summary()
    assert list(got.items()) == list(want.items()) and len(m.jobs) > 0 and len(m.timeline) > 0

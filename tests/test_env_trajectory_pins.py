"""Issue 14 (branch env5): the speed work on the envs must leave every trajectory bit-identical.
Each case runs random masked actions (and an out-of-range action every 97th step, the invalid
path) on `default`, across rounds, engine events and episode ends, and hashes everything a
learner sees: observations, `action_masks()`, rewards, terminated / truncated and the infos
(the metrics at an episode's end without `decision_latency_ms`, which is wall-clock time). The
digests were recorded on main at 7c85e8d, before the change; a digest that moves means a
trajectory changed. The Share env's digest was re-recorded at gts5: the engine's default
time-slicing became server-wide (`Overheads.time_slice: server`, Gandiva's Fig. 9), which changes
the speeds of its time-sliced jobs; the other envs do not time-slice and kept theirs. Every digest
was re-recorded at bias7: a job's speed biases come from generators of their own, so its loss
generator draws losses only and every loss moved by one normal draw; the observations carry them
(a job slot's loss ratio, last / first). With the observations left out (masks, rewards, ends,
infos), every case hashes the same on main 9c985a2 and on bias7."""

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

# (id, options, steps) -> sha256 recorded on main 7c85e8d, re-recorded at bias7
PINS = {
    ("DLCluster-v0", '{"max_steps": 500}', 1500): "ab77d3b22a5a8cb72d14a0a0be20d795c7f549a49e73c3528fa7adc7f380795f",
    ("DLClusterPlace-v0", "{}", 2000): "880a704bc002c43fed828af985fb2e8e36dd474942223f61ccdcc8c7fd44c680",
    ("DLClusterPlace-v0", '{"work_conserving": true}', 1000): "c33ab974313e9303994374e456e1936abfbf266df5921ed341a5d1f8a303c36d",
    ("DLClusterPlace-v0", json.dumps(SHAPED), 1000): "7e32294c08c3533e9703ac28d93cad745b6b63054cc81e54f46eba93efbd750d",
    ("DLClusterAlloc-v0", '{"max_steps": 400}', 1000): "183b1e5daec8a14a71bff9f1d46d777056cb10dc1bfca361562963913c92f46c",
    ("DLClusterAlloc-v0", '{"shapes": [[1, 1], [2, 4], [4, 8]]}', 600): "248ad691fa93121f9d7f3f7672fc44cc4049c0eeb54b6babbab01a862e010caa",
    ("DLClusterJoint-v0", json.dumps({**SHAPED, "max_steps": 600}), 1500): "4712cbc6963d8b81f6915fc3fa895f217f98346e59d7700b12fa148ecdb4c05e",
    ("DLClusterShare-v0", '{"max_steps": 400}', 1500): "7774379c8963590b2a960f4dc1debb61d019ab83d17b419cbd0d8260bfc19227"  # gts5,
}
VEC_PINS = {
    ("DLClusterPlace-v0", 4, 400): "f60b547ae8582d7606a941a62cc71ee4c5f97f2244a49f933ffd4768a0d71ed8",
    ("DLClusterJoint-v0", 3, 300): "5c58c87a0c0972a3a2abc5e52208daa8e73e1fd9a49a5854acef6a1c59edff66",
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

"""Shared fixtures and helpers for the env, property and adapter tests.

Hypothesis profiles (pick one with HYPOTHESIS_PROFILE=<name>):
- ``ci`` (default): derandomized (the same examples every run), no database, no deadline. The
  default because `python -m pytest` is what CI runs: a suite that draws new examples each run can
  fail on one run and pass on the next, and a failing run lands nothing.
- ``dev``: no deadline, new random examples each run, the example database on (to look for bugs;
  a failure prints the example and `@reproduce_failure` to replay it).
- ``thorough``: many more examples for a long local run (tests that set ``max_examples``
  themselves keep their own count; this profile raises the rest).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

# Two CPU cores shared with other jobs: one OpenMP thread in every process the tests start (README
# snippets, CLI runs, workers), set before numpy and torch load. Two threads per torch process on
# two busy cores spin at their barriers: at load 4 the README's MaskablePPO snippet took 57 s of
# CPU with two, 7 s with one.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

import dlclusterenv

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", **_COMMON)
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("thorough", max_examples=500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Two CPU cores: keep torch from oversubscribing them in the training tests (also where
# OMP_NUM_THREADS was set otherwise).
torch.set_num_threads(1)

SCENARIO = "tiny"
ENV_IDS = dlclusterenv.ENV_IDS
# A scenario without jobs: a trace window after the end of the trace (reset() returns a finished
# episode, evaluate has no job rows to write).
ZERO_JOBS = {
    "name": "zero-jobs",
    "cluster": "tiny",
    "workload": {
        "kind": "trace",
        "models": {"ResNet-50": 1},
        "trace": {"path": str(Path(__file__).parent / "data" / "philly_cluster_job_log.json"),
                  "format": "philly_json", "start": "2030-01-01"},
    },
}


def make_env(env_id: str, **kw) -> gym.Env:
    """The registered env on the tiny scenario."""
    return gym.make(env_id, scenario=SCENARIO, **kw)


def end_action(env) -> int:
    """The end-of-round action (allocation envs) or defer (placement env): always the last one."""
    return int(env.unwrapped.action_space.n - 1)


def random_valid_action(env, rng: np.random.Generator) -> int:
    mask = env.unwrapped.action_masks()
    return int(rng.choice(np.flatnonzero(mask)))


def run_random_episode(env, seed: int, max_steps: int = 100_000):
    """An episode of uniformly random valid actions; returns (rewards, last info, steps)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    rewards = []
    for step in range(1, max_steps + 1):
        _, r, term, trunc, info = env.step(random_valid_action(env, rng))
        rewards.append(float(r))
        if term or trunc:
            return rewards, info, step
    raise AssertionError(f"episode did not end within {max_steps} steps")


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_pytest_tmp(tmp_path_factory):
    """stable-baselines3 makes an empty /tmp/SB3-<time> folder at every ``learn()`` without a
    logger (its ``configure`` falls back to ``SB3_LOGDIR``, then tempdir): point it into pytest's
    own temporary tree, which pytest prunes, instead of leaving a dozen folders in /tmp per run."""
    patch = pytest.MonkeyPatch()
    patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3")))
    yield
    patch.undo()


@pytest.fixture(params=ENV_IDS)
def env_id(request) -> str:
    return request.param


@pytest.fixture
def fifo_as_learned(monkeypatch) -> list:
    """Learned policies (`KIND:PATH`) run FIFO: `agents.learned.run_learned` is replaced, so no
    model is loaded. The list it returns records each call's (spec, scenario, seed)."""
    calls = []

    def run_learned(spec, scenario, seed):
        import baselines

        calls.append((spec, scenario, seed))
        return dlclusterenv.make_sim(scenario, seed).run(baselines.make("fifo"))

    monkeypatch.setitem(sys.modules, "agents.learned", types.SimpleNamespace(run_learned=run_learned))
    return calls

"""A trained model as a policy like any other: `ppo:PATH` and `maskableppo:PATH` on the leaderboard.

PATH is a model.zip written by `dlcluster train`; the config.yaml beside it names the env id and
its keyword arguments, so the env is rebuilt as in training, on the requested scenario and seed.
`env.reset(seed=s)` builds the same workload as `make_sim(scenario, s)` (the adapter tests check
the two doors agree), so `run_learned` returns the Metrics a baseline run returns, for the same
leaderboard and CSVs. The policy acts deterministically; a maskable one only among valid actions.

Another scenario than the training one: if its cluster has more nodes than the config's
`max_nodes`, the env is sized to the cluster, and `max_jobs` grows with the node count; if the
observation or action space then differs from the model's, the weights are moved onto the new
spaces with `agents.policies.transfer`, which only size-agnostic policies (EntityPolicy
subclasses) allow; any other model gets a ConfigError.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from dlclusterenv import make_sim
from dlclusterenv.config import ConfigError
from dlclusterenv.envs.core import MAX_JOBS
from dlclusterenv.metrics import Metrics
from dlclusterenv.workload import build

from .train import TrainConfig, algo_class, load_config

PREFIXES = {"ppo": "ppo", "maskableppo": "maskable_ppo"}


class StuckPolicyError(RuntimeError):
    """A deterministic policy took a masked action: the env leaves the state unchanged, so the
    policy would repeat it forever (only possible without action masks, i.e. plain PPO)."""


def parse_spec(spec: str) -> tuple[str, Path, TrainConfig]:
    """`prefix:PATH` -> (algo, model path, its training config); ConfigError naming the spec."""
    prefix, sep, path = spec.partition(":")
    if not sep or prefix not in PREFIXES:
        raise ConfigError(f"policy {spec!r}: unknown learned-policy prefix {prefix!r}; "
                          f"use {' or '.join(p + ':PATH/model.zip' for p in PREFIXES)}")
    model = Path(path)
    if not model.is_file():
        raise ConfigError(f"policy {spec!r}: model file {path!r} not found")
    cfg_path = model.parent / "config.yaml"
    if not cfg_path.is_file():
        raise ConfigError(f"policy {spec!r}: {cfg_path} not found (dlcluster train writes the "
                          "config that names the model's env beside model.zip)")
    cfg = load_config(cfg_path)
    if cfg.algo != PREFIXES[prefix]:
        raise ConfigError(f"policy {spec!r}: {cfg_path} says algo {cfg.algo!r}, not {PREFIXES[prefix]!r}")
    return cfg.algo, model, cfg


def env_for(cfg: TrainConfig, scenario: str | None) -> gym.Env:
    """The training env on `scenario` (None: the training scenario), sized to fit its cluster. On a
    cluster with k times the training cluster's nodes the job window (`max_jobs`) grows k-fold as
    well: about k times as many jobs run at once there, and a job beyond the window cannot be seen,
    so cannot be started (trained on default with 16 slots, default_2x with 16 gave 1.33x
    Optimus' avg JCT, with 32 about 0.6x)."""
    kw = dict(cfg.env.kwargs)
    train_nodes = build(kw.get("scenario", "default"), 0)[1].n_nodes
    nodes = train_nodes if scenario is None else build(scenario, 0)[1].n_nodes
    if scenario is not None:
        kw["scenario"] = scenario
    if kw.get("max_nodes"):
        kw["max_nodes"] = max(kw["max_nodes"], nodes)
    if nodes > train_nodes:
        kw["max_jobs"] = math.ceil(kw.get("max_jobs", MAX_JOBS) * nodes / train_nodes)
    return gym.make(cfg.env.id, **kw)


def fit_spaces(model, env: gym.Env):
    """The model itself when the env has its spaces; else a transferred copy (see module doc)."""
    if model.observation_space == env.observation_space and model.action_space == env.action_space:
        return model
    from .policies import transfer

    try:
        return transfer(model, env, device=str(model.device))
    except ValueError as e:
        raise ConfigError(
            f"the model was trained on other spaces than this scenario's env "
            f"(nodes {model.observation_space['nodes'].shape} vs {env.observation_space['nodes'].shape}, "
            f"actions {model.action_space} vs {env.action_space}) and cannot move: {e}"
        ) from None


def episode(model, env: gym.Env, seed: int, masked: bool) -> Metrics:
    """One deterministic episode; the Metrics Simulator.run would return. Decision latency is the
    wall time of each `predict` (mask included), one per env step, as a baseline's is per decide."""
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped  # looked up once: the wrapper chain is walked per access
    latency = base.sim.totals.decision_s  # the episode's simulator, made by reset
    steps = 0
    while True:
        t0 = time.perf_counter()
        if masked:
            a, _ = model.predict(obs, action_masks=base.action_masks(), deterministic=True)
        else:
            a, _ = model.predict(obs, deterministic=True)
        latency.append(time.perf_counter() - t0)
        obs, _, term, trunc, info = env.step(int(a))
        steps += 1
        if term or trunc:
            return base.sim.metrics()
        if info["invalid_action"]:
            raise StuckPolicyError(
                f"seed {seed}, step {steps}: the policy chose masked action {int(a)}; the state is "
                "unchanged, so a deterministic policy repeats it forever (train with maskable_ppo)"
            )


def load_learned(spec: str, scenario) -> tuple[str, Any, gym.Env]:
    """`ppo:PATH` / `maskableppo:PATH` -> (algo, model, its env on `scenario`), the model fitted to
    the env's spaces."""
    algo, path, cfg = parse_spec(spec)
    env = env_for(cfg, scenario)
    return algo, fit_spaces(algo_class(algo).load(path, device="cpu"), env), env


def run_learned(spec: str, scenario: str, seed: int) -> Metrics:
    """`ppo:PATH` / `maskableppo:PATH` on a scenario and seed -> the same Metrics as a baseline."""
    algo, model, env = load_learned(spec, scenario)
    return episode(model, env, seed, masked=algo == "maskable_ppo")


def evaluate_model(model, cfg: TrainConfig, scenario: str | None, seeds: list[int],
                   baselines: list[str], cache: dict) -> tuple[dict[str, list[dict]], int]:
    """The model (name "policy") and each baseline on the held-out seeds: ({name: [summary per
    seed]}, seeds on which the policy got stuck). Baseline runs are deterministic per seed, so they
    are kept in `cache` across the evaluations of one training run."""
    import baselines as registry

    env = env_for(cfg, scenario)
    m = fit_spaces(model, env)
    scores: dict[str, list[dict]] = {"policy": []}
    stuck = 0
    for s in seeds:
        try:
            scores["policy"].append(episode(m, env, s, masked=cfg.algo == "maskable_ppo").summary())
        except StuckPolicyError:
            stuck += 1
    env.close()
    name = scenario or cfg.env.kwargs.get("scenario", "default")
    for b in baselines:
        for s in seeds:
            if (name, b, s) not in cache:
                cache[(name, b, s)] = make_sim(name, s).run(registry.make(b)).summary()
        scores[b] = [cache[(name, b, s)] for s in seeds]
    return scores, stuck

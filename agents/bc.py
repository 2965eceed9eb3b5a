"""Behaviour cloning from a heuristic, as a warm start before RL.

DL2 (Peng et al., "DL2: A Deep Learning-driven Scheduler for Deep Learning Clusters", 2019) first
trains its policy network by supervised learning on the decisions of the cluster's existing
scheduler, then improves it with RL; starting PPO from random weights on a long-horizon JCT reward
learns slowly. Here the heuristic (any baseline the adapter can run through the training env) is
rolled out with dlclusterenv.adapter.SchedulerAdapter, which turns each of its Decisions into the
env's micro-actions; every (observation, action, mask) is recorded, and the policy's action
distribution is trained by cross-entropy on those actions, masked like MaskablePPO's (invalid
actions get zero probability) for a maskable policy. Only the actor is trained; the critic learns
in RL. The optimizer is a fresh Adam, so PPO's own optimizer state starts clean.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch as th

from dlclusterenv.adapter import AdapterError, SchedulerAdapter


class BCError(ValueError):
    """The heuristic's decisions cannot be imitated in this env."""


@dataclass
class Demos:
    obs: dict[str, np.ndarray]  # key -> (n, ...) stacked observations
    actions: np.ndarray  # (n,) the heuristic's actions
    masks: np.ndarray  # (n, n_actions) valid actions in each state
    skipped: dict[int, str]  # seed -> why its episode could not be imitated

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def chance(self) -> float:
        """Accuracy of a uniform choice among the valid actions."""
        return float(np.mean(1.0 / self.masks.sum(1)))


def collect(env_id: str, env_kwargs: dict, heuristic: str, seeds: list[int]) -> Demos:
    """One episode per seed of the heuristic through the env; every state and its action. An
    episode in which the env cannot follow the heuristic (AdapterError, or a masked action) is
    dropped whole and reported in `skipped`; if every episode is, that is a BCError."""
    import baselines

    env = gym.make(env_id, **env_kwargs)
    adapter = SchedulerAdapter(env, baselines.make(heuristic))
    obs_rows: list[dict] = []
    actions, masks = [], []
    skipped: dict[int, str] = {}
    for seed in seeds:
        rows: list[tuple] = []
        try:
            adapter.scheduler.reset(seed)
            obs, _ = env.reset(seed=seed)
            done = False
            while not done:
                mask = env.unwrapped.action_masks()
                a = adapter.act()
                if not mask[a]:
                    raise BCError(
                        f"{heuristic} takes masked action {a} in {env_id} at step {len(rows)}, e.g. "
                        "deferring a task that fits while work_conserving=True"
                    )
                rows.append((obs, a, mask))
                obs, _, term, trunc, _ = env.step(a)
                done = term or trunc
        except (AdapterError, BCError) as e:
            skipped[seed] = str(e)
            continue
        for o, a, m in rows:
            obs_rows.append(o)
            actions.append(a)
            masks.append(m)
    env.close()
    if not actions:
        raise BCError(f"bc: {heuristic} cannot be imitated in {env_id} {env_kwargs}: "
                      + "; ".join(f"seed {s}: {why}" for s, why in skipped.items()))
    return Demos(
        obs={k: np.stack([o[k] for o in obs_rows]) for k in obs_rows[0]},
        actions=np.asarray(actions, np.int64),
        masks=np.stack(masks),
        skipped=skipped,
    )


def _batches(policy, demos: Demos, idx: np.ndarray):
    obs, _ = policy.obs_to_tensor({k: v[idx] for k, v in demos.obs.items()})
    actions = th.as_tensor(demos.actions[idx], device=policy.device)
    masks = demos.masks[idx]
    return obs, actions, masks


def _distribution(policy, obs, masks, masked: bool):
    return policy.get_distribution(obs, action_masks=masks) if masked else policy.get_distribution(obs)


def accuracy(policy, demos: Demos, masked: bool, batch_size: int = 1024) -> float:
    """Fraction of states in which the policy's most likely action is the heuristic's."""
    policy.set_training_mode(False)
    hits = 0
    with th.no_grad():
        for lo in range(0, len(demos), batch_size):
            obs, actions, masks = _batches(policy, demos, np.arange(lo, min(lo + batch_size, len(demos))))
            hits += int((_distribution(policy, obs, masks, masked).mode() == actions).sum())
    return hits / len(demos)


def clone(policy, demos: Demos, *, epochs: int, batch_size: int, learning_rate: float, seed: int,
          masked: bool, log=None) -> list[dict]:
    """Cross-entropy on the heuristic's actions; per epoch: mean loss and training accuracy."""
    opt = th.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    history = []
    for epoch in range(epochs):
        policy.set_training_mode(True)
        order = rng.permutation(len(demos))
        losses = []
        for lo in range(0, len(demos), batch_size):
            obs, actions, masks = _batches(policy, demos, order[lo : lo + batch_size])
            loss = -_distribution(policy, obs, masks, masked).log_prob(actions).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        row = {"epoch": epoch + 1, "loss": float(np.mean(losses)),
               "accuracy": accuracy(policy, demos, masked)}
        history.append(row)
        if log is not None:
            log(row)
    policy.set_training_mode(False)
    return history


def warm_start(model, cfg, logger) -> dict:
    """BC of cfg.bc.heuristic on episodes seeded cfg.seed + i, logged to TensorBoard as
    bc/loss and bc/accuracy by epoch; returns the statistics kept in run.json."""
    from stable_baselines3.common.logger import TensorBoardOutputFormat

    spec = cfg.bc
    kwargs = {**cfg.env.kwargs, **spec.env_kwargs}
    if spec.env_kwargs:
        probe = gym.make(cfg.env.id, **kwargs)
        if (probe.observation_space, probe.action_space) != (model.observation_space, model.action_space):
            raise BCError(f"bc.env_kwargs {spec.env_kwargs} change the env's spaces; the "
                          "demonstrations would not fit the policy")
        probe.close()
    demos = collect(cfg.env.id, kwargs, spec.heuristic, [cfg.seed + i for i in range(spec.episodes)])
    tb = next(f.writer for f in logger.output_formats if isinstance(f, TensorBoardOutputFormat))

    def log(row: dict) -> None:
        tb.add_scalar("bc/loss", row["loss"], row["epoch"])
        tb.add_scalar("bc/accuracy", row["accuracy"], row["epoch"])

    history = clone(model.policy, demos, epochs=spec.epochs, batch_size=spec.batch_size,
                    learning_rate=spec.learning_rate, seed=cfg.seed,
                    masked=cfg.algo == "maskable_ppo", log=log)
    tb.flush()
    if demos.skipped:
        warnings.warn(f"bc: episodes skipped (the env cannot follow {spec.heuristic}): {demos.skipped}")
    return {"heuristic": spec.heuristic, "states": len(demos), "chance": demos.chance,
            "accuracy": history[-1]["accuracy"], "loss": history[-1]["loss"],
            "skipped_seeds": {str(k): v for k, v in demos.skipped.items()}}

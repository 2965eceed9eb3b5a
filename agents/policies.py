"""Policies with the cluster's structure built in, for sb3-contrib's MaskablePPO.

`PlacePolicy`, `AllocPolicy` and `JointPolicy` (one per action layout; `policy_for(env)` picks)
score entities with agents.extractor's attention encoder; no parameter depends on the number of
nodes or job slots, so `transfer(model, env)` runs trained weights on a cluster of another size
or with another `max_jobs` (SB3 itself refuses to load a model on different spaces).

`NodeScoringPolicy` is for DLClusterPlace-v0: one shared MLP scores every node from (that node's
features, the focal task, the cluster summary), and those scores are the action logits, plus one
for defer from the mean node embedding. The same weights therefore serve any number of nodes
(padding is masked), and "put the task where its job already is" is one function to learn rather
than one per node, as a flat MLP over all nodes would need.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, create_mlp
from torch import nn

from dlclusterenv.envs import AllocationEnv, GrowEnv, JointEnv, PlacementEnv

from .extractor import EntityScorer


class NodeFeatures(BaseFeaturesExtractor):
    """Output: [a score per node slot, a defer score, a pooled context vector]."""

    def __init__(self, observation_space: spaces.Dict, hidden: int = 64, context: int = 32):
        n, node_f = observation_space["nodes"].shape
        per_node = node_f + observation_space["task"].shape[0] + observation_space["global"].shape[0]
        super().__init__(observation_space, features_dim=n + 1 + context)
        self.embed = nn.Sequential(
            nn.Linear(per_node, hidden), nn.ReLU(), nn.Linear(hidden, context), nn.ReLU()
        )
        self.score = nn.Linear(context, 1)
        self.defer = nn.Linear(context, 1)

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        nodes, mask = obs["nodes"], obs["node_mask"]
        n = nodes.shape[1]
        ctx = th.cat([obs["task"], obs["global"]], dim=-1).unsqueeze(1).expand(-1, n, -1)
        h = self.embed(th.cat([nodes, ctx], dim=-1))  # (B, N, context)
        scores = self.score(h).squeeze(-1)  # (B, N)
        pooled = (h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        return th.cat([scores, self.defer(pooled), pooled], dim=-1)


class _Logits(nn.Module):
    """The first k features are the logits."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: th.Tensor) -> th.Tensor:
        return x[..., : self.k]


class NodeScoringPolicy(MaskableActorCriticPolicy):
    def __init__(self, observation_space, action_space, lr_schedule, **kwargs):
        kwargs.setdefault("features_extractor_class", NodeFeatures)
        kwargs.setdefault("net_arch", dict(pi=[], vf=[64, 64]))
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = _Logits(int(self.action_space.n))
        self.optimizer = self.optimizer_class(
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )


class _SplitLatent(nn.Module):
    """Actor latent = the extractor's logits as they are; critic latent = an MLP of the pooled
    context. Neither depends on the action count, unlike SB3's MlpExtractor over all features."""

    def __init__(self, n_actions: int, context_dim: int, vf_arch: list[int], activation_fn):
        super().__init__()
        self.n_actions = n_actions
        self.critic = nn.Sequential(*create_mlp(context_dim, -1, vf_arch, activation_fn))
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = vf_arch[-1] if vf_arch else context_dim

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return features[:, : self.n_actions]

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.critic(features[:, self.n_actions :])


class EntityPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy on agents.extractor.EntityScorer for the layout named by the subclass.
    `features_extractor_kwargs` may set dim, heads, layers; `net_arch` (a list, or a dict whose
    "vf" entry is used) is the critic's MLP over the pooled context."""

    layout = ""

    def __init__(self, observation_space, action_space, lr_schedule, **kwargs):
        fk = dict(kwargs.pop("features_extractor_kwargs", None) or {})
        fk["layout"] = self.layout
        if self.layout == "alloc":  # +PS / +worker, or the env's shapes: read off the space
            fk["per_job"] = (int(action_space.n) - 1) // observation_space["jobs"].shape[0]
        kwargs["features_extractor_kwargs"] = fk
        kwargs.setdefault("features_extractor_class", EntityScorer)
        kwargs.setdefault("net_arch", [64, 64])
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        ext = self.features_extractor
        if ext.n_actions != self.action_space.n:
            raise ValueError(
                f"{type(self).__name__}: the {self.layout!r} layout has {ext.n_actions} actions on "
                f"this observation space, the env has {self.action_space.n}; use policy_for(env)"
            )
        arch = self.net_arch["vf"] if isinstance(self.net_arch, dict) else self.net_arch
        self.mlp_extractor = _SplitLatent(ext.n_actions, ext.context_dim, list(arch), self.activation_fn)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the extractor's heads already emit one logit per action
        if self.ortho_init:  # small initial logits, as SB3 gives its action_net (gain 0.01)
            for layer in self.features_extractor.output_layers():
                self.init_weights(layer, gain=0.01)
        self.optimizer = self.optimizer_class(
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )


class PlacePolicy(EntityPolicy):
    """DLClusterPlace-v0: a logit per node (shared scorer), and defer."""

    layout = "place"


class AllocPolicy(EntityPolicy):
    """DLClusterAlloc-v0: +PS and +worker logits per job slot (or one per shape, with the env's
    `shapes=`) from a shared scorer, and end of round."""

    layout = "alloc"


class GrowPolicy(EntityPolicy):
    """DLClusterGrow-v0: one logit per (job slot, growth limit) from the shared job scorer (the
    alloc layout, its `growth` rows read by the encoder), and end of round."""

    layout = "alloc"


class JointPolicy(EntityPolicy):
    """DLClusterJoint-v0 / DLCluster-v0: a job x node pair scorer for +PS and +worker, a release
    logit per job slot, and end of round."""

    layout = "joint"


_POLICIES = ((PlacementEnv, PlacePolicy), (AllocationEnv, AllocPolicy), (JointEnv, JointPolicy),
             (GrowEnv, GrowPolicy))


def _first_env(env):
    """The unwrapped env behind a gym.Env, a gymnasium VectorEnv (gym.make_vec, sync or async) or
    an SB3 VecEnv (Dummy, Subproc, and wrappers such as VecNormalize); the sub-envs of a vector
    share one class. A subprocess's env comes back pickled, once, which is why only env 0 is asked."""
    from stable_baselines3.common.vec_env import VecEnv

    if isinstance(env, VecEnv):
        return env.get_attr("unwrapped", indices=[0])[0]
    if isinstance(env, gym.vector.VectorEnv):
        envs = getattr(env, "envs", None)  # SyncVectorEnv holds them; AsyncVectorEnv does not
        return envs[0].unwrapped if envs else env.get_attr("unwrapped")[0]
    return env.unwrapped


def policy_for(env) -> type[EntityPolicy]:
    """The entity policy whose action layout matches a DLCluster env: a gym.Env (wrapped or not),
    a gymnasium VectorEnv or an SB3 VecEnv of them."""
    base = _first_env(env)
    for cls, policy in _POLICIES:
        if isinstance(base, cls):
            return policy
    raise ValueError(f"policy_for: {type(base).__name__} is not a DLCluster env (nor a vector of "
                     "DLClusterPlace / DLClusterAlloc / DLClusterJoint envs)")


_HYPERPARAMETERS = ("learning_rate", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda",
                    "clip_range", "ent_coef", "vf_coef", "max_grad_norm", "target_kl")


def transfer(model: MaskablePPO | str | Path, env: gym.Env, device: str = "cpu",
             seed: int | None = None) -> MaskablePPO:
    """A MaskablePPO on `env` (any cluster size and max_jobs) carrying `model`'s policy weights
    (a model or a saved .zip) and hyperparameters, ready to predict or to train further. The
    policy must be an EntityPolicy of the env's layout; a flat-MLP model cannot transfer."""
    if isinstance(model, (str, Path)):
        src = MaskablePPO.load(model, device=device)
    elif isinstance(model, MaskablePPO):
        src = model
    else:
        raise ValueError(f"transfer: expected a MaskablePPO model or its .zip path, got "
                         f"{type(model).__name__}")
    policy = type(src.policy)
    if not issubclass(policy, EntityPolicy):
        raise ValueError(f"transfer: {policy.__name__} has size-dependent weights; only "
                         "EntityPolicy subclasses (PlacePolicy, AllocPolicy, JointPolicy, GrowPolicy) transfer")
    if policy_for(env) is not policy:
        raise ValueError(f"transfer: the model is a {policy.__name__}, the env needs "
                         f"{policy_for(env).__name__}")
    hyper = {k: getattr(src, k) for k in _HYPERPARAMETERS}
    dst = MaskablePPO(policy, env, policy_kwargs=src.policy_kwargs, device=device,
                      seed=src.seed if seed is None else seed, **hyper)
    dst.policy.load_state_dict(src.policy.state_dict())
    return dst


def action_logits(model: MaskablePPO, obs: dict[str, np.ndarray]) -> th.Tensor:
    """The policy's logits for one observation, before the action mask is applied."""
    t, _ = model.policy.obs_to_tensor(obs)
    with th.no_grad():
        return model.policy.mlp_extractor.forward_actor(model.policy.extract_features(t))[0]

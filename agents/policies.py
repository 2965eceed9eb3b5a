"""Policies with the cluster's structure built in, for sb3-contrib's MaskablePPO.

`NodeScoringPolicy` is for DLClusterPlace-v0: one shared MLP scores every node from (that node's
features, the focal task, the cluster summary), and those scores are the action logits, plus one
for defer from the mean node embedding. The same weights therefore serve any number of nodes
(padding is masked), and "put the task where its job already is" is one function to learn rather
than one per node, as a flat MLP over all nodes would need.
"""

from __future__ import annotations

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


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

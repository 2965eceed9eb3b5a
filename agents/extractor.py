"""A size-agnostic encoder of the cluster observation, and entity-scoring action heads.

Every parameter here acts on one entity (a node, a job slot, a job x node pair) or on pooled
summaries, never on a flattened observation, so the same weights run on any `max_nodes` and
`max_jobs`: padding only adds masked entities. DL2 (Peng et al., 2019; the allocation scheme of
DLClusterAlloc) feeds a flat network a fixed number of job slots, which ties its weights to that
number, as SB3's MultiInputPolicy is tied here; Decima (Mao et al., SIGCOMM'19) scores entities
with shared weights over a graph embedding, so one policy runs on any job count. This follows
Decima.

`ClusterEncoder` maps the observation (layout in dlclusterenv/envs/core.py `_obs`) to per-node and
per-job embeddings plus a pooled context (DLClusterGrow-v0's `growth` rows join the job rows):
  - shared per-node and per-job MLPs, each also given the focal task and the global features;
  - blocks of multi-head self-attention over all nodes and jobs together, with key-padding masks
    from `node_mask` / `job_mask`, so padded slots are never attended to;
  - in each block a message from the node's rack-mates (mean over the nodes with the same rack
    feature), the cluster graph's one edge type visible in the observation. Job <-> node
    occupancy is observed only for the focal job (node feature 6), so it enters as a node
    feature; attention learns the rest.

`EntityScorer` is an SB3 features extractor that puts one of three heads on the encoder, matching
the action layouts of dlclusterenv/envs: `place` (a logit per node + defer), `alloc` (+PS and
+worker logits per job slot, or one per shape with the env's `shapes=`, + end of round) and
`joint` (a pairwise job x node scorer for +PS and +worker, a release logit per job slot, end of
round). Its output is [action logits, pooled context]; agents.policies splits the two between the
actor and the critic.
"""

from __future__ import annotations

from itertools import pairwise

import torch as th
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from dlclusterenv.envs.core import GLOBAL_F, JOB_F, NODE_F, TASK_F

LAYOUTS = ("place", "alloc", "joint")
_RACK = 5  # node feature: rack index / (racks - 1)
_SLOT = 5  # task feature: the focal job's slot / max_jobs
_CTX = TASK_F - 1 + GLOBAL_F  # the focal task without its slot index, and the global features


def _mlp(*sizes: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])  # no activation after the last layer


def _masked_mean(h: th.Tensor, mask: th.Tensor) -> th.Tensor:
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp(min=1.0)


def n_actions(layout: str, max_nodes: int, max_jobs: int, per_job: int = 2) -> int:
    """Size of the env's Discrete action space for a layout (dlclusterenv/envs); `per_job` is the
    alloc layout's actions per job slot (+PS, +worker; or one per shape of `shapes=`)."""
    if layout == "place":
        return max_nodes + 1
    if layout == "alloc":
        return per_job * max_jobs + 1
    if layout == "joint":
        return 2 * max_jobs * max_nodes + max_jobs + 1
    raise ValueError(f"layout: unknown {layout!r}; choose from {LAYOUTS}")


def check_observation_space(space: spaces.Space) -> tuple[int, int]:
    """(max_nodes, max_jobs) of a DLCluster observation space; a clear error if it is not one."""
    want = {"nodes": NODE_F, "node_mask": None, "jobs": JOB_F, "job_mask": None,
            "task": TASK_F, "global": GLOBAL_F}
    if not isinstance(space, spaces.Dict):
        raise ValueError(f"observation space: expected the DLCluster Dict space, got {space}")
    for key, feats in want.items():
        if key not in space.spaces:
            raise ValueError(f"observation space: missing key {key!r}")
        shape = space[key].shape
        if feats is not None and shape[-1] != feats:
            raise ValueError(f"observation space: {key!r} has {shape[-1]} features, expected {feats}")
    return space["nodes"].shape[0], space["jobs"].shape[0]


class _Block(nn.Module):
    """Self-attention over nodes and jobs, a rack message to each node, a shared feed-forward."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.rack = nn.Linear(dim, dim)
        self.ffn = _mlp(dim, 2 * dim, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, hn, hj, pad, rack):
        n = hn.shape[1]
        x = th.cat([hn, hj], dim=1)
        a, _ = self.attn(x, x, x, key_padding_mask=pad, need_weights=False)
        x = self.ln1(x + a)
        hn, hj = x[:, :n], x[:, n:]
        hn = hn + self.rack(rack @ hn)
        x = th.cat([hn, hj], dim=1)
        x = self.ln2(x + self.ffn(x))
        return x[:, :n], x[:, n:]


class ClusterEncoder(nn.Module):
    """obs -> (node embeddings (B, N, dim), job embeddings (B, J, dim), context (B, dim))."""

    def __init__(self, dim: int = 32, heads: int = 4, layers: int = 2, job_extra: int = 0):
        super().__init__()
        self.node_in = _mlp(NODE_F + _CTX, dim, dim)
        # + "is the focal task's job", + an env's own per-job features (`growth`: DLClusterGrow)
        self.job_in = _mlp(JOB_F + 1 + job_extra + _CTX, dim, dim)
        self.blocks = nn.ModuleList(_Block(dim, heads) for _ in range(layers))
        self.pool = _mlp(2 * dim + _CTX, dim, dim)

    def forward(self, obs: dict[str, th.Tensor]):
        nodes, jobs, task = obs["nodes"], obs["jobs"], obs["task"]
        nm, jm = obs["node_mask"] > 0.5, obs["job_mask"] > 0.5
        n, j = nodes.shape[1], jobs.shape[1]
        # The slot index only says which job is the focal one: it becomes a per-job flag, not a
        # context feature whose scale (1 / max_jobs) would change with the number of slots.
        ctx = th.cat([task[:, :_SLOT], obs["global"]], dim=-1)
        slot = th.round(task[:, _SLOT] * j).long().clamp(0, j - 1)
        has_role = (task[:, 0] + task[:, 1] > 0.5).to(jobs.dtype)
        focal = (th.arange(j, device=slot.device) == slot.unsqueeze(-1)).to(jobs.dtype)
        focal = focal * has_role.unsqueeze(-1)
        hn = self.node_in(th.cat([nodes, ctx.unsqueeze(1).expand(-1, n, -1)], dim=-1))
        own = [obs["growth"]] if "growth" in obs else []
        hj = self.job_in(th.cat([jobs, focal.unsqueeze(-1), *own, ctx.unsqueeze(1).expand(-1, j, -1)], -1))
        r = nodes[..., _RACK]
        same = (r.unsqueeze(2) - r.unsqueeze(1)).abs() < 1e-6
        same = same & nm.unsqueeze(2) & nm.unsqueeze(1)
        rack = same.to(nodes.dtype)
        rack = rack / rack.sum(-1, keepdim=True).clamp(min=1.0)
        pad = ~th.cat([nm, jm], dim=1)
        pad = pad & ~pad.all(1, keepdim=True)  # no valid entity at all: attend to everything
        for block in self.blocks:
            hn, hj = block(hn, hj, pad, rack)
        g = self.pool(th.cat([_masked_mean(hn, nm), _masked_mean(hj, jm), ctx], dim=-1))
        return hn, hj, g


class EntityScorer(BaseFeaturesExtractor):
    """Features = [the env's action logits, pooled context]; see the module docstring."""

    def __init__(self, observation_space: spaces.Dict, layout: str = "place", dim: int = 32,
                 heads: int = 4, layers: int = 2, per_job: int = 2):
        max_nodes, max_jobs = check_observation_space(observation_space)
        self.n_actions = n_actions(layout, max_nodes, max_jobs, per_job)
        super().__init__(observation_space, features_dim=self.n_actions + dim)
        self.layout, self.context_dim = layout, dim
        extra = observation_space["growth"].shape[-1] if "growth" in observation_space.spaces else 0
        self.encoder = ClusterEncoder(dim, heads, layers, extra)
        self.end = _mlp(dim, dim, 1)  # defer (place) or end of round (alloc, joint)
        if layout == "place":
            self.node_score = _mlp(2 * dim, dim, 1)
        elif layout == "alloc":
            self.job_score = _mlp(2 * dim, dim, per_job)  # +PS, +worker; or one per shape
        else:
            self.pair_job, self.pair_node = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)
            self.pair_ctx = nn.Linear(dim, dim, bias=False)
            self.pair_out = nn.Linear(dim, 2)  # +PS, +worker of this job on this node
            self.release = _mlp(2 * dim, dim, 1)

    def output_layers(self) -> list[nn.Linear]:
        """The layers that emit logits (the policy gives them a small initial scale)."""
        if self.layout == "place":
            return [self.end[-1], self.node_score[-1]]
        if self.layout == "alloc":
            return [self.end[-1], self.job_score[-1]]
        return [self.end[-1], self.pair_out, self.release[-1]]

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        hn, hj, g = self.encoder(obs)
        b = g.shape[0]
        end = self.end(g)
        if self.layout == "place":
            gn = g.unsqueeze(1).expand_as(hn)
            logits = [self.node_score(th.cat([hn, gn], -1)).squeeze(-1), end]
        elif self.layout == "alloc":
            gj = g.unsqueeze(1).expand_as(hj)
            logits = [self.job_score(th.cat([hj, gj], -1)).reshape(b, -1), end]  # slot-major
        else:
            pair = th.relu(self.pair_job(hj).unsqueeze(2) + self.pair_node(hn).unsqueeze(1)
                           + self.pair_ctx(g)[:, None, None, :])  # (B, J, N, dim)
            add = self.pair_out(pair).permute(0, 1, 3, 2)  # (B, J, role, N): (slot*2+role)*N+node
            gj = g.unsqueeze(1).expand_as(hj)
            logits = [add.reshape(b, -1), self.release(th.cat([hj, gj], -1)).squeeze(-1), end]
        return th.cat([*logits, g], dim=-1)

"""DLTAP (seed 000, §3): workers by the Kubernetes default score, then each PS where its job's
workers are, to cut cross-node worker-PS traffic.

- Workers: Eq. 1, the default hybrid score (LeastRequested + BalancedResourceAllocation, weight 1
  each), from `baselines.k8s_default`.
- Each PS: Eq. 2, finalScore' = finalScore + weightOfDLTAP * priorityScoreOfDLTAP, with Eq. 3 /
  Algorithm 1: priorityScoreOfDLTAP = (this job's workers on the node) / (this job's workers).
  Highest score wins; "if there are more than one nodes with equal highest scores, a random one
  among them is chosen" (seeded by the episode seed).

Choices where the paper leaves it open:
- weight_of_dltap defaults to 10 (= Kubernetes' MaxPriority): Eq. 3 is a fraction in [0, 1]
  while every default priority scores 0-10, so 10 puts DLTAP's term on the same scale as one more
  priority function of weight 1. With weight 1 the term is at most 1 against integer default
  scores: it breaks their ties, or ties a node one point behind (then broken at random).
  The scores are kept real-valued as Eq. 2-3 write them (not truncated to integers).
- Workers counted by Algorithm 1 are those already bound, i.e. this job's workers placed earlier in
  the same round (DLTAP schedules all workers before any PS).
- Everything else (filter, job order, all-or-nothing per job) is the Kubernetes default baseline's;
  see `baselines.k8s_default`.
"""

from __future__ import annotations

import numpy as np

from dlclusterenv.checks import check_real
from dlclusterenv.cluster import Cluster
from dlclusterenv.placers import Capacity

from .k8s_default import MAX_PRIORITY, K8sDefault, default_scores, pick


def dltap_ps_scores(
    cluster: Cluster, cap: Capacity, job, worker_nodes: list[int], weight_of_dltap: float
) -> np.ndarray:
    """Eq. 2 per node for one PS of `job` whose workers sit on `worker_nodes`; -1 = filtered."""
    base = default_scores(cluster, cap, job.ps_demand)  # Eq. 1
    # Algorithm 1 lines 3-8: count this job's worker tasks per node, over the job's worker total
    count = np.bincount(worker_nodes, minlength=cluster.n_nodes).astype(float)
    score = count / max(len(worker_nodes), 1)  # Eq. 3
    return np.where(base >= 0, base + weight_of_dltap * score, -1.0)  # Eq. 2, line 9


class DLTAP(K8sDefault):
    name = "dltap"

    def __init__(self, weight_of_dltap: float = MAX_PRIORITY):
        """`weight_of_dltap`: finite (inf x a score of 0 is NaN on every node without workers)."""
        self.weight_of_dltap = float(check_real(weight_of_dltap, "weight_of_dltap", type(self).__name__, ge=0))

    def place_ps(self, cluster: Cluster, cap: Capacity, job, worker_nodes: list[int]) -> int:
        return pick(dltap_ps_scores(cluster, cap, job, worker_nodes, self.weight_of_dltap), self.rng)

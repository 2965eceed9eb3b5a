"""Kubernetes default scheduling, the comparator of DLTAP (seed 000 §3, "the default Kubernetes
scheduling method includes two steps": filter, then rank by weighted priority scores, Eq. 1).

Each task is a pod, scheduled one at a time:
1. Filter (PodFitsResources): nodes whose free requests cover the pod's CPU, memory and GPUs
   (nvidia.com/gpu is an extended resource), plus the simulator's per-task NIC reservation.
2. Rank (DLTAP Eq. 1, weight 1 each): LeastRequestedPriority + BalancedResourceAllocation, the
   legacy integer 0-10 scores of kube-scheduler before the scheduling framework (v1.8-v1.17,
   pkg/scheduler/algorithm/priorities/least_requested.go, balanced_resource_allocation.go):
     least_requested = ((cap_cpu - req_cpu) * 10 / cap_cpu + (cap_mem - req_mem) * 10 / cap_mem) / 2
     balanced        = int((1 - |req_cpu / cap_cpu - req_mem / cap_mem|) * 10), 0 if a fraction >= 1
   with integer milli-CPU and bytes, integer division, and `req` = the node's requests plus this
   pod's. Both look at CPU and memory only (GPUs count in the filter, not in the scores).
3. The highest total wins; ties are broken at random, from the episode seed, as DLTAP writes for
   its own ranking (seed 000, "if there are more than one nodes with equal highest scores, a
   random one among them is chosen") and as later kube-scheduler's selectHost does (reservoir
   sampling); the v1.8-era selectHost took the tied nodes round-robin instead.

Choices where the paper leaves it open:
- Order: pending jobs in arrival order (the scheduling queue is FIFO); a job's pods workers first,
  then PS, as DLTAP describes its method.
- A job is placed whole or not at all: the simulator runs a job only when every task is placed, so
  a half-bound job would hold its nodes idle (plain Kubernetes has no gang scheduling and can
  deadlock that way; kube-batch/Volcano add the gang admission assumed here). A job that does not
  fit waits, and later jobs may still go (unschedulable pods go back to the queue, they do not
  block it).
- Pods with no CPU or memory request would count as 100m / 200 MiB in Kubernetes; every task of the
  model zoo requests both, so that default is not modelled.
"""

from __future__ import annotations

import numpy as np

from dlclusterenv.api import ClusterView, Decision, Scheduler
from dlclusterenv.cluster import Cluster
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity, add_placement, place_job

MAX_PRIORITY = 10  # schedulerapi.MaxPriority
_GIB = 2**30


def _milli(cores) -> np.ndarray:
    return np.rint(np.asarray(cores, dtype=float) * 1000).astype(np.int64)


def _bytes(gb) -> np.ndarray:
    return np.rint(np.asarray(gb, dtype=float) * _GIB).astype(np.int64)


def least_requested(req: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """calculateUnusedScore: (cap - req) * 10 / cap in integers; 0 if req > cap or cap == 0."""
    safe = np.maximum(cap, 1)
    s = (cap - req) * MAX_PRIORITY // safe
    return np.where((cap == 0) | (req > cap), 0, s)


def default_scores(cluster: Cluster, cap: Capacity, d: Demand) -> np.ndarray:
    """DLTAP Eq. 1 with weight 1 per priority: LeastRequested + BalancedResourceAllocation (0-20)
    per node for a pod of demand `d`; -1 on nodes the PodFitsResources filter removes."""
    cap_cpu, cap_mem = _milli(cluster.cpus), _bytes(cluster.memory)
    req_cpu = cap_cpu - _milli(cap.cpu) + int(_milli(d.cpu))
    req_mem = cap_mem - _bytes(cap.mem) + int(_bytes(d.mem_gb))
    lr = (least_requested(req_cpu, cap_cpu) + least_requested(req_mem, cap_mem)) // 2
    f_cpu = np.where(cap_cpu > 0, req_cpu / np.maximum(cap_cpu, 1), 1.0)  # fractionOfCapacity
    f_mem = np.where(cap_mem > 0, req_mem / np.maximum(cap_mem, 1), 1.0)
    bra = ((1.0 - np.abs(f_cpu - f_mem)) * MAX_PRIORITY).astype(np.int64)
    bra = np.where((f_cpu >= 1) | (f_mem >= 1), 0, bra)
    return np.where(cap.fits(d), lr + bra, -1)


def pick(scores: np.ndarray, rng: np.random.Generator) -> int:
    """selectHost: the highest score, a random one among equals; -1 if every node was filtered."""
    ok = scores >= 0
    if not ok.any():
        return -1
    best = np.flatnonzero(ok & np.isclose(scores, scores[ok].max(), rtol=0, atol=1e-9))
    return int(best[0]) if len(best) == 1 else int(rng.choice(best))


class K8sDefault(Scheduler):
    name = "k8s-default"

    def place_ps(self, cluster: Cluster, cap: Capacity, job, worker_nodes: list[int]) -> int:
        """A PS pod is scored like any other pod (DLTAP overrides this)."""
        return pick(default_scores(cluster, cap, job.ps_demand), self.rng)

    def decide(self, view: ClusterView) -> Decision:
        """Bind each pending job's pods one by one, workers first; all or nothing."""
        cap = Capacity.of(view)
        d = Decision()
        for job in view.pending:
            w = job.num_workers
            got = place_job(
                view.cluster, cap,
                lambda c, cp, dem, nodes: pick(default_scores(c, cp, dem), self.rng),
                job.ps_demand, job.worker_demand, job.num_ps, w,
                ps_placer=lambda c, cp, dem, nodes, job=job, w=w: self.place_ps(c, cp, job, nodes[:w]),
            )
            if got is not None:
                add_placement(d, job.job_id, *got)
        return d

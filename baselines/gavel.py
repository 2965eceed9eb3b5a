"""Gavel: heterogeneity-aware max-min fairness over effective throughput (Narayanan et al.,
"Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning Workloads", OSDI'20).

The paper is not among the seeds; its equations are cited from the published text as recalled.

§3.1 allocation: X[m, k] is the fraction of time job m spends on GPU type k, and its effective
throughput is throughput(m, X) = sum_k T[m, k] X[m, k]. §4.1 (max-min fairness, "LAS" in the
paper's heterogeneous form):

    maximize_X  min_m  (1 / w_m) * throughput(m, X) / throughput(m, X_equal)

    subject to  0 <= X[m, k] <= 1,   sum_k X[m, k] <= 1            (one type at a time)
                sum_m X[m, k] * scale_factor_m <= num_workers_k     (GPUs of each type)

solved here as a linear program (a variable t below every job's normalised throughput, maximised)
with scipy's HiGHS (`scipy.optimize.linprog(method="highs")`). §5 round-based mechanism: every
round, job-type pairs are ranked by priority X[m, k] / (the fraction of its time the job has
had on type k so far), and jobs are started in that order on types with enough free GPUs; a
job not chosen for the round is preempted (progress kept; the engine charges the restore).

Choices where the paper leaves room or the simulator differs:
- T[m, k]: the job's profiled single-GPU steps/s on type k (`JobView.gpu_step_s`, the measured
  figures of its zoo entry; Gavel assumes throughputs are known or estimated online). A model
  without per-type figures has the same T on every type. The job's scale factor (its requested
  workers) multiplies every T equally, so it cancels in the normalised objective.
- X_equal: an equal share of the cluster per job, min(1, GPUs / sum of scale factors), spread
  over the types in proportion to their GPU counts.
- Round length: the scenario's tick (decisions also happen at arrivals and completions). Time
  received per type is counted at decision points from the jobs' placements.
- Placement within a type: consolidated, the nodes of that type with the most free GPUs first
  (Gavel places a job's workers on one type, consolidated where possible). A running job that
  keeps its type keeps its placement; no PS (Gavel's jobs are all-reduce or single-GPU), so a PS
  job's PS go where its workers are placed (`consolidate`).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.placers import Capacity, add_placement, consolidate, place_job


def throughputs(jobs: list[JobView], types: list[str]) -> np.ndarray:
    """T[m, k]: steps/s of one worker of job m alone on a GPU of type k (1 where not profiled)."""
    T = np.ones((len(jobs), len(types)))
    for m, j in enumerate(jobs):
        if j.gpu_step_s:
            for k, t in enumerate(types):
                if t in j.gpu_step_s:
                    T[m, k] = 1.0 / j.gpu_step_s[t]
                else:
                    T[m, k] = 0.0  # not measured there: the job cannot run on this type
    return T


def max_min_allocation(T: np.ndarray, weights: np.ndarray, scale: np.ndarray,
                       capacity: np.ndarray) -> tuple[np.ndarray, float]:
    """Gavel's max-min fairness LP (§4.1). Returns (X, t): X[m, k] the time fractions and t the
    largest achievable min_m throughput(m, X) / (w_m throughput(m, X_equal))."""
    n, K = T.shape
    share = min(1.0, capacity.sum() / max(scale.sum(), 1e-12))
    x_equal = np.tile(share * capacity / capacity.sum(), (n, 1))
    equal = (T * x_equal).sum(axis=1)
    if np.any(equal <= 0):
        raise ValueError("gavel: a job has no GPU type it can run on")
    nv = n * K + 1  # X row-major, then t
    c = np.zeros(nv)
    c[-1] = -1.0  # maximise t
    A = np.zeros((2 * n + K, nv))
    m = np.arange(n)
    cols = m[:, None] * K + np.arange(K)  # the columns of X[m, :]
    A[m[:, None], cols] = -T  # t * w_m * equal_m - sum_k T[m, k] X[m, k] <= 0
    A[m, -1] = weights * equal
    A[n + m[:, None], cols] = 1.0  # sum_k X[m, k] <= 1
    A[2 * n + np.arange(K)[:, None], cols.T] = scale  # sum_m X[m, k] scale_m <= GPUs of type k
    b = np.concatenate([np.zeros(n), np.ones(n), capacity])
    bounds = [(0.0, 1.0)] * (n * K) + [(0.0, None)]
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"gavel: the LP failed: {res.message}")
    return res.x[:-1].reshape(n, K), float(res.x[-1])


class Gavel(Scheduler):
    name = "gavel"

    def __init__(self):
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._received: dict[tuple[str, str], float] = {}  # (job, type) -> seconds run there
        self._last = 0.0
        self._on: dict[str, str] = {}  # job -> type it ran on since the last decision

    def decide(self, view: ClusterView) -> Decision:
        c = view.cluster
        dt = view.time - self._last
        for jid, t in self._on.items():
            self._received[jid, t] = self._received.get((jid, t), 0.0) + dt
        self._last = view.time
        jobs = [j for j in view.jobs if j.worker_demand.gpu]
        types = sorted({c.node_gpu_type[n] for n in np.flatnonzero(c.gpus > 0)})
        d = Decision()
        if not jobs or not types:
            self._on = {}
            return d
        node_type = np.asarray(c.node_gpu_type)
        cap_k = np.array([c.gpus[node_type == t].sum() for t in types], dtype=float)
        T = throughputs(jobs, types)
        scale = np.array([j.requested[1] for j in jobs], dtype=float)
        X, _ = max_min_allocation(T, np.array([j.weight for j in jobs]), scale, cap_k)
        # §5 priorities: the allocation over the fraction of time received on each type
        age = np.array([max(view.time - j.arrival_s, 1e-9) for j in jobs])
        got = np.array([[self._received.get((j.job_id, t), 0.0) for t in types] for j in jobs])
        prio = np.where((X > 1e-9) & (T > 0), X / np.maximum(got / age[:, None], 1e-9), -np.inf)
        current = {j.job_id: self._type_of(view, j) for j in jobs}
        free = cap_k.copy()
        chosen: dict[str, str] = {}
        for flat in np.argsort(-prio, axis=None, kind="stable"):
            m, k = divmod(int(flat), len(types))
            j = jobs[m]
            if prio[m, k] == -np.inf or j.job_id in chosen or free[k] < scale[m]:
                continue
            chosen[j.job_id] = types[k]
            free[k] -= scale[m]
        # preempt what is not chosen, move what changes type (a migration), place the new ones
        moved = [j for j in jobs if j.status == "running" and chosen.get(j.job_id) != current[j.job_id]]
        d.preempt += [j.job_id for j in moved if j.job_id not in chosen]
        cap = Capacity.without(view, moved)
        for j in jobs:
            t = chosen.get(j.job_id)
            if t is None or (j.status == "running" and current[j.job_id] == t):
                continue
            if j.num_workers != j.requested[1] or j.num_ps != j.requested[0]:
                d.allocate[j.job_id] = j.requested
            ok = node_type == t
            typed = Capacity(cap.cpu, cap.mem, cap.bw, np.where(ok, cap.gpu, 0))  # shares cpu, mem, bw
            got_nodes = place_job(c, typed, consolidate, j.ps_demand, j.worker_demand, *j.requested)
            if got_nodes is None:
                chosen.pop(j.job_id)
                if j.status == "running":
                    d.preempt.append(j.job_id)
                continue
            cap.gpu[ok] = typed.gpu[ok]
            add_placement(d, j.job_id, *got_nodes)
        self._on = chosen
        return d

    @staticmethod
    def _type_of(view: ClusterView, j: JobView) -> str | None:
        """The GPU type a running job's workers are on (None: not running)."""
        if j.status != "running":
            return None
        nodes = [t.node for t in j.tasks if t.role == "worker" and t.node >= 0]
        return view.cluster.node_gpu_type[nodes[0]] if nodes else None

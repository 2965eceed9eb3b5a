"""Tetris: multi-resource packing plus shortest remaining work (Grandl et al., SIGCOMM'14), one of
Optimus' comparators (seed 002: "Tetris packs jobs to servers to minimize resource fragmentation";
"Optimus, DRF and Tetris use 4.1, 6.7 and 5.0 hours to finish all jobs").

Tetris §3.1, alignment: for a task and a machine whose free resources can hold the task's peak
demand, the score is the dot product of the task's demand vector and the machine's free-resource
vector, both normalised by the machine's capacity; the best (task, machine) pair is placed, and
this repeats until nothing more fits. §3.2, remaining work: a job with less remaining work is
preferred; the two are combined as  a - eps * W  with  eps = m * mean(a) / mean(W)  over the
candidates, so the multiplier m weighs packing against shortest-remaining-work. §3.3, fairness
knob f in [0, 1): only the ceil((1 - f) * |J|) jobs furthest below their fair share (lowest
dominant share, DRF) are considered for each placement; f = 0 is the most efficient. J is the set
of jobs with a task that fits somewhere, so the knob never leaves resources idle.

Choices where the sources leave room:
- Resources: CPU, memory, GPUs and NIC bandwidth (a task's bw_MBps cap), all weighted 1 in the
  dot product; Tetris' disk has no counterpart in the simulator.
- Remaining work W of a job (Tetris §3.2: the job's remaining duration x its resource demands) =
  remaining seconds x the size of all its tasks (demands as fractions of the cluster totals,
  summed). Remaining seconds = the steps left of its epoch budget (max_epochs x steps_per_epoch -
  steps done; the scheduler does not know where the job will converge) / its estimated speed in
  steps/s. The speed, first found of: the job's own measured speed at its (p, w), its last
  measured speed; then, as Tetris estimates task durations from earlier runs of recurring jobs
  (its section on estimating demands; the section number is not checked here), the speeds measured by earlier and running jobs of the same model (pooled, kept after
  they finish): the mean at the same (p, w), else the mean speed per worker x w (throughput taken
  as linear in workers, assumed). A job with no estimate (a model never run yet) is given the mean
  remaining seconds of the candidates that have one (a neutral prior), or 1 s when none has one,
  where W reduces to the footprint alone. Tetris is non-preemptive, so a pending job never ran:
  the pooled speeds of its model are what it gets.
  (DL2's Tetris, by Optimus' authors, tetris_env.py, uses resources x (1 - progress / epochs) and
  adds the term with a plus sign, which prefers more remaining work; Tetris prefers less, as here.)
- m = 1 (DL2 weighs the two terms by the ratio of their means, i.e. m = 1); f = 0 by default,
  since Optimus' description of Tetris names packing and remaining time only.
- The batch form of Tetris' per-machine loop: at a decision point every machine with free
  resources is offered at once, so the best pair over all machines is placed next.
- Gangs: a job runs only with all its tasks placed, (p, w) as it asked; Tetris does not resize.
  A pending job left partly placed gives its tasks back, the latest-arrived such job is dropped
  from the round, and the packing is redone (it waits); a dropped job that then fits beside the
  others is let back in. A job whose tasks exceed the cluster's total free resources is not
  considered. Non-preemptive.
- Ties: the earlier job, a worker before a PS, then the lower node index.
"""

from __future__ import annotations

import math

import numpy as np

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_real
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity

ROLES = ("worker", "ps")
TOL = np.array([1e-9, 1e-9, 0.0, 1e-3])  # cpu, mem, gpu, bw: the tolerances of Capacity.fits


def alignment(vecs: np.ndarray, scaled_free: np.ndarray) -> np.ndarray:
    """Tetris §3.1: <demand / capacity, free / capacity> for every task group (rows of `vecs`)
    and machine (rows of `scaled_free`, free / capacity^2), summed term by term: a BLAS product
    (vecs @ scaled_free.T) rounds equal machines' scores up to 1 ulp apart by their place in the
    matrix, so the first-max tie-break (lower node) failed and decisions depended on the BLAS
    build."""
    prod = vecs[:, None, :] * scaled_free[None, :, :]
    out = prod[..., 0]
    for r in range(1, prod.shape[2]):
        out = out + prod[..., r]
    return out


class Tetris(Scheduler):
    name = "tetris"

    def __init__(self, fairness: float = 0.0, m: float = 1.0):
        check_real(fairness, "fairness", type(self).__name__, ge=0.0, lt=1.0, note="the knob f")
        check_real(m, "m", type(self).__name__, ge=0, note="the multiplier of the work term")
        self.fairness = fairness
        self.m = m
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._speeds: dict[str, dict[str, dict[tuple[int, int], float]]] = {}

    def remaining_seconds(self, job: JobView) -> float | None:
        """Steps left of the epoch budget / the estimated speed (module docstring); None if the job
        and its model never ran."""
        steps = max(0.0, job.max_epochs * job.steps_per_epoch - job.steps_done)
        f = job.observed_speed.get((job.num_ps, job.num_workers)) or job.last_speed
        if not f:
            same, per_worker = [], []
            for samples in self._speeds.get(job.model, {}).values():
                for (p, w), v in samples.items():
                    if v > 0:
                        per_worker.append(v / w)
                        if (p, w) == (job.num_ps, job.num_workers):
                            same.append(v)
            if same:
                f = float(np.mean(same))
            elif per_worker:
                f = float(np.mean(per_worker)) * job.num_workers
        return steps / f if f else None

    def decide(self, view: ClusterView) -> Decision:
        for j in view.jobs:  # what each job has measured, pooled by model, kept after it finishes
            if j.observed_speed:
                self._speeds.setdefault(j.model, {})[j.job_id] = dict(j.observed_speed)
        excluded: list[str] = []
        while True:
            plan = self.pack(view, set(excluded))
            partial = self._partial(view, plan)
            if not partial:
                break
            excluded.append(partial[-1])  # the latest-arrived partial job waits; repack
        for jid in list(excluded):  # one that only failed beside a later-excluded job gets back in
            trial = self.pack(view, set(excluded) - {jid})
            if not self._partial(view, trial):
                excluded.remove(jid)
                plan = trial
        d = Decision()
        for jid, tasks in plan.items():
            for tid, node in tasks:
                d.place[tid] = node
        return d

    @staticmethod
    def _partial(view: ClusterView, plan: dict[str, list]) -> list[str]:
        return [
            j.job_id for j in view.pending
            if 0 < len(plan.get(j.job_id, [])) < j.num_ps + j.num_workers
        ]

    def pack(
        self, view: ClusterView, excluded: set[str] = frozenset()
    ) -> dict[str, list[tuple[str, int]]]:
        """One packing pass over the pending jobs: job -> [(task id, node)] in placement order."""
        c = view.cluster
        cap = Capacity.of(view)
        nodes_cap = np.stack([c.cpus, c.memory, c.gpus.astype(float), c.nic], axis=1)
        totals = nodes_cap.sum(axis=0)
        inv2 = np.divide(1.0, nodes_cap**2, out=np.zeros_like(nodes_cap), where=nodes_cap > 0)
        free_total = np.array([cap.cpu.sum(), cap.mem.sum(), cap.gpu.sum(), cap.bw.sum()])
        jobs = [
            j for j in view.pending
            if j.job_id not in excluded and (_size(j) <= free_total + TOL).all()  # could fit at all
        ]
        groups = []  # (job, role, demand, demand vector, tasks left)
        for job in jobs:
            for role in ROLES:
                dem = job.worker_demand if role == "worker" else job.ps_demand
                k = job.num_workers if role == "worker" else job.num_ps
                groups.append([job, role, dem, _vec(dem), k])
        if not groups:
            return {}
        vecs = np.array([g[3] for g in groups])
        secs = {j.job_id: self.remaining_seconds(j) for j in jobs}
        known = [v for v in secs.values() if v is not None]
        prior = float(np.mean(known)) if known else 1.0
        work = np.array([
            _remaining_work(g[0], totals, secs[g[0].job_id] if secs[g[0].job_id] is not None
                            else prior)
            for g in groups
        ])
        held = {j.job_id: np.zeros(4) for j in view.jobs}
        for j in view.jobs:
            for t in j.tasks:
                if t.node >= 0:
                    held[j.job_id] += _vec(t.demand)
        order = {j.job_id: k for k, j in enumerate(view.jobs)}
        plan: dict[str, list[tuple[str, int]]] = {}
        while True:
            free = np.stack([cap.cpu, cap.mem, cap.gpu.astype(float), cap.bw], axis=1)
            left = np.array([g[4] > 0 for g in groups])
            # the task's peak demand fits the machine's free resources (placers.Capacity.fits)
            fit = left[:, None] & (vecs[:, None, :] <= free[None, :, :] + TOL).all(axis=2)
            if not fit.any():
                return plan
            fitting = {groups[i][0].job_id for i in np.flatnonzero(fit.any(axis=1))}
            eligible = self._fairest(fitting, held, totals, order)
            for i, g in enumerate(groups):
                if g[0].job_id not in eligible:
                    fit[i] = False
            align = alignment(vecs, free * inv2)  # Tetris §3.1
            rows = np.flatnonzero(fit.any(axis=1))
            mean_a = float(align[fit].mean())
            mean_w = float(work[rows].mean())
            eps = self.m * mean_a / mean_w if mean_w > 0 else 0.0  # Tetris §3.2
            score = np.where(fit, align - eps * work[:, None], -np.inf)
            i, n = np.unravel_index(int(np.argmax(score)), score.shape)  # first max: earlier job, node
            job, role, dem = groups[i][0], groups[i][1], groups[i][2]
            k = (job.num_workers if role == "worker" else job.num_ps) - groups[i][4]
            prefix = "w" if role == "worker" else "ps"
            plan.setdefault(job.job_id, []).append((f"{job.job_id}/{prefix}{k}", int(n)))
            cap.take(int(n), dem)
            held[job.job_id] = held[job.job_id] + groups[i][3]
            groups[i][4] -= 1

    def _fairest(self, live: set[str], held: dict, totals: np.ndarray, order: dict) -> set[str]:
        """Tetris §3.3: the ceil((1 - f) |J|) jobs with the lowest dominant share."""
        if self.fairness == 0.0 or not live:
            return live
        share = {j: float((held[j] / np.where(totals > 0, totals, 1.0)).max()) for j in live}
        k = max(1, math.ceil((1.0 - self.fairness) * len(live)))
        return set(sorted(live, key=lambda j: (share[j], order[j]))[:k])


def _vec(d: Demand) -> np.ndarray:
    return np.array([d.cpu, d.mem_gb, float(d.gpu), d.bw_MBps * 1e6])


def _remaining_work(job: JobView, totals: np.ndarray, seconds: float) -> float:
    """Tetris §3.2: remaining seconds x the job's size (its tasks as cluster fractions)."""
    return seconds * float((_size(job) / np.where(totals > 0, totals, 1.0)).sum())


def _size(job: JobView) -> np.ndarray:
    """All of a job's tasks' demands together (cpu, mem, gpu, bw)."""
    return job.num_workers * _vec(job.worker_demand) + job.num_ps * _vec(job.ps_demand)

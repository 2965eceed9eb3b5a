"""Episode metrics: per-job JCT and queueing delay, makespan, traffic, locality, utilisation, fairness.

Definitions (stated once, used everywhere):
- JCT = finish - arrival; queueing delay = first start - arrival (a job never started counts until
  the end of the episode and is listed as unfinished).
- makespan = last finish - first arrival (Optimus §6).
- data-local / rack-local / off-switch: per worker at every (re)start, D²S Table 1.
- utilisation: GPU = GPUs with a running worker / all GPUs; CPU = cores in use / all cores;
  network = bytes over NIC directions / their capacity; averaged over the makespan.
- Jain's index over the dominant shares of the jobs in the system, averaged over time.
- dominant share per job: time-average while in the system (DRF).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .sim import Simulator

GB = 1e9


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    model: str
    arrival_s: float
    first_start_s: float
    finish_s: float
    jct_s: float
    queue_s: float
    finished: bool
    epochs: int
    cross_node_gb: float
    cross_rack_gb: float
    data_local: int
    rack_local: int
    off_switch: int
    dominant_share: float
    synthetic: str = ""  # ";"-joined JobSpec.synthetic: what a trace replay invented for this job


@dataclass(frozen=True)
class Metrics:
    avg_jct_s: float
    median_jct_s: float
    p95_jct_s: float
    makespan_s: float
    avg_queue_s: float
    cross_node_gb: float
    cross_rack_gb: float
    data_local_frac: float
    rack_local_frac: float
    off_switch_frac: float
    gpu_util: float
    cpu_util: float
    net_util: float
    jain_index: float
    decision_latency_ms: float
    jobs_finished: int
    jobs_unfinished: int
    jobs: tuple[JobRecord, ...] = field(repr=False, default=())
    timeline: tuple[tuple[float, float, float, float, float], ...] = field(repr=False, default=())

    def summary(self) -> dict[str, float]:
        """Scalar metrics only (no per-job rows or timeline); wall-clock latency excluded. Read
        field by field in their order, as `asdict` then popping gave: `asdict` deep-copied every
        job row and timeline entry first (2.6 ms at a random Place episode's end on `default`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_SUMMARY}


_NOT_SUMMARY = ("jobs", "timeline", "decision_latency_ms")


def summarize(sim: Simulator) -> Metrics:
    end = sim.now
    records = []
    for spec in sim.specs:
        job = sim.jobs.get(spec.job_id)
        if job is None:  # never arrived before the horizon
            continue
        finished = not math.isnan(job.finish_s)
        stop = job.finish_s if finished else end
        start = job.first_start_s if not math.isnan(job.first_start_s) else stop
        in_system = max(stop - spec.arrival_s, 0.0)
        loc = job.locality
        records.append(
            JobRecord(
                job_id=spec.job_id,
                model=spec.model,
                arrival_s=spec.arrival_s,
                first_start_s=job.first_start_s,
                finish_s=job.finish_s,
                jct_s=in_system,
                queue_s=start - spec.arrival_s,
                finished=finished,
                epochs=job.epochs_done,
                cross_node_gb=job.bytes_cross_node / GB,
                cross_rack_gb=job.bytes_cross_rack / GB,
                data_local=loc[0],
                rack_local=loc[1],
                off_switch=loc[2],
                dominant_share=job.dom_share_time / in_system if in_system > 0 else 0.0,
                synthetic=";".join(spec.synthetic),
            )
        )
    jct = np.array([r.jct_s for r in records]) if records else np.zeros(1)
    first = min((s.arrival_s for s in sim.specs), default=0.0)
    last = max((r.finish_s if r.finished else end for r in records), default=first)
    span = max(last - first, 0.0)
    loc = np.array([[r.data_local, r.rack_local, r.off_switch] for r in records] or [[0, 0, 0]])
    loc_total = max(int(loc.sum()), 1)
    tot = sim.totals
    c = sim.cluster
    norm = span if span > 0 else 1.0
    net_cap = float(c.nic.sum()) * 2
    return Metrics(
        avg_jct_s=float(jct.mean()),
        median_jct_s=float(np.median(jct)),
        p95_jct_s=float(np.percentile(jct, 95)),
        makespan_s=span,
        avg_queue_s=float(np.mean([r.queue_s for r in records])) if records else 0.0,
        cross_node_gb=float(tot.cross_node_bytes) / GB,
        cross_rack_gb=float(tot.cross_rack_bytes) / GB,
        data_local_frac=float(loc[:, 0].sum()) / loc_total,
        rack_local_frac=float(loc[:, 1].sum()) / loc_total,
        off_switch_frac=float(loc[:, 2].sum()) / loc_total,
        gpu_util=tot.gpu_busy_s / norm / c.n_gpus if c.n_gpus else 0.0,
        cpu_util=tot.cpu_used_s / norm / float(c.cpus.sum()),
        net_util=tot.net_bytes / norm / net_cap,
        jain_index=tot.jain_s / tot.jain_time if tot.jain_time > 0 else 1.0,
        decision_latency_ms=1e3 * float(np.mean(tot.decision_s)) if tot.decision_s else 0.0,
        jobs_finished=sum(r.finished for r in records),
        jobs_unfinished=len(sim.specs) - sum(r.finished for r in records),
        jobs=tuple(records),
        timeline=tuple(tot.timeline),
    )


def ci95(x: np.ndarray) -> float:
    """Half-width of the 95% interval of the mean over seeds (Student t; 0 for one seed): with 3
    seeds the normal approximation would understate it by a factor of 2.2."""
    from scipy.stats import t

    n = len(x)
    return float(t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0

"""Scenarios and workloads: which cluster, which jobs arrive when (fixed, uniform, Poisson, trace).

A scenario YAML (configs/scenarios/*.yaml) names a cluster and a workload. Job generation is a pure
function of the scenario and the seed, so every policy sees the same jobs, arrival times and noise
for a given seed. Trace replay maps each trace job to a PS/worker job: GPUs -> workers, PS =
ceil(workers / ps_ratio), and a model drawn from the scenario's model mix by a seeded rule — the
model is synthetic and every such job says so in `JobSpec.synthetic`. The trace's duration is kept
as the job's size: its convergence curve is stretched (epoch_scale) so that it converges after about
duration / ideal epoch time epochs (the epoch time of its (p, w) with no contention or network
cost), capped by the model's epoch budget.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from .cluster import Cluster, build_cluster
from .config import CONFIG_DIR, ConfigError, ModelZoo, _Strict, load_zoo, read_yaml, resolve, validate
from .jobs import JobSpec, convergence_epoch


class FixedJob(_Strict):
    model: str
    arrival_s: float = Field(ge=0)
    num_ps: int | None = Field(default=None, ge=1)
    num_workers: int | None = Field(default=None, ge=1)
    shard_nodes: list[int] | None = None
    epoch_scale: float = Field(default=1.0, gt=0)
    user: str = "default"
    weight: float = Field(default=1.0, gt=0)


class TraceWindow(_Strict):
    path: str
    format: Literal["philly_csv"] = "philly_csv"
    vc: str | None = None
    start: str | float | None = None
    end: str | float | None = None
    first_n: int | None = Field(default=None, ge=1)
    time_scale: float = Field(default=1.0, gt=0)
    skip_bad_rows: bool = False


class Workload(_Strict):
    kind: Literal["fixed", "uniform", "poisson", "trace"]
    jobs: list[FixedJob] = []  # fixed
    num_jobs: int = Field(default=0, ge=0)  # uniform / poisson
    window_s: float = Field(default=0.0, ge=0)  # uniform arrivals in [0, window_s]
    rate_per_s: float = Field(default=0.0, ge=0)  # poisson
    trace: TraceWindow | None = None
    models: dict[str, float] = Field(default_factory=dict, description="model -> draw weight")
    num_ps: tuple[int, int] | None = None  # inclusive range; None = the model's default
    num_workers: tuple[int, int] | None = None
    epoch_scale: tuple[float, float] = (1.0, 1.0)
    shards_per_job: int = Field(default=0, ge=0, description="input shards placed on random nodes")
    ps_ratio: int = Field(default=4, ge=1, description="trace replay: workers per PS")
    users: int = Field(default=1, ge=1, description="jobs are spread round-robin over users")

    @model_validator(mode="after")
    def _complete(self) -> "Workload":
        if self.kind == "fixed" and not self.jobs:
            raise ValueError("kind 'fixed' needs a non-empty 'jobs' list")
        if self.kind in ("uniform", "poisson") and (self.num_jobs < 1 or not self.models):
            raise ValueError(f"kind {self.kind!r} needs num_jobs >= 1 and a 'models' mix")
        if self.kind == "poisson" and self.rate_per_s <= 0:
            raise ValueError("kind 'poisson' needs rate_per_s > 0")
        if self.kind == "trace" and (self.trace is None or not self.models):
            raise ValueError("kind 'trace' needs 'trace' and a 'models' mix")
        for rng in (self.num_ps, self.num_workers, self.epoch_scale):
            if rng is not None and rng[0] > rng[1]:
                raise ValueError(f"range {list(rng)} has low > high")
        return self


class Engine(_Strict):
    tick_s: float | None = Field(default=None, gt=0, description="scheduling interval")
    horizon_s: float = Field(default=math.inf, gt=0)


class Scenario(_Strict):
    name: str
    source: str = ""
    cluster: str = "default"
    models_file: str | None = None
    engine: Engine = Engine()
    workload: Workload


def load_scenario(name_or_path: str | Path | Scenario | dict) -> tuple[Scenario, Path | None]:
    if isinstance(name_or_path, Scenario):
        return name_or_path, None
    if isinstance(name_or_path, dict):
        return validate(Scenario, name_or_path, "<scenario dict>"), None
    path = resolve(name_or_path, "scenarios")
    return validate(Scenario, read_yaml(path), path), path


def _pick(rng: np.random.Generator, lo_hi: tuple[int, int] | None, default: int) -> int:
    if lo_hi is None:
        return default
    return int(rng.integers(lo_hi[0], lo_hi[1] + 1))


def generate_jobs(sc: Scenario, cluster: Cluster, zoo: ModelZoo, seed: int, where: str = "") -> list[JobSpec]:
    """The scenario's jobs for this seed; validated against the zoo and the cluster."""
    w = sc.workload
    rng = np.random.default_rng([seed, 7])
    for name in list(w.models) + [j.model for j in w.jobs]:
        if name not in zoo.models:
            raise ConfigError(f"{where}: workload: unknown model {name!r}; known: {sorted(zoo.models)}")
    names = sorted(w.models)
    probs = np.array([w.models[n] for n in names], dtype=float)
    if names and ((probs < 0).any() or probs.sum() <= 0):
        raise ConfigError(f"{where}: workload.models: weights must be >= 0 and not all 0")
    if len(names):
        probs /= probs.sum()

    def shards() -> tuple[int, ...]:
        return tuple(int(x) for x in rng.integers(0, cluster.n_nodes, w.shards_per_job))

    specs: list[JobSpec] = []
    if w.kind == "fixed":
        for i, j in enumerate(w.jobs):
            m = zoo.models[j.model]
            specs.append(
                JobSpec(
                    job_id=f"j{i}",
                    model=j.model,
                    arrival_s=j.arrival_s,
                    num_ps=j.num_ps or m.default_ps,
                    num_workers=j.num_workers or m.default_workers,
                    shard_nodes=tuple(j.shard_nodes) if j.shard_nodes is not None else shards(),
                    epoch_scale=j.epoch_scale,
                    user=j.user,
                    weight=j.weight,
                )
            )
    else:
        if w.kind == "uniform":
            arrivals = np.sort(rng.uniform(0.0, w.window_s, w.num_jobs))
            gpus = [None] * w.num_jobs
            durations = [None] * w.num_jobs
            synthetic: tuple[str, ...] = ()
            ids = [f"j{i}" for i in range(w.num_jobs)]
        elif w.kind == "poisson":
            arrivals = np.cumsum(rng.exponential(1.0 / w.rate_per_s, w.num_jobs))
            gpus = [None] * w.num_jobs
            durations = [None] * w.num_jobs
            synthetic = ()
            ids = [f"j{i}" for i in range(w.num_jobs)]
        else:
            from .traces import load_philly_csv

            t = w.trace
            path = Path(t.path)
            trace = load_philly_csv(
                path if path.is_absolute() else CONFIG_DIR.parent / path,
                vc=t.vc,
                start=t.start,
                end=t.end,
                first_n=t.first_n,
                time_scale=t.time_scale,
                skip_bad_rows=t.skip_bad_rows,
            )
            arrivals = np.array([j.submit_s for j in trace.jobs])
            gpus = [j.num_gpus for j in trace.jobs]
            durations = [j.duration_s for j in trace.jobs]
            ids = [j.job_id for j in trace.jobs]
            synthetic = ("model", "num_ps", "epoch_scale", "shard_nodes")
        for i, (jid, at, g, dur) in enumerate(zip(ids, arrivals, gpus, durations)):
            name = names[int(rng.choice(len(names), p=probs))]
            m = zoo.models[name]
            if g is None:
                nw = _pick(rng, w.num_workers, m.default_workers)
                nps = _pick(rng, w.num_ps, m.default_ps)
                scale = float(rng.uniform(*w.epoch_scale))
            else:
                nw = int(g)
                nps = max(1, math.ceil(nw / w.ps_ratio))
                scale = _scale_for_duration(m, nps, nw, float(dur))
            specs.append(
                JobSpec(
                    job_id=jid,
                    model=name,
                    arrival_s=float(at),
                    num_ps=nps,
                    num_workers=nw,
                    shard_nodes=shards(),
                    epoch_scale=scale,
                    user=f"u{i % w.users}",
                    synthetic=synthetic,
                )
            )
    _check_fits(specs, cluster, zoo, where)
    return specs


def _scale_for_duration(m, p: int, w: int, duration_s: float) -> float:
    """epoch_scale that makes the job converge after about duration / ideal epoch time epochs."""
    step = m.step_compute_s / w + m.step_overhead_s + m.ps_update_s * w / p if m.sync else (
        (m.step_compute_s + m.step_overhead_s + m.ps_update_s / p) / w
    )
    target = min(max(duration_s / (step * m.steps_per_epoch), 1.0), m.convergence.max_epochs)
    return target / convergence_epoch(m)


def _check_fits(specs: list[JobSpec], cluster: Cluster, zoo: ModelZoo, where: str) -> None:
    """A job that could never run on this cluster is a config error, not a silent starvation."""
    for s in specs:
        m = zoo.models[s.model]
        need_gpu = s.num_workers * m.worker.gpu
        if need_gpu > cluster.n_gpus:
            raise ConfigError(
                f"{where}: job {s.job_id} ({s.model}) needs {need_gpu} GPUs, "
                f"the cluster has {cluster.n_gpus}"
            )
        for role, d in (("ps", m.ps), ("worker", m.worker)):
            if d.cpu > cluster.cpus.max() or d.mem_gb > cluster.memory.max():
                raise ConfigError(
                    f"{where}: job {s.job_id} ({s.model}): a {role} needs {d.cpu} CPU / "
                    f"{d.mem_gb} GB, more than any node has"
                )
        for n in s.shard_nodes:
            if not 0 <= n < cluster.n_nodes:
                raise ConfigError(f"{where}: job {s.job_id}: shard node {n} out of range")


def build(scenario: str | Path | Scenario | dict, seed: int = 0):
    """Scenario -> (scenario, cluster, zoo, jobs) for this seed."""
    sc, path = load_scenario(scenario)
    where = str(path) if path else sc.name
    cluster = build_cluster(sc.cluster)
    zoo = load_zoo(CONFIG_DIR.parent / sc.models_file if sc.models_file else None)
    return sc, cluster, zoo, generate_jobs(sc, cluster, zoo, seed, where)

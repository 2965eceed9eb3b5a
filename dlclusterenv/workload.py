"""Scenarios and workloads: which cluster, which jobs arrive when (fixed, uniform, Poisson, trace).

A scenario YAML (configs/scenarios/*.yaml) names a cluster and a workload. Job generation is a pure
function of the scenario and the seed, so every policy sees the same jobs, arrival times and noise
for a given seed. Trace replay (any format of dlclusterenv.traces: Philly CSV or job-log JSON,
Alibaba 2023 pods) maps each trace job to an all-reduce job (GPUs -> workers, no PS: the traces'
jobs ran all-reduce or on one GPU), or with `comm: ps` to a PS/worker job with PS =
ceil(workers / ps_ratio), and a model drawn from the scenario's model mix by the seed's generator
(numpy default_rng([seed, 7])), one weighted draw per job in trace order.

Replay rule (duration-preserving): a trace job's measured duration is the time it took at the size
it ran, so its work (`JobSpec.work_steps`, local batches) is what its drawn model does in that time
at the trace's placement under the speed model: duration x speed, the speed of the job alone on the
empty cluster, consolidated on as few nodes as hold its workers (`replay_work`). Run that way it
takes exactly its trace duration, so its GPU-seconds are the trace's; the scheduler's placement,
size and sharing change it from there through the speed model. Nothing is capped or floored. Its
epoch is its own (`replay_epoch`): steps_per_epoch = work / K, K its model's convergence epoch, so
it trains K epochs of its model's loss curve and stops there by its own threshold, as a generated
job does, whatever its duration (with its model's epoch, e.g. ResNet-50's 296 batches, a
replayed job trained work / 296 epochs: up to 478,418 on the Philly trace, where the zoo's models
converge in 5-60 epochs within budgets of 10-100). What the trace does not say is synthetic,
and every such job lists it in `JobSpec.synthetic` (and the `synthetic` column of jobs.csv): the
model, num_ps (and comm), work_steps (its duration is real, its unit the drawn model's batches),
steps_per_epoch (its data set's size), shard_nodes, and the user where the trace has none (Philly
CSV, Alibaba; jobs are then spread round-robin over `users`).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, StrictFloat, StrictInt, model_validator

from .cluster import Cluster, build_cluster, never_fits, room_per_node, task_never_fits
from .config import (
    CONFIG_DIR,
    ConfigError,
    ModelSpec,
    ModelZoo,
    _Strict,
    file_stamp,
    load_cached,
    load_zoo,
    read_yaml,
    resolve,
    validate,
)
from . import efficiency
from .efficiency import PhiTable
from .jobs import Job, JobSpec, convergence_epoch
from .sim import DEFAULT_PACKING
from .speed import SpeedError, alone_speed, gpu_compute_s
from .traces import TraceError, TraceSet, TraceWarning, check_time, data_path, load_trace


# Workload models take integers strictly (num_jobs: true is not 1), like the env options; inf and
# nan are refused by every config model (_Strict).


class FixedJob(_Strict):
    model: str
    arrival_s: float = Field(ge=0)
    num_ps: StrictInt | None = Field(default=None, ge=1)
    num_workers: StrictInt | None = Field(default=None, ge=1)
    shard_nodes: list[StrictInt] | None = None
    epoch_scale: float = Field(default=1.0, gt=0)
    comm: Literal["ps", "allreduce"] | None = Field(default=None, description="default: the model's")
    user: str = "default"
    weight: float = Field(default=1.0, gt=0)


class TraceWindow(_Strict):
    """Which trace, in which format, and which part of it (see dlclusterenv.traces)."""

    path: str = Field(description="absolute, or relative to the repository root")
    format: Literal["philly_csv", "philly_json", "alibaba_csv"] = "philly_csv"
    vc: str | None = Field(default=None, description="Philly: virtual cluster; Alibaba: QoS class")
    start: str | float | None = Field(
        default=None, description="inclusive: a date (Philly) or seconds after the first submit"
    )
    end: str | float | None = Field(default=None, description="exclusive, as start")
    first_n: StrictInt | None = Field(default=None, ge=1)
    time_scale: float = Field(default=1.0, gt=0, description="multiplies submit times, durations")
    skip_bad_rows: bool = False
    fractional_gpu: Literal["share", "skip", "whole"] | None = Field(
        default=None, description="alibaba_csv: pods with gpu_milli < 1000 share GPUs (default),"
        " are left out, or take whole GPUs"
    )

    @model_validator(mode="after")
    def _bounds(self) -> TraceWindow:
        for key in ("start", "end"):
            value = getattr(self, key)
            if isinstance(value, str) and self.format == "alibaba_csv":
                raise ValueError(f"{key}: {value!r}: alibaba_csv times are seconds; give seconds "
                                 "after the trace's first creation_time")
            check_time(key, value)
        if self.fractional_gpu is not None and self.format != "alibaba_csv":
            raise ValueError(f"fractional_gpu: only for format alibaba_csv, not {self.format}")
        return self


Count = Annotated[StrictInt, Field(ge=1)]
Scale = Annotated[StrictFloat, Field(gt=0)]


class Workload(_Strict):
    kind: Literal["fixed", "uniform", "poisson", "trace"]
    jobs: list[FixedJob] = []  # fixed
    num_jobs: StrictInt = Field(default=0, ge=0)  # uniform / poisson
    window_s: float = Field(default=0.0, ge=0)  # uniform arrivals in [0, window_s]
    rate_per_s: float = Field(default=0.0, ge=0)  # poisson
    trace: TraceWindow | None = None
    models: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="model -> draw weight")
    num_ps: tuple[Count, Count] | None = None  # inclusive range; None = the model's default
    num_workers: tuple[Count, Count] | None = None
    epoch_scale: tuple[Scale, Scale] = (1.0, 1.0)
    shards_per_job: StrictInt = Field(default=0, ge=0, description="input shards placed on random "
                                      "nodes; worker i reads shard i mod shards_per_job")
    comm: Literal["ps", "allreduce"] | None = Field(
        default=None,
        description="the jobs' communication pattern; default: the model's for generated jobs,"
        " allreduce for trace replays (the traces' jobs ran all-reduce or on one GPU)",
    )
    ps_ratio: StrictInt = Field(default=4, ge=1, description="trace replay with comm: ps: workers per PS")
    exchange_every: StrictInt = Field(
        default=1, ge=1,
        description="every job exchanges gradients once per this many steps (local SGD, a per-phase"
        " reduce); bytes and time of the exchange are charged once per k steps (speed.py, comm.py)",
    )
    data_fraction: float = Field(
        default=1.0, gt=0, le=1,
        description="share of its model's data set one epoch of every job reads (an application that"
        " is a training phase over part of the data set): steps per epoch scale by it",
    )
    users: StrictInt = Field(
        default=1, ge=1,
        description="jobs are spread round-robin over users (trace jobs with a user keep it)",
    )
    load: float = Field(
        default=1.0, gt=0,
        description="offered-load factor: gaps between arrivals are divided by it (2 = the same"
        " jobs arriving twice as fast, measured from the first arrival)",
    )
    ps_fraction: float | None = Field(
        default=None, ge=0, le=1,
        description="each generated or trace job is a PS job with this probability, else"
        " all-reduce (one draw per job, marked synthetic for trace jobs); replaces `comm`",
    )

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
        if self.ps_fraction is not None and self.comm is not None:
            raise ValueError("give comm or ps_fraction, not both")
        if self.ps_fraction is not None and self.kind == "fixed":
            raise ValueError("ps_fraction: fixed jobs set comm per job")
        if self.data_fraction != 1.0 and self.kind == "trace":
            raise ValueError(f"data_fraction: {self.data_fraction}: a replayed trace job's epoch "
                             "is its own (its work over its model's convergence epoch), not a share "
                             "of its model's data set; leave it at 1")
        if self.load != 1.0 and self.kind == "fixed":
            raise ValueError("load: fixed jobs have their own arrival_s; scale those instead")
        for rng in (self.num_ps, self.num_workers, self.epoch_scale):
            if rng is not None and rng[0] > rng[1]:
                raise ValueError(f"range {list(rng)} has low > high")
        return self


class Engine(_Strict):
    tick_s: float | None = Field(default=None, gt=0, description="scheduling interval")
    horizon_s: float = Field(default=math.inf, gt=0, allow_inf_nan=True,
                             description="inf (.inf): run until every job finishes")


class Scenario(_Strict):
    name: str
    source: str = ""
    cluster: str = "default"
    models_file: str | None = None
    engine: Engine = Engine()
    workload: Workload
    efficiency: Literal["none", "pgns"] = Field(
        default="none",
        description="statistical efficiency of large batches (dlclusterenv/efficiency.py): none (E = 1)"
        " or pgns (Pollux's measured gradient noise scale, configs/efficiency.yaml)",
    )


def load_scenario(name_or_path: str | Path | Scenario | dict) -> tuple[Scenario, Path | None]:
    if isinstance(name_or_path, Scenario):
        return name_or_path, None
    if isinstance(name_or_path, dict):
        return validate(Scenario, name_or_path, "<scenario dict>"), None
    path = resolve(name_or_path, "scenarios")
    return load_cached(path, _parse_scenario), path


def _parse_scenario(path: Path) -> Scenario:
    return validate(Scenario, read_yaml(path), path)


@functools.lru_cache(maxsize=4)
def _cached_trace(path: Path, stamp: tuple[int, int], t: TraceWindow) -> TraceSet:
    """Keyed by the file's (mtime, size) too, so an edited file is read again."""
    options = t.model_dump(exclude={"path", "format", "fractional_gpu"})
    if t.format == "alibaba_csv":
        options["fractional_gpu"] = t.fractional_gpu or "share"
    return load_trace(path, t.format, **options)


def load_trace_window(t: TraceWindow, where: str) -> TraceSet:
    """The trace a scenario replays, read once per process and file version: every seed and
    policy of an evaluation replays the same rows (and a forked worker inherits them). A window
    that does not fit the file (an unknown vc) is a ConfigError naming the key."""
    path = data_path(t.path)
    stamp = file_stamp(path) or (0, 0)  # the loader reports a missing file; failures are not cached
    try:
        return _cached_trace(path, stamp, t)
    except TraceError:
        raise
    except ValueError as exc:
        raise ConfigError(f"{where}: workload.trace.{exc}") from None


def prepare(
    name_or_path: str | Path | Scenario | dict, *, skip_bad_rows: bool = False
) -> tuple[str | Path | Scenario | dict, TraceSet | None]:
    """What `dlcluster run` / `evaluate` hand to their runs: the scenario, with
    `--skip-bad-rows` applied to its trace, and the trace (None if it replays none), loaded here
    so that a bad trace fails before any run starts and its counts are printed once
    (``TraceSet.report()``, which replaces the TraceWarning here)."""
    sc, path = load_scenario(name_or_path)
    if sc.workload.kind != "trace":
        return name_or_path, None
    t = sc.workload.trace
    if skip_bad_rows and not t.skip_bad_rows:
        t = t.model_copy(update={"skip_bad_rows": True})
        sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"trace": t})})
        name_or_path = sc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return name_or_path, load_trace_window(t, str(path) if path else sc.name)


def _pick(rng: np.random.Generator, lo_hi: tuple[int, int] | None, default: int) -> int:
    if lo_hi is None:
        return default
    return int(rng.integers(lo_hi[0], lo_hi[1] + 1))


def generate_jobs(sc: Scenario, cluster: Cluster, zoo: ModelZoo, seed: int, where: str = "",
                  fit_memo: tuple[dict, dict] | None = None) -> list[JobSpec]:
    """The scenario's jobs for this seed; validated against the zoo and the cluster. `fit_memo`:
    the caller's (per model, per shape) verdicts of the fit check (`_check_fits`), kept between
    calls with the same cluster and zoo, e.g. an env's resets (the check was most of a reset)."""
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

    if w.shards_per_job:
        # worker i reads shard i mod shards_per_job: shards beyond the most workers a job of the
        # mix could ever run are never read, and a million of them per job only fill memory
        most = max(room_per_node(cluster, zoo.models[n].worker).sum()
                   for n in names + [j.model for j in w.jobs])
        if w.shards_per_job > most:
            raise ConfigError(
                f"{where}: workload.shards_per_job: {w.shards_per_job}: no job of this workload "
                f"can run more than {int(most)} workers on cluster {cluster.config.name!r}, and "
                "worker i reads shard i mod shards_per_job, so the rest would never be read")

    def shards() -> tuple[int, ...]:
        return tuple(int(x) for x in rng.integers(0, cluster.n_nodes, w.shards_per_job))

    specs: list[JobSpec] = []
    # per job, for errors: the key and value its size comes from, and the key of its model
    origins: list[tuple[str, str]] = []
    if w.kind == "fixed":
        for i, j in enumerate(w.jobs):
            m = zoo.models[j.model]
            key = f"workload.jobs.{i}"
            origins.append((
                f"{key}.num_workers: {j.num_workers}" if j.num_workers
                else f"{key}.model: {j.model!r} (default_workers {m.default_workers})",
                f"{key}.model: {j.model!r}",
            ))
            if j.num_ps and (j.comm or m.comm) == "allreduce":
                raise ConfigError(f"{where}: {key}.num_ps: {j.num_ps}: an all-reduce job has no PS")
            for n in j.shard_nodes or ():
                if not 0 <= n < cluster.n_nodes:
                    raise ConfigError(
                        f"{where}: {key}.shard_nodes: {j.shard_nodes}: node {n} out of range "
                        f"(cluster {cluster.config.name!r} has {cluster.n_nodes} nodes)"
                    )
            specs.append(
                JobSpec(
                    job_id=f"j{i}",
                    model=j.model,
                    arrival_s=j.arrival_s,
                    num_ps=(j.num_ps or m.default_ps) if (j.comm or m.comm) == "ps" else 0,
                    comm=j.comm or m.comm,
                    num_workers=j.num_workers or m.default_workers,
                    shard_nodes=tuple(j.shard_nodes) if j.shard_nodes is not None else shards(),
                    epoch_scale=j.epoch_scale,
                    user=j.user,
                    weight=j.weight,
                    exchange_every=w.exchange_every,
                    data_fraction=w.data_fraction,
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
            trace = load_trace_window(w.trace, where)
            arrivals = np.array([j.submit_s for j in trace.jobs])
            gpus = [j.num_gpus for j in trace.jobs]
            durations = [j.duration_s for j in trace.jobs]
            ids = [j.job_id for j in trace.jobs]
            trace_users = [j.user for j in trace.jobs]
            synthetic = ("model", "num_ps", "comm", "work_steps", "steps_per_epoch", "shard_nodes")
            if any(u is None for u in trace_users):
                synthetic += ("user",)
        if len(arrivals) and w.load != 1.0:
            arrivals = arrivals[0] + (arrivals - arrivals[0]) / w.load
        for i, (jid, at, g, dur) in enumerate(zip(ids, arrivals, gpus, durations)):
            name = names[int(rng.choice(len(names), p=probs))]
            m = zoo.models[name]
            if g is None:
                nw = _pick(rng, w.num_workers, m.default_workers)
                comm = _comm(rng, w) or m.comm
                nps = _pick(rng, w.num_ps, m.default_ps) if comm == "ps" else 0
                scale = float(rng.uniform(*w.epoch_scale))
                user = f"u{i % w.users}"
                origins.append((
                    f"workload.num_workers: {list(w.num_workers)}" if w.num_workers
                    else f"workload.models.{name} (default_workers {m.default_workers})",
                    f"workload.models.{name}",
                ))
            else:
                nw = int(g)
                comm = _comm(rng, w) or "allreduce"
                nps = max(1, math.ceil(nw / w.ps_ratio)) if comm == "ps" else 0
                scale = 1.0  # unused: replay_work sets the job's work below
                user = trace_users[i] or f"u{i % w.users}"
                line = trace.jobs[i].line
                row = f"jobs[{line - 1}]" if w.trace.format == "philly_json" else f"line {line}"
                origins.append((f"workload.trace: {trace.source}, {row}: {nw} GPUs",
                                f"workload.models.{name}"))
            specs.append(
                JobSpec(
                    job_id=jid,
                    model=name,
                    arrival_s=float(at),
                    num_ps=nps,
                    num_workers=nw,
                    shard_nodes=shards(),
                    epoch_scale=scale,
                    user=user,
                    synthetic=synthetic,
                    comm=comm,
                    exchange_every=w.exchange_every,
                    data_fraction=w.data_fraction,
                    gpu_milli=trace.jobs[i].gpu_milli if g is not None else 1000,
                )
            )
    _check_fits(specs, origins, cluster, zoo, where, fit_memo)
    if w.kind == "trace":
        eff = efficiency.make(sc.efficiency)
        specs = [replay_work(s, float(dur), cluster, zoo.models[s.model], eff.table(s.model, zoo.models[s.model]))
                 for s, dur in zip(specs, durations)]
    return specs


def _comm(rng: np.random.Generator, w: Workload) -> str | None:
    """The workload's communication pattern for one job: drawn under `ps_fraction` (so existing
    scenarios keep their random stream), else `comm` (None: the model's or the trace's default)."""
    if w.ps_fraction is None:
        return w.comm
    return "ps" if rng.random() < w.ps_fraction else "allreduce"


def trace_placement(cluster: Cluster, m: ModelSpec, p: int, w: int) -> tuple[list[int], list[int]]:
    """(PS nodes, worker nodes) of a trace job as it ran: consolidated on the empty cluster.

    Choice (the traces do not record machines, except Philly's job log): the fewest nodes, filled
    in order of how many workers of the model each holds (ties: node order). An Alibaba pod is on
    one machine by construction, and Philly's scheduler places for locality first (Jeon et al.,
    ATC'19, Sec. 2). PS i sits on the node of worker i (mod the nodes used)."""
    room = room_per_node(cluster, m.worker)
    workers: list[int] = []
    for node in np.argsort(-room, kind="stable"):
        workers += [int(node)] * int(min(room[node], w - len(workers)))
        if len(workers) == w:
            break
    used = list(dict.fromkeys(workers))
    return [used[i % len(used)] for i in range(p)], workers


def trace_speed(spec: JobSpec, cluster: Cluster, m: ModelSpec) -> float:
    """Local batches/s of the job alone at its trace placement (speed.alone_speed)."""
    ps_nodes, w_nodes = trace_placement(cluster, m, spec.num_ps, spec.num_workers)
    job = Job(spec, m, np.random.default_rng(0), total_epochs=1)
    return alone_speed(cluster, job, ps_nodes, w_nodes, cluster.config.overheads, DEFAULT_PACKING)


def replay_work(spec: JobSpec, duration_s: float, cluster: Cluster, m: ModelSpec,
                eff: PhiTable | None = None) -> JobSpec:
    """The job with the work that its trace duration is at the trace's placement: duration x
    `trace_speed`, so that running it that way takes `duration_s` and its GPU-seconds are the
    trace's. The speed model is deterministic (a scheduler's measurements carry a 2% bias, the
    truth none), so this holds to rounding. With a statistical efficiency `eff` the work is
    divided by the mean of 1 / E at the trace's workers over the work, which keeps the duration
    exact: the trace's job ran at that size, efficiency included. Its epoch is its own
    (`replay_epoch`); a job with no work (a zero duration) keeps its model's and lists no epoch
    as synthetic."""
    work = duration_s * trace_speed(spec, cluster, m)
    if eff is not None:
        work /= eff.mean_inverse(spec.num_workers)
    spe = replay_epoch(work, m)
    synthetic = spec.synthetic if spe is not None else tuple(
        f for f in spec.synthetic if f != "steps_per_epoch")
    return replace(spec, work_steps=work, steps_per_epoch=spe, synthetic=synthetic)


def replay_epoch(work: float, m: ModelSpec) -> float | None:
    """A replayed job's steps per epoch: its work over K, its model's convergence epoch
    (`jobs.convergence_epoch` at scale 1: the budget if the model does not converge within it),
    so that it trains K epochs of its model's curve, crossing its stopping threshold at its last
    one (`jobs.stop_delta`), whatever its trace duration. None for no work (no epoch to size).

    Rounding choice: the epoch is a float, not whole batches (rounding work / K to whole batches
    would turn a job of 1.5 K batches into K / 2 or K + 1/2 ... epochs, not K), and may be under
    one batch (a job with less work than K batches still trains K epochs, of a fraction of a
    batch each: its data set is as synthetic as its model). It is the largest float with
    K x it <= work exactly (work / K, one ulp lower where that rounds up), so the engine, which
    ends epoch k when the work reaches k x it, counts exactly K epochs when the job finishes
    (`jobs.job_epochs`, Python's exact floor division); the remainder, a few ulps of the work,
    runs after the K-th epoch.

    What a scheduler sees: steps_per_epoch x max_epochs is now the job's work within the factor
    budget / K of its model (1.25-4 in the zoo), where the model's epoch said nothing of it (a
    data set's size correlates with a job's length on a real cluster too, but not this tightly);
    Tetris' and D2S' remaining-work estimates and Optimus' fallback read it."""
    if work <= 0:
        return None
    k = convergence_epoch(m, 1.0)
    spe = work / k
    while work // spe < k:
        spe = math.nextafter(spe, 0.0)
    return spe


# A replay this small or this idle compares schedulers on almost nothing: say so, with numbers.
FEW_JOBS = 20
LOW_LOAD = 0.05


@dataclass(frozen=True)
class ReplaySummary:
    """What a trace replay offers the simulated cluster, printed by `dlcluster run|evaluate`.

    Offered load = GPU-seconds / (the simulated cluster's GPUs x the span from the first to the
    last submit selected): the trace's (duration x GPUs of the rows selected) and the
    simulation's (each generated job's run time at its trace placement x its workers, seed 0),
    which the replay rule makes equal unless the mapping changed a job."""

    trace: TraceSet
    cluster: str
    cluster_gpus: int
    span_s: float
    trace_gpu_s: float
    sim_gpu_s: float
    n_jobs: int  # jobs the simulation replays

    def load(self, gpu_s: float) -> float:
        """Fraction of the cluster's GPU capacity over the span (nan for a span of 0)."""
        return gpu_s / (self.cluster_gpus * self.span_s) if self.span_s > 0 else math.nan

    def lines(self) -> list[str]:
        def load(gpu_s: float) -> str:
            return f"{gpu_s / 3600:,.1f} GPU-h = {self.load(gpu_s):.1%} of capacity"

        return [
            self.trace.report(),
            f"replay: {self.n_jobs:,} jobs over {self.span_s / 86400:,.2f} days of submits on "
            f"cluster {self.cluster!r} ({self.cluster_gpus:,} GPUs); offered load: trace "
            f"{load(self.trace_gpu_s)}, simulation {load(self.sim_gpu_s)}",
        ]

    def warnings(self) -> list[str]:
        out = []
        if self.n_jobs < FEW_JOBS:
            out.append(f"the window selects only {self.n_jobs:,} of the trace's "
                       f"{self.trace.n_rows:,} replayable jobs: move start/end to where the trace "
                       "has jobs")
        if self.span_s > 0 and self.load(self.sim_gpu_s) < LOW_LOAD:
            out.append(f"offered load is {self.load(self.sim_gpu_s):.2%} of cluster "
                       f"{self.cluster!r}'s {self.cluster_gpus:,} GPUs over the span (below "
                       f"{LOW_LOAD:.0%}): the cluster is mostly idle and schedulers will barely "
                       "differ; pick a busier window or a smaller cluster")
        return out


def replay_summary(scenario: str | Path | Scenario | dict, trace: TraceSet) -> ReplaySummary:
    """The replay's summary for a trace scenario (builds its jobs for seed 0)."""
    sc, cluster, zoo, specs = build(scenario, 0)
    submits = [j.submit_s for j in trace.jobs]
    return ReplaySummary(
        trace=trace,
        cluster=cluster.config.name,
        cluster_gpus=cluster.n_gpus,
        span_s=max(submits) - min(submits) if submits else 0.0,
        trace_gpu_s=sum(j.duration_s * j.num_gpus for j in trace.jobs),
        sim_gpu_s=sum(s.num_workers * s.work_steps / trace_speed(s, cluster, zoo.models[s.model])
                      for s in specs),
        n_jobs=len(specs),
    )


def _untimed(cluster: Cluster, m: ModelSpec, name: str) -> str | None:
    """Why a GPU model cannot be timed on some GPU type of this cluster (speed.gpu_compute_s)."""
    if m.compute_on != "gpu":
        return None
    for t in sorted({cluster.node_gpu_type[n] for n in np.flatnonzero(cluster.gpus > 0)}):
        try:
            gpu_compute_s(m, t, name)
        except SpeedError as e:
            return f"{e}; cluster {cluster.config.name!r} has {t!r} GPUs"
    return None


def _check_fits(
    specs: list[JobSpec], origins: list[tuple[str, str]], cluster: Cluster, zoo: ModelZoo,
    where: str, memo: tuple[dict, dict] | None = None,
) -> None:
    """A job that could never run on this cluster is a config error, not a silent starvation;
    the message names the key and value (or trace line) the job came from, or its model's key
    when a single task of the model fits no node. `memo`: verdicts of earlier calls on the same
    cluster and zoo (a verdict found there raises again, naming this call's job)."""
    # per model, then per shape: thousands of trace jobs share a few of each
    task_why: dict[str, str | None]
    job_why: dict[tuple[str, int, int], str | None]
    task_why, job_why = memo if memo is not None else ({}, {})
    for s, (origin, model_key) in zip(specs, origins):
        m = zoo.models[s.model]
        if s.model not in task_why:
            task_why[s.model] = task_never_fits(cluster, m) or _untimed(cluster, m, s.model)
        if task_why[s.model]:
            raise ConfigError(f"{where}: {model_key}: job {s.job_id}: {task_why[s.model]}")
        key = (s.model, s.num_ps, s.num_workers)
        if key not in job_why:
            job_why[key] = never_fits(cluster, m, s.num_ps, s.num_workers)
        if job_why[key]:
            raise ConfigError(f"{where}: {origin}: job {s.job_id} ({s.model}, {s.num_ps} PS, "
                              f"{s.num_workers} workers) {job_why[key]}")


def build(scenario: str | Path | Scenario | dict, seed: int = 0):
    """Scenario -> (scenario, cluster, zoo, jobs) for this seed."""
    sc, path = load_scenario(scenario)
    where = str(path) if path else sc.name
    cluster = build_cluster(sc.cluster)
    zoo = load_zoo(CONFIG_DIR.parent / sc.models_file if sc.models_file else None)
    return sc, cluster, zoo, generate_jobs(sc, cluster, zoo, seed, where)

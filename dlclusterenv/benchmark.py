"""A frozen, versioned benchmark suite (issue 15): `dlcluster benchmark [SUITE]`.

A suite (configs/benchmarks/NAME.yaml, validated like every config) lists scenarios, each at one or
more offered loads (`workload.load`), each with a train split and a held-out test split: seeds, and
for a trace replay the trace windows (start / end) it replays, as a list or as a seeded sample
(`windows: {sample: K, from: DATE, to: DATE, days: D, seed: S}`, `Sample`: K of the D-day tiles of
[from, to), expanded into the explicit list when the suite is read, so runs, logs, `runs.csv` and
fingerprints see only the list). The two splits may share neither a seed nor a window, and a test
window may not overlap a train window in time (they could replay the same jobs). Every (scenario,
load) is one instance of the suite.

Reference rows, per instance:
- best constant: the grid `constants.shapes` x `constants.placers` of `baselines.fixed.FixedShape`,
  each run on the train split; the one with the lowest mean avg JCT there (fewest unfinished jobs
  first) is scored on the test split;
- best oracle: of `oracles` (schedulers that read the engine's truth), the lowest mean test avg
  JCT, named;
- normalised score: a policy's mean test avg JCT / the `reference` heuristic's, per instance, and
  the geometric mean over the instances (as CompilerGym scores against -Oz).

Validity (`--check`), per instance, on the test split: constant gap = (best grid constant on test
/ best heuristic) - 1 (the best constant of the grid in hindsight, not only the train-tuned one, so
that "no constant comes within 10%" holds for every constant of the grid) and oracle headroom =
1 - best oracle / best heuristic. An instance qualifies if the gap exceeds `qualify.constant_gap`
and the headroom reaches `qualify.oracle_headroom`.

Heuristics and constants run on the test split; constants also on the train split; the policies of
`--policies` (learned `KIND:PATH`, or your own Scheduler as `module:Class`, `path/file.py:Class` or
an entry-point name, told apart by `schedulers.kind`) run on the test split only. Every scheduler
run writes its decision log (`logs/*.jsonl`: a header with the scenario and seed, one line per
decision point, the metrics last) that `dlcluster benchmark --validate LOG` replays; your own
schedulers are scheduler runs like the baselines. Learned policies act through an env, not the
Scheduler API, so their runs have no decision log.

`--resume` reuses the rows of `runs.csv` already in `--out` whose key matches a planned run: (instance,
split, window, policy, seed) and the `fingerprint` column, a hash of `evaluate.run_key` of the run's
scenario (every field as it resolves, and the SHA-256 of a trace file's content, so a trace
re-created with the same bytes keeps its runs) and `evaluate.policy_key` (the source that decides
the run: the policy's module with the modules of its package it imports, and the dlclusterenv
package; for a learned policy also the content hash of its model file and config). A run is a pure
function of its code, policy, scenario and seed, so the fingerprint covers every suite-entry field
that changes a run (load, window, ps_fraction, efficiency, the scenario file); an entry change that
changes no run (a heuristic added, a train seed) keeps the other runs, and a code change reruns
what it may change (an interrupted run resumes on the same code). A scheduler run is reused only
with its decision log present, so `--validate` still covers every run. Rows of an older version
(no fingerprint column, or a fingerprint of the older key: the trace by size and mtime, no code)
are read, reported as stale and rerun. `runs.csv` is read by column (`read_runs`): only numeric
columns are cast, so a policy named "1e3" stays a name. Reused rows keep their `wall_s`.

Output: one benchmark holds `--out` while it runs (`evaluate.claim`: a second one into it fails at
once). A run's decision log and its row go to the hidden stage `out/.staging/` (each file written
atomically, the row after the log), never beside the CSVs they would contradict; when every run is
done the CSVs and `suite.json` are written there too, the stage is renamed to `out/.commit/` (the
commit point) and its files are renamed into place, with SIGTERM and SIGINT held back from the
rename to the end (`_commit`, `evaluate.signals_held`). So `out` holds one benchmark's CSVs with the
logs they were computed from: a run killed before the commit leaves it as it was; a Ctrl-C during
the commit lets it finish (`dlcluster benchmark` then exits 130 with one line saying so, as for a
Ctrl-C before it); one SIGKILLed during the renames (a few ms) leaves `.commit/`, which the next
benchmark into `out` moves in first. `--resume` also reuses the
runs a killed benchmark finished in the stage (row and log there, fingerprint matching); every
other staged file is removed, and without `--resume` the stage is cleared.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
import shutil
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Discriminator, Field, StrictInt, Tag, model_validator

from . import schedulers
from .api import Decision, Scheduler
from .config import ConfigError, _Strict, read_yaml, resolve, validate
from .metrics import Metrics
from .evaluate import (EvaluateError, atomic_write, claim, move_all, policy_key, pool_run, resolve_policies, run_key,
                       signals_held, write_csv)
from .traces import check_time, data_path, parse_time
from .workload import Scenario, load_scenario

SPLITS = ("train", "test")
STAGE, COMMIT = ".staging", ".commit"  # in --out: runs in progress; outputs being moved into place


# ----------------------------------------------------------------------------- suite file
class Window(_Strict):
    """A trace window replacing the scenario's start / end (a date or seconds, as in TraceWindow)."""

    start: str | float
    end: str | float

    @model_validator(mode="after")
    def _bounds(self) -> Window:
        for key in ("start", "end"):
            check_time(key, getattr(self, key))
        if isinstance(self.start, str) != isinstance(self.end, str):
            raise ValueError(f"start {self.start!r}, end {self.end!r}: give both as dates or both as seconds")
        return self


def day_windows(start: dt.date, end: dt.date, every: int, days: int) -> list[tuple[dt.date, dt.date]]:
    """[d, d + days) for d from start every `every` days, before end."""
    if every < 1 or days < 1:
        raise ValueError(f"every {every}, days {days}: both must be >= 1")
    out, d = [], start
    while d < end:
        out.append((d, d + dt.timedelta(days=days)))
        d += dt.timedelta(days=every)
    return out


def _date(text: str, key: str) -> dt.date:
    """A YYYY-MM-DD day (fromisoformat alone also takes 20171001 and week dates)."""
    if len(text) != 10:
        raise ValueError(f"{key}: {text!r} is not a date (YYYY-MM-DD)")
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{key}: {text!r} is not a date (YYYY-MM-DD)") from None


class Sample(_Strict):
    """K windows of `days` days drawn without replacement (numpy's generator seeded by `seed`) from
    the back-to-back `days`-day tiles of [from, to): many windows per split, fixed by the config before
    any result is seen, so a split's mean stands for its span rather than for two picked windows.
    Tiles never overlap, so the windows share no job; they are listed in time order."""

    sample: StrictInt = Field(ge=1, description="how many windows (K)")
    from_: str = Field(alias="from", description="first day of the range (YYYY-MM-DD), inclusive")
    to: str = Field(description="end of the range (YYYY-MM-DD), exclusive: the last window ends by it")
    days: StrictInt = Field(gt=0, description="length of each window in days")
    seed: StrictInt = Field(default=0, ge=0)

    def tiles(self) -> list[tuple[dt.date, dt.date]]:
        a, b = _date(self.from_, "from"), _date(self.to, "to")
        return day_windows(a, b - dt.timedelta(days=self.days - 1), self.days, self.days)

    @model_validator(mode="after")
    def _fits(self) -> Sample:
        if _date(self.from_, "from") >= _date(self.to, "to"):
            raise ValueError(f"from: {self.from_!r} is not before to: {self.to!r}")
        n = len(self.tiles())
        if self.sample > n:
            raise ValueError(f"sample: {self.sample} windows of {self.days} days do not fit in "
                             f"[{self.from_}, {self.to}): at most {n}")
        return self

    def windows(self) -> list[Window]:
        tiles = self.tiles()
        pick = np.sort(np.random.default_rng(self.seed).choice(len(tiles), self.sample, replace=False))
        return [Window(start=tiles[i][0].isoformat(), end=tiles[i][1].isoformat()) for i in pick]


def _windows_kind(value) -> str:
    return "sample" if isinstance(value, (dict, Sample)) else "list"


def _no_repeats(key: str, values: list) -> None:
    """A value given twice in a suite list is an error: a repeated seed, load or policy was run
    (or scored) twice and weighed twice in the means, silently."""
    dup = [v for i, v in enumerate(values) if v in values[:i]]
    if dup:
        raise ValueError(f"{key}: {dup[0]!r} given twice")


class Split(_Strict):
    seeds: list[Annotated[StrictInt, Field(ge=0)]] = Field(min_length=1, description="numpy refuses negative seeds")
    windows: Annotated[Annotated[list[Window], Tag("list")] | Annotated[Sample, Tag("sample")],
                       Discriminator(_windows_kind)] = Field(
        default_factory=list, description="trace scenarios only: a list of windows, or a Sample")

    @model_validator(mode="before")
    @classmethod
    def _not_mixed(cls, data):
        w = data.get("windows") if isinstance(data, dict) else None
        if isinstance(w, list) and any(isinstance(x, dict) and "sample" in x for x in w):
            raise ValueError("windows: a sample {sample: K, ...} stands for the whole list; give it "
                             "as `windows:` itself, not inside a list of windows")
        return data

    @model_validator(mode="after")
    def _expand(self) -> Split:
        _no_repeats("seeds", self.seeds)
        if isinstance(self.windows, Sample):
            return self.model_copy(update={"windows": self.windows.windows()})
        return self


def _span(w: Window) -> tuple[bool, float, float]:
    """(dated, start, end) of a window, in seconds: a date and trace seconds are not comparable."""
    dated = isinstance(w.start, str)
    sec = (lambda x: parse_time(x) if isinstance(x, str) else float(x))
    return dated, sec(w.start), sec(w.end)


class Entry(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    scenario: str = Field(description="a preset of configs/scenarios or a YAML path")
    loads: list[float] = Field(default=[1.0], min_length=1)
    ps_fraction: float | None = Field(default=None, ge=0, le=1, description="workload.ps_fraction")
    efficiency: Literal["none", "pgns"] | None = Field(
        default=None, description="the scenario's `efficiency` (statistical efficiency); None: its own")
    train: Split
    test: Split

    @model_validator(mode="after")
    def _held_out(self) -> Entry:
        if any(x <= 0 or not math.isfinite(x) for x in self.loads):
            raise ValueError(f"loads: {self.loads}: every load must be a finite number > 0")
        _no_repeats("loads", self.loads)
        shared = sorted(set(self.train.seeds) & set(self.test.seeds))
        if shared:
            raise ValueError(f"test.seeds: {shared} are also train seeds (the test split must be held out)")
        both = set(self.train.windows) & set(self.test.windows)
        if both:
            w = next(iter(both))
            raise ValueError(f"test.windows: {w.start!r}..{w.end!r} is also a train window")
        for w in self.test.windows:
            kind, a, b = _span(w)
            for v in self.train.windows:
                vkind, c, d = _span(v)
                if kind == vkind and a < d and c < b:
                    raise ValueError(f"test.windows: {w.start!r}..{w.end!r} overlaps train window "
                                     f"{v.start!r}..{v.end!r} (the splits could replay the same jobs)")
        if bool(self.train.windows) != bool(self.test.windows):
            raise ValueError("windows: give them for both splits or neither")
        return self


class Constants(_Strict):
    shapes: list[tuple[StrictInt, StrictInt]] = Field(min_length=1, description="(PS, workers)")
    placers: list[Literal["consolidate", "spread", "pack"]] = Field(min_length=1)

    @model_validator(mode="after")
    def _positive(self) -> Constants:
        for i, (p, w) in enumerate(self.shapes):
            if p < 1 or w < 1:
                raise ValueError(f"shapes.{i}: {[p, w]}: PS and workers must be >= 1")
        _no_repeats("shapes", self.shapes)
        _no_repeats("placers", self.placers)
        return self

    def names(self) -> list[str]:
        return [f"fixed-{p}x{w}-{pl}" for p, w in self.shapes for pl in self.placers]


class Qualify(_Strict):
    constant_gap: float = Field(default=0.10, ge=0)
    oracle_headroom: float = Field(default=0.15, ge=0, lt=1)


class Suite(_Strict):
    name: str
    version: StrictInt = Field(ge=1)
    source: str = Field(min_length=1)
    reference: str = Field(description="the heuristic scores are normalised by")
    heuristics: list[str] = Field(min_length=1, description="state-dependent heuristics (not oracles)")
    oracles: list[str] = Field(min_length=1)
    constants: Constants
    qualify: Qualify = Qualify()
    scenarios: list[Entry] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> Suite:
        import baselines

        for key in ("heuristics", "oracles"):
            _no_repeats(key, getattr(self, key))
            for i, n in enumerate(getattr(self, key)):
                if n not in baselines.REGISTRY:
                    raise ValueError(f"{key}.{i}: unknown baseline {n!r}; known: {baselines.names()}")
                if baselines.REGISTRY[n].oracle != (key == "oracles"):
                    raise ValueError(f"{key}.{i}: {n!r} {'is not' if key == 'oracles' else 'is'} an oracle")
        if self.reference not in self.heuristics:
            raise ValueError(f"reference: {self.reference!r} is not one of heuristics")
        seen = [e.name for e in self.scenarios]
        dup = sorted({n for n in seen if seen.count(n) > 1})
        if dup:
            raise ValueError(f"scenarios: name {dup[0]!r} given twice")
        return self


def load_suite(name_or_path: str | Path) -> tuple[Suite, Path]:
    path = resolve(name_or_path, "benchmarks")
    return validate(Suite, read_yaml(path), path), path


# ----------------------------------------------------------------------------- instances
@dataclass(frozen=True)
class Instance:
    """One (scenario, load) of the suite; `runs(split)` are its (scenario, seed) pairs."""

    key: str  # entry@LOADx
    entry: Entry
    load: float
    base: Scenario

    def scenario(self, window: Window | None) -> Scenario:
        w = self.base.workload
        update: dict = {"load": self.load}
        if self.entry.ps_fraction is not None:
            update.update(ps_fraction=self.entry.ps_fraction, comm=None)
        if window is not None:
            update["trace"] = w.trace.model_copy(update={"start": window.start, "end": window.end})
        sc = {"workload": validate(type(w), {**w.model_dump(), **update}, f"{self.key}: workload")}
        if self.entry.efficiency is not None:
            sc["efficiency"] = self.entry.efficiency
        return self.base.model_copy(update=sc)

    def runs(self, split: str) -> list[tuple[int | None, Scenario, int]]:
        """(window index or None, scenario, seed) for every run of the split."""
        s = getattr(self.entry, split)
        windows = list(enumerate(s.windows)) or [(None, None)]
        return [(k, self.scenario(w), seed) for k, w in windows for seed in s.seeds]


def instances(suite: Suite, where: Path, say=print) -> list[Instance]:
    """The suite's instances; an entry whose trace file is absent is skipped with a message."""
    out = []
    for i, e in enumerate(suite.scenarios):
        try:
            base, _ = load_scenario(e.scenario)
        except ConfigError as exc:
            raise ConfigError(f"{where}: scenarios.{i}.scenario: {exc}") from None
        t = base.workload.trace
        if t is None and e.train.windows:
            raise ConfigError(f"{where}: scenarios.{i}.train.windows: scenario {e.scenario!r} replays no trace")
        if t is not None and not data_path(t.path).exists():
            say(f"suite {suite.name}: skipping scenario {e.name!r}: trace file {t.path} is not present "
                f"({data_path(t.path)})")
            continue
        out.extend(Instance(f"{e.name}@{load:g}x", e, load, base) for load in e.loads)
    return out


# ----------------------------------------------------------------------------- decision logs
def _plain(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, (tuple, list)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def decision_to_json(t: float, d: Decision) -> dict:
    return {"t": t, "allocate": _plain(d.allocate), "place": _plain(d.place), "preempt": list(d.preempt),
            "cpu_limits": _plain(d.cpu_limits), "gpu_mode": dict(d.gpu_mode), "wake_at": _plain(d.wake_at)}


def decision_from_json(r: dict) -> Decision:
    return Decision(
        allocate={k: tuple(v) for k, v in r["allocate"].items()},
        place={k: tuple(v) if isinstance(v, list) else v for k, v in r["place"].items()},
        preempt=list(r["preempt"]), cpu_limits=dict(r["cpu_limits"]), gpu_mode=dict(r["gpu_mode"]),
        wake_at=r["wake_at"])


class Recorder(Scheduler):
    """Runs `inner` and keeps every decision it returns, serialised when it is made."""

    def __init__(self, inner: Scheduler):
        self.inner, self.name, self.oracle = inner, inner.name, inner.oracle
        self.lines: list[dict] = []

    def reset(self, seed=None) -> None:
        self.inner.reset(seed)
        self.lines = []

    def decide(self, view) -> Decision:
        d = self.inner.decide(view)
        self.lines.append(decision_to_json(view.time, d))
        return d


class Replayer(Scheduler):
    """Returns the logged decisions in order; a decision point at another time than logged, or
    more decision points than logged, is a ValidationError: the replay diverged."""

    name = "replay"

    def __init__(self, lines: list[dict], where: str):
        self.lines, self.where, self.i = lines, where, 0

    def decide(self, view) -> Decision:
        if self.i >= len(self.lines):
            raise ValidationError(f"{self.where}: replay asks for decision {self.i + 1}, the log has {len(self.lines)}")
        r = self.lines[self.i]
        if r["t"] != view.time:
            raise ValidationError(f"{self.where}: decision {self.i + 1} logged at t={r['t']!r}, replayed at t={view.time!r}")
        self.i += 1
        return decision_from_json(r)


class ValidationError(ValueError):
    """A decision log that does not replay to its metrics; the message names the log and the field."""


def _same(a: float, b: float) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def validate_log(path: Path) -> dict:
    """Replay one decision log; returns its header, or raises ValidationError naming what differs."""
    from . import make_sim

    try:
        lines = [json.loads(s) for s in Path(path).read_text().splitlines() if s.strip()]
    except (OSError, json.JSONDecodeError) as e:
        raise ValidationError(f"{path}: not a readable decision log: {e}") from None
    if len(lines) < 2 or "header" not in lines[0] or "metrics" not in lines[-1]:
        raise ValidationError(f"{path}: a decision log starts with a header line and ends with a metrics line")
    head = lines[0]["header"]
    decisions = [r["decision"] for r in lines[1:-1]]
    rep = Replayer(decisions, str(path))
    got = make_sim(validate(Scenario, head["scenario"], f"{path}: header.scenario"), head["seed"]).run(rep).summary()
    if rep.i != len(decisions):
        raise ValidationError(f"{path}: replay used {rep.i} of {len(decisions)} logged decisions")
    want = lines[-1]["metrics"]
    for k in sorted(set(want) | set(got)):
        if k not in want or k not in got or not _same(want[k], got[k]):
            raise ValidationError(f"{path}: metrics.{k}: logged {want.get(k)!r}, replayed {got.get(k)!r}")
    return head


# ----------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class Task:
    instance: str
    split: str
    window: int | None
    policy: str
    scenario: Scenario
    seed: int
    log: str | None  # decision log path (scheduler runs)


def make_scheduler(policy: str) -> Scheduler:
    """A constant of the grid, a baseline or your own Scheduler (`schedulers.make`)."""
    from baselines import fixed

    return fixed.parse(policy) if policy.startswith(fixed.PREFIX) else schedulers.make(policy)


def run_task(task: Task) -> dict:
    """One run; a scheduler's decisions go to task.log. Module-level for process pools."""
    from . import make_sim

    fp = fingerprint(task.scenario, task.policy)  # before the run reads a model file
    t0 = time.perf_counter()
    if schedulers.kind(task.policy) == "learned":  # through its env
        from agents.learned import run_learned

        summary = run_learned(task.policy, task.scenario, task.seed).summary()
    else:
        rec = Recorder(make_scheduler(task.policy))
        summary = make_sim(task.scenario, task.seed).run(rec).summary()
        head = {"suite_instance": task.instance, "split": task.split, "window": task.window,
                "policy": task.policy, "seed": task.seed, "scenario": task.scenario.model_dump()}
        path = Path(task.log)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [{"header": head}, *({"decision": line} for line in rec.lines), {"metrics": summary}]
        text = "".join(json.dumps(x) + "\n" for x in lines)
        atomic_write(path, lambda tmp: tmp.write_text(text))  # a killed run leaves no half log
    return {"instance": task.instance, "split": task.split, "window": task.window, "policy": task.policy,
            "seed": task.seed, **summary, "wall_s": time.perf_counter() - t0,
            "fingerprint": fp}


def fingerprint(sc: Scenario, policy: str) -> str:
    """A short hash of `evaluate.run_key(sc)` + `evaluate.policy_key(policy)`: what a saved run
    must match to be resumed (scenario, trace file content, the policy's and the engine's source,
    a learned policy's files). Rows fingerprinted by an older key (the trace file by size and
    mtime, no code) no longer match: they are stale and rerun."""
    return hashlib.sha256((run_key(sc) + policy_key(policy)).encode()).hexdigest()[:16]


def plan(suite: Suite, insts: list[Instance], out: Path, extra: list[str] = ()) -> list[Task]:
    """Every run of the suite: the constant grid on train and test; heuristics, oracles and
    the policies of --policies (`extra`: learned or your own) on test only."""
    tasks = []
    for inst in insts:
        for split in SPLITS:
            policies = list(suite.constants.names())
            if split == "test":
                policies += [*suite.heuristics, *suite.oracles, *extra]
            for k, sc, seed in inst.runs(split):
                for p in policies:
                    log = None if schedulers.kind(p) == "learned" else str(
                        out / "logs" / inst.key / split
                        / f"{urllib.parse.quote(p, safe='')}-s{seed}{'' if k is None else f'-w{k}'}.jsonl")
                    tasks.append(Task(inst.key, split, k, p, sc, seed, log))
    return tasks


def execute(tasks: list[Task], workers: int = 1, progress: bool = True,
            done: dict[int, dict] | None = None, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Every task, rows in plan order (each run is a pure function of its task, so the rows do not
    depend on `workers`), through evaluate's process pool: a failed run, Ctrl-C or SIGTERM stops
    the workers, and none outlives the command. `done`: rows already run, by task index; `on_row`
    gets each new row as its run finishes."""
    from tqdm import tqdm

    done = done or {}
    rows: list[dict] = [done.get(i, {}) for i in range(len(tasks))]
    todo = [i for i in range(len(tasks)) if i not in done]
    with tqdm(total=len(todo), desc="runs", unit="run", file=sys.stderr, disable=not progress) as bar:
        for j, r in pool_run(run_task, [(tasks[i],) for i in todo], workers):
            rows[todo[j]] = r
            if on_row is not None:
                on_row(r)
            bar.update()
    return rows


# runs.csv columns that hold numbers: the plan's window and seed, the run's metrics and wall time;
# every other column (instance, split, policy, fingerprint) is text, whatever it looks like
NUMERIC = frozenset({"window", "seed", "wall_s", *(f.name for f in fields(Metrics))} - {"jobs", "timeline"})


def _cell(column: str, text: str):
    """A runs.csv cell as run_task wrote it, by its column: a number (int, or float: repr
    round-trips) in a NUMERIC column, None for an empty one (a trace-less run's window); the
    text itself elsewhere, so a policy or instance named "1e3" or "007" stays that name."""
    if column not in NUMERIC:
        return text
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def read_runs(path: Path) -> list[dict]:
    """The rows of a runs.csv, each cell by its column (`_cell`); a row with more or fewer cells
    than the header (csv.DictReader would fill None in) is a ValueError naming its line, and a
    cell that is not a number where one belongs one naming its line and column."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for r in reader:
            line = reader.line_num  # in the file (DictReader skips blank lines)
            if None in r or None in r.values():
                k = len(reader.fieldnames)
                n = k + len(r.get(None, ())) - sum(v is None for v in r.values())  # extras, missing
                raise ValueError(f"{path}: line {line}: {n} cells, the header has {k}")
            row = {}
            for k, v in r.items():
                try:
                    row[k] = _cell(k, v)
                except ValueError:
                    raise ValueError(f"{path}: line {line}: column {k}: {v!r} is not a number") from None
            rows.append(row)
    return rows


def _key(r: dict) -> tuple:
    """A run's place in the plan: (instance, split, window, policy, seed)."""
    return r["instance"], r["split"], r["window"], r["policy"], r["seed"]


def _staged(path: str, out: Path) -> Path:
    """Where the file `path` of `out` is written while the benchmark runs (module docstring)."""
    return out / STAGE / Path(path).relative_to(out)


def _row_file(stage: Path, row: dict) -> Path:
    """A finished run's row in the stage; named by a hash of its key (a policy spec can be long)."""
    return stage / "rows" / f"{hashlib.sha256(json.dumps(_key(row)).encode()).hexdigest()[:24]}.json"


def _save_row(stage: Path, row: dict) -> None:
    """One finished run's row, atomically, after its log: a staged row means a whole staged run.
    JSON keeps each float's shortest exact form, so the CSV cell is the one a fresh run writes."""
    path = _row_file(stage, row)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_plain(row))
    atomic_write(path, lambda tmp: tmp.write_text(text))


def reusable(tasks: list[Task], out: Path, say=lambda m: None) -> dict[int, dict]:
    """The finished runs in `out` that match a task (by index), see the module docstring: rows of
    `runs.csv` whose fingerprint matches and whose log is in place, and (preferred) runs a killed
    benchmark finished in the stage. Rows of planned runs that are stale (another fingerprint, or
    none: a runs.csv from before the column) are rerun, and `say` is told how many and why.
    Every staged file that matches no task is removed, so the stage holds only this plan's
    finished runs (their logs are what the next commit moves in; their rows go into its runs.csv)."""
    path, stage = out / "runs.csv", out / STAGE
    saved = {}
    if path.exists():
        try:
            saved = {_key(r): r for r in read_runs(path)}
        except ValueError as e:
            raise EvaluateError(f"--resume: {e}; remove it or run without --resume") from None
    staged = {}
    for f in stage.glob("rows/*.json"):
        row = json.loads(f.read_text())
        staged[_key(row)] = (row, f)
    done, keep, stale, unkeyed = {}, set(), 0, 0
    for i, t in enumerate(tasks):
        key, fp = (t.instance, t.split, t.window, t.policy, t.seed), fingerprint(t.scenario, t.policy)
        row, f = staged.get(key, (None, None))
        if row is not None and row["fingerprint"] == fp and (t.log is None or _staged(t.log, out).exists()):
            done[i] = row
            keep.update([f] if t.log is None else [f, _staged(t.log, out)])
            continue
        r = saved.get(key)
        if r is None or (t.log is not None and not Path(t.log).exists()):
            continue
        if r.get("fingerprint") != fp:
            stale += 1
            unkeyed += "fingerprint" not in r
            continue
        done[i] = {**r, "instance": t.instance, "split": t.split, "window": t.window, "policy": t.policy,
                   "seed": t.seed, "fingerprint": fp}
    if stale:
        why = (f"{unkeyed} from a runs.csv without fingerprints, {stale - unkeyed} with another"
               if unkeyed else "their fingerprint differs")
        say(f"--resume: {stale} rows of {path} are stale ({why}: another scenario, trace file content, "
            "model file or policy / engine code than now, or keyed by an older version, e.g. the trace "
            "file by size and mtime); they are rerun")
    for f in stage.rglob("*"):
        if f.is_file() and f not in keep:
            f.unlink()
    return done


def _finish_commit(out: Path) -> None:
    """Move a committed stage's files into `out` (all of them when a SIGKILL stopped the last
    benchmark part way) and remove it. Its `rows/` stay in the stage until this commit, so a kill
    before the rename to `.commit` still leaves `--resume` every finished run."""
    commit = out / COMMIT
    if commit.exists():
        shutil.rmtree(commit / "rows", ignore_errors=True)  # the staged rows are in its runs.csv
        move_all(commit, out)
        shutil.rmtree(commit)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a benchmark; the message says what state `out` is left in."""


def _commit(out: Path) -> None:
    """Rename the stage to `.commit` (the commit point) and move its files into place, with SIGINT
    and SIGTERM held back throughout (`evaluate.signals_held`): a Ctrl-C there lets the commit
    finish and is then raised as Interrupted, saying so; a SIGKILL leaves `.commit` (or the
    stage) for the next benchmark into `out` (`_finish_commit`, `--resume`)."""
    try:
        with signals_held():
            (out / STAGE).rename(out / COMMIT)
            _finish_commit(out)
    except KeyboardInterrupt:
        raise Interrupted(f"{out} holds this benchmark's outputs, committed before the interrupt took "
                          "effect (results not printed)") from None


# ----------------------------------------------------------------------------- scoring
def _mean(rows: dict[tuple, list[dict]], inst: str, split: str, policy: str) -> tuple[float, int]:
    """(mean avg JCT, unfinished jobs) over the runs of `rows` (grouped by `_by_run`) that match."""
    sel = rows.get((inst, split, policy), [])
    if not sel:
        return math.nan, 0
    return float(np.mean([r["avg_jct_s"] for r in sel])), int(sum(r["jobs_unfinished"] for r in sel))


def _best(rows, inst, split, policies) -> tuple[str, float, int]:
    """(policy, mean avg JCT, unfinished) of the best: fewest unfinished jobs, then lowest JCT."""
    scored = [(p, *_mean(rows, inst, split, p)) for p in policies]
    return min(scored, key=lambda x: (x[2], x[1]))


def _by_run(rows: list[dict]) -> dict[tuple, list[dict]]:
    """The rows grouped by (instance, split, policy), in their order: one pass, not one per lookup."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault((r["instance"], r["split"], r["policy"]), []).append(r)
    return out


def score(suite: Suite, insts: list[Instance], rows: list[dict], extra: list[str] = ()) -> dict:
    """Leaderboard (per instance, test split) and the validity check."""
    consts = suite.constants.names()
    rows = _by_run(rows)
    board, check = [], []
    for inst in insts:
        k = inst.key
        tuned, _, _ = _best(rows, k, "train", consts)
        h_name, h, _ = _best(rows, k, "test", suite.heuristics)
        c_name, c, _ = _best(rows, k, "test", consts)
        o_name, o, _ = _best(rows, k, "test", suite.oracles)
        ref = _mean(rows, k, "test", suite.reference)[0]
        entries = {p: _mean(rows, k, "test", p) for p in [*suite.heuristics, *suite.oracles, *extra]}
        entries["best-constant"] = _mean(rows, k, "test", tuned)
        entries["best-oracle"] = (o, entries[o_name][1])
        for p, (jct, unf) in entries.items():
            board.append({"instance": k, "policy": p, "avg_jct_s": jct, "jobs_unfinished": unf,
                          "normalised": jct / ref,
                          "named": tuned if p == "best-constant" else o_name if p == "best-oracle" else ""})
        gap, headroom = c / h - 1, 1 - o / h
        check.append({"instance": k, "load": inst.load, "best_heuristic": h_name, "best_heuristic_jct_s": h,
                      "best_constant_test": c_name, "constant_gap": gap, "tuned_constant": tuned,
                      "best_oracle": o_name, "oracle_headroom": headroom,
                      "qualifies": bool(gap > suite.qualify.constant_gap
                                        and headroom >= suite.qualify.oracle_headroom),
                      "train": _split_text(inst.entry.train), "test": _split_text(inst.entry.test)})
    geo = {}
    for p in dict.fromkeys(b["policy"] for b in board):
        vals = [b["normalised"] for b in board if b["policy"] == p]
        geo[p] = float(np.exp(np.mean(np.log(vals))))
    return {"board": board, "check": check, "geomean": geo}


def _split_text(s: Split) -> str:
    if len(s.seeds) == 1:
        seeds = f"seed {s.seeds[0]}"
    elif s.seeds == list(range(s.seeds[0], s.seeds[-1] + 1)):
        seeds = f"seeds {s.seeds[0]}-{s.seeds[-1]}"
    else:
        seeds = f"seeds {','.join(map(str, s.seeds))}"
    return seeds + (f" x {len(s.windows)} windows" if s.windows else "")


def check_table(res: dict, suite: Suite) -> str:
    q = suite.qualify
    lines = [f"validity (test split): qualifies if constant gap > {q.constant_gap:.0%} and oracle headroom "
             f">= {q.oracle_headroom:.0%}",
             f"{'instance':<24} {'best heuristic':>26} {'best constant (test)':>30} {'gap':>7} "
             f"{'best oracle':>22} {'headroom':>8}  qualifies"]
    for c in res["check"]:
        lines.append(f"{c['instance']:<24} {c['best_heuristic']:>16} {c['best_heuristic_jct_s']:>9,.0f} "
                     f"{c['best_constant_test']:>30} {c['constant_gap']:>+7.1%} {c['best_oracle']:>22} "
                     f"{c['oracle_headroom']:>8.1%}  {'yes' if c['qualifies'] else 'no'}")
    return "\n".join(lines)


def board_table(res: dict, suite: Suite) -> str:
    geo = res["geomean"]
    lines = [f"normalised score = avg JCT / {suite.reference}'s, geometric mean over "
             f"{len(res['check'])} instances (test split; lower is better)"]
    w = max(map(len, geo))
    for p in sorted(geo, key=geo.get):
        lines.append(f"  {p:<{w}} {geo[p]:7.3f}")
    return "\n".join(lines)


def run_suite(name: str, out: Path, *, workers: int = 1, extra: list[str] = (), progress: bool = True,
              say=print, resume: bool = False) -> dict:
    """Run (or, with `resume`, complete) the suite into `out`; see the module docstring."""
    suite, path = load_suite(name)
    insts = instances(suite, path, say)
    if not insts:
        raise ConfigError(f"{path}: no scenario of the suite can run here (every trace file is absent)")
    out = Path(out)
    with claim(out):
        _finish_commit(out)
        stage = out / STAGE
        tasks = plan(suite, insts, out, extra)
        if resume:
            done = reusable(tasks, out, say)
            say(f"--resume: {len(done)} of {len(tasks)} runs reused from {out}, {len(tasks) - len(done)} to run")
        else:
            shutil.rmtree(stage, ignore_errors=True)
            done = {}
        t0 = time.perf_counter()
        staged = [t if t.log is None else replace(t, log=str(_staged(t.log, out))) for t in tasks]
        rows = execute(staged, workers, progress, done, on_row=lambda r: _save_row(stage, r))
        wall = time.perf_counter() - t0
        res = score(suite, insts, rows, extra)
        stage.mkdir(exist_ok=True)
        write_csv(stage / "runs.csv", rows)
        write_csv(stage / "leaderboard.csv", res["board"])
        write_csv(stage / "check.csv", res["check"])
        summary = json.dumps({"suite": suite.name, "version": suite.version, "runs": len(tasks),
                              "reused": len(done), "wall_s": wall, "geomean": res["geomean"]}, indent=1)
        atomic_write(stage / "suite.json", lambda tmp: tmp.write_text(summary))
        _commit(out)
    res.update(suite=suite, wall_s=wall, runs=len(tasks), reused=len(done))
    return res


def cli(suite: str, out: str | None, check: bool, validate_path: str | None, workers: int,
        policies: str | None, resume: bool = False) -> int:
    if validate_path:
        ignored = [f for f, given in (("--out", out), ("--check", check), ("--policies", policies),
                                      ("--resume", resume)) if given]
        if ignored:  # they would be ignored: --validate only replays the logs it is given
            print(f"error: --validate replays decision logs; {', '.join(ignored)} would run a suite: "
                  "give them without --validate", file=sys.stderr)
            return 2
        p = Path(validate_path)
        if not p.exists():  # a bad path, exit 2: it was replayed as a log and reported a MISMATCH (exit 1)
            print(f"error: --validate {p}: no such file or folder", file=sys.stderr)
            return 2
        # a benchmark's hidden stage (runs not yet committed) is not part of its results
        logs = sorted(x for x in p.rglob("*.jsonl") if not any(
            part.startswith(".") for part in x.relative_to(p).parts)) if p.is_dir() else [p]
        if not logs:
            print(f"error: {p}: no decision logs (*.jsonl)", file=sys.stderr)
            return 2
        for log in logs:
            try:
                validate_log(log)
            except ValidationError as e:
                print(f"MISMATCH {e}", file=sys.stderr)
                return 1
        print(f"{len(logs)} decision log(s) replayed to identical metrics")
        return 0
    if workers < 0:
        print(f"error: --workers must be 0 (one per core) or more, got {workers}", file=sys.stderr)
        return 2
    extra = resolve_policies(policies) if policies and policies.strip() else []
    bad = [x for x in extra if schedulers.kind(x) == "baseline"]
    if bad:
        print(f"error: --policies takes learned policies KIND:PATH or your own schedulers (module:Class, "
              f"path/file.py:Class, an entry point); baselines are set by the suite, got {bad[0]!r}",
              file=sys.stderr)
        return 2
    out = Path(out or f"runs/benchmark/{Path(suite).stem}")
    try:
        res = run_suite(suite, out, workers=workers, extra=extra, say=lambda m: print(m, file=sys.stderr),
                        resume=resume)
    except KeyboardInterrupt as e:  # Ctrl-C: one line saying what `out` holds, not a traceback
        why = str(e) if isinstance(e, Interrupted) else (
            f"{out} is as it was; `--resume` reuses the runs finished before it (kept in {out / STAGE})")
        print(f"interrupted: {why}", file=sys.stderr)
        return 130
    s = res["suite"]
    print(f"suite {s.name} (version {s.version}): {len(res['check'])} instances, {res['runs']} runs "
          f"({res['reused']} reused), {res['wall_s']:.0f} s")
    print(check_table(res, s))
    if not check:
        print()
        print(board_table(res, s))
    return 0


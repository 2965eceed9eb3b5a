"""The main job: every policy x seed on one scenario, a leaderboard, CSVs and plots.

Fairness: a run is a pure function of (scenario, policy, seed). Jobs, arrival times and noise come
from the scenario and the seed only (`workload.build`), so every policy sees the same workload.

Determinism: `runs.csv` and `jobs.csv` hold simulated quantities only and are assembled in policy x
seed order, so the same command gives byte-identical files whichever run finishes first, however
many workers, and on either backend (local processes or Ray). Wall-clock quantities (mean decision
latency, run wall time) cannot repeat by nature, so they go to a separate `timing.csv` and to the
leaderboard, never into `runs.csv`.

Policies: a baseline name (`baselines.REGISTRY`), a learned-policy spec `KIND:PATH` (e.g.
`maskableppo:runs/ppo.zip`) dispatched to `agents.learned.run_learned(spec, scenario, seed)`, or
your own Scheduler as `module:Class`, `path/file.py:Class` or an entry-point name
(`dlclusterenv.schedulers`); every run gets the spec string and builds its scheduler from it.

Output: one run owns `--out` while it runs (a lock on the directory): a second run into it is
refused with an EvaluateError at once, not interleaved with the first. Each finished run is saved
as it completes, atomically (a temporary file renamed into place), to `out/per_run/`, so an
interrupted sweep keeps what it finished; `resume=True` (`dlcluster evaluate --resume`) reruns
only the runs missing there, and the CSVs, assembled in policy x seed order from exact (JSON,
shortest-repr floats) copies of each run, are byte-identical to an uninterrupted sweep's. A saved
run records its scenario (and a trace replay the SHA-256 of its trace file's content, `run_key`),
the source that decides it (the policy's module and the dlclusterenv package) and, for a learned
policy, the content hash of its model and config files (`policy_key`), so resuming with another
scenario, a changed trace file, changed code or a swapped model is refused, naming what changed;
without `--resume`, saved runs are cleared first. The CSVs and plots are written into a hidden
`.partial-*` folder in `out` and renamed into place together, with SIGTERM and SIGINT held back
for the renames, so `out` holds every file of one evaluation or the previous contents, never a
mix. A failed or killed run removes its partial folder (a SIGKILLed one leaves it hidden, for the
next run into `out` to remove) and the `out` directory if it created it and it is empty.

Workers: the local backend's pool workers are terminated when the sweep stops early (a failed
run, Ctrl-C, or SIGTERM, which `dlcluster` turns into an exit that unwinds), and each worker exits
by itself within a second of its parent's death (SIGKILL), so no sweep work outlives the command.
"""

from __future__ import annotations

import csv
import fcntl
import functools
import hashlib
import io
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from . import make_sim, schedulers
from .config import file_digest, file_stamp
from .metrics import JobRecord, ci95
from .plots import figures
from .schedulers import PolicyError
from .traces import data_path
from .workload import Scenario, build

BACKENDS = ("local", "ray")

# Leaderboard columns: key, header, which mean is best. avg JCT ranks the policies. All of them go
# to the CSVs; the printed table shows DEFAULT_COLUMNS (rank, policy and unfinished always), which
# with 6-digit means and intervals fit 132 terminal columns; `--columns` picks others.
BOARD = (
    ("avg_jct_s", "avg JCT (s)", min),
    ("p95_jct_s", "p95 JCT (s)", min),
    ("makespan_s", "makespan (s)", min),
    ("avg_queue_s", "avg queue (s)", min),
    ("cross_node_gb", "cross-node GB", min),
    ("gpu_util", "GPU util", max),
    ("jain_index", "Jain", max),
    ("decision_latency_ms", "decision ms", min),
)
COLUMNS = tuple(key for key, _, _ in BOARD)
DEFAULT_COLUMNS = ("avg_jct_s", "makespan_s", "avg_queue_s", "cross_node_gb", "gpu_util")


class EvaluateError(ValueError):
    """A bad evaluate argument; the message names it."""


@dataclass(frozen=True)
class RunResult:
    """One policy x seed. `summary` and `jobs` are deterministic; `latency_ms` and `wall_s` are not."""

    policy: str
    seed: int
    summary: dict[str, float]
    jobs: list[dict]
    timeline: tuple
    latency_ms: float
    wall_s: float


def resolve_policies(spec: str, flag: str = "--policies") -> list[str]:
    """`all` (every baseline) or a comma-separated list of policy specs (`schedulers` module doc).
    Each is checked here, before any run: a scheduler class is imported, a learned model's file must
    exist; a bad one is a PolicyError naming it (an empty list names `flag`, the option it came in)."""
    import baselines

    names = baselines.names() if spec.strip() == "all" else [p.strip() for p in spec.split(",") if p.strip()]
    if not names:
        raise PolicyError(f"{flag} {spec!r} names no policy; valid: all, {', '.join(schedulers.names())}")
    for n in names:
        if schedulers.kind(n) != "learned":
            schedulers.scheduler_class(n)
            continue
        path = n.partition(":")[2]
        if not path:
            raise PolicyError(f"learned policy {n!r} must be KIND:PATH, e.g. maskableppo:runs/ppo.zip")
        if not Path(path).is_file():
            raise PolicyError(f"learned policy {n!r}: model file {path!r} not found")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PolicyError(f"policy listed twice: {', '.join(dup)}")
    return names


def run_one(scenario: str | Path | Scenario | dict, policy: str, seed: int) -> RunResult:
    """One policy on one seed. Module-level so process pools and Ray can ship it by reference."""
    t0 = time.perf_counter()
    if schedulers.kind(policy) == "learned":
        # imported lazily: torch and SB3 load only when a learned policy runs
        from agents.learned import run_learned

        m = run_learned(policy, scenario, seed)
    else:
        m = make_sim(scenario, seed).run(schedulers.make(policy))
    wall = time.perf_counter() - t0
    return RunResult(
        policy=policy,
        seed=seed,
        summary=m.summary(),
        jobs=[asdict(r) for r in m.jobs],
        timeline=m.timeline,
        latency_ms=m.decision_latency_ms,
        wall_s=wall,
    )


def _worker_init() -> None:
    """A pool worker takes SIGTERM as the default (an inherited handler that raises would let the
    pool catch the exception and the worker live on), leaves Ctrl-C to its parent, and exits when
    its parent dies (after a SIGKILL nobody else would stop it)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def pool_run(fn: Callable, args: list[tuple], workers: int) -> Iterator[tuple[int, Any]]:
    """(i, fn(*args[i])) for every i, as the runs finish, in a process pool of `workers` (0: one
    per core); with 1, in this process, in order. A failed run, Ctrl-C or SIGTERM terminates the
    workers at once and drops the queued runs; each worker exits by itself when its parent dies
    (`_worker_init`). `fn` must be module-level (pickled by reference). `dlcluster benchmark`
    runs its suite through it too."""
    if workers == 1:
        for i, a in enumerate(args):
            yield i, fn(*a)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    n = workers or len(os.sched_getaffinity(0))
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(max_workers=max(1, min(n, len(args))), initializer=_worker_init)
    try:
        index = {pool.submit(fn, *a): i for i, a in enumerate(args)}
        for f in as_completed(index):
            yield index[f], f.result()
    except BaseException:  # a failed run, Ctrl-C or SIGTERM: runs in progress are not waited for
        procs = set(multiprocessing.active_children()) - before
        for proc in procs:
            proc.terminate()
        for proc in procs:  # a worker forked but not yet in _worker_init still has our handler,
            proc.join(1.0)  # which SIGTERM only makes raise: then shutdown would wait on it
            if proc.is_alive():
                proc.kill()
        raise
    finally:  # queued runs are dropped, not run to completion
        pool.shutdown(wait=True, cancel_futures=True)


def _run_local(scenario, tasks: list[tuple[str, int]], workers: int) -> Iterator[RunResult]:
    """A process pool (one per core by default); one worker runs in this process instead."""
    for _, r in pool_run(run_one, [(scenario, p, s) for p, s in tasks], workers):
        yield r


def _run_ray(scenario, tasks: list[tuple[str, int]], workers: int, address: str | None) -> Iterator[RunResult]:
    """One Ray task per run. Uses a Ray session already open in this process, else connects to
    `address` or starts a local one (`workers` CPUs, 0 = all) and shuts it down afterwards. Nodes
    of a remote cluster need this package installed (same version) to import `run_one`."""
    import logging

    try:
        import ray
    except ImportError:
        raise EvaluateError("--backend ray needs Ray: pip install 'dlclusterenv[ray]'") from None
    started = not ray.is_initialized()
    main = threading.current_thread() is threading.main_thread()
    own = signal.getsignal(signal.SIGTERM)
    raised: list[BaseException] = []  # what our SIGTERM handler raised inside a Ray call
    if started:
        ray.init(
            address=address,
            num_cpus=(workers or None) if address is None else None,
            include_dashboard=False,
            logging_level=logging.WARNING,
            configure_logging=True,
        )
        # ray.init puts its own SIGTERM handler (sys.exit(15)) in place of ours, under which
        # `dlcluster` unwinds with 143 through the shutdown below
        if main:
            signal.signal(signal.SIGTERM, _noting(own, raised) if callable(own) else own)
    pending: list = []
    try:
        remote = ray.remote(num_cpus=1)(run_one)
        pending = [remote.remote(scenario, p, s) for p, s in tasks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    except SystemExit:  # Ray turns what a signal handler raised during its calls into exit 1
        if raised:
            raise raised[0] from None
        raise
    finally:  # a failed run stops the sweep
        for ref in pending:
            ray.cancel(ref)
        if started:
            ray.shutdown()
            if main:
                signal.signal(signal.SIGTERM, own)


def _noting(handler: Callable, raised: list[BaseException]) -> Callable:
    """`handler`, keeping what it raises in `raised`."""

    def noted(signum, frame):
        try:
            handler(signum, frame)
        except BaseException as e:
            raised.append(e)
            raise

    return noted


def _tasks(policies: list[str], seeds: int, first_seed: int) -> list[tuple[str, int]]:
    """(policy, seed) of every run, in policy x seed order (the order of the CSV rows)."""
    return [(p, s) for p in policies for s in range(first_seed, first_seed + seeds)]


def check_sweep_args(seeds: int, first_seed: int, workers: int, backend: str, ray_address: str | None) -> None:
    """The sweep's arguments, checked before `evaluate` touches --out: a bad one must not cost
    the runs saved there (they were deleted first, then --seeds 0 was refused)."""
    if seeds < 1:
        raise EvaluateError(f"--seeds must be at least 1, got {seeds}")
    if first_seed < 0:
        raise EvaluateError(f"--first-seed must be 0 or more, got {first_seed}")
    if workers < 0:
        raise EvaluateError(f"--workers must be 0 (one per core) or more, got {workers}")
    if backend not in BACKENDS:
        raise EvaluateError(f"--backend {backend!r}: valid: {', '.join(BACKENDS)}")
    if ray_address is not None and backend != "ray":
        raise EvaluateError(f"--ray-address {ray_address} is for --backend ray, not {backend}: add "
                            "--backend ray or leave --ray-address out")


def sweep(
    scenario, policies: list[str], seeds: int, *, workers: int = 0, backend: str = "local",
    ray_address: str | None = None, progress: bool = True, first_seed: int = 0,
    done: dict[tuple[str, int], RunResult] | None = None,
    on_result: Callable[[RunResult], None] | None = None,
) -> list[RunResult]:
    """Every policy x seed (seeds first_seed..first_seed+seeds-1), in policy x seed order. Runs in
    `done` are not run again; `on_result` gets each new run as it finishes."""
    check_sweep_args(seeds, first_seed, workers, backend, ray_address)
    tasks = _tasks(policies, seeds, first_seed)
    done = {t: r for t, r in (done or {}).items() if t in tasks}
    todo = [t for t in tasks if t not in done]
    runs = (_run_ray(scenario, todo, workers, ray_address) if backend == "ray"
            else _run_local(scenario, todo, workers)) if todo else iter(())
    from tqdm import tqdm

    # runs done out of total, elapsed and remaining time (tqdm's estimate), on stderr
    with tqdm(total=len(tasks), initial=len(done), desc="runs", unit="run", file=sys.stderr,
              disable=not progress) as bar:
        for r in runs:
            done[(r.policy, r.seed)] = r
            if on_result is not None:
                on_result(r)
            bar.update()
    return [done[t] for t in tasks]


PER_RUN = "per_run"


def _run_file(out: Path, policy: str, seed: int) -> Path:
    """Where one run is saved; a learned policy's KIND:PATH is quoted into one file name."""
    return out / PER_RUN / f"{urllib.parse.quote(policy, safe='')}.seed{seed}.json"


def _plain(x: Any) -> Any:
    """numpy scalars as Python numbers, for JSON."""
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"cannot save {type(x).__name__} in a run file")


def run_key(sc: Scenario) -> str:
    """What a saved run must match to be resumed: the scenario as it resolves (every field) and,
    for a trace replay, the SHA-256 of the trace file's content, so a file edited or replaced
    between run and resume is noticed, while the same bytes written again (a data folder
    re-created between sessions: new mtime) still resume. The hash is read once per process and
    file version (`config.file_digest`, cached by resolved path, size and mtime_ns), so a
    multi-GB trace costs one read, not one per run."""
    key = sc.model_dump_json()
    t = sc.workload.trace
    if t is None:
        return key
    path = data_path(t.path).resolve()  # one file, one key, from whichever checkout it is read
    return f"{key}\ntrace file {path}: sha256 {file_digest(path)}"


ENGINE = Path(__file__).resolve().parent  # the dlclusterenv package: the simulator, speed model, envs


def policy_key(policy: str) -> str:
    """What a run depends on beyond its scenario, seed and spec string: the source code that
    decides it and, for a learned `KIND:PATH`, the files it is loaded from (the model file and the
    `config.yaml` beside it that names its env, `agents.learned.parse_spec`), each by the SHA-256
    of its content, read on every call (a model file is small: ~0.5 MB, 7 ms with its config on the
    loaded shared cores; a retrained model can have the old one's size and even mtime, and a copy
    in another checkout is still the same policy).

    Code: the policy's own module (a baseline's file in baselines/, `baselines/fixed.py` for the
    constants, your scheduler's file, `agents/learned.py` for a learned policy) with the modules
    of its package it imports (`_package_imports`), and every .py file of the dlclusterenv
    package (`ENGINE`: the engine and its envs). So an interrupted run resumes on the same code
    and anything else reruns; a change anywhere in the engine reruns every policy (which of its
    files a run reaches is not traced). Not covered: installed libraries (numpy, scipy, torch)
    and data files the scenario names (model zoo, profiles). Files are named relative to their
    package's folder, so two checkouts of the same code agree."""
    lines = []
    if schedulers.kind(policy) == "learned":
        model = Path(policy.partition(":")[2])
        for what, f in (("model file", model), ("model config", model.parent / "config.yaml")):
            digest = hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else "absent"
            lines.append(f"\n{what} {f}: sha256 {digest}")
    files = _package_imports(_policy_module(policy))
    lines.append(f"\npolicy code {', '.join(name for name, _ in files)}: sha256 {_digest(files)}")
    lines.append(f"\nengine code {ENGINE.name}: sha256 {_digest(_package_files(ENGINE))}")
    return "".join(lines)


def _policy_module(policy: str) -> Path:
    """The file of the module that defines the policy's decisions."""
    from baselines import fixed

    if schedulers.kind(policy) == "learned":
        import agents  # the package alone: agents.learned would import torch

        return Path(agents.__file__).parent / "learned.py"
    if policy.startswith(fixed.PREFIX):
        return Path(fixed.__file__)
    return Path(sys.modules[schedulers.scheduler_class(policy).__module__].__file__)


def _package_imports(module: Path) -> list[tuple[str, Path]]:
    """(name, file) of `module` and of every module of its top-level package it imports, directly
    or through another, by its import statements (`from .fifo import FIFO`,
    `from baselines.k8s_default import ...`); names are relative to the package's parent folder.
    A file in no package is itself alone. Cached while none of the files found changes (stamp),
    since a benchmark keys every run by it."""
    module = module.resolve()
    hit = _IMPORTS.get(module)
    if hit is not None and all(file_stamp(f) == st for f, st in hit[0]):
        return hit[1]
    found = _scan_imports(module)
    _IMPORTS[module] = (tuple((f, file_stamp(f)) for _, f in found), found)
    return found


_IMPORTS: dict[Path, tuple[tuple, list[tuple[str, Path]]]] = {}


def _scan_imports(module: Path) -> list[tuple[str, Path]]:
    """`_package_imports`, uncached."""
    import ast

    top = module.parent
    while (top / "__init__.py").is_file() and (top.parent / "__init__.py").is_file():
        top = top.parent
    if not (top / "__init__.py").is_file():
        return [(module.name, module)]

    def find(parts: list[str]) -> list[Path]:
        base = top.parent.joinpath(*parts)
        return [f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()]

    seen, todo = {module}, [module]
    while todo:
        f = todo.pop()
        here = list(f.relative_to(top.parent).parent.parts)  # the package f is in
        for node in ast.walk(ast.parse(f.read_bytes(), str(f))):
            found: list[Path] = []
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == top.name:
                        found += find(a.name.split("."))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    pkg = here[: max(0, len(here) - node.level + 1)]
                elif node.module and node.module.split(".")[0] == top.name:
                    pkg = []
                else:
                    continue
                parts = pkg + (node.module.split(".") if node.module else [])
                found += find(parts)
                for a in node.names:  # `from . import fifo`: a module, not a name
                    found += find([*parts, a.name])[:1]
            for g in found:
                if g.resolve().is_relative_to(top) and g.resolve() not in seen:
                    seen.add(g.resolve())
                    todo.append(g.resolve())
    return sorted((g.relative_to(top.parent).as_posix(), g) for g in seen)


@functools.cache
def _package_files(root: Path) -> list[tuple[str, Path]]:
    """(name, file) of every .py file of the package folder `root`, listed once per process (a file
    added later is not imported by this process either)."""
    root = root.resolve()
    return [(p.relative_to(root.parent).as_posix(), p) for p in sorted(root.rglob("*.py"))]


def _digest(files: list[tuple[str, Path]]) -> str:
    """One SHA-256 over (name, content hash) of each file (resolved paths); cached while no file's
    stamp changes, since a benchmark keys every run by it (1.1 ms a key uncached)."""
    key = tuple((name, f, file_stamp(f)) for name, f in files)
    if key not in _DIGESTED:
        h = hashlib.sha256()
        for name, f in files:
            h.update(f"{name} {file_digest(f)}\n".encode())
        if len(_DIGESTED) >= 64:
            del _DIGESTED[next(iter(_DIGESTED))]  # oldest first
        _DIGESTED[key] = h.hexdigest()
    return _DIGESTED[key]


_DIGESTED: dict[tuple, str] = {}


_OLD_TRACE_KEY = re.compile(r"trace file .*: \d+ bytes, mtime_ns \d+")


def _changed(saved: str, now: str) -> str:
    """Why a saved run's key `saved` is not `now` (keys of `run_key` + `policy_key`, one fact a line)."""
    if saved.partition("\n")[0] != now.partition("\n")[0]:
        return "was run on another scenario"
    old = set(saved.split("\n"))
    if any(_OLD_TRACE_KEY.fullmatch(line) for line in old):
        return ("was saved by an older version, which keyed the trace file by its size and mtime, "
                "not its content: stale")
    new = [line for line in now.split("\n")[1:] if line not in old]
    if not new:
        return "was run with other inputs"
    what = " ".join(new[0].split(" ", 2)[:2])  # "trace file", "model file", "policy code", ...
    if not any(line.startswith(what + " ") for line in old):  # saved before runs were keyed by it
        return f"was saved with no record of its {what} (by an older version; now: {new[0]})"
    return f"was run on another version of the {what} (now: {new[0]})"


def save_run(out: Path, r: RunResult, fingerprint: str) -> None:
    """One finished run as JSON, atomically. JSON writes floats in their shortest exact form
    (and inf/nan), so a loaded run gives the CSVs the same bytes as the run itself."""
    data = {"scenario": fingerprint, **asdict(r)}
    text = json.dumps(data, default=_plain)
    atomic_write(_run_file(out, r.policy, r.seed), lambda tmp: tmp.write_text(text))


def load_runs(out: Path, tasks: list[tuple[str, int]], keys: dict[str, str]) -> dict[tuple[str, int], RunResult]:
    """The saved runs among `tasks`; one saved under another key than its policy's in `keys` (another
    scenario, trace file or model file) is an EvaluateError naming what changed."""
    done = {}
    for policy, seed in tasks:
        path = _run_file(out, policy, seed)
        if not path.exists():
            continue
        try:
            data = json.loads(path.read_text())
            saved = data.pop("scenario")
            if saved != keys[policy]:
                why = _changed(saved, keys[policy])
                raise EvaluateError(f"--resume: {path} {why}; remove it or choose another --out")
            data["timeline"] = tuple(tuple(row) for row in data["timeline"])
            done[(policy, seed)] = RunResult(**data)
        except EvaluateError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise EvaluateError(f"--resume: {path}: not a saved run ({exc}); remove it") from None
    return done


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` fills a temporary file beside `path`, which then replaces `path` in one rename.
    On any error the temporary file is removed and `path` keeps its old content."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """Rows (all with `columns`, default the first row's keys, in that order) as CSV, atomically;
    no rows give the header alone. Floats are written with repr, the shortest exact form, so equal
    results give equal bytes."""
    if columns is None:
        if not rows:
            raise ValueError(f"{path.name}: no rows, so the columns must be given")
        columns = list(rows[0])
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="raise", lineterminator="\n")
    w.writeheader()
    for i, row in enumerate(rows):
        if list(row) != columns:
            raise ValueError(f"{path.name}: row {i + 1} has columns {list(row)}, expected {columns}")
        w.writerow(row)
    atomic_write(path, lambda tmp: tmp.write_text(buf.getvalue()))


def leaderboard(results: list[RunResult], policies: list[str]) -> list[dict[str, Any]]:
    """Per policy: (mean, 95% half-width) of each BOARD metric and the unfinished job count; ranked
    by mean avg JCT (ties by name), except that policies leaving jobs unfinished rank after those
    that finish all: an unfinished job's JCT stops at the episode's end, so a policy that starts
    nothing before a truncation could otherwise look fast."""
    board = []
    for pol in policies:
        rs = [r for r in results if r.policy == pol]
        row: dict[str, Any] = {"policy": pol}
        for key, _, _ in BOARD:
            x = np.array([r.latency_ms if key == "decision_latency_ms" else r.summary[key] for r in rs], dtype=float)
            row[key] = (float(x.mean()), ci95(x))
        row["unfinished"] = sum(int(r.summary["jobs_unfinished"]) for r in rs)
        board.append(row)
    board.sort(key=lambda r: (r["unfinished"] > 0, r["avg_jct_s"][0], r["policy"]))
    return board


PERCENT = {"gpu_util"}  # fractions shown as percentages


def _fmt(mean: float, half: float, key: str = "") -> str:
    """Enough digits that a small value is not printed as 0: a utilisation of 0.0004 on a big
    idle cluster shows as 0.040%, not 0.000."""
    if key in PERCENT:
        mean, half = 100 * mean, 100 * half
        # three significant digits, at least one decimal
        digits = max(1, 2 - math.floor(math.log10(abs(mean)))) if mean else 1
        return f"{mean:.{digits}f}% ± {half:.{digits}f}%"
    digits = 0 if abs(mean) >= 100 else 2 if abs(mean) >= 1 else 3
    return f"{mean:,.{digits}f} ± {half:,.{digits}f}"


def resolve_columns(spec: str) -> tuple[str, ...]:
    """`--columns`: `default`, `all`, or a comma-separated list of BOARD keys; a bad key is an
    EvaluateError listing the valid ones."""
    if spec.strip() in ("default", "all"):
        return DEFAULT_COLUMNS if spec.strip() == "default" else COLUMNS
    cols = tuple(c.strip() for c in spec.split(",") if c.strip())
    bad = [c for c in cols if c not in COLUMNS]
    if bad or not cols:
        raise EvaluateError(f"--columns {spec!r}: unknown column {', '.join(bad) or '(none given)'}; "
                            f"valid: default, all, {', '.join(COLUMNS)}")
    return cols


def print_leaderboard(board: list[dict[str, Any]], title: str = "", console=None,
                      columns: tuple[str, ...] = DEFAULT_COLUMNS) -> None:
    """A rich table of `columns` (rank, policy and unfinished always), each metric's best mean in
    bold. Only policies that finish every job compete for "best": an unfinished job's metrics stop
    at the episode's end, so a policy that starts nothing would win Jain, traffic and latency.
    Rich drops the styling when the output is not a terminal (a pipe, a file), so piped output is
    plain text, laid out as wide as the table needs. Cells wrap at the "±" rather than being cut
    when a terminal is too narrow."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console() if sys.stdout.isatty() else Console(width=1000)
    spec = [next(b for b in BOARD if b[0] == c) for c in columns]  # in the order asked for
    done = [r for r in board if r["unfinished"] == 0]
    best = {key: better(r[key][0] for r in done) for key, _, better in spec} if done else {}
    if title:
        console.print(title, highlight=False)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("policy", overflow="fold")
    for _, header, _ in spec:
        table.add_column(header, justify="right", overflow="fold")
    table.add_column("unfinished", justify="right", no_wrap=True)
    for i, r in enumerate(board, 1):
        cells = [f"[bold]{_fmt(*r[k], k)}[/bold]" if r["unfinished"] == 0 and r[k][0] == best.get(k) else _fmt(*r[k], k)
                 for k, _, _ in spec]
        table.add_row(str(i), r["policy"], *cells, str(r["unfinished"]))
    console.print(table)


def evaluate(
    scenario, policies: list[str], seeds: int, out: Path, *, workers: int = 0, backend: str = "local",
    ray_address: str | None = None, progress: bool = True, first_seed: int = 0,
    resume: bool = False,
) -> list[dict[str, Any]]:
    """The sweep, each run saved as it finishes, then runs.csv, jobs.csv, timing.csv and the plots
    in `out`; returns the leaderboard. `resume` reuses the runs saved in `out`. See the module
    docstring for how `out` is held and filled."""
    check_sweep_args(seeds, first_seed, workers, backend, ray_address)
    sc = build(scenario, 0)[0]  # a bad scenario fails here, once, before any worker or Ray task starts
    key = run_key(sc)
    keys = {p: key + policy_key(p) for p in policies}  # hashed before any run reads a model
    with claim(out):
        (out / PER_RUN).mkdir(exist_ok=True)
        tasks = _tasks(policies, seeds, first_seed)
        if resume:
            done = load_runs(out, tasks, keys)
        else:
            done = {}
            for old in (out / PER_RUN).glob("*.json"):
                old.unlink()
        results = sweep(scenario, policies, seeds, workers=workers, backend=backend,
                        ray_address=ray_address, progress=progress, first_seed=first_seed,
                        done=done, on_result=lambda r: save_run(out, r, keys[r.policy]))
        board = leaderboard(results, policies)
        stage = Path(tempfile.mkdtemp(dir=out, prefix=".partial-"))
        try:
            write_csv(stage / "runs.csv", [{"policy": r.policy, "seed": r.seed, **r.summary} for r in results])
            write_csv(stage / "jobs.csv",
                      [{"policy": r.policy, "seed": r.seed, **j} for r in results for j in r.jobs],
                      ["policy", "seed", *(f.name for f in fields(JobRecord))])
            write_csv(stage / "timing.csv", [
                {"policy": r.policy, "seed": r.seed, "decision_latency_ms": r.latency_ms, "wall_s": r.wall_s}
                for r in results
            ])
            plots(stage, [r["policy"] for r in board], results, sc.name)  # bars, panels in board order
            move_all(stage, out)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return board


@contextmanager
def claim(out: Path) -> Iterator[None]:
    """Hold `out` (created if missing) for one evaluation or benchmark: an exclusive lock on the
    directory, so a second one into it (of either command: the lock does not say which holds it)
    fails at once, naming the folder. A `.partial-*` folder found there was left
    by a SIGKILLed run and is removed. If the evaluation fails, an empty `per_run` folder is
    removed, and so is `out` when this call created it and it is then empty."""
    if out.exists() and not out.is_dir():
        raise EvaluateError(f"--out {out}: exists and is not a directory")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EvaluateError(f"--out {out}: another evaluation or benchmark is writing there; wait for it to "
                                "finish or choose another --out") from None
        for stale in out.glob(".partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield
    except BaseException:
        runs = out / PER_RUN
        if runs.is_dir() and not any(runs.iterdir()):
            runs.rmdir()
        if created and not any(out.iterdir()):
            out.rmdir()
        raise
    finally:
        os.close(fd)


def move_all(stage: Path, out: Path) -> None:
    """Rename every file under `stage` to the same place under `out` (folders made as needed), with
    SIGTERM and SIGINT held back until the last rename, so a kill cannot leave files of two
    evaluations side by side. `dlcluster benchmark` commits its staged outputs with it too."""
    with signals_held():
        for src in sorted(p for p in stage.rglob("*") if p.is_file()):
            dst = out / src.relative_to(stage)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT are held back inside and delivered, to the handlers there were before,
    when it ends: a Ctrl-C in the block raises KeyboardInterrupt only after its last statement.
    In the main thread by swapping the Python handlers for ones that note the signal (a signal mask
    would not do: the kernel may hand a process-directed signal to another thread, e.g. tqdm's
    monitor, and Python still runs the handler in the main thread); elsewhere, where handlers
    cannot be set, by the thread's signal mask. Nests."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread():
        held = signal.pthread_sigmask(signal.SIG_BLOCK, set(sigs))
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return
    caught: list[int] = []
    before = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in sigs}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        order = list(dict.fromkeys(caught))  # each once, in the order they came
        for i, s in enumerate(order):
            handler = before[s]
            if handler == signal.SIG_IGN:
                continue
            if not callable(handler):  # SIG_DFL: the default action (SIGTERM ends the process)
                signal.raise_signal(s)
                continue
            # called here, not raised again: the handler runs in this frame, whatever the thread's
            # signal mask, and a raising handler no longer drops the signals held after it
            try:
                handler(s, sys._getframe())
            except BaseException:
                for rest in order[i + 1:]:  # still delivered, as signals, after this one
                    signal.raise_signal(rest)
                raise


def plots(out: Path, policies: list[str], results: list[RunResult], scenario: str = "") -> None:
    """Every plot of dlclusterenv.plots.figures as out/<name>.png."""
    import matplotlib.pyplot as plt

    for name, fig in figures(policies, results, scenario).items():
        atomic_write(out / f"{name}.png", lambda tmp, fig=fig: fig.savefig(tmp, dpi=100, format="png"))
        plt.close(fig)

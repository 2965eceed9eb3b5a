"""The main job: every policy x seed on one scenario, a leaderboard, CSVs and plots.

Fairness: a run is a pure function of (scenario, policy, seed). Jobs, arrival times and noise come
from the scenario and the seed only (`workload.build`), so every policy sees the same workload.

Determinism: `runs.csv` and `jobs.csv` hold simulated quantities only and are assembled in policy x
seed order, so the same command gives byte-identical files whichever run finishes first, however
many workers, and on either backend (local processes or Ray). Wall-clock quantities (mean decision
latency, run wall time) cannot repeat by nature, so they go to a separate `timing.csv` and to the
leaderboard, never into `runs.csv`.

Policies: a baseline name (`baselines.REGISTRY`), or a learned-policy spec `KIND:PATH` (e.g.
`maskableppo:runs/ppo.zip`) dispatched to `agents.learned.run_learned(spec, scenario, seed)`.

Output: one run owns `--out` while it runs (a lock on the directory): a second run into it is
refused with an EvaluateError at once, not interleaved with the first. Nothing is written until
every run is done; then all files are written into a hidden `.partial-*` folder in `out` and
renamed into place together, with SIGTERM and SIGINT held back for the renames, so `out` holds
every file of one evaluation or the previous contents, never a mix. A failed or killed run removes
its partial folder (a SIGKILLed one leaves it hidden, for the next run into `out` to remove) and
the `out` directory if it created it.

Workers: the local backend's pool workers are terminated when the sweep stops early (a failed
run, Ctrl-C, or SIGTERM, which `dlcluster` turns into an exit that unwinds), and each worker exits
by itself within a second of its parent's death (SIGKILL), so no sweep work outlives the command.
"""

from __future__ import annotations

import csv
import fcntl
import io
import math
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from . import make_sim
from .metrics import JobRecord
from .workload import Scenario, build

BACKENDS = ("local", "ray")

# Leaderboard columns: key, header, which mean is best. avg JCT ranks the policies.
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


class EvaluateError(ValueError):
    """A bad evaluate argument; the message names it."""


class PolicyError(EvaluateError):
    """A bad --policies entry; the message lists the valid names."""


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


def is_learned(name: str) -> bool:
    return ":" in name


def resolve_policies(spec: str) -> list[str]:
    """`all` (every baseline) or a comma-separated list of baseline names and `KIND:PATH` specs."""
    import baselines

    names = baselines.names() if spec.strip() == "all" else [p.strip() for p in spec.split(",") if p.strip()]
    if not names:
        raise PolicyError(f"--policies {spec!r} names no policy; valid: all, {', '.join(baselines.names())}")
    for n in names:
        if is_learned(n):
            kind, _, path = n.partition(":")
            if not kind or not path:
                raise PolicyError(f"learned policy {n!r} must be KIND:PATH, e.g. maskableppo:runs/ppo.zip")
        elif n not in baselines.REGISTRY:
            raise PolicyError(
                f"unknown policy {n!r}; valid: {', '.join(baselines.names())} (or KIND:PATH for a learned policy)"
            )
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PolicyError(f"policy listed twice: {', '.join(dup)}")
    return names


def run_one(scenario: str | Path | Scenario | dict, policy: str, seed: int) -> RunResult:
    """One policy on one seed. Module-level so process pools and Ray can ship it by reference."""
    t0 = time.perf_counter()
    if is_learned(policy):
        # imported lazily: torch and SB3 load only when a learned policy runs
        from agents.learned import run_learned

        m = run_learned(policy, scenario, seed)
    else:
        import baselines

        m = make_sim(scenario, seed).run(baselines.make(policy))
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


def _run_local(scenario, tasks: list[tuple[str, int]], workers: int) -> Iterator[RunResult]:
    """A process pool (one per core by default); one worker runs in this process instead."""
    if workers == 1:
        for p, s in tasks:
            yield run_one(scenario, p, s)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    n = workers or len(os.sched_getaffinity(0))
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(max_workers=min(n, len(tasks)), initializer=_worker_init)
    try:
        for f in as_completed([pool.submit(run_one, scenario, p, s) for p, s in tasks]):
            yield f.result()
    except BaseException:  # a failed run, Ctrl-C or SIGTERM: runs in progress are not waited for
        for proc in set(multiprocessing.active_children()) - before:
            proc.terminate()
        raise
    finally:  # queued runs are dropped, not run to completion
        pool.shutdown(wait=True, cancel_futures=True)


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


def sweep(
    scenario, policies: list[str], seeds: int, *, workers: int = 0, backend: str = "local",
    ray_address: str | None = None, progress: bool = True, first_seed: int = 0,
) -> list[RunResult]:
    """Every policy x seed (seeds first_seed..first_seed+seeds-1), in policy x seed order."""
    if seeds < 1:
        raise EvaluateError(f"--seeds must be at least 1, got {seeds}")
    if first_seed < 0:
        raise EvaluateError(f"--first-seed must be 0 or more, got {first_seed}")
    if workers < 0:
        raise EvaluateError(f"--workers must be 0 (one per core) or more, got {workers}")
    if backend not in BACKENDS:
        raise EvaluateError(f"--backend {backend!r}: valid: {', '.join(BACKENDS)}")
    tasks = [(p, s) for p in policies for s in range(first_seed, first_seed + seeds)]
    runs = _run_ray(scenario, tasks, workers, ray_address) if backend == "ray" else _run_local(scenario, tasks, workers)
    done: dict[tuple[str, int], RunResult] = {}
    from tqdm import tqdm

    # runs done out of total, elapsed and remaining time (tqdm's estimate), on stderr
    with tqdm(total=len(tasks), desc="runs", unit="run", file=sys.stderr, disable=not progress) as bar:
        for r in runs:
            done[(r.policy, r.seed)] = r
            bar.update()
    return [done[t] for t in tasks]


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


def ci95(x: np.ndarray) -> float:
    """Half-width of the 95% interval of the mean over seeds (Student t; 0 for one seed): with 3
    seeds the normal approximation would understate it by a factor of 2.2."""
    from scipy.stats import t

    n = len(x)
    return float(t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0


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


def _fmt(mean: float, half: float) -> str:
    digits = 0 if abs(mean) >= 100 else 2 if abs(mean) >= 1 else 3
    return f"{mean:,.{digits}f} ± {half:,.{digits}f}"


def print_leaderboard(board: list[dict[str, Any]], title: str = "", console=None) -> None:
    """A rich table, each metric's best mean in bold. Rich drops the styling when the output is not a
    terminal (a pipe, a file), so piped output is plain text; there it is laid out 200 wide."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console() if sys.stdout.isatty() else Console(width=200)
    best = {key: better(r[key][0] for r in board) for key, _, better in BOARD}
    if title:
        console.print(title, highlight=False)
    table = Table()
    table.add_column("rank", justify="right")
    table.add_column("policy", no_wrap=True)
    for _, header, _ in BOARD:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("unfinished", justify="right")
    for i, r in enumerate(board, 1):
        cells = [f"[bold]{_fmt(*r[k])}[/bold]" if r[k][0] == best[k] else _fmt(*r[k]) for k, _, _ in BOARD]
        table.add_row(str(i), r["policy"], *cells, str(r["unfinished"]))
    console.print(table)


def evaluate(
    scenario, policies: list[str], seeds: int, out: Path, *, workers: int = 0, backend: str = "local",
    ray_address: str | None = None, progress: bool = True, first_seed: int = 0,
) -> list[dict[str, Any]]:
    """The sweep, then runs.csv, jobs.csv, timing.csv and the plots in `out`; returns the leaderboard.
    See the module docstring for how `out` is held and filled."""
    build(scenario, 0)  # a bad scenario fails here, once, before any worker or Ray task starts
    with claim(out):
        results = sweep(scenario, policies, seeds, workers=workers, backend=backend,
                        ray_address=ray_address, progress=progress, first_seed=first_seed)
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
            plots(stage, [r["policy"] for r in board], results)  # bars and legends in leaderboard order
            _move_all(stage, out)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return board


@contextmanager
def claim(out: Path) -> Iterator[None]:
    """Hold `out` (created if missing) for one evaluation: an exclusive lock on the directory, so a
    second evaluation into it fails at once, naming it. A `.partial-*` folder found there was left
    by a SIGKILLed run and is removed. If the evaluation fails, `out` is removed again when this
    call created it and it is still empty."""
    if out.exists() and not out.is_dir():
        raise EvaluateError(f"--out {out}: exists and is not a directory")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EvaluateError(f"--out {out}: another evaluation is writing there; wait for it to "
                                "finish or choose another --out") from None
        for stale in out.glob(".partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield
    except BaseException:
        if created and not any(out.iterdir()):
            out.rmdir()
        raise
    finally:
        os.close(fd)


def _move_all(stage: Path, out: Path) -> None:
    """Rename every file of `stage` into `out`, with SIGTERM and SIGINT held back until the last
    rename, so a kill cannot leave files of two evaluations side by side."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        for name in sorted(os.listdir(stage)):
            os.replace(stage / name, out / name)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _save(fig, out: Path, name: str) -> None:
    atomic_write(out / f"{name}.png", lambda tmp: fig.savefig(tmp, dpi=100, format="png"))


def plots(out: Path, policies: list[str], results: list[RunResult]) -> None:
    """jct.png (CDF and bars of avg JCT and makespan with 95% intervals), utilisation.png (GPU use
    over time, seed 0), traffic.png (cross-node / cross-rack GB), locality.png (data-local,
    rack-local, off-switch fractions)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def per(key: str, scale: float = 1.0):
        xs = [np.array([r.summary[key] for r in results if r.policy == p], dtype=float) / scale for p in policies]
        return [x.mean() for x in xs], [ci95(x) for x in xs]

    plt.rcParams["axes.prop_cycle"] = plt.cycler(color=plt.cm.tab20.colors)  # 16+ policies
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.5))
    for pol in policies:
        x = np.sort([j["jct_s"] for r in results if r.policy == pol for j in r.jobs])
        a.plot(x / 3600, np.arange(1, len(x) + 1) / max(len(x), 1), label=pol)
    a.set(xlabel="JCT (h)", ylabel="CDF of jobs", title="Job completion time")
    a.legend(fontsize=7)
    for ax, key, title in ((b, "avg_jct_s", "Average JCT (h)"), (c, "makespan_s", "Makespan (h)")):
        m, e = per(key, 3600)
        ax.bar(policies, m, yerr=e, capsize=3)
        ax.set(title=f"{title}, 95% interval over seeds")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
    fig.tight_layout()
    _save(fig, out, "jct")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    for r in results:
        if r.seed == 0 and r.timeline:
            tl = np.array(r.timeline)
            ax.step(tl[:, 0] / 3600, tl[:, 2], where="post", label=r.policy, lw=1)
    ax.set(xlabel="time (h)", ylabel="GPUs busy (fraction)", title="GPU utilisation, seed 0")
    if ax.get_legend_handles_labels()[0]:  # no lines without jobs
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    _save(fig, out, "utilisation")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    x = np.arange(len(policies))
    for k, (key, label) in enumerate((("cross_node_gb", "across nodes"), ("cross_rack_gb", "across racks"))):
        m, e = per(key)
        ax.bar(x + 0.4 * k, m, 0.4, yerr=e, capsize=3, label=label)
    ax.set_xticks(x + 0.2, policies, rotation=60, fontsize=7)
    ax.set(ylabel="GB per run", title="Network traffic, 95% interval over seeds")
    ax.legend()
    fig.tight_layout()
    _save(fig, out, "traffic")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    bottom = np.zeros(len(policies))
    for key, label in (("data_local_frac", "data-local"), ("rack_local_frac", "rack-local"),
                       ("off_switch_frac", "off-switch")):
        m, _ = per(key)
        ax.bar(policies, m, bottom=bottom, label=label)
        bottom += np.array(m)
    ax.set(ylabel="fraction of worker starts", title="Input locality (D²S Table 1 classes)")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax.legend()
    fig.tight_layout()
    _save(fig, out, "locality")
    plt.close(fig)

"""Real job traces, replayed as arrivals, and the clusters they ran on.

Every format is parsed into the same :class:`TraceJob` / :class:`TraceSet`, so the workload
generator does not care where a trace came from: a parser yields :class:`_Row` values and hands
them to :func:`_select`, which cuts the window. Formats (``TraceWindow.format`` in a scenario):

- ``philly_csv``: the condensed Philly trace of ../shared/traces (:func:`load_philly_csv`);
- ``philly_json``: Philly's original ``cluster_job_log`` (:func:`load_philly_json`);
- ``alibaba_csv``: the Alibaba GPU cluster trace 2023 pod list, ``openb_pod_list_*.csv``
  (:func:`load_alibaba_pods`); its node list, ``openb_node_list_*.csv``, becomes a cluster
  config (:func:`alibaba_cluster_config`, or a cluster YAML with a ``node_list`` key).

Three kinds of row are told apart, and each is counted:

- duplicates, exact copies of an earlier row (the condensed Philly file has 65): dropped;
- malformed rows: a :class:`TraceError` naming the file, the line (or JSON job index) and the
  field, or, with ``skip_bad_rows``, left out, counted in ``n_bad_rows_skipped`` and announced by
  a :class:`TraceWarning`;
- well-formed rows that cannot become a PS/worker job (a Philly job that never ran, a CPU-only
  pod): dropped and counted per reason in ``TraceSet.dropped``.

All counts cover the whole file, which is read and checked in full before the window is cut.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .checks import is_int, is_real
from .config import (
    CONFIG_DIR,
    ClusterConfig,
    ConfigError,
    Network,
    NodeGroup,
    NodeType,
    Overheads,
    RackGroup,
    shared_dir,
)

if TYPE_CHECKING:
    from .config import NodeListCluster

TRACE_FORMATS = ("philly_csv", "philly_json", "alibaba_csv")
PHILLY_COLUMNS = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
PHILLY_NOTE = (
    "Philly records only submit time, duration, GPU count and virtual cluster: the model, batch "
    "size, PS/worker split, CPU/memory demands and convergence of each job are synthetic and "
    "must be assigned by the replay."
)
PHILLY_JSON_NOTE = (
    "Philly's job log records submit time, attempts (run times, machines and GPUs), user and "
    "virtual cluster: the model, batch size, PS/worker split, CPU/memory demands and convergence "
    "of each job are synthetic and must be assigned by the replay."
)
ALIBABA_POD_COLUMNS = [
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
]
ALIBABA_NODE_COLUMNS = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
ALIBABA_NOTE = (
    "The Alibaba pod list records creation, scheduling and deletion times, GPU count and share, "
    "CPU/memory requests and QoS class: the model, batch size, PS/worker split and convergence "
    "of each job are synthetic (the pod's own CPU/memory requests are not used: task demands come "
    "from the drawn model), and so are users (the trace has none)."
)
# GPU memory of the GPU models whose name or datasheet fixes it (NVIDIA: A10 24 GB, T4 16 GB;
# "V100M16"/"V100M32" name the memory). Others (P100 exists with 12 and 16 GB; the trace's
# anonymised "G2", "G3") come from the cluster YAML's ``node_list.gpu_memory_gb`` or stay 0 GB,
# which only means GPUs there are never packed (GPU memory is checked only when packing).
ALIBABA_GPU_MEMORY_GB = {"A10": 24.0, "T4": 16.0, "V100M16": 16.0, "V100M32": 32.0}
_TIME_FORMAT = "YYYY-MM-DD HH:MM:SS"
_MIB = 2**20 / 1e9  # GB per MiB


class TraceError(ConfigError):
    """A trace that cannot be used; the message names the file, the line and the field.

    A ConfigError (hence a ValueError): a bad trace is bad input to a scenario, reported alike.
    """


class TraceWarning(UserWarning):
    """Rows of a trace left out on request (``skip_bad_rows``): the user must hear how many."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a real trace, in seconds relative to the first submit of the selection."""

    job_id: str
    submit_s: float
    duration_s: float
    num_gpus: int
    vc: str  # Philly: virtual cluster; Alibaba: QoS class (the trace has no VCs)
    line: int  # 1-based CSV line, or 1-based position in a JSON job list
    user: str | None = None  # None: the trace does not say (the replay assigns one)
    gpu_milli: int = 1000  # thousandths of each GPU (Alibaba's gpu_milli); 1000 = whole GPUs


@dataclass(frozen=True)
class TraceSet:
    """A selected window of a trace, sorted by (submit_s, line).

    The counts cover the whole file, which is read and checked in full before the window is cut.
    """

    jobs: tuple[TraceJob, ...]
    source: str
    n_duplicates_dropped: int
    n_bad_rows_skipped: int
    synthetic_note: str
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> well-formed rows left out
    n_rows: int = 0  # replayable rows in the whole file, before the window was cut

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)

    def report(self) -> str:
        """One line for the terminal: what was selected and everything that was left out."""
        parts = [f"{len(self):,} jobs selected"]
        if self.n_rows > len(self):
            parts.append(f"{self.n_rows - len(self):,} outside the window (vc, start, end, first_n)")
        if self.n_bad_rows_skipped:
            parts.append(f"{self.n_bad_rows_skipped:,} malformed rows skipped")
        if self.n_duplicates_dropped:
            parts.append(f"{self.n_duplicates_dropped:,} duplicate rows dropped")
        parts += [f"{n:,} {reason}" for reason, n in self.dropped.items()]
        return f"trace {self.source}: " + "; ".join(parts)


class _Row(NamedTuple):
    """A valid row before windowing; a tuple so that rows sort by (submit, line) as they are."""

    submit: float  # absolute seconds; only differences matter
    line: int
    duration: float
    num_gpus: int
    vc: str
    name: str = ""  # the trace's own job id, if it has one
    user: str | None = None
    gpu_milli: int = 1000


def data_path(path: str | Path) -> Path:
    """A data file named in a config: absolute, or relative to the repository root (where
    ``configs/`` is), so a scenario means the same file from whatever directory it is run; a path
    under ``../shared/`` is under :func:`shared_dir` (``$DLCLUSTER_SHARED`` where set), as the
    profiles are."""
    path = Path(path)
    if path.is_absolute():
        return path
    if path.parts[:2] == ("..", "shared"):
        return shared_dir().joinpath(*path.parts[2:])
    return CONFIG_DIR.parent / path


def _warn_skipped(path: Path, n_bad: int) -> None:
    if n_bad:
        warnings.warn(f"{path}: skipped {n_bad:,} malformed rows (skip_bad_rows)", TraceWarning,
                      stacklevel=3)


def _utf8_error(path: Path) -> str:
    """Where a file stops being UTF-8: its line and byte offset in the whole file (a decoder's
    own position counts from the start of the chunk it was reading, not of the file)."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        return (f"{path}:{line}: not UTF-8: byte 0x{data[exc.start]:02x} at byte offset "
                f"{exc.start:,} of the file (byte {col + 1} of line {line}): {exc.reason}")
    return f"{path}: not UTF-8"  # the file changed while it was read


_EPOCH = datetime(1970, 1, 1)


def parse_time(text: str) -> float:
    """Seconds since 1970 of a naive "YYYY-MM-DD[ HH:MM:SS]" time (only differences matter).

    The separators are checked first because ``fromisoformat`` also takes week dates and offsets.
    """
    n = len(text)
    if not (
        n in (10, 19) and text[4] == text[7] == "-"
        and (n == 10 or (text[10] == " " and text[13] == text[16] == ":"))
    ):
        raise ValueError(f"expected {_TIME_FORMAT}, got {text!r}")
    try:
        return (datetime.fromisoformat(text) - _EPOCH).total_seconds()
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid time: {exc}") from None


def check_time(key: str, value: str | float) -> None:
    """A window bound given as text must be a time `parse_time` reads (the error names `key`);
    seconds pass as they are."""
    if isinstance(value, str):
        try:
            parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None


def _parse_philly_row(row: list[str]) -> tuple[float, float, int, str]:
    """(submit, duration, num_gpus, vc) of one CSV row; ValueError("field: why") if malformed.

    Tries the plain conversion first (the trace is large and clean) and only diagnoses a row,
    field by field, when that fails.
    """
    try:
        timestamp, duration_s, num_gpus_s, gpu_time_s, cluster = row
        submit = parse_time(timestamp.strip())
        duration, num_gpus, gpu_time = float(duration_s), int(num_gpus_s), float(gpu_time_s)
        cluster = cluster.strip()
        if (
            num_gpus >= 1 and 0 <= duration < math.inf and cluster
            and math.isclose(gpu_time, duration * num_gpus, rel_tol=1e-6, abs_tol=1e-6)
        ):
            return submit, duration, num_gpus, cluster
    except ValueError:
        pass
    raise ValueError(_diagnose_philly_row(row))


def _diagnose_philly_row(row: list[str]) -> str:
    """The "field: why" message for the first problem of a row that failed to parse."""
    if len(row) != len(PHILLY_COLUMNS):
        expected = f"{len(PHILLY_COLUMNS)} ({','.join(PHILLY_COLUMNS)})"
        return f"fields: expected {expected}, got {len(row)}"
    values = dict(zip(PHILLY_COLUMNS, (cell.strip() for cell in row)))
    for name, text in values.items():
        if not text:
            return f"{name}: missing value"
    try:
        parse_time(values["timestamp"])
    except ValueError as exc:
        return f"timestamp: {exc}"
    numbers = {}
    # in column order, except that gpu_time, which follows from the other two, comes last: a row of
    # -2 GPUs and -20 GPU-seconds is the GPU count's fault
    for key in ("duration", "num_gpus", "gpu_time"):
        text = values[key]
        try:
            numbers[key] = int(text) if key == "num_gpus" else float(text)
        except ValueError:
            return f"{key}: not {'an integer' if key == 'num_gpus' else 'a number'}: {text!r}"
        if key == "num_gpus" and numbers[key] < 1:
            return f"num_gpus: must be >= 1, got {numbers[key]}"
        if key != "num_gpus" and not 0 <= numbers[key] < math.inf:
            return f"{key}: must be finite and >= 0, got {text!r}"
    expected = numbers["duration"] * numbers["num_gpus"]
    return f"gpu_time: {numbers['gpu_time']} != duration * num_gpus = {expected}"


def _window_bound(
    value: str | float | None, origin: float, name: str, dates: bool = True
) -> float | None:
    """An absolute time from a "YYYY-MM-DD[ HH:MM:SS]" string or seconds after ``origin``.

    ``dates=False`` for traces whose times are bare seconds (Alibaba), where a date means nothing.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if not dates:
            raise ValueError(f"{name}: this trace's times are seconds, not dates; give seconds "
                             f"after its first submit, got {value!r}")
        try:
            return parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    if not is_real(value):
        raise ValueError(f"{name}: expected a date string or seconds from the trace start, "
                         f"got {value!r}")
    return origin + float(value)


def _select(
    rows: list[_Row],
    *,
    source: Path,
    prefix: str,
    vc: str | None,
    start: str | float | None,
    end: str | float | None,
    first_n: int | None,
    time_scale: float,
    n_duplicates: int,
    n_bad: int,
    note: str,
    dropped: Counter | None = None,
    dates: bool = True,
    vc_label: str = "VCs",
) -> TraceSet:
    """Cut the window [start, end) of one VC, keep the first ``first_n``, rebase and scale times.

    Numeric ``start``/``end`` count from the first submit in the whole file, so a window means the
    same wall-clock span whatever VC is selected.
    """
    if not (is_real(time_scale) and time_scale > 0):  # True was taken as a scale of 1
        raise ValueError(f"time_scale: must be a finite number > 0, got {time_scale!r}")
    if first_n is not None and not (is_int(first_n) and first_n >= 0):
        raise ValueError(f"first_n: must be an integer >= 0, got {first_n!r}")
    if vc is not None and not any(r.vc == vc for r in rows):
        known = ", ".join(sorted({r.vc for r in rows}))
        raise ValueError(f"vc: {vc!r} not in {source} ({vc_label}: {known})")
    origin = min((r.submit for r in rows), default=0.0)
    lo = _window_bound(start, origin, "start", dates)
    hi = _window_bound(end, origin, "end", dates)
    chosen = [
        r for r in rows
        if (vc is None or r.vc == vc) and (lo is None or r.submit >= lo)
        and (hi is None or r.submit < hi)
    ]
    chosen.sort()
    if first_n is not None:
        chosen = chosen[:first_n]
    t0 = chosen[0].submit if chosen else 0.0
    jobs = tuple(
        TraceJob(
            job_id=r.name or f"{prefix}-{r.line}",
            submit_s=(r.submit - t0) * time_scale,
            duration_s=r.duration * time_scale,
            num_gpus=r.num_gpus,
            vc=r.vc,
            line=r.line,
            user=r.user,
            gpu_milli=r.gpu_milli,
        )
        for r in chosen
    )
    dropped = dict(sorted((dropped or {}).items()))
    return TraceSet(jobs, str(source), n_duplicates, n_bad, note, dropped, n_rows=len(rows))


def load_philly_csv(
    path: str | Path,
    *,
    vc: str | None = None,
    start: str | float | None = None,
    end: str | float | None = None,
    first_n: int | None = None,
    time_scale: float = 1.0,
    skip_bad_rows: bool = False,
) -> TraceSet:
    """Load the condensed Philly trace (``timestamp,duration,num_gpus,gpu_time,cluster``).

    Exact duplicate rows are dropped (the first copy is kept) and blank lines ignored. A malformed
    row raises :class:`TraceError` naming file, line and field, or with ``skip_bad_rows`` is
    counted and left out. ``time_scale`` multiplies submit times and durations (0.5 = twice as
    fast); ``first_n`` keeps the earliest jobs after the VC and time filters. ``start`` (inclusive)
    and ``end`` (exclusive) are dates or seconds after the file's first submit; ``submit_s`` then
    counts from the first job selected.
    """
    path = Path(path)
    rows: list[_Row] = []
    seen: set[str] = set()  # rows joined into one string: strings cost the GC nothing
    n_duplicates = n_bad = 0
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = [cell.strip() for cell in next(reader, [])]
            if header != PHILLY_COLUMNS:
                raise TraceError(f"{path}:1: header: expected {','.join(PHILLY_COLUMNS)}, "
                                 f"got {','.join(header) or 'nothing'}")
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                key = "\x1f".join(row)
                if key in seen:
                    n_duplicates += 1
                    continue
                seen.add(key)
                try:
                    submit, duration, num_gpus, cluster = _parse_philly_row(row)
                except ValueError as exc:
                    if not skip_bad_rows:
                        raise TraceError(f"{path}:{line}: {exc}") from None
                    n_bad += 1
                    continue
                rows.append(_Row(submit, line, duration, num_gpus, cluster))
    except UnicodeDecodeError:
        raise TraceError(_utf8_error(path)) from None
    except (OSError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read Philly trace: {exc}") from exc
    _warn_skipped(path, n_bad)
    return _select(
        rows, source=path, prefix="philly", vc=vc, start=start, end=end, first_n=first_n,
        time_scale=time_scale, n_duplicates=n_duplicates, n_bad=n_bad, note=PHILLY_NOTE,
    )


# ----------------------------------------------------------------------------- Philly job log
def _json_time(value: object, name: str) -> float | None:
    """Seconds of a job-log time, or None where the log has no time (null, "" or "None")."""
    if value is None or value in ("", "None"):
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected a {_TIME_FORMAT} string or null, got {value!r}")
    try:
        return parse_time(value.strip())
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _json_text(job: dict, key: str) -> str:
    value = job.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key}: expected a non-empty string, got {value!r}")
    return value.strip()


def _parse_philly_job(job: object, index: int) -> _Row | str:
    """The row of one ``cluster_job_log`` entry, or the reason it cannot be replayed.

    Raises ValueError("field: why") if the entry is malformed; see :func:`load_philly_json`.
    """
    if not isinstance(job, dict):
        raise ValueError(f"expected a JSON object, got {type(job).__name__}")
    jobid, vc, user = (_json_text(job, key) for key in ("jobid", "vc", "user"))
    submit = _json_time(job.get("submitted_time"), "submitted_time")
    if submit is None:
        raise ValueError(f"submitted_time: missing (got {job.get('submitted_time')!r})")
    attempts = job.get("attempts")
    if not isinstance(attempts, list):
        raise ValueError(f"attempts: expected a list, got {attempts!r}")
    run_s, completed, gpus, running = 0.0, 0, 0, False
    for k, attempt in enumerate(attempts):
        at = f"attempts[{k}]"
        if not isinstance(attempt, dict):
            raise ValueError(f"{at}: expected a JSON object, got {attempt!r}")
        t0 = _json_time(attempt.get("start_time"), f"{at}.start_time")
        t1 = _json_time(attempt.get("end_time"), f"{at}.end_time")
        detail = attempt.get("detail")
        if not isinstance(detail, list):
            raise ValueError(f"{at}.detail: expected a list of {{ip, gpus}}, got {detail!r}")
        n = 0
        for m, machine in enumerate(detail):
            if not (isinstance(machine, dict) and isinstance(machine.get("ip"), str)
                    and isinstance(machine.get("gpus"), list)):
                raise ValueError(f"{at}.detail[{m}]: expected {{ip: str, gpus: list}}, "
                                 f"got {machine!r}")
            n += len(machine["gpus"])
        gpus = n or gpus
        if t0 is not None and t1 is not None:
            if t1 < t0:
                raise ValueError(f"{at}.end_time: {attempt['end_time']!r} is before start_time "
                                 f"{attempt['start_time']!r}")
            run_s += t1 - t0
            completed += 1
        running = t0 is not None and t1 is None
    if not attempts:
        return "jobs without attempts (never started)"
    if running:
        return "jobs still running when the log ended (length unknown)"
    if not completed:
        return "jobs without an attempt that has both start and end time"
    if not gpus:
        return "jobs without GPUs in any attempt"
    return _Row(submit, index + 1, run_s, gpus, vc, name=jobid, user=user)


def load_philly_json(
    path: str | Path,
    *,
    vc: str | None = None,
    start: str | float | None = None,
    end: str | float | None = None,
    first_n: int | None = None,
    time_scale: float = 1.0,
    skip_bad_rows: bool = False,
) -> TraceSet:
    """Load Philly's original ``cluster_job_log``: a JSON list of jobs, each with ``jobid``,
    ``vc``, ``user``, ``status``, ``submitted_time`` and ``attempts`` (``start_time``,
    ``end_time``, ``detail``: a list of ``{ip, gpus: [...]}``).

    How a job becomes one replayed run (Jeon et al., ATC'19, describe retries as attempts):

    - GPUs: those listed in the ``detail`` of the last attempt that lists any, the shape the job
      ended in (a retry may be rescheduled, but Philly retries keep the requested GPU count).
    - Duration: the sum of (end - start) over the attempts that have both times, i.e. the
      execution time without the gaps between retries, the definition the condensed
      ``philly_jobs.csv`` uses, so both Philly formats replay a job the same way.
    - A missing time (null, "" or "None", as the log writes it) means "not recorded": an attempt
      without one adds no run time. Jobs are dropped and counted (``TraceSet.dropped``) when they
      have no attempts (never started), when their last attempt has a start but no end (still
      running when the log ended, so the length is unknown), when no attempt has both times, or
      when no attempt lists a GPU. ``status`` (Pass / Killed / Failed) is not used: a killed or
      failed job occupied its GPUs as long as a passing one.
    - ``submitted_time`` is required; an attempt ending before it starts is malformed.

    Exact duplicate entries are dropped; a ``jobid`` repeated with different fields is malformed.
    A malformed entry raises :class:`TraceError` naming file, job index, jobid and field
    (``path: jobs[12] (jobid 'application_1'): attempts[0].end_time: ...``), or with
    ``skip_bad_rows`` is counted and left out. The window options are those of
    :func:`load_philly_csv`; the job id is the trace's ``jobid`` and the user is real.
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8-sig") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except UnicodeDecodeError:
        raise TraceError(_utf8_error(path)) from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read Philly job log: {exc}") from exc
    if not isinstance(data, list):
        raise TraceError(f"{path}: expected a JSON list of jobs (cluster_job_log), "
                         f"got {type(data).__name__}")
    rows: list[_Row] = []
    seen: set[str] = set()
    first_at: dict[str, int] = {}  # jobid -> index of its first entry
    dropped: Counter = Counter()
    n_duplicates = n_bad = 0
    for i, job in enumerate(data):
        key = json.dumps(job, sort_keys=True)
        if key in seen:
            n_duplicates += 1
            continue
        seen.add(key)
        try:
            parsed = _parse_philly_job(job, i)
            jobid = job["jobid"].strip()
            if jobid in first_at:
                raise ValueError(f"jobid: repeats jobs[{first_at[jobid]}] with different fields")
        except ValueError as exc:
            if not skip_bad_rows:
                jid = job.get("jobid") if isinstance(job, dict) else None
                named = f" (jobid {jid!r})" if jid is not None else ""
                raise TraceError(f"{path}: jobs[{i}]{named}: {exc}") from None
            n_bad += 1
            continue
        first_at[jobid] = i
        if isinstance(parsed, str):
            dropped[parsed] += 1
        else:
            rows.append(parsed)
    _warn_skipped(path, n_bad)
    return _select(
        rows, source=path, prefix="philly", vc=vc, start=start, end=end, first_n=first_n,
        time_scale=time_scale, n_duplicates=n_duplicates, n_bad=n_bad, note=PHILLY_JSON_NOTE,
        dropped=dropped,
    )


# ----------------------------------------------------------------------------- Alibaba 2023
def _read_named_csv(
    path: Path, columns: list[str], parse: Callable[[dict[str, str], int], object], *,
    skip_bad_rows: bool, what: str, explain_missing: Callable[[list[str]], str] | None = None,
) -> tuple[list, int, int]:
    """(parsed rows, duplicates dropped, bad rows skipped) of a CSV whose header names at least
    ``columns``, in any order. ``parse(values, line)`` gets the stripped cells by column and
    raises ValueError("field: why") for a malformed row; ``explain_missing(missing columns)``
    may add why a known kind of file lacks them."""
    results: list = []
    seen: set[str] = set()
    n_duplicates = n_bad = 0
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = [cell.strip() for cell in next(reader, [])]
            missing = [c for c in columns if c not in header]
            if missing:
                why = explain_missing(missing) if explain_missing else ""
                raise TraceError(f"{path}:1: header: missing {','.join(missing)} (expected "
                                 f"{','.join(columns)}, got {','.join(header) or 'nothing'})"
                                 + (f": {why}" if why else ""))
            at = [header.index(c) for c in columns]
            for row in reader:
                line = reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                key = "\x1f".join(row)
                if key in seen:
                    n_duplicates += 1
                    continue
                seen.add(key)
                try:
                    if len(row) != len(header):
                        raise ValueError(f"fields: expected {len(header)} "
                                         f"({','.join(header)}), got {len(row)}")
                    results.append(parse({c: row[j].strip() for c, j in zip(columns, at)}, line))
                except ValueError as exc:
                    if not skip_bad_rows:
                        raise TraceError(f"{path}:{line}: {exc}") from None
                    n_bad += 1
    except UnicodeDecodeError:
        raise TraceError(_utf8_error(path)) from None
    except (OSError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read {what}: {exc}") from exc
    _warn_skipped(path, n_bad)
    return results, n_duplicates, n_bad


def _number(values: dict[str, str], name: str, *, integer: bool = False, lo: float = 0.0,
            hi: float = math.inf) -> float:
    """A finite number in [lo, hi] from a cell; ``integer`` also accepts "8.0" but not "8.5"."""
    text = values[name]
    if not text:
        raise ValueError(f"{name}: missing value")
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"{name}: not a number: {text!r}") from None
    if not math.isfinite(x) or not lo <= x <= hi:
        raise ValueError(f"{name}: must be a finite number in [{lo:g}, {hi:g}], got {text!r}")
    if integer and x != int(x):
        raise ValueError(f"{name}: not an integer: {text!r}")
    return x


def _unique_name(values: dict[str, str], name: str, line: int, first: dict[str, int]) -> str:
    """The row's id, claimed for ``line``; called last, so a skipped bad row claims nothing."""
    text = values[name]
    if not text:
        raise ValueError(f"{name}: missing value")
    if text in first:
        raise ValueError(f"{name}: {text!r} already on line {first[text]} with different fields")
    first[text] = line
    return text


_POD_TIMES = ("creation_time", "scheduled_time", "deletion_time")


def _no_time_columns(missing: list[str]) -> str:
    """A pod list without any time column (the openb ``multigpu*`` lists record only requests)."""
    if not all(c in missing for c in _POD_TIMES):
        return ""
    return ("this pod list has no time columns (creation_time, scheduled_time, deletion_time), "
            "like the openb multigpu* lists, which record only resource requests: it has no "
            "arrivals or durations to replay; use openb_pod_list_default.csv or another list "
            "with times")


def load_alibaba_pods(
    path: str | Path,
    *,
    vc: str | None = None,
    start: float | None = None,
    end: float | None = None,
    first_n: int | None = None,
    time_scale: float = 1.0,
    skip_bad_rows: bool = False,
    fractional_gpu: str = "skip",
) -> TraceSet:
    """Load an Alibaba GPU cluster trace 2023 pod list (``openb_pod_list_*.csv``: ``name,
    cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
    deletion_time, scheduled_time``, times in seconds, ``gpu_milli`` the share of each GPU).

    How a pod becomes a job: submit = ``creation_time``, duration = ``deletion_time -
    scheduled_time`` (its run time; the queueing before ``scheduled_time`` is the simulated
    scheduler's to decide), GPUs = ``num_gpu`` (the replay makes each a worker). Left out and
    counted in ``TraceSet.dropped``: CPU-only pods (``num_gpu`` 0: no GPU job to schedule),
    pods never scheduled or never deleted (empty time: no run time). Pods with ``gpu_milli`` <
    1000: ``fractional_gpu="skip"`` (default here; a scenario's trace window shares) leaves them
    out, ``"share"`` keeps the fraction (``TraceJob.gpu_milli``; the engine shares the GPU by
    packing), ``"whole"`` rounds them up to ``num_gpu`` whole GPUs. The trace has no
    virtual clusters: ``vc`` selects a QoS class (``qos``), the trace's only partition of
    pods. ``start``/``end`` are seconds after the first ``creation_time`` in the file. The pod's
    ``cpu_milli``, ``memory_mib``, ``gpu_spec`` and ``pod_phase`` are checked but not used (task
    demands come from the model the replay draws; placement ignores GPU models).

    Malformed: a missing or non-numeric number, ``gpu_milli`` outside [0, 1000] or inconsistent
    with ``num_gpu``, ``scheduled_time`` before ``creation_time``, ``deletion_time`` before
    ``scheduled_time``, a ``name`` repeated with different fields. Exact duplicate rows and blank
    lines are dropped; errors and ``skip_bad_rows`` as in :func:`load_philly_csv`.
    """
    if fractional_gpu not in ("share", "skip", "whole"):
        raise ValueError(f"fractional_gpu: must be 'share', 'skip' or 'whole', got {fractional_gpu!r}")
    path = Path(path)
    first: dict[str, int] = {}

    def parse(v: dict[str, str], line: int) -> _Row | str:
        _number(v, "cpu_milli")
        _number(v, "memory_mib")
        num_gpu = int(_number(v, "num_gpu", integer=True))
        gpu_milli = int(_number(v, "gpu_milli", integer=True, hi=1000))
        if (num_gpu == 0) != (gpu_milli == 0):
            raise ValueError(f"gpu_milli: {gpu_milli} with num_gpu {num_gpu} (both or neither "
                             f"must be 0)")
        created = _number(v, "creation_time", lo=-math.inf)
        times = {}
        for key in ("scheduled_time", "deletion_time"):
            times[key] = _number(v, key, lo=-math.inf) if v[key] else None
        scheduled, deleted = times["scheduled_time"], times["deletion_time"]
        if scheduled is not None and scheduled < created:
            raise ValueError(f"scheduled_time: {v['scheduled_time']} is before creation_time "
                             f"{v['creation_time']}")
        if deleted is not None and deleted < (created if scheduled is None else scheduled):
            before = "creation_time" if scheduled is None else "scheduled_time"
            raise ValueError(f"deletion_time: {v['deletion_time']} is before {before} "
                             f"{v[before]}")
        name = _unique_name(v, "name", line, first)
        if num_gpu == 0:
            return "CPU-only pods"
        if gpu_milli < 1000 and fractional_gpu == "skip":
            return "fractional-GPU pods (gpu_milli < 1000)"
        if scheduled is None:
            return "pods never scheduled"
        if deleted is None:
            return "pods without deletion_time (length unknown)"
        milli = gpu_milli if fractional_gpu == "share" else 1000
        return _Row(created, line, deleted - scheduled, num_gpu, v["qos"], name=name, gpu_milli=milli)

    parsed, n_duplicates, n_bad = _read_named_csv(
        path, ALIBABA_POD_COLUMNS, parse, skip_bad_rows=skip_bad_rows, what="Alibaba pod list",
        explain_missing=_no_time_columns)
    rows = [r for r in parsed if isinstance(r, _Row)]
    dropped = Counter(r for r in parsed if isinstance(r, str))
    return _select(
        rows, source=path, prefix="pod", vc=vc, start=start, end=end, first_n=first_n,
        time_scale=time_scale, n_duplicates=n_duplicates, n_bad=n_bad, note=ALIBABA_NOTE,
        dropped=dropped, dates=False, vc_label="QoS classes",
    )


@dataclass(frozen=True)
class TraceNode:
    """One machine of a trace's node list, in the config's units (cores, GB)."""

    name: str
    cpus: float
    memory_gb: float
    gpus: int
    gpu_model: str  # "none" for a CPU-only node
    line: int


def load_alibaba_nodes(path: str | Path, *, skip_bad_rows: bool = False) -> tuple[TraceNode, ...]:
    """Load an Alibaba 2023 node list (``openb_node_list_*.csv``: ``sn, cpu_milli, memory_mib,
    gpu, model``), in file order. ``cpu_milli`` and ``memory_mib`` must be > 0; a node with GPUs
    must name its ``model`` (a CPU-only node's model is ignored); ``sn`` must be unique. Errors,
    duplicates and ``skip_bad_rows`` as in :func:`load_philly_csv`."""
    path = Path(path)
    first: dict[str, int] = {}

    def parse(v: dict[str, str], line: int) -> TraceNode:
        cpu_milli = _number(v, "cpu_milli")
        memory_mib = _number(v, "memory_mib")
        for key, x in (("cpu_milli", cpu_milli), ("memory_mib", memory_mib)):
            if x <= 0:
                raise ValueError(f"{key}: must be > 0, got {v[key]!r}")
        gpus = int(_number(v, "gpu", integer=True))
        if gpus and not v["model"]:
            raise ValueError(f"model: missing for a node with {gpus} GPUs")
        name = _unique_name(v, "sn", line, first)
        return TraceNode(name, cpu_milli / 1000, memory_mib * _MIB, gpus,
                         v["model"] if gpus else "none", line)

    nodes, _, _ = _read_named_csv(path, ALIBABA_NODE_COLUMNS, parse, skip_bad_rows=skip_bad_rows,
                                  what="Alibaba node list")
    if not nodes:
        raise TraceError(f"{path}: no nodes")
    return tuple(nodes)


def alibaba_cluster_config(
    path: str | Path,
    *,
    name: str,
    source: str,
    nodes_per_rack: int,
    nic_MBps: float,
    uplink_MBps: float,
    gpu_memory_gb: dict[str, float] | None = None,
    overheads: Overheads | None = None,
    skip_bad_rows: bool = False,
    intra_MBps: float = 0.0,
    network: Network | None = None,
) -> ClusterConfig:
    """A cluster config for the machines of an Alibaba node list.

    The node list gives cores, memory, GPU count and GPU model per machine, and nothing about
    the network: racks, NIC and uplink bandwidths are the caller's (documented) assumptions.
    Grouping rule: machines are grouped by GPU model (CPU-only machines form their own group),
    groups in order of first appearance in the file, and each group is cut, in file order, into
    racks of ``nodes_per_rack`` machines (its last rack may be smaller): homogeneous racks, as
    fleets are bought and installed a rack of one server type at a time (the same assumption as
    the ``philly`` preset). Each distinct (model, GPUs, cores, memory) is one node type.

    GPU model -> speed: the simulator has one compute speed per model of the zoo, not per GPU
    type, so ``gpu_model`` is recorded on the node types (and the topology graph) but every GPU
    computes at the zoo's speed. GPU memory (used only to decide whether two jobs can pack on a
    GPU) comes from ``gpu_memory_gb`` or :data:`ALIBABA_GPU_MEMORY_GB`, else 0 (never packed).
    Cluster node names are ``r{rack}-n{i}`` as for every preset, not the trace's ``sn``.
    """
    nodes = load_alibaba_nodes(path, skip_bad_rows=skip_bad_rows)
    memory = {**ALIBABA_GPU_MEMORY_GB, **(gpu_memory_gb or {})}
    type_of: dict[tuple, str] = {}
    node_types: dict[str, NodeType] = {}
    by_model: dict[str, list[str]] = {}  # GPU model -> node type of each machine, in file order
    for n in nodes:
        key = (n.gpu_model, n.gpus, n.cpus, n.memory_gb)
        if key not in type_of:
            type_of[key] = f"{n.gpu_model}x{n.gpus}-{len(node_types)}"
            node_types[type_of[key]] = NodeType(
                cpus=n.cpus, memory_gb=n.memory_gb, gpus=n.gpus, gpu_model=n.gpu_model,
                gpu_memory_gb=memory.get(n.gpu_model, 0.0) if n.gpus else 0.0, nic_MBps=nic_MBps,
                intra_MBps=intra_MBps,
            )
        by_model.setdefault(n.gpu_model, []).append(type_of[key])
    racks = [
        RackGroup(uplink_MBps=uplink_MBps, nodes=[
            NodeGroup(type=t, count=len(list(run)))
            for t, run in itertools.groupby(machines[i:i + nodes_per_rack])
        ])
        for machines in by_model.values()
        for i in range(0, len(machines), nodes_per_rack)
    ]
    return ClusterConfig(name=name, source=source, node_types=node_types, racks=racks,
                         overheads=overheads or Overheads(), network=network or Network())


def cluster_from_node_list(spec: NodeListCluster) -> ClusterConfig:
    """The cluster config of a cluster YAML that names a ``node_list`` instead of racks."""
    nl = spec.node_list
    return alibaba_cluster_config(
        data_path(nl.path), name=spec.name, source=spec.source, nodes_per_rack=nl.nodes_per_rack,
        nic_MBps=nl.nic_MBps, uplink_MBps=nl.uplink_MBps, gpu_memory_gb=nl.gpu_memory_gb,
        overheads=spec.overheads, skip_bad_rows=nl.skip_bad_rows, intra_MBps=nl.intra_MBps,
        network=spec.network,
    )


def load_trace(path: str | Path, format: str = "philly_csv", **window) -> TraceSet:
    """Load a trace of any format in :data:`TRACE_FORMATS` with the window options of its loader."""
    loaders = {"philly_csv": load_philly_csv, "philly_json": load_philly_json,
               "alibaba_csv": load_alibaba_pods}
    if format not in loaders:
        raise ValueError(f"format: {format!r} is not one of {', '.join(TRACE_FORMATS)}")
    return loaders[format](path, **window)

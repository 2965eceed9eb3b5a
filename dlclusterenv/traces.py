"""Real job traces, replayed as arrivals.

Every format is parsed into the same :class:`TraceJob` / :class:`TraceSet`, so the workload
generator does not care where a trace came from; a new format only needs a parser that yields
:class:`_Row` values and hands them to :func:`_select`. Only the Philly CSV is implemented now.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterator, NamedTuple

PHILLY_COLUMNS = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
PHILLY_NOTE = (
    "Philly records only submit time, duration, GPU count and virtual cluster: the model, batch "
    "size, PS/worker split, CPU/memory demands and convergence of each job are synthetic and "
    "must be assigned by the replay."
)
_TIME_FORMAT = "YYYY-MM-DD HH:MM:SS"


class TraceError(ValueError):
    """A trace that cannot be used; the message names the file, the line and the field."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a real trace, in seconds relative to the first submit of the selection."""

    job_id: str
    submit_s: float
    duration_s: float
    num_gpus: int
    vc: str
    line: int  # 1-based line in the source file


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

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)


class _Row(NamedTuple):
    """A valid row before windowing; a tuple so that rows sort by (submit, line) as they are."""

    submit: float  # absolute seconds; only differences matter
    line: int
    duration: float
    num_gpus: int
    vc: str


_EPOCH = datetime(1970, 1, 1)


def _parse_time(text: str) -> float:
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


def _parse_philly_row(row: list[str]) -> tuple[float, float, int, str]:
    """(submit, duration, num_gpus, vc) of one CSV row; ValueError("field: why") if malformed.

    Tries the plain conversion first (the trace is large and clean) and only diagnoses a row,
    field by field, when that fails.
    """
    try:
        timestamp, duration_s, num_gpus_s, gpu_time_s, cluster = row
        submit = _parse_time(timestamp.strip())
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
    for field, text in values.items():
        if not text:
            return f"{field}: missing value"
    try:
        _parse_time(values["timestamp"])
    except ValueError as exc:
        return f"timestamp: {exc}"
    numbers = {}
    for field in ("duration", "gpu_time"):
        try:
            numbers[field] = float(values[field])
        except ValueError:
            return f"{field}: not a number: {values[field]!r}"
        if not 0 <= numbers[field] < math.inf:
            return f"{field}: must be finite and >= 0, got {values[field]!r}"
    try:
        num_gpus = int(values["num_gpus"])
    except ValueError:
        return f"num_gpus: not an integer: {values['num_gpus']!r}"
    if num_gpus < 1:
        return f"num_gpus: must be >= 1, got {num_gpus}"
    expected = numbers["duration"] * num_gpus
    return f"gpu_time: {numbers['gpu_time']} != duration * num_gpus = {expected}"


def _window_bound(value: str | float | None, origin: float, name: str) -> float | None:
    """An absolute time from a "YYYY-MM-DD[ HH:MM:SS]" string or seconds after ``origin``."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return _parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
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
) -> TraceSet:
    """Cut the window [start, end) of one VC, keep the first ``first_n``, rebase and scale times.

    Numeric ``start``/``end`` count from the first submit in the whole file, so a window means the
    same wall-clock span whatever VC is selected.
    """
    if not (isinstance(time_scale, (int, float)) and math.isfinite(time_scale) and time_scale > 0):
        raise ValueError(f"time_scale: must be a finite number > 0, got {time_scale!r}")
    if first_n is not None and (isinstance(first_n, bool) or not isinstance(first_n, int)
                                or first_n < 0):
        raise ValueError(f"first_n: must be an integer >= 0, got {first_n!r}")
    if vc is not None and not any(r.vc == vc for r in rows):
        known = ", ".join(sorted({r.vc for r in rows}))
        raise ValueError(f"vc: {vc!r} not in {source} (VCs: {known})")
    origin = min((r.submit for r in rows), default=0.0)
    lo = _window_bound(start, origin, "start")
    hi = _window_bound(end, origin, "end")
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
            job_id=f"{prefix}-{r.line}",
            submit_s=(r.submit - t0) * time_scale,
            duration_s=r.duration * time_scale,
            num_gpus=r.num_gpus,
            vc=r.vc,
            line=r.line,
        )
        for r in chosen
    )
    return TraceSet(jobs, str(source), n_duplicates, n_bad, note)


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
        with path.open(newline="", encoding="utf-8") as f:
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
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read Philly trace: {exc}") from exc
    return _select(
        rows, source=path, prefix="philly", vc=vc, start=start, end=end, first_n=first_n,
        time_scale=time_scale, n_duplicates=n_duplicates, n_bad=n_bad, note=PHILLY_NOTE,
    )

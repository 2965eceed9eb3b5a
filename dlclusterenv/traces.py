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
from typing import Iterator

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


@dataclass(frozen=True)
class _Row:
    """A parsed, valid trace row before windowing; ``submit`` is absolute (epoch-free) seconds."""

    line: int
    submit: float
    duration: float
    num_gpus: int
    vc: str


_EPOCH = datetime(1970, 1, 1)


def _parse_time(text: str) -> float:
    """Seconds since 1970 of a naive "YYYY-MM-DD[ HH:MM:SS]" time (only differences matter)."""
    if len(text) not in (10, 19) or (len(text) == 19 and text[10] != " "):
        raise ValueError(f"expected {_TIME_FORMAT}, got {text!r}")
    return (datetime.fromisoformat(text) - _EPOCH).total_seconds()


def _parse_philly_row(row: list[str]) -> tuple[float, float, int, str]:
    """(submit, duration, num_gpus, vc) of one CSV row; ValueError("field: why") if malformed."""
    if len(row) != len(PHILLY_COLUMNS):
        raise ValueError(f"fields: expected {len(PHILLY_COLUMNS)} ({','.join(PHILLY_COLUMNS)}), "
                         f"got {len(row)}")
    values = dict(zip(PHILLY_COLUMNS, (cell.strip() for cell in row)))
    for field, text in values.items():
        if not text:
            raise ValueError(f"{field}: missing value")

    def number(field: str) -> float:
        try:
            value = float(values[field])
        except ValueError:
            raise ValueError(f"{field}: not a number: {values[field]!r}") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{field}: must be finite and >= 0, got {values[field]!r}")
        return value

    try:
        submit = _parse_time(values["timestamp"])
    except ValueError as exc:
        raise ValueError(f"timestamp: {exc}") from None
    duration = number("duration")
    try:
        num_gpus = int(values["num_gpus"])
    except ValueError:
        raise ValueError(f"num_gpus: not an integer: {values['num_gpus']!r}") from None
    if num_gpus < 1:
        raise ValueError(f"num_gpus: must be >= 1, got {num_gpus}")
    gpu_time = number("gpu_time")
    if not math.isclose(gpu_time, duration * num_gpus, rel_tol=1e-6, abs_tol=1e-6):
        raise ValueError(f"gpu_time: {gpu_time} != duration * num_gpus = {duration * num_gpus}")
    return submit, duration, num_gpus, values["cluster"]


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
    origin = min((r.submit for r in rows), default=0.0)
    lo = _window_bound(start, origin, "start")
    hi = _window_bound(end, origin, "end")
    chosen = [
        r for r in rows
        if (vc is None or r.vc == vc) and (lo is None or r.submit >= lo)
        and (hi is None or r.submit < hi)
    ]
    chosen.sort(key=lambda r: (r.submit, r.line))
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
    fast); ``first_n`` keeps the earliest jobs after the VC and time filters.
    """
    path = Path(path)
    rows: list[_Row] = []
    seen: set[tuple[str, ...]] = set()
    n_duplicates = n_bad = 0
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)
            header = [cell.strip() for cell in next(reader, [])]
            if header != PHILLY_COLUMNS:
                raise TraceError(f"{path}:1: header: expected {','.join(PHILLY_COLUMNS)}, "
                                 f"got {','.join(header) or 'nothing'}")
            for row in reader:
                line = reader.line_num
                if not row or not any(cell.strip() for cell in row):
                    continue
                key = tuple(row)
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
                rows.append(_Row(line, submit, duration, num_gpus, cluster))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read Philly trace: {exc}") from exc
    return _select(
        rows, source=path, prefix="philly", vc=vc, start=start, end=end, first_n=first_n,
        time_scale=time_scale, n_duplicates=n_duplicates, n_bad=n_bad, note=PHILLY_NOTE,
    )

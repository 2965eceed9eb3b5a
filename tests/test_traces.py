"""Philly trace loader: the real file, its quirks, windows, and bad rows."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest

from dlclusterenv.profiles import shared_dir
from dlclusterenv.traces import TraceError, TraceSet, load_philly_csv

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


@pytest.fixture(scope="module")
def philly_path() -> Path:
    path = shared_dir() / "traces" / "philly_jobs.csv"
    if not path.exists():
        pytest.skip(f"shared data file absent: {path}")
    return path


@pytest.fixture(scope="module")
def philly(philly_path) -> TraceSet:
    return load_philly_csv(philly_path)


def _csv(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- the real file
def test_real_file_rows_duplicates_and_order(philly, philly_path):
    assert len(philly) == 82_247 - 65
    assert philly.n_duplicates_dropped == 65
    assert philly.n_bad_rows_skipped == 0
    assert philly.source == str(philly_path)
    keys = [(j.submit_s, j.line) for j in philly]
    assert keys == sorted(keys)
    assert philly.jobs[0].submit_s == 0.0
    assert len({j.job_id for j in philly}) == len(philly)
    assert all(j.num_gpus >= 1 and j.duration_s > 0 for j in philly)
    assert max(j.num_gpus for j in philly) == 128
    assert "synthetic" in philly.synthetic_note and "model" in philly.synthetic_note


def test_real_file_vc_filter(philly_path):
    """6214e9 has 41,226 rows in the file, 33 of them repeats of an earlier row."""
    trace = load_philly_csv(philly_path, vc="6214e9")
    assert len(trace) == 41_193
    assert {j.vc for j in trace} == {"6214e9"}
    assert trace.jobs[0].submit_s == 0.0


def test_real_file_window_matches_filtering_the_full_trace(philly, philly_path):
    trace = load_philly_csv(
        philly_path, vc="11cb48", start="2017-10-01", end="2017-10-08 00:00:00", first_n=500
    )
    t0 = datetime(2017, 9, 4, 10, 30, 41)  # earliest timestamp in the file: submit_s 0 above
    lo, hi = ((datetime(2017, 10, d) - t0).total_seconds() for d in (1, 8))
    expected = [j.line for j in philly if j.vc == "11cb48" and lo <= j.submit_s < hi][:500]
    assert len(expected) == 500
    assert [j.line for j in trace] == expected
    assert trace.jobs[0].submit_s == 0.0 and trace.jobs[-1].submit_s < hi - lo


# ----------------------------------------------------------------------------- hand-written rows
def test_quirks_unsorted_duplicates_blank_lines(tmp_path):
    path = _csv(
        tmp_path,
        "2017-10-01 00:01:40,50.0,2,100.0,vcB",   # line 2
        "2017-10-01 00:00:00,10.0,1,10.0,vcA",    # line 3: earliest
        "2017-10-01 00:01:40,30.0,1,30.0,vcA",    # line 4: same submit as line 2
        "2017-10-01 00:00:00,10.0,1,10.0,vcA",    # line 5: exact duplicate of line 3
        "",
    )
    trace = load_philly_csv(path)
    assert [(j.line, j.submit_s) for j in trace] == [(3, 0.0), (2, 100.0), (4, 100.0)]
    assert [j.job_id for j in trace] == ["philly-3", "philly-2", "philly-4"]
    assert trace.n_duplicates_dropped == 1
    assert trace.jobs[1].num_gpus == 2 and trace.jobs[1].vc == "vcB"
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.jobs[0].submit_s = 1.0


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("2017-10-01 00:00:05,20.0,1,20.0", "fields"),
        ("2017-10-01 00:00:05,,1,20.0,vcA", "duration"),
        ("2017-10-01 00:00:05,long,1,20.0,vcA", "duration"),
        ("2017-10-01 00:00:05,-20.0,1,20.0,vcA", "duration"),
        ("2017-10-01 00:00:05,20.0,0,0.0,vcA", "num_gpus"),
        ("2017-10-01 00:00:05,20.0,1.5,30.0,vcA", "num_gpus"),
        ("2017-13-01 00:00:05,20.0,1,20.0,vcA", "timestamp"),
        ("10/01/2017 00:00,20.0,1,20.0,vcA", "timestamp"),
        ("2017-10-01 00:00:05,20.0,2,20.0,vcA", "gpu_time"),
        ("2017-10-01 00:00:05,20.0,1,20.0,", "cluster"),
    ],
)
def test_bad_row_names_file_line_and_field(tmp_path, row, field):
    path = _csv(tmp_path, "2017-10-01 00:00:00,10.0,1,10.0,vcA", row)
    with pytest.raises(TraceError) as err:
        load_philly_csv(path)
    message = str(err.value)
    assert f"{path}:3:" in message and field in message
    assert isinstance(err.value, ValueError)


def test_skip_bad_rows_counts_them(tmp_path):
    path = _csv(
        tmp_path,
        "2017-10-01 00:00:00,10.0,1,10.0,vcA",
        "2017-10-01 00:00:05,oops,1,10.0,vcA",
        "2017-10-01 00:00:06,10.0,0,0.0,vcA",
        "2017-10-01 00:00:10,10.0,1,10.0,vcA",
        "not a row",
    )
    trace = load_philly_csv(path, skip_bad_rows=True)
    assert trace.n_bad_rows_skipped == 3
    assert [j.line for j in trace] == [2, 5]


def test_bad_header(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("time,duration,num_gpus,gpu_time,cluster\n")
    with pytest.raises(TraceError, match=r"trace\.csv:1: header"):
        load_philly_csv(path)


def test_time_scale_and_first_n(tmp_path):
    path = _csv(
        tmp_path,
        "2017-10-01 00:00:00,100.0,1,100.0,vcA",
        "2017-10-01 00:00:10,200.0,4,800.0,vcB",
        "2017-10-01 00:01:00,300.0,1,300.0,vcA",
        "2017-10-01 00:02:00,400.0,1,400.0,vcA",
    )
    half = load_philly_csv(path, time_scale=0.5)
    assert [(j.submit_s, j.duration_s) for j in half] == [
        (0.0, 50.0), (5.0, 100.0), (30.0, 150.0), (60.0, 200.0)
    ]
    first = load_philly_csv(path, vc="vcA", first_n=2, start=5)
    assert [(j.line, j.submit_s) for j in first] == [(4, 0.0), (5, 60.0)]
    by_offset = load_philly_csv(path, start=10, end=120)
    by_date = load_philly_csv(path, start="2017-10-01 00:00:10", end="2017-10-01 00:02:00")
    assert [j.line for j in by_offset] == [j.line for j in by_date] == [3, 4]
    assert len(load_philly_csv(path, first_n=0)) == 0
    with pytest.raises(ValueError, match="vc: 'vcC' not in .*vcA, vcB"):
        load_philly_csv(path, vc="vcC")
    for bad in [dict(time_scale=0), dict(time_scale=float("inf")), dict(first_n=-1),
                dict(start="yesterday")]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            load_philly_csv(path, **bad)

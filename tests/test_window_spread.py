"""benchmarks/window_spread.py: the windows it replays and which split each overlaps."""

import datetime as dt

import pytest

from benchmarks.window_spread import main, split_of
from dlclusterenv.benchmark import Split, Window, day_windows


def test_windows_step_by_every_and_stop_before_end():
    w = day_windows(dt.date(2017, 10, 1), dt.date(2017, 10, 8), every=3, days=2)
    assert w == [(dt.date(2017, 10, 1), dt.date(2017, 10, 3)), (dt.date(2017, 10, 4), dt.date(2017, 10, 6)),
                 (dt.date(2017, 10, 7), dt.date(2017, 10, 9))]
    with pytest.raises(ValueError, match="every 0"):
        day_windows(dt.date(2017, 10, 1), dt.date(2017, 10, 8), every=0, days=2)
    with pytest.raises(SystemExit, match="--every 0"):
        main(["--every", "0"])


def test_a_window_is_marked_with_the_split_it_overlaps_and_touching_is_not_overlapping():
    class Entry:
        train = Split(seeds=[0], windows=[Window(start="2017-11-06", end="2017-11-08")])
        test = Split(seeds=[1000], windows=[Window(start="2017-11-14", end="2017-11-16")])

    d = dt.date
    assert split_of((d(2017, 11, 7), d(2017, 11, 9)), Entry) == "train"
    assert split_of((d(2017, 11, 15), d(2017, 11, 17)), Entry) == "test"
    assert split_of((d(2017, 11, 8), d(2017, 11, 10)), Entry) == ""  # [6, 8) and [8, 10) share no day
    assert split_of((d(2017, 11, 12), d(2017, 11, 14)), Entry) == ""

"""Sampled trace windows of a suite split (issue 15): K windows drawn, seeded, from a date range,
expanded into the explicit list when the suite is read; and suite v4, which uses them."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from dlclusterenv.benchmark import Instance, Split, load_suite, plan
from dlclusterenv.config import CONFIG_DIR, ConfigError, read_yaml, validate
from dlclusterenv.traces import load_philly_csv
from dlclusterenv.workload import load_scenario
from helpers import shared_file

SAMPLE = {"sample": 3, "from": "2017-10-01", "to": "2017-10-21", "days": 2, "seed": 0}


def _windows(windows) -> list[tuple[str, str]]:
    return [(w.start, w.end) for w in validate(Split, {"seeds": [0], "windows": windows}, "suite.yaml").windows]


def _day(x: str) -> dt.date:
    return dt.date.fromisoformat(x)


def _suite_file(tmp_path, train, test):
    """The tiny suite with these train / test windows (a scenario without a trace: it loads, and
    `instances` would refuse it, which these tests do not reach)."""
    data = yaml.safe_load((CONFIG_DIR / "benchmarks" / "tiny.yaml").read_text())
    data["scenarios"][0]["train"]["windows"] = train
    data["scenarios"][0]["test"]["windows"] = test
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_sample_is_k_windows_of_its_days_on_the_tiles_of_its_range():
    w = _windows(SAMPLE)
    assert w == _windows(dict(SAMPLE))  # the same config expands identically
    assert w == [("2017-10-11", "2017-10-13"), ("2017-10-13", "2017-10-15"), ("2017-10-19", "2017-10-21")]
    days = [(_day(a), _day(b)) for a, b in w]
    assert all(b - a == dt.timedelta(days=2) for a, b in days)
    assert all(_day("2017-10-01") <= a and b <= _day("2017-10-21") for a, b in days)
    assert all((a - _day("2017-10-01")).days % 2 == 0 for a, _ in days)  # on the tiles: no two overlap
    assert days == sorted(days) and all(b <= c for (_, b), (c, _) in zip(days, days[1:]))


def test_every_sample_field_changes_the_windows():
    base = _windows(SAMPLE)
    assert len(_windows({**SAMPLE, "sample": 5})) == 5
    assert _windows({**SAMPLE, "seed": 1}) != base
    assert all(_day(b) - _day(a) == dt.timedelta(days=3) for a, b in _windows({**SAMPLE, "days": 3}))
    # from and to bound the tiles: exactly 3 tiles fit in [10-02, 10-08), so all 3 are drawn
    assert _windows({**SAMPLE, "from": "2017-10-02", "to": "2017-10-08"}) == [
        ("2017-10-02", "2017-10-04"), ("2017-10-04", "2017-10-06"), ("2017-10-06", "2017-10-08")]
    # a tile that would end past `to` is not one: [10-07, 10-09) does not fit in [10-01, 10-08)
    assert ("2017-10-07", "2017-10-09") not in _windows({**SAMPLE, "to": "2017-10-08"})


def test_every_tile_can_be_drawn():
    drawn = {w for seed in range(40) for w in _windows({**SAMPLE, "seed": seed})}
    assert len(drawn) == 10  # the 10 two-day tiles of [10-01, 10-21)


@pytest.mark.parametrize("change, field, why", [
    ({"sample": 11}, "train.windows.sample", "11 windows of 2 days do not fit in .* at most 10"),
    ({"from": "2017-10-21"}, "train.windows.sample", "from: '2017-10-21' is not before to"),
    ({"from": "2017-10-22"}, "train.windows.sample", "is not before to"),
    ({"days": 0}, "train.windows.sample.days", "greater than 0"),
    ({"sample": 0}, "train.windows.sample.sample", "greater than or equal to 1"),
    ({"sed": 1}, "train.windows.sample.sed", "Extra inputs"),
    ({"from": "2017-10-1"}, "train.windows.sample", "from: '2017-10-1' is not a date"),
    ({"to": None}, "train.windows.sample.to", "Field required"),
])
def test_a_bad_sample_is_an_error_naming_the_field(tmp_path, change, field, why):
    sample = {k: v for k, v in {**SAMPLE, **change}.items() if v is not None}
    test = {**SAMPLE, "from": "2017-11-01", "to": "2017-11-21"}
    with pytest.raises(ConfigError, match=why) as e:
        load_suite(_suite_file(tmp_path, sample, test))
    assert f"suite.yaml: scenarios.0.{field}" in str(e.value)


def test_a_sample_inside_a_list_of_windows_is_refused(tmp_path):
    path = _suite_file(tmp_path, [{"start": "2017-10-01", "end": "2017-10-03"}, SAMPLE],
                       [{"start": "2017-11-01", "end": "2017-11-03"}])
    with pytest.raises(ConfigError, match="scenarios.0.train: .*stands for the whole list"):
        load_suite(path)


@pytest.mark.parametrize("train, test", [
    (SAMPLE, {"sample": 1, "from": "2017-10-12", "to": "2017-10-14", "days": 2}),  # [10-11, 10-13) drawn
    ([{"start": "2017-10-01", "end": "2017-10-03"}], [{"start": "2017-10-02", "end": "2017-10-04"}]),
    ([{"start": 0, "end": 100}], [{"start": 50, "end": 150}]),
])
def test_a_test_window_overlapping_a_train_window_is_refused(tmp_path, train, test):
    with pytest.raises(ConfigError, match="scenarios.0: .*test.windows: .* overlaps train window"):
        load_suite(_suite_file(tmp_path, train, test))


@pytest.mark.parametrize("train, test", [
    (SAMPLE, {**SAMPLE, "from": "2017-10-21", "to": "2017-11-10"}),  # disjoint ranges
    ([{"start": "2017-10-01", "end": "2017-10-03"}], [{"start": "2017-10-03", "end": "2017-10-05"}]),  # touching
    ([{"start": 0, "end": 100}], [{"start": "2017-10-01", "end": "2017-10-03"}]),  # seconds vs dates
])
def test_windows_that_do_not_overlap_load(tmp_path, train, test):
    load_suite(_suite_file(tmp_path, train, test))


def test_a_window_gives_both_bounds_as_dates_or_both_as_seconds(tmp_path):
    with pytest.raises(ConfigError, match="train.windows.list.0: .*both as dates or both as seconds"):
        load_suite(_suite_file(tmp_path, [{"start": "2017-10-01", "end": 100}], [{"start": 200, "end": 300}]))
    with pytest.raises(ConfigError, match="train.windows.list.0: .*end: expected"):
        load_suite(_suite_file(tmp_path, [{"start": "2017-10-01", "end": "Oct 3"}], [{"start": 200, "end": 300}]))


# ----------------------------------------------------------------------------- suite v4
PHILLY = {"philly-6c71a0": "philly-6c71a0-nov", "philly-103959": "philly-103959-oct"}  # v4 name: v3 name
K, DAYS = 4, 5


def test_v4_is_v3_with_sampled_windows_per_philly_split():
    v3, _ = load_suite("v3")
    v4, p4 = load_suite("v4")
    assert v4.version == 4
    for key in ("reference", "heuristics", "oracles", "constants", "qualify"):
        assert getattr(v4, key) == getattr(v3, key), key
    e3 = {e.name: e for e in v3.scenarios}
    raw = {e["name"]: e for e in read_yaml(p4)["scenarios"]}
    assert len(v4.scenarios) == len(v3.scenarios)
    for e in v4.scenarios:
        if e.name not in PHILLY:
            assert e == e3[e.name]
            continue
        old = e3[PHILLY[e.name]]
        assert (e.scenario, e.loads, e.ps_fraction, e.efficiency) == (old.scenario, old.loads, old.ps_fraction,
                                                                      old.efficiency)
        for split in ("train", "test"):
            assert getattr(e, split).seeds == getattr(old, split).seeds
            assert raw[e.name][split]["windows"]["sample"] == K  # a sample in the file, a list once read
            ws = getattr(e, split).windows
            assert len(ws) == K and all(_day(w.end) - _day(w.start) == dt.timedelta(days=DAYS) for w in ws)
        assert max(_day(w.end) for w in e.train.windows) <= min(_day(w.start) for w in e.test.windows)


def test_v4_windows_are_frozen():
    """The suite is frozen: its windows are pinned here, so a change of the draw (numpy's stream,
    the tiling) shows as a failure, not as a silently different benchmark."""
    v4, _ = load_suite("v4")
    got = {(e.name, split): [w.start for w in getattr(e, split).windows]
           for e in v4.scenarios if e.name in PHILLY for split in ("train", "test")}
    assert got == V4_STARTS


V4_STARTS = {  # 5-day windows: train from [2017-09-25, 11-04), test from [11-04, 12-14)
    (name, split): starts for name in PHILLY for split, starts in (
        ("train", ["2017-10-05", "2017-10-10", "2017-10-15", "2017-10-25"]),
        ("test", ["2017-11-09", "2017-11-19", "2017-11-24", "2017-11-29"]))}


def test_v4_runs_replay_the_sampled_windows(tmp_path):
    """The expanded windows are what the runs replay and what their logs are named by."""
    v4, p4 = load_suite("v4")
    e = next(e for e in v4.scenarios if e.name == "philly-6c71a0")
    base, _ = load_scenario(e.scenario)
    inst = Instance(f"{e.name}@7x", e, 7.0, base)
    tasks = [t for t in plan(v4, [inst], tmp_path) if t.policy == "gandiva"]
    assert [t.window for t in tasks] == list(range(K))
    assert [(t.scenario.workload.trace.start, t.scenario.workload.trace.end) for t in tasks] == [
        (w.start, w.end) for w in e.test.windows]
    assert all(t.log.endswith(f"-w{t.window}.jsonl") for t in tasks)


def test_every_v4_window_holds_its_scenarios_first_n_jobs():
    path = shared_file("traces", "philly_jobs.csv")
    v4, _ = load_suite("v4")
    for e in v4.scenarios:
        if e.name in PHILLY:
            t = load_scenario(e.scenario)[0].workload.trace
            for split in ("train", "test"):
                for w in getattr(e, split).windows:
                    n = len(load_philly_csv(path, vc=t.vc, start=w.start, end=w.end).jobs)
                    assert n >= t.first_n, (e.name, split, w)


# ----------------------------------------------------------------------------- suite v5
def test_v5_is_v4_with_pollux_oracle_among_the_oracles():
    v4, _ = load_suite("v4")
    v5, _ = load_suite("v5")
    assert (v5.name, v5.version) == ("v5", 5)
    assert v5.oracles == v4.oracles + ["pollux-oracle"]
    for key in ("reference", "heuristics", "constants", "qualify", "scenarios"):
        assert getattr(v5, key) == getattr(v4, key), key

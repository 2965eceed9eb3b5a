"""The evaluation plots: one style per policy everywhere, titles naming scenario and seeds, the
utilisation panels drawn for --first-seed, traffic on a log axis with positive whiskers, and the
queueing and pending-jobs plots."""

from __future__ import annotations

import baselines
import numpy as np
import pytest

from dlclusterenv.evaluate import sweep
from dlclusterenv.plots import MAX_POLICIES, censored_cdf, figures, styles

POLICIES = ["tiresias", "fifo", "dltap"]


@pytest.fixture(scope="module")
def figs():
    results = sweep("tiny", POLICIES, 2, workers=1, progress=False, first_seed=7)
    return figures(POLICIES, results, "tiny")


def test_styles_fixed_by_sorted_names_and_distinct():
    a = styles(["fifo", "tiresias", "dltap"])
    assert a == styles(["dltap", "fifo", "tiresias"])  # leaderboard order does not matter
    names = baselines.names()
    every = styles(names)
    assert len({(s["color"], s["linestyle"]) for s in every.values()}) == len(names)
    assert len({(s["color"], s["hatch"]) for s in every.values()}) == len(names)
    with pytest.raises(ValueError, match="at most"):
        styles([f"p{i}" for i in range(MAX_POLICIES + 1)])


def test_same_colour_for_a_policy_in_every_plot(figs):
    want = {p: s["color"] for p, s in styles(POLICIES).items()}
    cdf = figs["jct"].axes[0]
    assert {ln.get_label(): ln.get_color() for ln in cdf.get_lines()} == want
    for name in ("utilisation", "pending"):
        for ax in figs[name].axes:
            if ax.get_visible():
                assert {ln.get_color() for ln in ax.get_lines()} == {want[ax.get_title()]}


def test_titles_name_scenario_and_seeds(figs):
    for name in ("jct", "queueing", "pending"):
        assert "scenario tiny, seeds 7, 8" in figs[name]._suptitle.get_text()
    assert "scenario tiny, seeds 7, 8" in figs["traffic"].axes[0].get_title()
    # --first-seed 7: the timeline panels draw seed 7 (they were empty, titled "seed 0")
    util = figs["utilisation"]
    assert util._suptitle.get_text().endswith("seed 7")
    assert all(ax.get_lines() for ax in util.axes if ax.get_visible())


def test_traffic_log_scale_with_positive_whiskers(figs):
    ax = figs["traffic"].axes[0]
    assert ax.get_yscale() == "log"
    low = ax.get_ylim()[0]
    for coll in ax.collections:  # the error bars' segments
        for seg in coll.get_segments():
            assert seg[:, 1].min() > 0 and seg[:, 1].min() >= low


def test_queueing_and_pending(figs):
    q = figs["queueing"].axes[1]
    assert [t.get_text() for t in q.get_xticklabels()] == POLICIES
    pend = [ax for ax in figs["pending"].axes if ax.get_visible()]
    assert [ax.get_title() for ax in pend] == POLICIES
    for ax in pend:
        y = ax.get_lines()[0].get_ydata()
        assert y.min() == 0 and 0 < y.max() <= 8  # 8 jobs in tiny; some wait at some point
        assert np.all(np.asarray(y) >= 0)


def test_censored_cdf():
    nan = float("nan")
    jobs = [dict(jct_s=10.0, finished=True, queue_s=1.0, first_start_s=5.0),
            dict(jct_s=99.0, finished=False, queue_s=2.0, first_start_s=6.0),
            dict(jct_s=99.0, finished=False, queue_s=50.0, first_start_s=nan)]
    x, y = censored_cdf(jobs)
    assert x.tolist() == [10.0] and y.tolist() == pytest.approx([1 / 3])
    x, y = censored_cdf(jobs, "queue_s")
    assert x.tolist() == [1.0, 2.0] and y.tolist() == pytest.approx([1 / 3, 2 / 3])


def test_unfinished_jobs_are_censored_and_marked():
    """A horizon that cuts the run: the CDF ends below 1, the legend and the bars say so."""
    import yaml

    sc = yaml.safe_load(open("configs/scenarios/tiny.yaml"))
    sc["engine"]["horizon_s"] = 2400.0
    results = sweep(sc, ["fifo"], 1, workers=1, progress=False)
    assert results[0].summary["jobs_unfinished"] > 0
    f = figures(["fifo"], results, "tiny-cut")
    line = f["jct"].axes[0].get_lines()[0]
    assert line.get_ydata().max() < 1 and "unfinished" in line.get_label()
    bar = f["jct"].axes[1].patches[0]
    assert bar.get_hatch() == "xx" and "lower bound" in f["jct"].axes[1].get_title()

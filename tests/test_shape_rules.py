"""benchmarks/shape_rules.py: scripted shape rules in the allocation env's action space, and the
sizing watcher of heuristics."""

import gymnasium as gym
import pytest

import dlclusterenv  # noqa: F401  (registers the env ids)
from benchmarks.shape_rules import ORDERS, Rule, rule_episode, _Watch
import baselines
from dlclusterenv import make_sim


def _env():
    return gym.make("DLClusterAlloc-v0", scenario="default", placer="consolidate", work_conserving=True,
                    shapes=[[1, 1], [2, 4], [4, 8]], grow_running=True, max_jobs=32)


def test_growth_is_an_action_that_changes_the_run():
    still = rule_episode(_env(), 0, Rule((2, 4), (2, 4)))
    grow = rule_episode(_env(), 0, Rule((2, 4), (2, 4), grow=(4, 8)))
    assert still["grown"] == 0 and grow["grown"] > 0
    assert grow["avg_jct_s"] != still["avg_jct_s"]


def test_big_while_few_wait_changes_the_run_and_same_rule_same_result():
    a = rule_episode(_env(), 1, Rule((1, 1), (1, 1)))
    b = rule_episode(_env(), 1, Rule((1, 1), (4, 8), q_big=1))
    assert a["avg_jct_s"] != b["avg_jct_s"]
    assert rule_episode(_env(), 1, Rule((1, 1), (4, 8), q_big=1)) == b


def test_a_shape_the_env_lacks_is_refused_by_name():
    with pytest.raises(ValueError, match=r"8x8.*\(8, 8\) is not one of the env's shapes"):
        rule_episode(_env(), 0, Rule((8, 8), (8, 8)))


def test_watch_sees_fifo_start_jobs_as_requested_and_never_resize():
    w = _Watch(baselines.make("fifo"))
    direct = make_sim("default", 0).run(baselines.make("fifo")).summary()["avg_jct_s"]
    assert make_sim("default", 0).run(w).summary()["avg_jct_s"] == direct  # watching changes nothing
    shapes = sum(v for k, v in w.starts.items() if isinstance(k, tuple))
    assert shapes > 0 and w.starts["as requested"] == shapes and w.changes == 0


def test_watch_counts_optimus_resizes():
    w = _Watch(baselines.make("optimus"))
    make_sim("default", 0).run(w)
    assert w.changes > 0


def test_a_shrinking_rule_needs_the_shrink_option_and_shrinks_on_a_loaded_cluster():
    with pytest.raises(ValueError, match="needs shrink_running"):
        rule_episode(_env(), 0, Rule((1, 1), (1, 1), grow=(4, 8), shrink=True))
    kw = dict(placer="consolidate", work_conserving=True, shapes=[[1, 1], [2, 4], [4, 8]], grow_running=True,
              max_jobs=32)
    rule = Rule((2, 4), (2, 4), grow=(4, 8), shrink=True)
    r = rule_episode(gym.make("DLClusterAlloc-v0", scenario="gandiva", shrink_running=True, **kw), 0, rule)
    assert r["grown"] > 0 and r["shrunk"] > 0  # the gandiva testbed is overloaded: arrivals wait
    grow_only = rule_episode(gym.make("DLClusterAlloc-v0", scenario="gandiva", shrink_running=True, **kw), 0,
                             Rule((2, 4), (2, 4), grow=(4, 8)))
    assert grow_only["shrunk"] == 0 and grow_only["avg_jct_s"] != r["avg_jct_s"]



def test_each_start_order_changes_a_trace_run_and_an_unknown_order_is_refused():
    """On the qualifying instance's first train run (7x load: jobs queue, their trace requests
    differ) every start order gives another avg JCT, and the same rule gives the same run."""
    from agents.learned import env_for
    from agents.train import load_config
    from dlclusterenv.benchmark import instances, load_suite
    from helpers import shared_file

    shared_file("traces", "philly_jobs.csv")
    suite, where = load_suite("v2")
    inst = {i.key: i for i in instances(suite, where, say=lambda m: None)}["philly-6c71a0-nov@7x"]
    cfg = load_config("configs/agents/suite_6c71a0_grow_noprogress.yaml")
    _, sc, seed = inst.runs("train")[0]
    jct = {o: rule_episode(env_for(cfg, sc), seed, Rule((2, 4), (2, 4), order=o))["avg_jct_s"] for o in ORDERS}
    assert len(set(jct.values())) == len(ORDERS)
    assert rule_episode(env_for(cfg, sc), seed, Rule((2, 4), (2, 4), order="newest"))["avg_jct_s"] == jct["newest"]
    with pytest.raises(ValueError, match="order: 'shortest'"):
        Rule((2, 4), (2, 4), order="shortest")

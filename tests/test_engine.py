"""Engine behaviour that is not a paper mechanism: decision points, wake-ups, run-to-run identity."""

from __future__ import annotations

import pytest
import baselines
from dlclusterenv import Decision, Scheduler, make_sim


class Recorder(Scheduler):
    """FIFO that records when it is asked, and asks once to be woken at t = 1234.5 s."""

    def __init__(self):
        self.inner = baselines.make("fifo")
        self.times: list[float] = []

    def decide(self, view):
        self.times.append(view.time)
        d = self.inner.decide(view)
        if len(self.times) == 1:
            d.wake_at = 1234.5
        return d


def test_wake_at_adds_a_decision_point_and_time_is_monotone():
    r = Recorder()
    make_sim("tiny", 0).run(r)
    assert 1234.5 in r.times
    assert r.times == sorted(r.times)


def test_same_seed_same_metrics_across_runs():
    a = make_sim("default", 3).run(baselines.make("random")).summary()
    b = make_sim("default", 3).run(baselines.make("random")).summary()
    assert a == b


def test_scheduler_that_never_places_ends_with_jobs_unfinished():
    class Idle(Scheduler):
        def decide(self, view):
            return Decision()

    m = make_sim("tiny", 0).run(Idle())
    assert m.jobs_finished == 0 and m.jobs_unfinished == 8


def test_traffic_shaping_changes_when_not_how_much():
    """Potential-based shaping (Ng et al. 1999): the shaped episode return equals the unshaped
    one (the potential starts and ends at 0), but the charge arrives at placement time."""
    import gymnasium as gym
    import numpy as np

    totals, first_charge = {}, {}
    for shaping in (False, True):
        env = gym.make("DLClusterPlace-v0", scenario="tiny", reward="traffic", shaping=shaping)
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        total, step, done = 0.0, 0, False
        while not done:
            a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
            _, r, term, trunc, info = env.step(a)
            total += r
            step += 1
            if r != 0 and shaping not in first_charge:
                first_charge[shaping] = step
            done = term or trunc
        totals[shaping] = total
        assert abs(total + info["metrics"]["cross_node_gb"]) < 1e-6 * abs(total)
    assert abs(totals[True] - totals[False]) < 1e-6 * abs(totals[False])
    assert first_charge[True] < first_charge[False]


def test_jct_shaping_keeps_the_return_and_charges_a_jobs_size_when_chosen():
    """JCT potential = minus the hours running jobs still need: the shaped episode return equals
    the unshaped one, and the step that sizes a job already tells a small shape from a big one."""
    import gymnasium as gym
    import numpy as np

    shapes = [[1, 1], [2, 4]]
    totals = {}
    for shaping in (False, True):
        env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", shapes=shapes,
                       work_conserving=True, shaping=shaping)
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        total, done = 0.0, False
        while not done:
            a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
            _, r, term, trunc, info = env.step(a)
            total += r
            done = term or trunc
        totals[shaping] = total
        assert abs(total * 3600 + info["metrics"]["avg_jct_s"] * 8) < 1e-6 * abs(total * 3600)
    assert abs(totals[True] - totals[False]) < 1e-9 * abs(totals[False])
    first = {}
    for k in (0, 1):  # the first job alone, as (1 PS, 1 worker) or (2 PS, 4 workers), then end
        env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", shapes=shapes,
                       shaping=True)
        env.reset(seed=0)
        _, first[k], *_ = env.step(k)  # the sizing step itself
        env.step(env.action_space.n - 1)
    assert first[1] > first[0]


def test_shaping_names_its_terms():
    import gymnasium as gym

    from dlclusterenv.config import ConfigError

    kw = {"scenario": "tiny", "reward": {"traffic": 1.0, "jct": 1.0}}
    assert gym.make("DLClusterPlace-v0", shaping=True, **kw).unwrapped.shaping == ("traffic", "jct")
    assert gym.make("DLClusterPlace-v0", shaping=["traffic"], **kw).unwrapped.shaping == ("traffic",)
    assert gym.make("DLClusterPlace-v0", **kw).unwrapped.shaping == ()
    for bad, match in ((["makespan"], "has no potential"), ("jct", "expected true, false or a list")):
        with pytest.raises(ConfigError, match=f"shaping: .*{match}"):
            gym.make("DLClusterPlace-v0", shaping=bad, **kw)
    with pytest.raises(ConfigError, match="not a term of the reward"):
        gym.make("DLClusterPlace-v0", scenario="tiny", reward="traffic", shaping=["jct"])

"""Engine behaviour that is not a paper mechanism: decision points, wake-ups, run-to-run identity."""

from __future__ import annotations

import math

import pytest
import baselines
from dlclusterenv import Decision, Scheduler, Simulator, build, make_sim
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import STALL_LIMIT, SimulationStalled


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


def test_wake_at_inf_asks_for_no_decision_point_and_is_not_kept():
    """inf is a legal wake_at meaning never: the run is the same as without it, and the requests
    are not kept (every decision asking for inf grew the engine's list of pending wake-ups, read
    at every advance)."""

    class Asking(Scheduler):
        def __init__(self, wake_at):
            self.inner, self.wake_at, self.times = baselines.make("fifo"), wake_at, []

        def decide(self, view):
            self.times.append(view.time)
            d = self.inner.decide(view)
            d.wake_at = self.wake_at
            return d

    plain, never = Asking(None), Asking(math.inf)
    m_plain = make_sim("tiny", 0).run(plain).summary()
    sim = make_sim("tiny", 0)
    assert sim.run(never).summary() == m_plain and never.times == plain.times
    assert len(never.times) > 10 and sim._wakes == []


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


def _running_alone(model: str, at: float):
    """A tiny-cluster simulator whose one job arrives at `at` and runs: (sim, job, its speed)."""
    _, cluster, zoo, _ = build("tiny")
    sim = Simulator(cluster, [JobSpec("j", model, at, 1, 2)], zoo)
    sim.advance()
    sim.decide(baselines.make("fifo"))
    job = sim.jobs["j"]
    assert sim.now == at and job.status == "running"
    return sim, job, sim.rates().speed["j"]


@pytest.mark.parametrize("ulps", [0.25, 1.4])
def test_a_job_whose_last_steps_the_clock_cannot_resolve_ends_exactly(ulps):
    """Issue 14's stall: at t = 2.1e6 s the clock resolves 4.7e-10 s. Last steps taking 0.25 of
    that (t + dt == t), or 1.4 of it (the clock moves one unit and leaves a float residue that
    takes 0.4), left the job running with dt = 0 at every later advance, forever. The job must
    end at the instant its completion rounds to, with exactly its total steps."""
    sim, job, v = _running_alone("GRU", 2.1e6)
    ulp = math.ulp(sim.now)
    job.steps_done = job.total_steps - ulps * ulp * v
    # precondition: the residue is beyond what the engine rounds off when it finishes a job
    assert (ulps % 1) * ulp * v > job.total_steps * 1e-12 + 1e-9
    sim.advance()  # one call: the old engine returned here with the job still running
    assert job.status == "done" and job.steps_done == job.total_steps
    assert job.finish_s == sim.now == 2.1e6 + round(ulps) * ulp
    assert sim.done


def test_engine_raises_instead_of_looping_when_time_stops():
    """Any bug that stops the clock (here a scheduling tick that is always now) is an error
    naming the time and the running jobs, after STALL_LIMIT steps, not an endless loop."""
    sim, job, _ = _running_alone("GRU", 2.1e6)
    sim._next_tick = lambda: sim.now
    with pytest.raises(SimulationStalled, match=r"t = 2100000\.0 s .*running jobs .*: j \("):
        for _ in range(STALL_LIMIT + 2):
            sim.advance()
    assert job.status == "running"

"""Engine behaviour that is not a paper mechanism: decision points, wake-ups, run-to-run identity."""

from __future__ import annotations

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

"""NA (FlowCon's comparator, seed 004 Sec. 5.2): containers start at once where they fit and compete
freely — no limits. It only places pending jobs, so it runs through both front doors."""

from __future__ import annotations

import gymnasium as gym

import dlclusterenv
from baselines.na import NA
from dlclusterenv.adapter import SchedulerAdapter


def test_na_equal_shares_on_the_flowcon_node():
    """Fig. 8: with VAE and MNIST running, NA splits the 8 cores equally (no limit set)."""
    sim = dlclusterenv.make_sim("flowcon_fixed", 0)
    na = NA()
    na.reset(0)
    while sim.now < 50:
        d = na.decide(sim.view())
        assert not d.cpu_limits
        sim.apply(d)
        sim.advance()
    view = sim.view()
    cores = {j.job_id: sum(t.cores for t in j.tasks) for j in view.running}
    assert set(cores) == {"j0", "j1"}
    assert cores["j0"] == cores["j1"] == 4.0  # 0.1-core PS + 3.9-core worker each


def test_na_does_not_block_behind_a_job_that_does_not_fit():
    """A job too big for the free room waits; later jobs that fit start (docker run does not queue)."""
    sc = {"name": "t", "cluster": "flowcon", "engine": {"tick_s": 2},
          "workload": {"kind": "fixed", "jobs": [
              {"model": "VAE", "arrival_s": 0, "num_workers": 12},
              {"model": "VAE", "arrival_s": 0, "num_workers": 8},
              {"model": "MNIST", "arrival_s": 0}]}}
    sim = dlclusterenv.make_sim(sc, 0)
    d = NA().decide(sim.view())
    placed = {t.rpartition("/")[0] for t in d.place}
    assert placed == {"j0", "j2"}  # j1's 8 workers (4.1 cores) do not fit beside j0's 6.1


def test_na_default_scenario_both_doors_identical():
    direct = dlclusterenv.make_sim("default", 0).run(NA()).summary()
    env = gym.make("DLClusterJoint-v0", scenario="default", max_jobs=64)
    assert direct["jobs_finished"] == 60
    assert SchedulerAdapter(env, NA()).run(0).summary() == direct


def test_a_pass_that_started_nothing_is_not_made_again_until_something_changes(monkeypatch):
    """NA (and FlowCon, which places as NA does) skips the placement pass while the pending jobs
    and the free resources are those of a pass that started nothing; the decisions are those of
    one that makes every pass. FlowCon's timer makes most of its decision points such repeats."""
    import baselines.na as na_mod
    from baselines.flowcon import FlowCon
    from helpers import decision_digest

    calls = []
    real = na_mod.start_pending
    monkeypatch.setattr(na_mod, "start_pending", lambda *a, **k: calls.append(1) or real(*a, **k))

    def every_pass(cls):
        class EveryPass(cls):
            def place_pending(self, view, d):
                self._idle = None
                return super().place_pending(view, d)
        return EveryPass()

    for cls, sc, least in ((NA, "default", 1), (FlowCon, "dltap", 10)):  # (123 of 131, 120 of 1,698)
        calls.clear()
        kept = decision_digest(sc, cls(), 0)
        n_kept = len(calls)
        calls.clear()
        assert decision_digest(sc, every_pass(cls), 0) == kept
        assert n_kept * least < len(calls), (cls.name, sc, n_kept, len(calls))

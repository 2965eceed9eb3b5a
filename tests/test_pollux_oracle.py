"""pollux-oracle (baselines/pollux.py `PolluxOracle`, issue 15): Pollux whose goodput is the engine's
truth. It must read the truth (not fall back to the fit or the measured phi), read it at the layout
its docstring names, decide differently from Pollux, and stay deterministic per seed."""

from __future__ import annotations

import numpy as np
import pytest

import baselines
import dlclusterenv
from baselines.pollux import Pollux, PolluxOracle, oracle_layout
from benchmarks.pollux_cap import CappedOracle
from dlclusterenv.workload import load_scenario

from helpers import decision_digest


def _default(eff: str, jobs: int) -> dict:
    sc, _ = load_scenario("default")
    small = sc.workload.model_copy(update={"num_jobs": jobs, "window_s": 60 * jobs, "ps_fraction": 0.5,
                                           "comm": None})
    return sc.model_copy(update={"efficiency": eff, "workload": small}).model_dump()


def test_registered_as_an_oracle():
    assert "pollux-oracle" in baselines.names()
    pol = baselines.make("pollux-oracle")
    assert isinstance(pol, PolluxOracle) and pol.oracle and pol.name == "pollux-oracle"


class _Probe(PolluxOracle):
    """Records, at each round, the goodput table it built and the truth it should equal."""

    def reset(self, seed=None):
        super().reset(seed)
        self.checked = 0

    def goodput_table(self, job, w_max, view=None):
        table = super().goodput_table(job, w_max, view)
        if self.checked >= 40:  # enough rounds; the reads below are not cached, so they cost
            return table
        for w in range(1, w_max + 1):
            eff = view.oracle.efficiency(job.job_id, w)
            for m in (False, True):
                want = view.oracle.speed(job.job_id, *oracle_layout(view.cluster, job, w, m)) * eff
                assert table[w, int(m)] == want, (job.job_id, w, m)
        self.checked += 1
        return table


def test_goodput_is_the_true_speed_times_the_true_efficiency():
    """Fails if the table comes from the fit or from Eq. 7 at the measured phi: both differ from
    the truth (2% speed bias, phi of the work done so far)."""
    sim = dlclusterenv.make_sim(_default("pgns", 8), 0)
    probe = _Probe()
    sim.run(probe)
    assert probe.checked > 20


def test_truth_differs_from_the_fit_and_phi():
    """Where Pollux has measured a job, its fitted, phi-based table is not the oracle's."""
    sc = _default("pgns", 8)
    seen = []

    class Both(Pollux):
        oracle = True

        def decide(self, view):
            d = super().decide(view)
            o = PolluxOracle()
            for j in view.running:
                if self._samples.get(j.job_id):
                    seen.append((self.goodput_table(j, 4, view), o.goodput_table(j, 4, view)))
            return d

    dlclusterenv.make_sim(sc, 0).run(Both())
    assert seen and all(not np.array_equal(a[1:], b[1:]) for a, b in seen)


def test_layout_read():
    """One node: the w workers on the node with the most GPUs; several: the fewest nodes (at least
    2), workers round-robin; PS in the asked ratio, round-robin over the worker nodes."""
    c = dlclusterenv.make_sim("default", 0).cluster
    per = int(c.gpus.max())
    first = int(np.argmax(c.gpus))

    class J:
        comm, requested = "ps", (1, 2)  # one PS per two workers

    assert oracle_layout(c, J, 3, False) == ([first, first], [first] * 3)
    ps, ws = oracle_layout(c, J, 4, True)
    assert len(set(ws)) == 2 and sorted(ws.count(n) for n in set(ws)) == [2, 2] and sorted(ps) == sorted(set(ws))
    ps, ws = oracle_layout(c, J, 2 * per + 1, True)
    assert len(set(ws)) == 3 and len(ps) == per + 1
    J.comm = "allreduce"
    assert oracle_layout(c, J, 2, False) == ([], [first, first])


def test_decides_differently_from_pollux_and_is_deterministic():
    sc = _default("pgns", 12)
    a = decision_digest(sc, "pollux-oracle", 0)
    assert a == decision_digest(sc, "pollux-oracle", 0)
    assert a != decision_digest(sc, "pollux", 0)
    assert a != decision_digest(sc, "pollux-oracle", 1)


@pytest.mark.parametrize("scenario", ["tiny", "default"])
def test_finishes_every_job(scenario):
    m = dlclusterenv.make_sim(scenario, 0).run(baselines.make("pollux-oracle")).summary()
    assert m["jobs_unfinished"] == 0 and m["jobs_finished"] > 0


def test_no_growth_cap_only_max_workers():
    """The truth has no optimistic prior to guard: a job may get any size up to max_workers, measured
    or not, and that changes decisions (fails if the oracle keeps Pollux's cap)."""
    assert PolluxOracle(max_workers=5).cap(None) == 5
    sc = _default("pgns", 12)
    assert decision_digest(sc, PolluxOracle(), 0) != decision_digest(sc, CappedOracle(), 0)


def test_max_growth_is_refused_where_no_growth_cap_reads_it():
    """pollux-oracle took `max_growth` and ignored it (its cap is max_workers): the same decisions
    at 1, 2 and 64. It is refused by name now; CappedOracle, whose cap reads it, keeps it."""
    for make in (lambda: PolluxOracle(max_growth=4.0), lambda: baselines.make("pollux-oracle", max_growth=1.0)):
        with pytest.raises(ValueError, match="max_growth"):
            make()
    assert decision_digest("tiny", CappedOracle(max_growth=1.0), 0) != decision_digest("tiny", CappedOracle(), 0)


@pytest.mark.parametrize("kwargs", [
    {"interval_s": 300.0}, {"p": 1.0}, {"restart_delay_s": 600.0}, {"population": 4}, {"generations": 3},
    {"max_workers": 2},
])
def test_every_parameter_changes_the_oracles_decisions(kwargs):
    """As Pollux's (test_baseline_pollux.py), each knob the oracle keeps changes its decisions."""
    assert decision_digest("tiny", PolluxOracle(**kwargs), 0) != decision_digest("tiny", PolluxOracle(), 0)

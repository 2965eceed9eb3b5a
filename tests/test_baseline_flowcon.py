"""FlowCon (seed 004): Algorithm 1's list moves by alpha, limits from efficiency shares with the CL
lower bound 1/(beta n), everything free when all are in CL with itval doubling, and Algorithm 2's
listeners resetting itval on arrival and departure; Sec. 5.3's worked example (VAE limited to 0.25,
the new MNIST to ~1).

FlowCon sets cpu_limits, which the Gym envs cannot express: its default-scenario run is checked on
the direct door only (NA, its comparator, is checked through both in test_baseline_na.py)."""

from __future__ import annotations

import math

import pytest
from helpers import decision_digest

import dlclusterenv
from baselines.flowcon import FlowCon, WorkerState, algorithm1, presume
from baselines.na import NA

ALPHA, BETA = 0.05, 2.0


def worker(*names: str) -> WorkerState:
    s = WorkerState(itval=20.0)
    for c in names:
        s.add(c, 0.0)
    return s


def lists(s: WorkerState) -> tuple[list[str], list[str], list[str]]:
    return s.nl, s.wl, s.cl


def test_list_moves_nl_wl_cl_by_alpha():
    """Lines 2-13: below alpha NL -> WL -> CL, one list per run; at or above alpha back to NL.
    Lines 18-26: NL gets G / sum G, WL keeps its limit, CL max(G / sum G, 1 / (beta n))."""
    s = worker("a", "b", "c")
    algorithm1(s, {"a": 0.01, "b": 0.2, "c": 0.3}, ALPHA, BETA)
    assert lists(s) == (["b", "c"], ["a"], [])
    assert s.limit == pytest.approx({"a": 1.0, "b": 0.2 / 0.51, "c": 0.3 / 0.51})
    algorithm1(s, {"a": 0.01, "b": 0.02, "c": 0.3}, ALPHA, BETA)
    assert lists(s) == (["c"], ["b"], ["a"])
    assert s.limit == pytest.approx({"a": 1 / 6, "b": 0.2 / 0.51, "c": 0.3 / 0.33})
    algorithm1(s, {"a": 0.06, "b": 0.001, "c": 0.001}, ALPHA, BETA)
    assert lists(s) == (["a"], ["c"], ["b"])
    assert s.limit == pytest.approx({"a": 0.06 / 0.062, "b": 1 / 6, "c": 0.3 / 0.33})
    assert s.itval == 20.0  # not all in CL: no back-off


def test_cl_lower_bound_one_over_beta_n():
    """Line 22: a converged container keeps at least 1 / (beta n) of the node."""
    for beta, want in ((2.0, 1 / 8), (4.0, 1 / 16)):
        s = worker("a", "b", "c", "d")
        s.nl.remove("a")
        s.cl.append("a")
        algorithm1(s, {"a": 1e-6, "b": 0.1, "c": 0.1, "d": 0.1}, ALPHA, beta)
        assert s.limit["a"] == pytest.approx(want)
        assert s.limit["b"] == pytest.approx(0.1 / (0.3 + 1e-6))


def test_all_in_cl_compete_freely_and_itval_doubles():
    """Lines 14-17: every container in CL -> limits 1 and itval x2 at every such run."""
    s = worker("a", "b")
    low = {"a": 0.001, "b": 0.002}
    algorithm1(s, low, ALPHA, BETA)  # NL -> WL
    algorithm1(s, low, ALPHA, BETA)  # WL -> CL: all in CL
    assert lists(s) == ([], [], ["a", "b"]) and s.limit == {"a": 1.0, "b": 1.0} and s.itval == 40.0
    algorithm1(s, low, ALPHA, BETA)
    assert s.itval == 80.0


def test_paper_example_new_mnist_gets_the_node():
    """Sec. 5.3: when MNIST arrives at 40 s, the slowly growing VAE is set to 0.25 = 1/(beta * 2)
    and the new MNIST to 1 (its G is not measurable yet: it stays in NL, free, and counts in the
    VAE's share as young and quickly growing)."""
    s = worker("vae", "mnist")
    s.nl.remove("vae")
    s.cl.append("vae")
    g = presume({"vae": 0.0004, "mnist": None}, ALPHA)
    assert g == {"vae": 0.0004, "mnist": ALPHA}
    algorithm1(s, g, ALPHA, BETA, young=frozenset({"mnist"}))
    assert s.limit == {"vae": 0.25, "mnist": 1.0} and "mnist" in s.nl


class _Logged(FlowCon):
    def reset(self, seed=None):
        super().reset(seed)
        self.log = []

    def _run(self, s, here, now):
        before = s.itval
        super()._run(s, here, now)
        self.log.append((now, before, s.itval, sorted(here), list(s.cl), dict(s.limit)))


def test_listeners_and_back_off_on_the_testbed():
    """Algorithm 2 on FlowCon's node: runs every itval, itval doubling while all are in CL; an
    arrival and a departure each rerun Algorithm 1 at once with itval reset to 20 s."""
    sc = {"name": "t", "cluster": "flowcon", "engine": {"tick_s": 2},
          "workload": {"kind": "fixed", "jobs": [{"model": "VAE", "arrival_s": 0}, {"model": "MNIST", "arrival_s": 200}]}}
    sim = dlclusterenv.make_sim(sc, 0)
    f = _Logged()
    m = sim.run(f)
    assert m.jobs_finished == 2
    mnist_done = sim.jobs["j1"].finish_s
    times = [r[0] for r in f.log]
    assert 0.0 in times and 200.0 in times and mnist_done in times  # listeners fire at once
    for t, before, after, here, cl, limit in f.log:
        if t in (0.0, 200.0, mnist_done):
            assert before == 20.0, t  # reset by the listener
        assert after == (2 * before if set(cl) == set(here) else before), t
    for (t0, _, after, *_), (t1, *_) in zip(f.log, f.log[1:]):
        if t1 not in (200.0, mnist_done):
            assert t1 - t0 == pytest.approx(after, abs=2.0)  # next timer run one itval later (2 s ticks)
    # VAE alone reaches CL (itval doubles); G is measured per interval, so the doubled interval
    # shows twice the growth and brings it back to NL (itval reset by the run after)
    assert max(r[2] for r in f.log if r[0] < 200) >= 40.0
    at_arrival = next(r for r in f.log if r[0] == 200.0)
    assert at_arrival[5]["j1"] == 1.0  # the new container starts free (Sec. 5.3)


@pytest.mark.parametrize("scenario", ["flowcon_fixed", "flowcon_5", "flowcon_10", "flowcon_15"])
def test_flowcon_and_na_complete_flowcon_scenarios(scenario):
    for sched in (FlowCon(), NA()):
        m = dlclusterenv.make_sim(scenario, 0).run(sched)
        assert m.jobs_unfinished == 0 and m.jobs_finished >= 3
        assert math.isfinite(m.makespan_s)


def test_flowcon_helps_the_young_job_on_the_fixed_schedule():
    """Sec. 5.3 / Table 2 direction: the MNIST launched at 80 s finishes faster than under NA."""
    fc = dlclusterenv.make_sim("flowcon_fixed", 0).run(FlowCon(alpha=0.05, itval=20))
    na = dlclusterenv.make_sim("flowcon_fixed", 0).run(NA())
    assert fc.jobs[2].jct_s < 0.9 * na.jobs[2].jct_s


def test_alpha_and_itval_change_the_outcome():
    """Table 2 is a sensitivity table: with G measured per interval, the threshold alpha and the
    interval itval each change the young MNIST's completion time on the fixed schedule (with G per
    second, every G was below every alpha of Table 2 and the runs were identical; issue 12).

    The three alphas' completion times differ (not identical runs); by how much depends on the
    loss noise's draw: the smallest pairwise gap over seeds 0-3 was 0.71-3.0 s on main 9c985a2
    (2.64 s at seed 0) and is 0-9.1 s since bias7 drew every loss one normal earlier (0.85 s at
    seed 0; at seed 2 two alphas coincide), so no margin in seconds is asserted."""
    def jct(alpha, itval):
        return dlclusterenv.make_sim("flowcon_fixed", 0).run(FlowCon(alpha=alpha, itval=itval)).jobs[2].jct_s

    by_alpha = [jct(a, 20.0) for a in (0.03, 0.05, 0.10)]
    assert len(set(by_alpha)) == 3
    assert abs(jct(0.05, 60.0) - by_alpha[1]) > 1.0


def test_flowcon_completes_default_scenario_directly():
    m = dlclusterenv.make_sim("default", 0).run(FlowCon())
    assert m.jobs_finished == 60 and m.jobs_unfinished == 0


def test_bad_parameters_rejected():
    with pytest.raises(ValueError, match="alpha"):
        FlowCon(alpha=0)


def test_beta_changes_the_outcome():
    """FlowCon(beta=...) reaches Algorithm 1's CL floor 1 / (beta n) (test_cl_lower_bound_one_over_beta_n
    checks the floor itself): on flowcon_5 beta 1 and 8 decide otherwise than the paper's 2. On
    flowcon_fixed the three give the same decisions (the floor never binds there)."""
    runs = {b: decision_digest("flowcon_5", FlowCon(beta=b), 0) for b in (1.0, 2.0, 8.0)}
    assert len(set(runs.values())) == 3


class _Demotions(FlowCon):
    """Records, at each run of Algorithm 1, the loss points of every container it demoted."""

    def reset(self, seed=None):
        super().reset(seed)
        self.demoted: list[int] = []
        self.runs: list[tuple[float, float]] = []  # (time, itval after the run), one node

    def _run(self, s, here, now):
        was = set(s.wl + s.cl)
        super()._run(s, here, now)
        self.demoted += [len(here[c].observed_loss) for c in s.wl + s.cl if c not in was]
        self.runs.append((now, s.itval))


@pytest.mark.parametrize("scenario", ["flowcon_5", "flowcon_10"])
def test_a_job_with_one_loss_point_is_not_demoted(scenario):
    """With one epoch-end point E(t) had no slope and read as the point itself, so P = 0 and the job
    went NL -> WL -> CL before its second epoch ended (6-130 times a run on these scenarios). Now a
    container needs an E at two runs, each from two points, before it can be demoted."""
    for seed in range(3):
        f = _Demotions()
        dlclusterenv.make_sim(scenario, seed).run(f)
        assert f.demoted and min(f.demoted) >= 2, (seed, f.demoted[:10])


def test_algorithm1_runs_every_itval_without_engine_ticks():
    """Alg. 2's timer asks for its own decision point (Decision.wake_at): on a scenario without a
    tick, Algorithm 1 still runs one itval after the last run (it waited for the next arrival or
    exit: gaps of 22-2,119 s against itval = 20 s on `dltap`)."""
    sc = {"name": "t", "cluster": "flowcon", "engine": {"tick_s": None},
          "workload": {"kind": "fixed", "jobs": [{"model": "VAE", "arrival_s": 0}, {"model": "MNIST", "arrival_s": 200}]}}
    sim = dlclusterenv.make_sim(sc, 0)
    f = _Demotions()
    sim.run(f)
    listeners = {0.0, 200.0, *(j.finish_s for j in sim.jobs.values())}
    gaps = [(t1 - t0, itval) for (t0, itval), (t1, _) in zip(f.runs, f.runs[1:]) if t1 not in listeners]
    assert len(gaps) >= 10
    for gap, itval in gaps:
        assert gap == pytest.approx(itval, abs=1e-6)


def test_wake_false_waits_for_the_engines_decision_points():
    """FlowCon(wake=False), for front doors that cannot express a wake-up (the Gym adapter): no
    wake_at, so on a tick-less scenario the timer's runs wait for arrivals and exits, and the
    run differs from the default's."""
    sc = {"name": "t", "cluster": "flowcon", "engine": {"tick_s": None},
          "workload": {"kind": "fixed", "jobs": [{"model": "VAE", "arrival_s": 0}, {"model": "MNIST", "arrival_s": 200}]}}
    on, off = _Demotions(), _Demotions()
    off.wake = False
    m_on, m_off = (dlclusterenv.make_sim(sc, 0).run(f) for f in (on, off))
    assert 3 * len(off.runs) < len(on.runs)
    assert m_on.jobs[1].jct_s != m_off.jobs[1].jct_s
    with pytest.raises(ValueError, match="wake"):
        FlowCon(wake=1)


# Recorded on main 9efbff0, before FlowCon kept its running jobs' layouts (`_containers`), NA kept
# its idle pass and the engine kept a plan across a limit change (Job.relimit): speed-ups only.
PINNED = [("flowcon_10", 0, {}, "fc9bc68969325c48", "e73beea4b2f9a30e"),
          ("default_2x", 0, {}, "384be8478fb67355", "8131416fd40b5aa4"),
          ("gandiva", 1, {}, "386f4f71c6a32132", "f520db10cff705b1"),
          ("flowcon_15", 1, {"placer": "pack"}, "620dfc2fb51d1c63", "94f8ec21477488fa")]


@pytest.mark.parametrize("scenario,seed,kw,flowcon,na", PINNED)
def test_decisions_as_recorded_before_the_speed_ups(scenario, seed, kw, flowcon, na):
    assert decision_digest(scenario, FlowCon(**kw), seed) == flowcon
    assert decision_digest(scenario, NA(), seed) == na


@pytest.mark.parametrize("scenario", ["flowcon_10", "default", "gandiva"])
def test_containers_are_those_the_job_views_show(scenario, monkeypatch):
    """At every decision point the kept layouts give each node's containers (jobs with a worker
    there once the decision is applied; the new ones in arrival order) with their tasks there, as
    a scan of every job's view does; and ClusterView.task_cores gives each task's TaskView.cores."""
    seen = {"points": 0, "placed": 0}
    real = FlowCon._containers

    def containers(self, view, d):
        got = real(self, view, d)
        want: dict[int, dict[str, list[str]]] = {}
        for job in view.jobs:
            nodes = {t.task_id: int(d.place.get(t.task_id, t.node)) for t in job.tasks}
            for t in job.tasks:
                if t.role == "worker" and nodes[t.task_id] >= 0:
                    want.setdefault(nodes[t.task_id], {})[job.job_id] = [
                        u.task_id for u in job.tasks if nodes[u.task_id] == nodes[t.task_id]]
            for t in job.tasks:
                assert view.task_cores().get(t.task_id, 0.0) == t.cores
        assert got == want
        for n, h in got.items():  # the new containers (they join NL in this order): arrival order
            new = [jid for jid in want[n] if jid not in self.workers.get(n, WorkerState(0.0)).members()]
            assert [jid for jid in h if jid in new] == new
        seen["points"] += 1
        seen["placed"] += bool(d.place)
        return got

    monkeypatch.setattr(FlowCon, "_containers", containers)
    dlclusterenv.make_sim(scenario, 0).run(FlowCon())
    assert seen["points"] > 100 and seen["placed"] > 5, seen

"""Tiresias' kept and compiled shortcuts (issue 14, branch tires9) equal what they replace: the
2D-Gittins index kernel equals numpy's formula bit for bit, the indices a decision reads from
its batched cache equal a recompute, and Admission's kept free-GPU count and lower-priority sums
equal a count made anew at every read."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import needs_philly

import baselines.tiresias as tiresias_mod
from baselines.tiresias import Admission, Tiresias, TiresiasGittins, gittins_indices
from dlclusterenv import make_sim
from dlclusterenv.placers import Capacity, WorkerOrder, place_job

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from decision_log import decision_log, scenario_of  # noqa: E402
from overload import overloaded  # noqa: E402


def gittins_numpy(sizes: np.ndarray, a: float, delta: float) -> float:
    """The index as main computed it before branch tires9 (numpy), the oracle."""
    left = sizes[sizes > a] - a
    if not len(left):
        return 0.0
    done = float((left <= delta).mean()) if math.isfinite(delta) else 1.0
    return done / float(np.minimum(left, delta).mean())


_SIZE = st.floats(0.0, 1e7, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(_SIZE, max_size=40) | st.integers(0, 3000).map(
           lambda n: np.random.default_rng(n).lognormal(7.0, 2.5, n).tolist()),
       a=st.lists(_SIZE | st.sampled_from([0.0, 100.0, 3250.0]), min_size=1, max_size=12),
       data=st.data())
def test_gittins_kernel_equals_numpy(sizes, a, data):
    """Bit for bit, on short lists and on long ones (numpy's pairwise sum blocks by 8 and 128
    and halves above that), at services equal to sizes, with finite and unbounded horizons."""
    sizes = np.array(sizes, dtype=float)
    a = [data.draw(st.sampled_from(sizes.tolist())) if len(sizes) and k % 3 == 2 else x
         for k, x in enumerate(a)]
    delta = [data.draw(st.sampled_from([math.inf]) | st.floats(1e-3, 1e6)) for _ in a]
    got = gittins_indices(sizes, a, delta).tolist()
    assert got == [gittins_numpy(sizes, x, d) for x, d in zip(a, delta)]


def test_gittins_indices_refuses_ragged_input():
    try:
        gittins_indices(np.ones(3), [1.0, 2.0], [1.0])
    except ValueError as e:
        assert "a and delta" in str(e)
    else:
        raise AssertionError("ragged a / delta accepted")


def test_batched_indices_equal_a_recompute(monkeypatch):
    """Every index a 2D-Gittins decision reads through `_ngis` (kept per decision point, made in
    one compiled call for the pairs not kept) equals numpy's formula on that distribution."""
    seen = [0]
    ngis = TiresiasGittins._ngis

    def checked(self, queues, a):
        got = ngis(self, queues, a)
        if self._keyed is not None:
            tops = (*self.thresholds, math.inf)
            want = [-gittins_numpy(np.array(self.sizes), x, tops[q] - x) for q, x in zip(queues, a)]
            assert got == want
            seen[0] += len(got)
        return got

    monkeypatch.setattr(TiresiasGittins, "_ngis", checked)
    sim = make_sim(overloaded(60, 10.0), 0)
    assert sim.run(TiresiasGittins()).jobs_finished == 60
    assert seen[0] > 500  # (indices of running and waiting jobs were read and checked)


class CheckedAdmission(Admission):
    """Admission whose kept free-GPU count and lower-priority sums are checked at every read
    against a count made anew (the suffix sums main made before branch tires9)."""

    reads = 0

    def free_gpus(self):
        got = super().free_gpus()
        assert got == int(self.cap.gpu.sum())
        return got

    def _lower(self, key):
        got = super()._lower(key)
        i = self._below(key)
        alive = [r for r in self.running[i:] if r.job_id not in self._gone]
        assert got == (sum(tiresias_mod._held(r) for r in alive), len(alive))
        CheckedAdmission.reads += 1
        return got


def test_kept_counts_equal_counts_made_anew(monkeypatch):
    """On the overloaded `default` (a long queue, preemptions), LAS and 2D-Gittins."""
    monkeypatch.setattr(tiresias_mod, "Admission", CheckedAdmission)
    for sched in (Tiresias(), TiresiasGittins()):
        CheckedAdmission.reads = 0
        sim = make_sim(overloaded(60, 10.0), 0)
        preempted = []
        decide = sched.decide

        def watch(view, decide=decide):
            d = decide(view)
            preempted.extend(d.preempt)
            return d

        sched.decide = watch
        assert sim.run(sched).jobs_finished == 60
        assert preempted and CheckedAdmission.reads > 100


class _RoundAlways(dict):
    """Waiting buckets that read as non-empty when empty: every decision makes its round."""

    def __bool__(self) -> bool:
        return True


def _with_every_round(cls):
    class EveryRound(cls):
        def reset(self, seed=None):
            super().reset(seed)
            self._waiting = _RoundAlways()

    return EveryRound


@pytest.mark.parametrize("cls", [Tiresias, TiresiasGittins])
@pytest.mark.parametrize("seed", [0, 1])
def test_no_round_where_no_job_waits_decides_as_the_round(monkeypatch, cls, seed):
    """Where no job waits, Tiresias returns the empty decision without an Admission round
    (branch tires11: about half the Philly week's decision points); every decision and finish
    time equals that of a run making the round at every decision point, and rounds are skipped."""
    rounds = [0]
    init = Admission.__init__

    def counted(self, *a, **k):
        rounds[0] += 1
        init(self, *a, **k)

    monkeypatch.setattr(Admission, "__init__", counted)
    made = []
    logs = []
    for sched in (cls(), _with_every_round(cls)()):
        rounds[0] = 0
        logs.append(decision_log("default", sched, seed))
        made.append(rounds[0])
    assert logs[0] == logs[1]
    points = sum(line.startswith("(") for line in logs[1])  # (a decision point's line)
    assert made[1] == points > made[0] > 0


class _StaleLAS(Tiresias):
    """Tiresias whose kept 2D-LAS order is brought up to date only at every third decision point
    (a plain sort of the running records in between), so the next update finds it two points
    stale and takes `_las_order`'s path for an order kept for other jobs; each update is checked
    against the plain sort, record for record."""

    def reset(self, seed=None):
        super().reset(seed)
        self.calls, self.checked = 0, 0

    def _las_order(self, running):
        self.calls += 1
        full = sorted(running.values(), key=lambda r: self.state[r.job_id].rkey)
        if self.calls % 3:
            return full, [self.state[r.job_id].rkey for r in full]
        order, okeys = super()._las_order(running)
        assert [id(r) for r in order] == [id(r) for r in full], "a stale running record kept"
        self.checked += 1
        return order, okeys


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_las_order_kept_for_older_jobs_is_made_anew(seed):
    """`_las_order` reached with an order kept two or more decision points ago (not reached by
    Tiresias itself, which keeps it at every point, but its documented fallback) gives the plain
    sort of the current running records: a job that stopped and started again in between is not
    left with its old record (and old nodes)."""
    sched = _StaleLAS()
    log = decision_log("default", sched, seed)
    assert sched.checked > 10 and log == decision_log("default", Tiresias(), seed)


class WalkCheckedAdmission(Admission):
    """Admission whose walk shortcuts (issue 14, branch tires14) are checked at every use: the
    state `_placed_at` finds against the walk's trials made state by state on a copy, and
    every placement counted after a walk (`_fit` without `m`, dry) against place_job's, charges
    included."""

    seen = {"none": 0, "later": 0, "after walk": 0}

    def _placed_at(self, job, lower):
        at = super()._placed_at(job, lower)
        if at is not None:
            cap = copy.deepcopy(self.cap)
            order = WorkerOrder(self.cluster, cap, self.placer)
            want = -1
            for k in range(len(lower) + 1):
                if k:
                    for n, cpu, mem, bw, gpu in lower[k - 1].per_node:
                        cap.cpu[n] += cpu
                        cap.mem[n] += mem
                        cap.bw[n] += bw
                        cap.gpu[n] += gpu
                    order.touch(lower[k - 1].touched)
                if isinstance(order.nodes(job.worker_demand, job.num_workers,
                                          self.servers(job)), list):
                    want = k
                    break
            assert at == want
            WalkCheckedAdmission.seen["none" if at < 0 else "later"] += 1
        return at

    def _fit(self, job, m=None, blame=None, free=None):
        if m is not None or not self._exact or job.num_ps:
            return super()._fit(job, m, blame, free)
        cap = copy.deepcopy(self.cap)
        want = place_job(self.cluster, cap, self.placer, job.ps_demand, job.worker_demand,
                         job.num_ps, job.num_workers)
        if want is not None and not self._accepts(job, want[1]):
            want, cap = None, self.cap
        cap = [a.copy() for a in (cap.cpu, cap.mem, cap.bw, cap.gpu)]
        got = super()._fit(job, m, blame, free)
        assert got == want
        assert all((a == b).all() for a, b in zip(cap, (self.cap.cpu, self.cap.mem, self.cap.bw,
                                                         self.cap.gpu)))
        WalkCheckedAdmission.seen["after walk"] += 1
        return got


@needs_philly
def test_walk_shortcuts_as_the_trials(monkeypatch):
    """All virtual clusters, 2017-10-02 (the day of test_baseline_tiresias' walk pins): the
    state each walk of a consolidated job first places it at, and each placement after a walk, as the
    trials and place_job give them; walks that never place, walks placed at a later state and
    placements after a walk are all reached."""
    monkeypatch.setattr(tiresias_mod, "Admission", WalkCheckedAdmission)
    for k in WalkCheckedAdmission.seen:
        WalkCheckedAdmission.seen[k] = 0
    sim = make_sim(scenario_of("philly", "all", "2017-10-02", "2017-10-03"), 0)
    sim.run(Tiresias())
    seen = WalkCheckedAdmission.seen
    assert seen["none"] > 100 and seen["later"] >= 3 and seen["after walk"] > 50, seen


class StateCheckedAdmission(Admission):
    """Admission that notes its round's full state as main made it before branch tires14 (from
    the capacity at the round's start, not the view's arrays)."""

    made: list = []

    def __init__(self, view, *a, **k):
        super().__init__(view, *a, **k)
        c = Capacity.of(view)
        self.full = (c.cpu.tobytes(), c.mem.tobytes(), c.bw.tobytes(), c.gpu.tobytes(),
                     tuple(tiresias_mod._sig(r) for r in self.running))
        StateCheckedAdmission.made.append(self)


@pytest.mark.parametrize("cls", [Tiresias, TiresiasGittins])
def test_failures_reused_where_the_state_is_the_last_rounds(monkeypatch, cls):
    """A round's failures are kept only where it started no job (branch tires14: its state is
    then made from the view, at the round's start or end), and the next round reuses them
    exactly where its full state equals that round's; on the overloaded `default` (fractional
    capacities, preemptions) such reuses happen, and rounds that start a job keep nothing."""
    monkeypatch.setattr(tiresias_mod, "Admission", StateCheckedAdmission)
    made = StateCheckedAdmission.made
    made.clear()
    sched = cls()
    decide = sched.decide
    counts = {"reused": 0, "started": 0}

    def checked(view):
        before, kept = len(made), sched._failed
        last = made[-1] if made else None
        d = decide(view)
        if len(made) > before:
            adm = made[-1]
            want = (last is not None and not last.started and kept[0] is not None
                    and adm.full == last.full)
            assert (adm.first is kept[1]) == want
            counts["reused"] += want
            counts["started"] += bool(adm.started)
            assert (sched._failed[0] is None) == bool(adm.started)
        return d

    sched.decide = checked
    assert make_sim(overloaded(200, 10.0), 0).run(sched).jobs_finished == 200
    assert counts["reused"] >= 5 and counts["started"] > 50, counts

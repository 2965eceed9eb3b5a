"""speed.PlanStack keeps the running jobs' plan arrays between compute_rates calls and splices
only the changed run of jobs; its arrays must equal a full gather (values and dtypes) for any
sequence of job lists: starts, ends, moves anywhere in the list."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import baselines
import dlclusterenv
from dlclusterenv.speed import PlanStack, common_run, job_plan


def _full(plans):
    out = {f: np.concatenate([getattr(p, f) for p in plans])
           for fs in PlanStack.FIELDS.values() for f in fs}
    out["consts"] = np.array([p.consts for p in plans], dtype=float)
    return out


@pytest.mark.parametrize("min_pool", [4, PlanStack._MIN_POOL])
def test_splices_equal_a_full_gather(min_pool, monkeypatch):
    """With tiny pools (4 rows) nearly every update makes them again from the stack: a plan whose
    rows were dropped so is copied in again when it comes back; the pools never exceed four
    times the most rows the stack held (twice the live and added rows at a remake)."""
    monkeypatch.setattr(PlanStack, "_MIN_POOL", min_pool)
    sim = dlclusterenv.make_sim("default", 0)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    pool = []  # plans of many jobs and placements, several per job as tasks move
    while not sim.done and len(pool) < 60:
        sim.decide(fifo)
        sim.advance()
        pool += [job_plan(sim.cluster, j) for j in sim.running_jobs() if j.plan not in pool]
    assert len(pool) >= 20
    rng = np.random.default_rng(0)
    stack, plans = PlanStack(), []
    most = np.zeros(4, np.int64)  # the most rows of each kind the stack held
    remakes = 0
    for step in range(300):
        op = rng.integers(4)
        if op == 0 or not plans:  # a job starts somewhere
            plans.insert(int(rng.integers(len(plans) + 1)), pool[rng.integers(len(pool))])
        elif op == 1:  # a job ends
            plans.pop(int(rng.integers(len(plans))))
        elif op == 2:  # a job's tasks move: a new plan at its place
            plans[int(rng.integers(len(plans)))] = pool[rng.integers(len(pool))]
        # op 3: nothing changed
        mark = stack.mark
        stack.update(plans)
        remakes += stack.mark is not mark
        most = np.maximum(most, PlanStack._sizes(plans))
        sizes = [len(stack.pool["task_node"]), len(stack.pool["w_gpu"]), len(stack.pool["links"]),
                 len(stack.pool_consts)]
        assert all(s <= max(min_pool, 4 * m) for s, m in zip(sizes, most)), (step, sizes, most)
        if not plans:  # compute_rates returns before gathering; the next update starts over
            continue
        want = _full(plans)
        arrays, consts = stack.gathered()
        assert np.array_equal(consts, want.pop("consts")), step
        for f, v in want.items():
            got = arrays[f]
            assert got.dtype == v.dtype and np.array_equal(got, v), (step, f)
        for g, fields in PlanStack.FIELDS.items():
            sizes = [len(getattr(p, fields[0])) for p in plans]
            assert stack.ends(g).tolist() == [0, *np.cumsum(sizes).tolist()], (step, g)
        assert stack.entry_counts.tolist() == [len(p.links) for p in plans], step
    assert remakes >= (20 if min_pool == 4 else 0), remakes


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40),
       st.integers(0, 45))
def test_common_head_and_tail_as_a_scan(xs, ys, cap):
    """speed.common_run (a bisection over slice compares) finds the common head and tail, up to n,
    that a scan element by element finds; objects compare by identity, as plans do."""
    pool = [object() for _ in range(4)]
    x, y = [pool[i] for i in xs], [pool[i] for i in ys]
    n = min(cap, len(x), len(y))
    head = next((i for i in range(n) if x[i] is not y[i]), n)
    tail = next((i for i in range(n) if x[-1 - i] is not y[-1 - i]), n)
    assert common_run(x, y, n, False) == head
    assert common_run(x, y, n, True) == tail


def _eight_running():
    """`default` seed 0 under FIFO until at least 8 jobs run: the simulator and its running jobs."""
    sim = dlclusterenv.make_sim("default", 0)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    while not sim.done and len(sim.running_jobs()) < 8:
        sim.decide(fifo)
        sim.advance()
    jobs = list(sim.running_jobs())
    assert len(jobs) >= 8
    return sim, jobs


@pytest.mark.parametrize("min_pool", [4, PlanStack._MIN_POOL])
def test_follow_gives_every_jobs_current_plan(min_pool, monkeypatch):
    """PlanStack.follow over random job lists (jobs start, end, reorder) while jobs in and out of
    the list have their plans dropped (Job.touch, which fills Ledger.replanned): its plans are
    every listed job's current plan, and its pools gather to them, after every step; the jobs
    whose plan was not dropped keep the plan object they had."""
    monkeypatch.setattr(PlanStack, "_MIN_POOL", min_pool)
    sim, pool = _eight_running()  # fully placed jobs
    led, cluster = sim._ledger, sim.cluster
    rng = np.random.default_rng(1)
    stack, jobs = PlanStack(), []
    led.replanned.clear()
    touched_in_list = 0
    for step in range(400):
        op = rng.integers(5)
        if op == 0 or not jobs:  # a job starts
            free = [j for j in pool if j not in jobs]
            if free:  # (new lists, as the engine makes them)
                k = int(rng.integers(len(jobs) + 1))
                jobs = [*jobs[:k], free[rng.integers(len(free))], *jobs[k:]]
        elif op == 1:  # a job ends
            k = int(rng.integers(len(jobs)))
            jobs = jobs[:k] + jobs[k + 1 :]
        elif op == 2:  # the list is made anew in another order
            jobs = [jobs[k] for k in rng.permutation(len(jobs))]
        elif op == 3:  # a job's plan is dropped, in the list or not
            job = pool[rng.integers(len(pool))]
            touched_in_list += job in jobs
            job.touch()
        kept = {id(j): j.plan for j in jobs if j.plan is not None and j not in led.replanned}
        plans = stack.follow(cluster, jobs, led.replanned)
        led.replanned.clear()
        assert len(plans) == len(jobs) and all(p is j.plan for p, j in zip(plans, jobs)), step
        assert all(j.plan is kept[id(j)] for j in jobs if id(j) in kept), step
        if jobs:
            want = _full(plans)
            arrays, consts = stack.gathered()
            assert np.array_equal(consts, want.pop("consts")), step
            assert all(np.array_equal(arrays[f], v) for f, v in want.items()), step
    assert touched_in_list >= 20


def test_replanned_jobs_are_kept_in_the_order_their_plans_were_dropped():
    """Ledger.replanned is read by PlanStack.follow in its own order (where a moved job's plan is
    made and copied into the pools): that order must be the order of the touches, the same in
    every process, not a set's memory-address order."""
    sim, jobs = _eight_running()
    led = sim._ledger
    for perm in np.random.default_rng(0).permuted(np.tile(np.arange(len(jobs)), (5, 1)), axis=1):
        led.replanned.clear()
        order = [jobs[k] for k in perm]
        for job in order + order[:3]:  # a job touched again keeps its first place
            job.touch()
        assert list(led.replanned) == order

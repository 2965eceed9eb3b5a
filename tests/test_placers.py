"""placers: the one-pass worker fill of `pack` and `consolidate` (issue 14, branch tires5) places
and charges exactly as the task-by-task loop it replaced, and Capacity.load's pairwise maxima
equal the maximum over the stacked rows."""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest
from helpers import decision_digest, make_cluster
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

import baselines
import dlclusterenv.placers as placers
from baselines.fixed import FixedShape
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity, consolidate, pack, place_job


def task_by_task(monkeypatch, *args):
    """place_job with the one-pass fill turned off."""
    with monkeypatch.context() as m:
        m.setattr(placers, "_fill_workers", lambda *a: None)
        return place_job(*args)


def random_capacity(cluster, rng) -> Capacity:
    """Free resources anywhere between none and all of each node, in non-dyadic fractions, so
    that a different order of charges would show in the bits."""
    n = cluster.n_nodes
    return Capacity(cluster.cpus * rng.uniform(0, 1, n), cluster.memory * rng.uniform(0, 1, n),
                    cluster.nic * 1e6 * rng.uniform(0, 1, n), rng.integers(0, 4, n))


def two_racks():
    """16 nodes of 4 GPUs in 2 racks: the cluster the placer property tests draw capacities on."""
    return make_cluster(racks=2, nodes_per_rack=8, cpus=16, memory_gb=64, gpus=4, gpu_memory_gb=16)


@pytest.mark.parametrize("placer", [pack, consolidate])
def test_one_pass_fill_as_task_by_task(monkeypatch, placer):
    cluster = two_racks()
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(400):
        cap = random_capacity(cluster, rng)
        worker = Demand(cpu=float(rng.choice([0.3, 0.5, 2.0])), mem_gb=float(rng.choice([0.4, 4.0])),
                        gpu=int(rng.integers(0, 2)), bw_MBps=float(rng.choice([0.0, 10.5])))
        ps = Demand(cpu=0.5, mem_gb=0.4)
        p, w = int(rng.integers(0, 3)), int(rng.integers(2, 60))
        a, b = copy.deepcopy(cap), copy.deepcopy(cap)
        got = place_job(cluster, a, placer, ps, worker, p, w)
        assert got == task_by_task(monkeypatch, cluster, b, placer, ps, worker, p, w)
        for field in ("cpu", "mem", "bw", "gpu"):  # the same charges, or none, to the bit
            assert getattr(a, field).tobytes() == getattr(b, field).tobytes()
        outcomes.add(got is None)
    assert outcomes == {True, False}  # both placements and failures were compared


def test_load_is_the_maximum_of_the_stacked_rows():
    """Including a node without cores (0 / 0: NaN, which np.max propagated) and one without
    GPUs (on a stand-in cluster: a built one's arrays are read-only)."""
    from types import SimpleNamespace

    real = make_cluster(nodes_per_rack=6, cpus=16, memory_gb=64, gpus=4, gpu_memory_gb=16)
    cluster = SimpleNamespace(cpus=real.cpus.copy(), memory=real.memory.copy(),
                              gpus=real.gpus.copy(), n_gpus=real.n_gpus)
    cluster.cpus[0], cluster.gpus[1] = 0.0, 0
    cap = random_capacity(real, np.random.default_rng(1))
    cap.cpu[0] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        used = [1 - cap.cpu / cluster.cpus, 1 - cap.mem / cluster.memory,
                np.where(cluster.gpus > 0, 1 - cap.gpu / np.maximum(cluster.gpus, 1), 0.0)]
        load = cap.load(cluster)
    assert np.isnan(load[0])
    assert load.tobytes() == np.max(used, axis=0).tobytes()


def whole_capacity(cluster, rng) -> Capacity:
    """Free resources in whole cores, GB, bytes/s and GPUs, some of them negative (a node
    oversubscribed), as on the Philly preset."""
    n = cluster.n_nodes
    return Capacity(np.floor(cluster.cpus * rng.uniform(-0.1, 1, n)),
                    np.floor(cluster.memory * rng.uniform(-0.1, 1, n)),
                    np.floor(cluster.nic * 1e6 * rng.uniform(0, 1, n)), rng.integers(0, 5, n))


@pytest.mark.parametrize("placer", [pack, consolidate])
def test_worker_order_counts_what_place_job_places(placer):
    """WorkerOrder.nodes (issue 14, branch tires6: Tiresias' walk trials) gives the worker nodes
    of place_job for a job without PS, without charging, on whole-number capacities, also after
    charges and releases it was told of (`touch`); with `most`, SPREAD exactly when place_job's
    workers do not all go to the first `most` nodes."""
    cluster = two_racks()
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(60):
        cap = whole_capacity(cluster, rng)
        order = placers.WorkerOrder(cluster, cap, placer)
        for _ in range(10):
            worker = Demand(cpu=float(rng.choice([0.0, 1.0, 2.0])),
                            mem_gb=float(rng.choice([0.0, 4.0])), gpu=1,
                            bw_MBps=float(rng.choice([0.0, 10.0])))
            w = int(rng.integers(1, 12))
            before = [a.copy() for a in (cap.cpu, cap.mem, cap.bw, cap.gpu)]
            got = place_job(cluster, copy.deepcopy(cap), placer, worker, worker, 0, w)
            want = None if got is None else got[1]
            assert order.nodes(worker, w) == want
            for most in (1, 2):
                spread = want is not None and len(set(want)) > most
                counted = order.nodes(worker, w, most)
                assert counted == (placers.WorkerOrder.SPREAD if spread or (
                    want is None and counted == placers.WorkerOrder.SPREAD) else want)
            assert all((a == b).all() for a, b in zip(before, (cap.cpu, cap.mem, cap.bw, cap.gpu)))
            outcomes.add(want is None)
            # some charge or release on a few nodes, then told
            nodes = rng.choice(cluster.n_nodes, size=3, replace=False).tolist()
            sign = int(rng.choice([-1, 1]))
            for n in nodes:
                cap.take(n, Demand(cpu=2.0, mem_gb=8.0, gpu=1), sign)
            order.touch(nodes)
    assert outcomes == {True, False}


@pytest.mark.parametrize("placer", [pack, consolidate])
def test_worker_order_kept_results_as_a_fresh_scan(placer):
    """WorkerOrder.nodes keeps a scan's result until a node at or before the last one it read
    changes, and `rebase` follows a new capacity (issue 14, branch tires7): through walks of
    small charges and releases (one node, or a few, as a Tiresias walk releases a job) and
    rebases onto a capacity that differs on some nodes, every answer equals that of an order
    made anew on the same capacity, and most answers come from kept results."""
    cluster = two_racks()
    rng = np.random.default_rng(1)
    demands = [Demand(cpu=1.0, mem_gb=4.0, gpu=1), Demand(cpu=2.0, mem_gb=0.0, gpu=1, bw_MBps=10.0)]
    asks = [(d, w, most) for d in demands for w, most in ((1, None), (4, 1), (6, 2), (9, None))]
    queries = scans = 0
    outcomes = set()
    for _ in range(30):
        cap = whole_capacity(cluster, rng)
        order = placers.WorkerOrder(cluster, cap, placer)
        scan = order._scan

        def counted(*a):
            nonlocal scans
            scans += 1
            return scan(*a)

        order._scan = counted
        for step in range(40):
            for d, w, most in asks:
                got = order.nodes(d, w, most)
                assert got == placers.WorkerOrder(cluster, copy.deepcopy(cap), placer).nodes(d, w, most)
                queries += 1
                outcomes.add(got if got in (None, placers.WorkerOrder.SPREAD) else "placed")
            if step % 10 == 9:  # the next round: a new capacity, a few nodes changed
                cap = copy.deepcopy(cap)
                for n in rng.choice(cluster.n_nodes, size=3, replace=False).tolist():
                    cap.take(n, Demand(cpu=1.0, mem_gb=0.0, gpu=1), int(rng.choice([-1, 1])))
                assert len(order.rebase(cap)) <= 3
                continue
            nodes = rng.choice(cluster.n_nodes, size=int(rng.integers(1, 3)), replace=False).tolist()
            sign = int(rng.choice([-1, 1]))
            for n in nodes:
                cap.take(n, Demand(cpu=2.0, mem_gb=8.0, gpu=1), sign)
            order.touch(nodes)
    assert outcomes == {None, placers.WorkerOrder.SPREAD, "placed"}
    assert scans < 0.7 * queries  # kept results were answered (and checked) above


# a walk: whole free values per node of two_racks (cores, GB, bytes/s, GPUs; some oversubscribed),
# then jobs given back one after another, each holding whole charges on one to three nodes
_FREE = st.lists(st.tuples(st.integers(-2, 16), st.integers(-4, 64),
                           st.sampled_from([0, 10**7, 10**9]), st.integers(0, 4)),
                 min_size=16, max_size=16)
_JOB = st.lists(st.tuples(st.integers(0, 15), st.integers(0, 8), st.integers(0, 16),
                          st.sampled_from([0, 10**7]), st.integers(1, 4)), min_size=1, max_size=3)
_WORKER = st.tuples(st.sampled_from([0.0, 1.0, 2.0]), st.sampled_from([0.0, 4.0]),
                    st.sampled_from([0.0, 10.0]), st.integers(1, 4))


def _arrays(releases) -> list[np.ndarray]:
    """placed_state's releases: each job's (node, cores, GB, bytes/s, GPUs) rows as a float array."""
    return [np.array(r, dtype=float).reshape(len(r), 5) for r in releases]


def _walked(cluster, cap, placer, d, w, most, releases) -> int:
    """The first state of the walk (0 before the first release, k after the k-th) at which an
    order made anew on that state's capacity places the workers on at most `most` nodes (-1:
    none), state by state as Tiresias' walk made its trials before branch tires14: the oracle."""
    cap = copy.deepcopy(cap)
    for k in range(len(releases) + 1):
        if k:
            for n, cpu, mem, bw, gpu in releases[k - 1]:
                cap.cpu[n] += cpu
                cap.mem[n] += mem
                cap.bw[n] += bw
                cap.gpu[n] += gpu
        if isinstance(placers.WorkerOrder(cluster, copy.deepcopy(cap), placer).nodes(d, w, most), list):
            return k
    return -1


def _per_node(job) -> tuple:
    """A job's charges summed per node, as Tiresias' kept running jobs hold them."""
    per: dict[int, list] = {}
    for n, cpu, mem, bw, gpu in job:
        v = per.setdefault(n, [n, 0.0, 0.0, 0.0, 0])
        for k, x in enumerate((cpu, mem, bw, gpu), 1):
            v[k] += x
    return tuple(map(tuple, per.values()))


@settings(max_examples=400, deadline=None)
@given(free=_FREE, jobs=st.lists(_JOB, max_size=8), worker=_WORKER, most=st.integers(1, 3))
@example(free=[(0, 0, 0, 0)] * 15 + [(16, 64, 0, 4)], jobs=[[(3, 2, 8, 0, 2)]],
         worker=(1.0, 4.0, 0.0, 4), most=1).via("placed before the first release")
@example(free=[(14, 56, 0, 2)] + [(0, 0, 0, 0)] * 15, jobs=[[(1, 4, 16, 0, 2)], [(2, 2, 8, 0, 2)]],
         worker=(1.0, 4.0, 0.0, 4), most=1).via("a half-free node ahead of every release: never")
@example(free=[(0, 0, 0, 0)] * 16, jobs=[[(1, 4, 16, 0, 2)], [(1, 4, 16, 0, 2)]],
         worker=(1.0, 4.0, 0.0, 4), most=1).via("a node given back twice: placed after the second")
@example(free=[(14, 56, 0, 2)] + [(0, 0, 0, 0)] * 15, jobs=[[(1, 4, 16, 0, 2)], [(2, 2, 8, 0, 2)]],
         worker=(1.0, 4.0, 0.0, 4), most=2).via("an untouched node and a touched one together")
def test_placed_state_is_the_first_state_a_trial_places(free, jobs, worker, most):
    """WorkerOrder.placed_state (Tiresias' walks of consolidated jobs answered without their
    trials, issue 14, branch tires14) is the first state of the walk at which an order made
    anew on that state's capacity places the workers on at most `most` nodes, or -1 where none
    does; for pack and consolidate (whose keys are the free GPUs)."""
    cluster = two_racks()
    cap = Capacity(*(np.array([float(v[k]) for v in free]) for k in range(3)),
                   np.array([v[3] for v in free], dtype=np.int64))
    d = Demand(cpu=worker[0], mem_gb=worker[1], bw_MBps=worker[2], gpu=1)
    w = worker[3] * most
    releases = [_per_node(job) for job in jobs]
    for placer in (pack, consolidate):
        got = placers.WorkerOrder(cluster, copy.deepcopy(cap), placer).placed_state(
            d, w, most, _arrays(releases))
        event(f"{placer.__name__}, most {min(most, 2)}: "
              f"{'none' if got < 0 else 'now' if got == 0 else 'later'}")
        assert got == _walked(cluster, cap, placer, d, w, most, releases)


def test_placed_state_on_random_walks():
    """As the state-by-state trials on 1,500 random walks of whole charges: mostly busy nodes
    given back by up to 30 jobs, as in Tiresias' walks, a few oversubscribed, with a kept order
    that has a dirty node when asked, at most 1 to 3 nodes; none, now and a later state are all
    reached."""
    cluster = two_racks()
    rng = np.random.default_rng(7)
    answers = {"none": 0, "now": 0, "later": 0}
    for k in range(1500):
        free = rng.integers(0, 5, size=(16, 4)) * np.array([2, 8, 10**7, 1])
        free[rng.random(16) < 0.1, :2] -= 2  # a few oversubscribed nodes
        cap = Capacity(*(free[:, k].astype(float) for k in range(3)), free[:, 3].astype(np.int64))
        releases = [_per_node([(int(n), float(rng.integers(0, 5)), float(4 * rng.integers(0, 5)),
                                float(rng.choice([0, 10**7])), int(rng.integers(1, 3)))
                               for n in rng.choice(16, size=int(rng.integers(1, 4)), replace=False)])
                    for _ in range(int(rng.integers(0, 30)))]
        d = Demand(cpu=float(rng.choice([0, 1, 2])), mem_gb=float(rng.choice([0, 4])),
                   bw_MBps=float(rng.choice([0, 10])), gpu=1)
        most = int(rng.integers(1, 4))
        w = int(rng.integers(1, 7)) * most
        placer = pack if k % 3 else consolidate
        order = placers.WorkerOrder(cluster, copy.deepcopy(cap), placer)
        order.cap.gpu[3] += 1  # a change it is told of, not yet refreshed
        order.touch([3])
        cap.gpu[3] += 1
        got = order.placed_state(d, w, most, _arrays(releases))
        assert got == _walked(cluster, cap, placer, d, w, most, releases)
        answers["none" if got < 0 else "now" if got == 0 else "later"] += 1
    assert min(answers.values()) > 100, answers


def test_integral():
    assert placers.integral(np.array([0.0, -3.0, 48.0]), 2.0, 1.25e10)
    assert not placers.integral(np.array([0.0, 0.5]))
    assert not placers.integral(2.0**53)
    assert not placers.integral(np.array([np.nan]))


_WITH_PLACER = [n for n, cls in baselines.REGISTRY.items() if "placer" in inspect.signature(cls).parameters]


@pytest.mark.parametrize("name", _WITH_PLACER)
def test_every_schedulers_placer_changes_its_decisions(name):
    """A scheduler's `placer` argument reaches its placements: on tiny each placer it accepts
    (Hadoop's heartbeat only where it is the default) gives decisions of their own."""
    default = inspect.signature(baselines.REGISTRY[name]).parameters["placer"].default
    names = {"spread", "pack", "consolidate", default}
    digests = {pl: decision_digest("tiny", baselines.make(name, placer=pl), 0) for pl in names}
    assert len(set(digests.values())) == len(names), digests


def test_fixed_shapes_placer_changes_its_decisions():
    """FixedShape(1, 3): its default consolidate, pack and spread place the jobs differently."""
    digests = {pl: decision_digest("tiny", FixedShape(1, 3, placer=pl), 0)
               for pl in ("spread", "pack", "consolidate")}
    assert len(set(digests.values())) == 3, digests

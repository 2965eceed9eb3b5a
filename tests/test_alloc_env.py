"""The proposal envs' round state: what the policy has added shows in the observation, and the
work-conserving allocation env starts every job that fits."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import dlclusterenv  # noqa: F401


def _first_add(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask[:-1])[0])


def test_observation_shows_the_round_so_far():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack")
    obs, _ = env.reset(seed=0)
    a = _first_add(env.unwrapped.action_masks())
    slot, role = divmod(a, 2)
    obs2, *_ = env.step(a)
    col = 2 + role  # p or w of the slot
    assert obs2["jobs"][slot, col] > obs["jobs"][slot, col]
    assert obs2["nodes"][:, 1:4].sum() < obs["nodes"][:, 1:4].sum()  # capacity spent


def test_work_conserving_alloc_never_ends_a_round_with_a_startable_job_waiting():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", work_conserving=True)
    env.reset(seed=0)
    done = False
    while not done:
        m = env.unwrapped.action_masks()
        # end the round whenever allowed, else add the first worker (a PS once there is one)
        workers = np.flatnonzero(m[1:-1:2]) * 2 + 1
        a = len(m) - 1 if m[-1] else int(workers[0]) if len(workers) else _first_add(m)
        *_, te, tr, info = env.step(a)
        done = te or tr
    assert info["metrics"]["jobs_unfinished"] == 0
    plain = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack")
    plain.reset(seed=0)
    m = plain.unwrapped.action_masks()
    assert m[-1]  # without the option, ending at once is allowed
    env.reset(seed=0)
    assert not env.unwrapped.action_masks()[-1]


def test_max_adds_per_round_bounds_one_jobs_growth():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", max_adds_per_round=2)
    env.reset(seed=0)
    m = env.unwrapped.action_masks()
    slot = _first_add(m) // 2
    for role in (0, 1):  # one PS, one worker: the bound is reached
        assert env.unwrapped.action_masks()[2 * slot + role]
        env.step(2 * slot + role)
    # the round closed by itself (nothing else could be added): the job runs with exactly 2 tasks
    job = env.unwrapped.sim.active_jobs()[slot]
    assert job.status == "running" and job.num_ps + job.num_workers == 2
    free = gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack")
    free.reset(seed=0)
    free.step(2 * slot)
    free.step(2 * slot + 1)
    assert free.unwrapped.action_masks()[2 * slot + 1]  # unbounded: it could still grow


def test_max_adds_per_round_must_not_be_negative():
    import pytest

    with pytest.raises(ValueError, match="max_adds_per_round"):
        gym.make("DLClusterAlloc-v0", scenario="tiny", max_adds_per_round=-1)


SHAPES = [[1, 1], [2, 4], [4, 4], [8, 8]]


def _shape_env(**kw):
    return gym.make("DLClusterAlloc-v0", scenario="tiny", placer="pack", shapes=SHAPES, **kw)


def test_a_shape_action_sizes_a_job_in_one_step_and_only_growth_is_offered():
    env = _shape_env()
    env.reset(seed=0)
    base = env.unwrapped
    assert base.action_space.n == len(SHAPES) * base.max_jobs + 1
    m = base.action_masks()
    a = int(np.flatnonzero(m[:-1])[0])
    slot, k = divmod(a, len(SHAPES))
    job = base.slots()[slot]
    round_ = base.decision_index
    env.step(a)
    if base.decision_index == round_:  # the round goes on: proposed, and no second shape
        assert base.proposed(job) == tuple(SHAPES[k])
        assert not base.action_masks()[slot * len(SHAPES) : (slot + 1) * len(SHAPES)].any()
    else:  # nothing else to decide: the round closed with the job running at that shape
        assert (job.num_ps, job.num_workers) == tuple(SHAPES[k]) and job.status == "running"


def test_shape_mask_is_exactly_what_fits():
    """Every offered shape is carried out whole; every refused one fails to place or shrinks."""
    env = _shape_env(max_jobs=8)
    rng = np.random.default_rng(0)
    env.reset(seed=1)
    base = env.unwrapped
    for _ in range(200):
        m = base.action_masks()
        slots = base.slots()
        for slot, job in enumerate(slots):
            for k, (p, w) in enumerate(SHAPES):
                p0, w0 = base.proposed(job)
                before = (base._cap.gpu.copy(), {r: list(v) for r, v in base._added.get(job.job_id, {}).items()})
                grows = p >= p0 and w >= w0 and (p, w) != (p0, w0) and job.job_id not in base._shaped
                if grows and base._grow(slot, p, w):
                    assert m[slot * len(SHAPES) + k], (slot, k)
                    # undo the probe
                    for role, keep in (("ps", len(before[1].get("ps", []))), ("worker", len(before[1].get("worker", [])))):
                        d = job.model.ps if role == "ps" else job.model.worker
                        while len(base._added[job.job_id][role]) > keep:
                            base._cap.take(base._added[job.job_id][role].pop(), d, -1)
                    if not before[1]:
                        base._added.pop(job.job_id)
                else:
                    assert not m[slot * len(SHAPES) + k], (slot, k)
                assert (base._cap.gpu == before[0]).all()
        a = int(rng.choice(np.flatnonzero(m)))
        *_, te, tr, _ = env.step(a)
        if te or tr:
            break


def test_work_conserving_shapes_start_every_job_that_fits():
    env = _shape_env(work_conserving=True)
    env.reset(seed=0)
    done = False
    while not done:
        m = env.unwrapped.action_masks()
        a = len(m) - 1 if m[-1] else int(np.flatnonzero(m[:-1])[0])
        *_, te, tr, info = env.step(a)
        done = te or tr
    assert info["metrics"]["jobs_unfinished"] == 0


def test_adapter_follows_a_scheduler_whose_shapes_are_on_the_menu():
    from dlclusterenv import make_sim
    from dlclusterenv.adapter import AdapterError, SchedulerAdapter
    from dlclusterenv.api import Decision, Scheduler
    from dlclusterenv.placers import Capacity, add_placement, get_placer, place_job

    class Fixed(Scheduler):
        name = "fixed"

        def __init__(self, shape):
            self.shape = shape

        def decide(self, view):
            d, cap = Decision(), Capacity.of(view)
            for j in view.pending:
                got = place_job(view.cluster, cap, get_placer("pack"), j.ps_demand, j.worker_demand,
                                *self.shape)
                if got is not None:
                    d.allocate[j.job_id] = self.shape
                    add_placement(d, j.job_id, *got)
            return d

    direct = make_sim("tiny", 3).run(Fixed((2, 4)))
    via = SchedulerAdapter(_shape_env(max_jobs=32), Fixed((2, 4))).run(3)
    assert via.summary() == direct.summary()
    with pytest.raises(AdapterError, match=r"\(2, 2\) is not one of the env's shapes"):
        SchedulerAdapter(_shape_env(max_jobs=32), Fixed((2, 2))).run(3)


@pytest.mark.parametrize(
    "shapes, match",
    [([[0, 1]], r"shapes\[0\]"), ([[1, 1], [1, 1]], r"shapes\[1\]: \(1, 1\) appears twice"),
     ([], "shapes: empty"), ("2x4", "shapes: expected a list"), ([[1, 2, 3]], r"shapes\[0\]")],
)
def test_bad_shapes_are_refused_by_field(shapes, match):
    with pytest.raises(ValueError, match=match):
        gym.make("DLClusterAlloc-v0", scenario="tiny", shapes=shapes)


def test_shapes_exclude_max_adds_per_round():
    with pytest.raises(ValueError, match="max_adds_per_round"):
        gym.make("DLClusterAlloc-v0", scenario="tiny", shapes=SHAPES, max_adds_per_round=2)


def test_grow_running_false_sizes_a_job_once_when_it_starts():
    env = _shape_env(grow_running=False)
    env.reset(seed=0)
    base, k = env.unwrapped, len(SHAPES)
    rng = np.random.default_rng(0)
    for _ in range(300):
        m = base.action_masks()
        for slot, job in enumerate(base.slots()):
            if job.status == "running":
                assert not m[slot * k : (slot + 1) * k].any()
        *_, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        if te or tr:
            break
    with pytest.raises(ValueError, match="grow_running"):
        gym.make("DLClusterAlloc-v0", scenario="tiny", grow_running=False)


def test_consolidate_starts_a_big_job_on_the_emptiest_node_where_pack_splinters_it():
    from dlclusterenv.placers import Capacity, consolidate, pack, place_job
    from dlclusterenv.workload import build

    _, cluster, zoo, _ = build("default", 0)
    model = zoo.models["ResNet-50"]
    cap = Capacity(cluster.cpus.astype(float), cluster.memory.astype(float),
                   cluster.nic.astype(float), cluster.gpus.astype(np.int64).copy())
    cap.gpu[:8] = 1  # eight nodes with one free GPU each; the rest empty
    layouts = {}
    for placer in (pack, consolidate):
        c = Capacity(cap.cpu.copy(), cap.mem.copy(), cap.bw.copy(), cap.gpu.copy())
        _, workers = place_job(cluster, c, placer, model.ps, model.worker, 1, 8)
        layouts[placer.__name__] = set(workers)
    assert len(layouts["consolidate"]) == 1 and min(layouts["consolidate"]) >= 8
    assert len(layouts["pack"]) == 8  # best fit takes the crumbs first


def test_shape_env_with_shaping_is_deterministic():
    def rollout():
        env = _shape_env(work_conserving=True, shaping=True, grow_running=False)
        obs, _ = env.reset(seed=5)
        rng = np.random.default_rng(5)
        trace = []
        while True:
            obs, r, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
            trace.append((r, obs["jobs"].tobytes(), obs["nodes"].tobytes()))
            if te or tr:
                return trace

    assert rollout() == rollout()


def test_fits_many_at_is_one_column_of_fits_many():
    """The allocation masks redo a changed node with `fits_many_at`: equal to that node's column of
    `fits_many`, including capacities exactly at a demand and within the tolerances."""
    from dlclusterenv.config import Demand
    from dlclusterenv.placers import Capacity

    rng = np.random.default_rng(5)
    demands = [Demand(cpu=c, mem_gb=m, gpu=g, bw_MBps=b) for c, m, g, b in
               [(4, 16, 1, 0), (2, 8, 0, 100), (8, 64, 1, 1000), (0.5, 1, 0, 0)]]
    need = Capacity.needs(demands)
    cap = Capacity(rng.choice([0.0, 0.5, 2 - 1e-10, 4.0, 8.0], 40), rng.choice([0.0, 8.0, 16 - 1e-10, 64.0], 40),
                   rng.choice([0.0, 1e8 - 1e-4, 1e9, 2e9], 40), rng.integers(0, 3, 40))
    whole = cap.fits_many(need)
    assert whole.any() and not whole.all()
    for a in range(40):
        assert np.array_equal(cap.fits_many_at(a, need), whole[:, a]), a

"""DLClusterAlloc-v0's `resize_running` option: with shapes, a running job can also be resized to
a smaller or other grid shape (released and placed afresh, tasks that stay on their node not moving)."""

import gymnasium as gym
import numpy as np
import pytest

import dlclusterenv  # noqa: F401  (registers the env ids)

SHAPES = [[1, 1], [2, 4], [4, 8]]


def _env(**kw):
    return gym.make("DLClusterAlloc-v0", scenario="default", shapes=SHAPES, placer="consolidate",
                    **kw).unwrapped


def _run_until_running_at(env, shape):
    """Start every job at `shape` where it fits (else the end of the round) until a round begins
    with a running job at `shape`; its slot."""
    env.reset(seed=0)
    for _ in range(2000):
        for i, job in enumerate(env.slots()):
            if job.status == "running" and (job.num_ps, job.num_workers) == shape and job.job_id not in env._shaped:
                return i
        mask = env.action_masks()
        pend = [i for i, j in enumerate(env.slots()) if j.status != "running"
                and mask[i * env.per_job + SHAPES.index(list(shape))]]
        a = pend[0] * env.per_job + SHAPES.index(list(shape)) if pend else env.action_space.n - 1
        if not mask[a]:
            a = int(np.flatnonzero(mask)[0])
        env.step(a)
    raise AssertionError("no running job at the shape")


def test_a_running_job_is_shrunk_keeping_tasks_in_place():
    env = _env(resize_running=True)
    slot = _run_until_running_at(env, (4, 8))
    job = env.slots()[slot]
    before = {t.task_id: t.node for t in job.tasks.values()}
    a = slot * env.per_job + SHAPES.index([2, 4])
    assert env.action_masks()[a]
    env.step(a)
    assert env._proposed(job) == (2, 4)
    *_, info = env.step(env.action_space.n - 1)  # end the round: the engine resizes the job
    assert not info["invalid_action"]
    assert (job.num_ps, job.num_workers) == (2, 4)
    kept = [t for t in job.tasks.values() if t.node >= 0]
    assert len(kept) == 6
    # the new tasks sit on nodes the job held: a shrink under consolidate moves no task off its node
    assert {t.node for t in kept} <= set(before.values())


def test_without_the_option_a_running_job_is_offered_growths_only():
    env = _env(grow_running=True)
    slot = _run_until_running_at(env, (4, 8))
    mask = env.action_masks()
    assert not mask[slot * env.per_job: (slot + 1) * env.per_job].any()  # 4x8 is the largest shape
    env2 = _env(resize_running=True)
    slot2 = _run_until_running_at(env2, (4, 8))
    m2 = env2.action_masks()[slot2 * env2.per_job: (slot2 + 1) * env2.per_job]
    assert m2.tolist() == [True, True, False]


def test_random_resizes_run_to_the_end_without_invalid_actions():
    env = _env(resize_running=True, work_conserving=True)
    rng = np.random.default_rng(3)
    env.reset(seed=3)
    resized = 0
    for _ in range(20000):
        mask = env.action_masks()
        a = int(rng.choice(np.flatnonzero(mask)))
        if a != env.action_space.n - 1:
            slot, k = divmod(a, env.per_job)
            resized += env._is_resize(env.slots()[slot], *env.shapes[k])
        _, _, te, tr, info = env.step(a)
        assert not info["invalid_action"]
        if te or tr:
            break
    assert te and resized > 0


@pytest.mark.parametrize("kw", [{}, {"grow_running": False}])
def test_resize_needs_shapes_and_growth(kw):
    args = {"resize_running": True, **kw}
    if not kw:
        with pytest.raises(ValueError, match="resize_running"):
            gym.make("DLClusterAlloc-v0", scenario="default", **args)
    else:
        with pytest.raises(ValueError, match="resize_running"):
            _env(**args)


def _allreduce_default():
    from dlclusterenv.workload import load_scenario

    sc, _ = load_scenario("default")
    return sc.model_copy(update={"workload": sc.workload.model_copy(update={"comm": "allreduce"})})


@pytest.mark.parametrize("resize", [False, True])
def test_work_conservation_never_forces_a_running_allreduce_job_to_grow(resize):
    """work_conserving masks the end of a round only while a job that does not run yet could
    start: a running all-reduce job (no PS, by design) is running, so its growths never mask it.
    (Before, `p < 1` counted it as not started, so with grow_running every round had to grow it.)"""
    env = gym.make("DLClusterAlloc-v0", scenario=_allreduce_default(), shapes=SHAPES, placer="consolidate",
                   work_conserving=True, resize_running=resize).unwrapped
    rng = np.random.default_rng(1)
    env.reset(seed=1)
    running_growable = 0
    for _ in range(3000):
        mask = env.action_masks()
        slots = env.slots()
        pending = [i for i, j in enumerate(slots) if j.status != "running"
                   and mask[i * env.per_job:(i + 1) * env.per_job].any()]
        running = [i for i, j in enumerate(slots) if j.status == "running"
                   and mask[i * env.per_job:(i + 1) * env.per_job].any()]
        assert mask[-1] == (not pending)
        running_growable += bool(running) and not pending
        _, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if te or tr:
            break
    assert running_growable > 0  # the case arose

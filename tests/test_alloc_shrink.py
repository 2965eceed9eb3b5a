"""DLClusterAlloc-v0's `shrink_running` option: with shapes, a running job can also shrink to a
smaller grid shape, keeping its first tasks where they are."""

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


def test_a_running_job_is_shrunk_keeping_its_first_tasks_in_place():
    env = _env(shrink_running=True)
    slot = _run_until_running_at(env, (4, 8))
    job = env.slots()[slot]
    before = {t.task_id: t.node for t in job.tasks.values()}
    free_gpu = env._cap_gpus
    a = slot * env.per_job + SHAPES.index([2, 4])
    assert env.action_masks()[a]
    env.step(a)
    assert env.proposed(job) == (2, 4)
    assert env._cap_gpus == free_gpu + 4 * job.model.worker.gpu  # the dropped workers' GPUs, for this round
    assert env._end_round().allocate == {job.job_id: (2, 4)}
    *_, info = env.step(env.action_space.n - 1)  # end the round: the engine drops the last tasks
    assert not info["invalid_action"]
    assert (job.num_ps, job.num_workers) == (2, 4)
    after = {t.task_id: t.node for t in job.tasks.values()}
    want = [f"{job.job_id}/ps{i}" for i in range(2)] + [f"{job.job_id}/w{i}" for i in range(4)]
    assert after == {t: before[t] for t in want}


def test_without_the_option_a_running_job_is_offered_growths_only():
    env = _env(grow_running=True)
    slot = _run_until_running_at(env, (4, 8))
    mask = env.action_masks()
    assert not mask[slot * env.per_job: (slot + 1) * env.per_job].any()  # 4x8 is the largest shape
    env2 = _env(shrink_running=True)
    slot2 = _run_until_running_at(env2, (4, 8))
    m2 = env2.action_masks()[slot2 * env2.per_job: (slot2 + 1) * env2.per_job]
    assert m2.tolist() == [True, True, False]  # 1x1 and 2x4 are shrinks


def test_random_shrinks_run_to_the_end_without_invalid_actions():
    env = _env(shrink_running=True, work_conserving=True)
    rng = np.random.default_rng(3)
    env.reset(seed=3)
    shrunk = 0
    for _ in range(20000):
        mask = env.action_masks()
        a = int(rng.choice(np.flatnonzero(mask)))
        if a != env.action_space.n - 1:
            slot, k = divmod(a, env.per_job)
            shrunk += env.is_shrink(env.slots()[slot], *env.shapes[k])
        _, _, te, tr, info = env.step(a)
        assert not info["invalid_action"]
        if te or tr:
            break
    assert te and shrunk > 0


@pytest.mark.parametrize("kw", [{}, {"grow_running": False}])
def test_shrink_needs_shapes_and_growth(kw):
    args = {"shrink_running": True, **kw}
    if not kw:
        with pytest.raises(ValueError, match="shrink_running"):
            gym.make("DLClusterAlloc-v0", scenario="default", **args)
    else:
        with pytest.raises(ValueError, match="shrink_running"):
            _env(**args)


def _allreduce_default():
    from dlclusterenv.workload import load_scenario

    sc, _ = load_scenario("default")
    return sc.model_copy(update={"workload": sc.workload.model_copy(update={"comm": "allreduce"})})


@pytest.mark.parametrize("shrink", [False, True])
def test_work_conservation_never_forces_a_running_allreduce_job_to_grow(shrink):
    """work_conserving masks the end of a round only while a job that does not run yet could
    start: a running all-reduce job (no PS, by design) is running, so its growths never mask it.
    (Before, `p < 1` counted it as not started, so with grow_running every round had to grow it.)"""
    env = gym.make("DLClusterAlloc-v0", scenario=_allreduce_default(), shapes=SHAPES, placer="consolidate",
                   work_conserving=True, shrink_running=shrink).unwrapped
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

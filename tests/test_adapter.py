"""One house: a Scheduler run through a Gym env (SchedulerAdapter) gives exactly the metrics it gets
when run on the simulator directly, and a decision the env cannot express raises AdapterError."""

from __future__ import annotations

import gymnasium as gym
import pytest
from conftest import make_env

import baselines
import dlclusterenv
from dlclusterenv import Decision, Scheduler
from dlclusterenv.adapter import AdapterError, SchedulerAdapter, _limit_digits
from dlclusterenv.envs.share import DIGIT_BASE, MAX_DIGITS

POLICIES = ("fifo", "random")
SEEDS = (0, 1)
# no env expresses a wake-up (Decision.wake_at), so these run through the adapter without theirs
NO_WAKE = {name: {"wake": False} for name in ("flowcon", "tiresias", "tiresias-gittins")}


def direct(policy: str, seed: int, **kw) -> dict:
    return dlclusterenv.make_sim("tiny", seed).run(baselines.make(policy, **kw)).summary()


def through_env(env: gym.Env, policy: str, seed: int, **kw) -> dict:
    return SchedulerAdapter(env, baselines.make(policy, **kw)).run(seed).summary()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("env_id", ["DLClusterPlace-v0", "DLClusterJoint-v0", "DLCluster-v0"])
def test_adapter_matches_simulator(env_id, policy, seed):
    want = direct(policy, seed)
    assert want["jobs_finished"] > 0
    assert through_env(make_env(env_id), policy, seed) == want


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("placer", ["spread", "pack"])
def test_adapter_alloc_env_with_matching_placer(placer, seed):
    """DLClusterAlloc places with its own placer: FIFO with the same placer is expressible."""
    env = make_env("DLClusterAlloc-v0", placer=placer)
    assert through_env(env, "fifo", seed, placer=placer) == direct("fifo", seed, placer=placer)


def test_adapter_alloc_env_fifo_default_placer():
    """FIFO's default placement is Hadoop's (a random node with a free slot, baselines/fifo.py),
    which no placer of the allocation env does: refused like random placement."""
    with pytest.raises(AdapterError, match="placer"):
        through_env(make_env("DLClusterAlloc-v0", placer="spread"), "fifo", 0)


def test_adapter_alloc_env_placer_mismatch_raises():
    """Random placement is not what the env's spread placer does: refused, not silently changed."""
    with pytest.raises(AdapterError, match="placer"):
        through_env(make_env("DLClusterAlloc-v0", placer="spread"), "random", 0)


def test_adapter_same_env_reused():
    """An adapter can run several episodes on one env; each matches the direct run."""
    adapter = SchedulerAdapter(make_env("DLClusterPlace-v0"), baselines.make("random"))
    for seed in (1, 0, 1):
        assert adapter.run(seed).summary() == direct("random", seed)


def test_adapter_decision_latency_recorded():
    m = SchedulerAdapter(make_env("DLClusterJoint-v0"), baselines.make("fifo")).run(0)
    assert m.decision_latency_ms >= 0
    assert m.jobs_finished == direct("fifo", 0)["jobs_finished"]


# --------------------------------------------------------------------------- inexpressible decisions
class _Wrapping(Scheduler):
    """FIFO's decision plus something extra the env may not express."""

    name = "wrapping"

    def __init__(self, extra):
        self.inner = baselines.make("fifo", placer="spread")  # the allocation env's placer
        self.extra = extra

    def reset(self, seed=None):
        super().reset(seed)
        self.inner.reset(seed)

    def decide(self, view):
        d = self.inner.decide(view)
        self.extra(view, d)
        return d


def _cpu_limits(view, d: Decision) -> None:
    for tid in d.place:
        d.cpu_limits[tid] = 0.5


def _gpu_slot(view, d: Decision) -> None:
    for tid, node in list(d.place.items()):
        if "/w" in tid:
            d.place[tid] = (node, 0)


def _resize(view, d: Decision) -> None:
    for j in view.pending:
        d.allocate[j.job_id] = (j.num_ps, j.num_workers + 1)


def _preempt(view, d: Decision) -> None:
    d.preempt.extend(j.job_id for j in view.running)


@pytest.mark.parametrize("env_id", ["DLClusterPlace-v0", "DLClusterJoint-v0", "DLClusterAlloc-v0"])
def test_adapter_rejects_cpu_limits(env_id):
    with pytest.raises(AdapterError, match="cpu_limits"):
        SchedulerAdapter(make_env(env_id), _Wrapping(_cpu_limits)).run(0)


def test_adapter_place_rejects_gpu_slot():
    with pytest.raises(AdapterError, match="DLClusterPlace"):
        SchedulerAdapter(make_env("DLClusterPlace-v0"), _Wrapping(_gpu_slot)).run(0)


def test_adapter_place_rejects_resize():
    with pytest.raises(AdapterError, match="resize"):
        SchedulerAdapter(make_env("DLClusterPlace-v0"), _Wrapping(_resize)).run(0)


@pytest.mark.parametrize("env_id", ["DLClusterPlace-v0", "DLClusterAlloc-v0"])
def test_adapter_rejects_preempt(env_id):
    with pytest.raises(AdapterError, match="preempt"):
        SchedulerAdapter(make_env(env_id), _Wrapping(_preempt)).run(0)


def test_joint_env_expresses_preemption():
    """The joint env's release action: preempting every running job at every decision point gives
    the same metrics through the env as directly."""
    want = dlclusterenv.make_sim("tiny", 0).run(_Wrapping(_preempt)).summary()
    assert SchedulerAdapter(make_env("DLClusterJoint-v0"), _Wrapping(_preempt)).run(0).summary() == want


def test_adapter_joint_rejects_gpu_slot():
    with pytest.raises(AdapterError, match="GPU slot"):
        SchedulerAdapter(make_env("DLClusterJoint-v0"), _Wrapping(_gpu_slot)).run(0)


def test_adapter_rejects_non_cluster_env():
    with pytest.raises(AdapterError):
        SchedulerAdapter(gym.make("CartPole-v1"), baselines.make("fifo"))


@pytest.mark.parametrize("env_id", ["DLClusterJoint-v0", "DLClusterPlace-v0"])
@pytest.mark.parametrize("name", ["dltap", "k8s-default", "otea"])
def test_placement_baselines_both_front_doors_on_default(name, env_id):
    """Every job of the default scenario finishes, with the same metrics through either env (all
    60 jobs in view; the placement env defers a task per step, so episodes are long)."""
    want = dlclusterenv.make_sim("default", 0).run(baselines.make(name)).summary()
    assert want["jobs_finished"] == 60 and want["jobs_unfinished"] == 0
    env = gym.make(env_id, scenario="default", max_jobs=64, max_steps=10**7)
    assert SchedulerAdapter(env, baselines.make(name)).run(0).summary() == want


# --------------------------------------------------------------------------- DLClusterShare
class _Counting(Scheduler):
    """A baseline, counting the decisions that only DLClusterShare can express."""

    def __init__(self, name: str):
        self.inner = baselines.make(name, **NO_WAKE.get(name, {}))
        self.name, self.oracle = self.inner.name, self.inner.oracle

    def reset(self, seed=None):
        super().reset(seed)
        self.inner.reset(seed)
        self.slots = self.modes = self.limits = 0

    def decide(self, view):
        d = self.inner.decide(view)
        self.slots += sum(isinstance(t, tuple) for t in d.place.values())
        self.modes += sum(m == "pack" for m in d.gpu_mode.values())
        self.limits += len(d.cpu_limits)
        return d


def _both_doors(name: str, scenario: str, seed: int) -> _Counting:
    want = dlclusterenv.make_sim(scenario, seed).run(_Counting(name)).summary()
    assert want["jobs_unfinished"] == 0
    counted = _Counting(name)
    env = gym.make("DLClusterShare-v0", scenario=scenario, max_jobs=64, max_steps=10**8)
    assert SchedulerAdapter(env, counted).run(seed).summary() == want
    return counted


@pytest.mark.parametrize("name", ["gandiva", "flowcon"])
def test_gandiva_flowcon_both_front_doors_on_default(name):
    """GPU slots, packing, migration, grow-shrink (Gandiva) and FlowCon's real-valued CPU limits
    through DLClusterShare: every job of the default scenario, metrics identical to the direct run
    (about 1.5 s for Gandiva, 4 s for FlowCon's ~60k micro-actions)."""
    counted = _both_doors(name, "default", 0)
    if name == "gandiva":  # packing (mode changes) happens on the overload scenario, below
        assert counted.slots > 0
    else:
        assert counted.limits > 1000


@pytest.mark.parametrize("name", ["gandiva", "flowcon"])
def test_gandiva_flowcon_both_front_doors_on_gandiva_overload(name):
    """Gandiva's overload scenario: 16 GPUs over-subscribed, so GPUs are shared and packed."""
    counted = _both_doors(name, "gandiva", 1)
    if name == "gandiva":
        assert counted.modes > 0


@pytest.mark.parametrize("extra", [_cpu_limits, _gpu_slot])
def test_share_env_expresses_limits_and_gpu_slots(extra):
    """What the other envs refuse (see above), DLClusterShare carries out exactly."""
    want = dlclusterenv.make_sim("tiny", 0).run(_Wrapping(extra)).summary()
    assert SchedulerAdapter(make_env("DLClusterShare-v0"), _Wrapping(extra)).run(0).summary() == want


def _wake(view, d: Decision) -> None:
    d.wake_at = view.time + 1.0


@pytest.mark.parametrize("env_id", ["DLClusterPlace-v0", "DLClusterJoint-v0", "DLClusterShare-v0"])
def test_adapter_rejects_wake_at(env_id):
    """No env has an action for an extra decision point: refused, not silently dropped."""
    with pytest.raises(AdapterError, match="wake_at"):
        SchedulerAdapter(make_env(env_id), _Wrapping(_wake)).run(0)


def _limit_pending(view, d: Decision) -> None:
    for j in view.pending:
        if not any(t.task_id in d.place for t in j.tasks):
            d.cpu_limits[j.tasks[0].task_id] = 0.5


def test_share_env_rejects_limit_on_unstarted_job():
    """The simulator accepts a limit on a task that is not placed; the env's limit actions name
    tasks of running jobs only."""
    sched = _Wrapping(_limit_pending)
    sched.inner = baselines.make("fifo", placer="pack")  # hold jobs back so some stay pending
    with pytest.raises(AdapterError, match="running"):
        SchedulerAdapter(make_env("DLClusterShare-v0"), sched).run(0)


def test_share_env_rejects_partly_placed_job():
    with pytest.raises(AdapterError, match="partly placed"):
        SchedulerAdapter(make_env("DLClusterShare-v0"), _Wrapping(_resize)).run(0)


@pytest.mark.parametrize(
    "value",
    [1.0, 0.5, 1 / 3, 0.1, 1 / 28, 0.7071067811865476, 2.0**-20, 3 * 2.0**-22, 1 - 2.0**-53],
)
def test_limit_digits_are_exact(value):
    digits = _limit_digits("j/w0", value)
    assert 1 <= len(digits) <= MAX_DIGITS and all(0 <= x <= DIGIT_BASE for x in digits)
    num = 0
    for x in digits:  # what the env computes, digit by digit
        num = num * DIGIT_BASE + x
    assert num / (1 << (12 * len(digits))) == value


@pytest.mark.parametrize("value", [0.0, -0.5, 1.5, float("nan"), True, "0.5", 1e-7])
def test_limit_digits_refuse_what_the_env_cannot_write(value):
    with pytest.raises(AdapterError, match="cpu_limits"):
        _limit_digits("j/w0", value)


@pytest.mark.parametrize("name", baselines.names())
def test_every_baseline_through_share_env_on_tiny(name):
    """DLClusterShare expresses every decision of every baseline: identical metrics on tiny
    (about 0.1 s each)."""
    kw = NO_WAKE.get(name, {})
    want = dlclusterenv.make_sim("tiny", 0).run(baselines.make(name, **kw)).summary()
    assert want["jobs_finished"] > 0
    assert SchedulerAdapter(make_env("DLClusterShare-v0"), baselines.make(name, **kw)).run(0).summary() == want


@pytest.mark.parametrize("name", sorted(NO_WAKE))
def test_a_baseline_that_asks_for_wake_ups_is_refused_by_the_adapter(name):
    """FlowCon's timer and Tiresias' demotions ask for wake-ups by default; through an env that
    cannot express one the adapter says so (wake=False runs them, above)."""
    scenario = "flowcon_5" if name == "flowcon" else "default"
    env = gym.make("DLClusterShare-v0", scenario=scenario, max_jobs=64, max_steps=10**8)
    with pytest.raises(AdapterError, match=r"ShareEnv cannot express wake_at="):
        SchedulerAdapter(env, baselines.make(name)).run(1)

"""One house: drive any Gym env with any Scheduler whose decisions the env's actions can express.

At every decision point of the env's simulator the scheduler sees the same view it would see when
run directly (`Simulator.run`), and its Decision is replayed as the env's micro-actions. Running a
scheduler either way gives identical metrics (tests/test_adapter.py). A decision the env cannot
express raises AdapterError naming the job or task, instead of being silently changed:
- DLClusterPlace: placements of unplaced tasks on nodes only (no resizing, migration, preemption,
  limits, GPU slots or GPU modes).
- DLClusterJoint: any allocation, placement (on nodes, not GPU slots), migration or preemption
  that leaves every touched job fully placed or not placed at all.
- DLClusterAlloc: starting pending jobs and growing running ones; the env's placer must put each
  task where the scheduler did.
"""

from __future__ import annotations

import time

import gymnasium as gym

from .api import Decision, Scheduler
from .envs.allocation import ROLES, AllocationEnv, JointEnv, _ProposalEnv
from .envs.placement import PlacementEnv
from .metrics import Metrics


class AdapterError(ValueError):
    """The env's action space cannot express this scheduler decision."""


class SchedulerAdapter:
    def __init__(self, env: gym.Env, scheduler: Scheduler):
        self.env = env.unwrapped
        if not isinstance(self.env, (PlacementEnv, _ProposalEnv)):
            raise AdapterError(f"no adapter for {type(self.env).__name__}")
        self.scheduler = scheduler
        self.env.decision_hook = self._on_decision
        self._decision = Decision()
        self._plan: list[int] = []  # env actions still to take, for proposal envs

    def _on_decision(self, env) -> None:
        sim = env.sim
        view = sim.view(oracle=self.scheduler.oracle)
        t0 = time.perf_counter()
        d = self.scheduler.decide(view)
        sim.totals.decision_s.append(time.perf_counter() - t0)
        self._decision = d
        if d.cpu_limits or d.gpu_mode or (d.preempt and isinstance(env, PlacementEnv)):
            raise AdapterError(
                f"{type(env).__name__} cannot express this decision's "
                f"preempt={d.preempt}, cpu_limits={d.cpu_limits}, gpu_mode={d.gpu_mode}"
            )
        if isinstance(env, PlacementEnv):
            self._check_placement(env, d)
        else:
            self._plan = self._proposal_plan(env, d)

    def _check_placement(self, env: PlacementEnv, d: Decision) -> None:
        sim = env.sim
        for jid, pw in d.allocate.items():
            job = sim.job(jid)
            if tuple(pw) != (job.num_ps, job.num_workers):
                raise AdapterError(f"DLClusterPlace cannot resize job {jid!r} to {pw}")
        visible = {t.task_id for j in env.slots() for t in j.tasks.values()}
        for tid, target in d.place.items():
            job = sim.jobs.get(tid.rpartition("/")[0])
            task = job.tasks.get(tid) if job else None
            if task is None or task.node >= 0 or isinstance(target, tuple) or tid not in visible:
                raise AdapterError(
                    f"DLClusterPlace cannot express place[{tid!r}] = {target!r} "
                    "(only unplaced tasks of visible jobs, on a node without a GPU slot)"
                )

    def _proposal_plan(self, env: _ProposalEnv, d: Decision) -> list[int]:
        """The env actions that rebuild the decision's final state: releases first, then adds."""
        sim = env.sim
        slots = {j.job_id: i for i, j in enumerate(env.slots())}
        joint = isinstance(env, JointEnv)
        jobs = {tid.rpartition("/")[0] for tid in d.place} | set(d.allocate) | set(d.preempt)
        releases, adds = [], []
        for jid in sorted(jobs, key=lambda j: slots.get(j, 1 << 30)):
            job = sim.job(jid)
            if jid not in slots:
                raise AdapterError(f"job {jid!r} is not in the env's {env.max_jobs} visible slots")
            slot = slots[jid]
            if jid in d.preempt:
                if not joint:
                    raise AdapterError(f"DLClusterAlloc cannot preempt job {jid!r}")
                releases.append(env.encode_release(slot))
                continue
            p, w = d.allocate.get(jid, (job.num_ps, job.num_workers))
            final = {}  # task id -> node after the decision
            for prefix, n, old in (("ps", p, job.ps_tasks()), ("w", w, job.worker_tasks())):
                for i in range(n):
                    tid = f"{jid}/{prefix}{i}"
                    target = d.place.get(tid, old[i].node if i < len(old) else -1)
                    if isinstance(target, tuple):
                        raise AdapterError(f"{type(env).__name__} cannot place {tid!r} on a GPU slot")
                    final[tid] = sim._node(target, f"place[{tid!r}]") if target != -1 else -1
            if any(n < 0 for n in final.values()):
                raise AdapterError(f"{type(env).__name__} cannot leave job {jid!r} partly placed")
            p0, w0 = env._base(job)
            growth = p >= p0 and w >= w0 and all(
                final[t.task_id] == t.node for t in job.ps_tasks()[:p0] + job.worker_tasks()[:w0]
            )
            if not growth:
                if not joint:
                    raise AdapterError(f"DLClusterAlloc can only grow job {jid!r}, not {(p, w)}")
                releases.append(env.encode_release(slot))
                p0 = w0 = 0
            # workers first, the order placers.place_job uses (matters for DLClusterAlloc)
            for role, prefix, lo, hi in (("worker", "w", w0, w), ("ps", "ps", p0, p)):
                for i in range(lo, hi):
                    node = final[f"{jid}/{prefix}{i}"]
                    adds.append(env.encode(slot, role, node) if joint else 2 * slot + ROLES.index(role))
        return releases + adds

    def act(self) -> int:
        """The env action that carries out the current decision."""
        env = self.env
        if isinstance(env, PlacementEnv):
            tid = env.focal_task()
            target = self._decision.place.get(tid)
            return env.defer if target is None else env.sim._node(target, f"place[{tid!r}]")
        if not self._plan:
            if isinstance(env, AllocationEnv):
                self._check_placer(env)
            return env.action_space.n - 1
        a = self._plan.pop(0)
        if not env.action_masks()[a]:
            raise AdapterError(
                f"{type(env).__name__} cannot carry out this decision: action {a} is masked "
                f"(e.g. a job over the env's {env.max_tasks_per_job} tasks)"
            )
        return a

    def _check_placer(self, env: AllocationEnv) -> None:
        d = self._decision
        for job in env.slots():
            add = env._added.get(job.job_id)
            if not add:
                continue
            p0, w0 = env._base(job)
            for role, prefix, lo in (("ps", "ps", p0), ("worker", "w", w0)):
                for i, n in enumerate(add[role]):
                    tid = f"{job.job_id}/{prefix}{lo + i}"
                    want = env.sim._node(d.place[tid], tid)
                    if want != n:
                        raise AdapterError(
                            f"DLClusterAlloc's placer {env.placer_name!r} put {tid!r} on node {n}, "
                            f"the scheduler on node {want}"
                        )

    def run(self, seed: int) -> Metrics:
        """A whole episode through the env; returns the same Metrics as Simulator.run."""
        self.scheduler.reset(seed)
        self.env.reset(seed=seed)
        done = False
        while not done:
            _, _, term, trunc, _ = self.env.step(self.act())
            done = term or trunc
        return self.env.sim.metrics()

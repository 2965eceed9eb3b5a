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
  task where the scheduler did, and with `shapes=` each job's new (p, w) must be one of them.
- DLClusterShare: what the joint env expresses, plus GPU slots (sharing occupied GPUs), GPU modes
  and CPU limits (written in base-4096 digits, exact for every float limit >= 2^-20): Gandiva and
  FlowCon. A worker placed on a node without a GPU slot gets the GPU the simulator would give it.
No env expresses `wake_at` (an extra decision point): it raises AdapterError as well.
"""

from __future__ import annotations

import math
import time
from collections import deque
from fractions import Fraction

import gymnasium as gym

from .api import Decision, DecisionError, Scheduler
from .envs.allocation import ROLES, AllocationEnv, JointEnv, _ProposalEnv
from .envs.placement import PlacementEnv
from .envs.share import DIGIT_BASE, MAX_DIGITS, ShareEnv
from .metrics import Metrics
from .sim import EPS, Simulator


class AdapterError(ValueError):
    """The env's action space cannot express this scheduler decision."""


class SchedulerAdapter:
    def __init__(self, env: gym.Env, scheduler: Scheduler):
        self.env = env.unwrapped
        if not isinstance(self.env, (PlacementEnv, _ProposalEnv, ShareEnv)):
            raise AdapterError(f"no adapter for {type(self.env).__name__}")
        self.scheduler = scheduler
        self.env.decision_hook = self._on_decision
        self._decision = Decision()
        self._plan: deque = deque()  # env actions still to take (proposal and share envs)

    def _on_decision(self, env) -> None:
        sim = env.sim
        view = sim.view(oracle=self.scheduler.oracle)
        t0 = time.perf_counter()
        d = self.scheduler.decide(view)
        sim.totals.decision_s.append(time.perf_counter() - t0)
        self._decision = d
        if d.wake_at is not None and d.wake_at > sim.now + EPS:
            raise AdapterError(f"{type(env).__name__} cannot express wake_at={d.wake_at!r}")
        if isinstance(env, ShareEnv):
            self._plan = deque(_share_plan(env, d))
            return
        if d.cpu_limits or d.gpu_mode or (d.preempt and isinstance(env, PlacementEnv)):
            raise AdapterError(
                f"{type(env).__name__} cannot express this decision's "
                f"preempt={d.preempt}, cpu_limits={d.cpu_limits}, gpu_mode={d.gpu_mode}"
            )
        if isinstance(env, PlacementEnv):
            self._check_placement(env, d)
        else:
            self._plan = deque(self._proposal_plan(env, d))

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
        joint = isinstance(env, JointEnv)
        jobs = {tid.rpartition("/")[0] for tid in d.place} | set(d.allocate) | set(d.preempt)
        releases, adds = [], []
        for jid, job, slot in _in_slot_order(env, jobs):
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
            if not joint and env.shapes:
                if (p, w) != (p0, w0):
                    try:
                        adds.append(env.encode_shape(slot, p, w))
                    except ValueError as e:
                        raise AdapterError(f"DLClusterAlloc cannot size job {jid!r}: {e}") from None
                continue
            # workers first, the order placers.place_job uses (matters for DLClusterAlloc)
            for role, prefix, lo, hi, old in (("worker", "w", w0, w, job.worker_tasks()),
                                              ("ps", "ps", p0, p, job.ps_tasks())):
                nodes = [final[f"{jid}/{prefix}{i}"] for i in range(hi)]
                order = range(lo, hi) if lo or not joint else _release_order(old, nodes)
                for i in order:
                    adds.append(
                        env.encode(slot, role, nodes[i]) if joint else 2 * slot + ROLES.index(role))
        return releases + adds

    def act(self) -> int:
        """The env action that carries out the current decision."""
        env = self.env
        if isinstance(env, PlacementEnv):
            tid = env.focal_task()
            target = self._decision.place.get(tid)
            return env.defer if target is None else env.sim._node(target, f"place[{tid!r}]")
        if isinstance(env, ShareEnv):
            a = self._share_next(env)
            if a is None:
                return env.end
        elif not self._plan:
            if isinstance(env, AllocationEnv):
                self._check_placer(env)
            return env.action_space.n - 1
        else:
            a = self._plan.popleft()
        if not env.action_masks()[a]:
            raise AdapterError(
                f"{type(env).__name__} cannot carry out this decision: action {a} is masked "
                f"(e.g. a job over the env's {env.max_tasks_per_job} tasks)"
            )
        return a

    def _share_next(self, env: ShareEnv) -> int | None:
        """The next planned action; a mode change is decided against the round's state when its
        turn comes, and skipped when the GPU is in that mode already."""
        while self._plan:
            item = self._plan.popleft()
            if not isinstance(item, tuple):
                return item
            phase, gpu, mode = item
            now = env.declared_mode(gpu) if phase == "first" else env.effective_mode(gpu)
            if now != mode:
                c = env.cluster
                return env.encode_mode(int(c.gpu_node[gpu]), int(c.gpu_slot[gpu]), ("timeslice", "pack")[mode])
        return None

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


def _release_order(old: list, nodes: list[int]) -> list[int]:
    """Task indices in the order to add a released job's tasks of one role so that the joint env,
    which names no task index (envs/allocation.py _keep_in_place: a task already on one of the
    added nodes stays there, the others take the remaining nodes in the order added), gives task i
    nodes[i]: the tasks it keeps first, then the others in index order. Adding in index order
    instead could swap tasks between nodes (same speeds, other shards read: Optimus' default run
    at optspd5)."""
    left, kept = list(nodes), []
    for i, t in enumerate(old[: len(nodes)]):
        if t.node in left:
            left.remove(t.node)
            kept.append(i)
    rest = set(kept)
    return kept + [i for i in range(len(nodes)) if i not in rest]


def _in_slot_order(env, jobs: set[str]):
    """(job id, job, slot) for the jobs a decision touches, in slot order; AdapterError for a job
    outside the env's visible slots."""
    slots = {j.job_id: i for i, j in enumerate(env.slots())}
    for jid in sorted(jobs, key=lambda j: slots.get(j, 1 << 30)):
        job = env.sim.job(jid)
        if jid not in slots:
            raise AdapterError(f"job {jid!r} is not in the env's {env.max_jobs} visible slots")
        yield jid, job, slots[jid]


# --------------------------------------------------------------------------- DLClusterShare
def _limit_digits(tid: str, value: object) -> list[int]:
    """Base-4096 digits d1..dk with value = sum d_i / 4096^i exactly (d1 = 4096 for 1.0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise AdapterError(f"cpu_limits[{tid!r}] = {value!r} is not in (0, 1]")
    if value == 1:
        return [DIGIT_BASE]
    frac = Fraction(value)
    bits = frac.denominator.bit_length() - 1  # a float's denominator is a power of two
    k = max(1, math.ceil(bits / 12))
    if k > MAX_DIGITS:
        raise AdapterError(
            f"cpu_limits[{tid!r}] = {value!r} needs {k} > {MAX_DIGITS} base-4096 digits to be exact"
        )
    num = frac.numerator << (12 * k - bits)
    return [(num >> (12 * (k - 1 - i))) & (DIGIT_BASE - 1) for i in range(k)]


def _final_positions(sim: Simulator, d: Decision) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Where every task d.place moves ends up, (node, global GPU or -1), and the moves in d.place
    order. Mirrors Simulator.apply: tasks already where they are asked to be do not move, and a
    worker placed on a node without a slot gets the node's first GPU left unoccupied once every
    leaving task has left and the moves before it have landed."""
    c = sim.cluster
    alloc = {jid: tuple(int(x) for x in pw) for jid, pw in d.allocate.items()}
    occ = [len(o) for o in sim.gpu_tasks]
    gone: set[str] = set()
    for jid in sorted(set(d.preempt) | set(alloc)):
        job = sim.job(jid)
        p, w = alloc.get(jid, (job.num_ps, job.num_workers))
        for t in job.tasks.values():
            if t.node >= 0 and (jid in d.preempt or not Simulator._exists(t.task_id, job, p, w)):
                gone.add(t.task_id)
                if t.gpu >= 0:
                    occ[t.gpu] -= 1
    wanted: dict[str, tuple[int, int]] = {}  # gpu -1: the simulator picks
    for tid, target in d.place.items():
        job = sim.job(tid.rpartition("/")[0])
        try:
            node, gpu = sim.place_target(tid, target)
        except DecisionError as e:
            raise AdapterError(str(e)) from None
        old = job.tasks.get(tid)
        if old is not None and old.node == node and gpu in (-1, old.gpu) and tid not in gone:
            continue
        if old is not None and old.node >= 0 and tid not in gone:
            gone.add(tid)
            if old.gpu >= 0:
                occ[old.gpu] -= 1
        wanted[tid] = (node, gpu)
    final: dict[str, tuple[int, int]] = {}
    for tid, (node, gpu) in wanted.items():
        job = sim.job(tid.rpartition("/")[0])
        uses_gpu = "/w" in tid and job.model.worker.gpu > 0
        if gpu < 0 and uses_gpu:
            base = int(c.gpu_base[node])
            gpu = next((g for g in range(base, base + int(c.gpus[node])) if occ[g] == 0), -1)
            if gpu < 0:
                raise AdapterError(f"place[{tid!r}]: node {c.node_names[node]} has no free GPU")
        if gpu >= 0:
            occ[gpu] += 1
        final[tid] = (node, gpu)
    return final, list(wanted)


def _share_plan(env: ShareEnv, d: Decision) -> list:
    """DLClusterShare actions that rebuild the decision's final state: releases, GPUs leaving
    packing, additions (a released job's in index order, so the i-th added is task i), GPUs
    entering packing, then CPU limits."""
    sim, c = env.sim, env.cluster
    moved, move_order = _final_positions(sim, d)
    rank = {tid: i for i, tid in enumerate(move_order)}
    jobs = {tid.rpartition("/")[0] for tid in list(d.place) + list(d.cpu_limits)}
    jobs |= set(d.allocate) | set(d.preempt)
    releases: list[int] = []
    adds: list[tuple[int, int, int, str, int]] = []  # (order key, serial, action, task, GPU)
    shapes: dict[str, tuple[int, int]] = {}  # running after the decision: (p, w)
    for jid, job, slot in _in_slot_order(env, jobs):
        if jid in d.preempt:
            releases.append(env.encode_release(slot))
            continue
        p, w = (int(x) for x in d.allocate.get(jid, (job.num_ps, job.num_workers)))
        final: list[tuple[str, int, int]] = []  # (task id, node, gpu) in index order per role
        for prefix, n in (("ps", p), ("w", w)):
            for i in range(n):
                tid = f"{jid}/{prefix}{i}"
                old = job.tasks.get(tid)
                node, gpu = moved.get(tid, (old.node, old.gpu) if old is not None else (-1, -1))
                final.append((tid, node, gpu))
        placed = [node >= 0 for _, node, _ in final]
        if not any(placed):
            if job.n_placed or (p, w) != (job.num_ps, job.num_workers):
                raise AdapterError(f"DLClusterShare cannot leave job {jid!r} unplaced as {(p, w)} without preempting it")
            continue
        if not all(placed):
            raise AdapterError(f"DLClusterShare cannot leave job {jid!r} partly placed")
        shapes[jid] = (p, w)
        p0, w0 = (job.num_ps, job.num_workers) if job.status == "running" else (0, 0)
        olds = job.ps_tasks()[:p0] + job.worker_tasks()[:w0]
        if not (p >= p0 and w >= w0 and all(t.task_id not in moved for t in olds)):
            if job.n_placed:
                releases.append(env.encode_release(slot))
            p0 = w0 = 0
        keys = {"ps": -1, "w": -1}  # within a role, additions keep index order
        for tid, node, gpu in final:
            role = "ps" if "/ps" in tid else "w"
            i = int(tid.rpartition("/")[2][len(role):])
            if i < (p0 if role == "ps" else w0):
                continue
            keys[role] = max(keys[role], rank.get(tid, -1))
            if role == "ps":
                a = env.encode_ps(slot, node)
            else:
                a = env.encode_worker(slot, node, int(c.gpu_slot[gpu]) if gpu >= 0 else 0)
            adds.append((keys[role], len(adds), a, tid, gpu))
    adds.sort(key=lambda x: x[:2])
    # the simulator lists a GPU's workers in arrival order (Gandiva reads it): keep it
    env_order = [(tid, gpu) for *_, tid, gpu in adds if tid in moved and gpu >= 0]
    direct_order = [(tid, moved[tid][1]) for tid in move_order if moved[tid][1] >= 0]
    for g in {gpu for _, gpu in direct_order}:
        if [t for t, x in env_order if x == g] != [t for t, x in direct_order if x == g]:
            raise AdapterError(f"DLClusterShare cannot reproduce the order of workers arriving on GPU {g}")
    modes = []
    for key, mode in d.gpu_mode.items():
        if mode not in ("pack", "timeslice"):
            raise AdapterError(f"gpu_mode[{key!r}]: must be 'pack' or 'timeslice', got {mode!r}")
        modes.append((sim._gpu_key(key), int(mode == "pack")))
    limits: list[int] = []
    for tid, value in d.cpu_limits.items():
        jid, _, name = tid.rpartition("/")
        job = sim.jobs.get(jid)
        p, w = shapes.get(jid, (job.num_ps, job.num_workers) if job is not None and job.status == "running" else (0, 0))
        if jid not in shapes and (jid in d.preempt or job is None or job.status != "running"):
            raise AdapterError(f"DLClusterShare sets limits only on tasks of running jobs: cpu_limits[{tid!r}]")
        if not Simulator._exists(tid, job, p, w):
            raise AdapterError(f"cpu_limits: unknown task {tid!r}")
        index = int(name[2:]) if name.startswith("ps") else p + int(name[1:])
        if index >= env.max_tasks:
            raise AdapterError(f"cpu_limits[{tid!r}]: task {index} is past the env's max_tasks={env.max_tasks}")
        limits.append(env.encode_limit(env.slots().index(job), index))
        limits += [env.encode_digit(x) for x in _limit_digits(tid, value)]
    return (
        releases
        + [("first", g, 0) for g, m in modes if m == 0]
        + [a for _, _, a, _, _ in adds]
        + [("last", g, m) for g, m in modes]
        + limits
    )

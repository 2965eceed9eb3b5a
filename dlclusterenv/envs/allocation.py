"""Allocation envs: the policy sizes jobs one task at a time, DL2-style.

At each decision point a round of micro-actions adds one PS or one worker to a job slot; running
jobs grow, pending jobs start once their proposal has at least one PS and one worker. The round
ends with the end-of-round action or when nothing more fits, and is applied as one Decision.

- DLClusterAlloc: Discrete(2 * max_jobs + 1): (slot, +PS | +worker), last = end of round; the task
  goes where the named placer (`placer=`: spread | pack) puts it. With `shapes=[(p, w), ...]` it
  is Discrete(len(shapes) * max_jobs + 1) instead: (slot, shape k) grows the job to shape k in one
  action (Decima's parallelism-limit action, Mao et al. SIGCOMM'19), so a job's size is one
  choice rather than a run of micro-actions.
- DLClusterJoint: Discrete(2 * max_jobs * max_nodes + max_jobs + 1): (slot, +PS | +worker, node),
  then "release slot" for each slot, last = end of round; allocation and placement together.
  Releasing a job frees its tasks for the round; what is added back for it is its new shape and
  placement (tasks that stay on their node do not move), and a released job left without a PS
  and a worker is preempted. So a round can start, grow, shrink, migrate or preempt any job.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pydantic import Field, field_validator

from ..api import Decision
from ..checks import is_int
from ..config import ConfigError
from ..placers import PLACERS, Capacity, get_placer
from ..cluster import never_fits
from .core import Bool, ClusterEnv, Int, Options

ROLES = ("ps", "worker")


def _keep_in_place(jid: str, prefix: str, tasks, nodes: list[int]) -> dict[str, int]:
    """Task id -> node for a released job's new tasks of one role: the first len(nodes) task
    indices survive a resize, and those already on a proposed node stay there (no migration)."""
    left = list(nodes)
    out: dict[str, int] = {}
    for i, t in enumerate(tasks[: len(nodes)]):
        if t.node in left:
            left.remove(t.node)
            out[f"{jid}/{prefix}{i}"] = t.node
    free = iter(left)
    for i in range(len(nodes)):
        if f"{jid}/{prefix}{i}" not in out:
            out[f"{jid}/{prefix}{i}"] = next(free)
    return out


class _ProposalEnv(ClusterEnv):
    # per-job task cap of a round's proposal (masks only): under weak scaling Optimus sizes jobs
    # of up to ~300 tasks on the 256-GPU default cluster, and every heuristic decision must be
    # expressible here
    max_tasks_per_job = 512

    def _begin_round(self) -> None:
        self._cap = Capacity.of_sim(self.sim)
        self._cap_gpus = int(self._cap.gpu.sum())  # kept by _take (GPU demands are whole)
        self._fit: np.ndarray | None = None  # _fits() before the per-job caps, on _cap
        self._held: dict[str, list[int]] = {}  # nodes of each job's placed tasks (fixed in a round)
        self._dirty: set[int] = set()  # nodes whose capacity changed since _fit was computed
        self._added: dict[str, dict[str, list[int]]] = {}
        self._released: set[str] = set()
        self._ended = False
        self._view: dict[str, np.ndarray] | None = None  # the round's observation (`_round_view`)
        self._view_nodes: set[int] = set()  # nodes and jobs an action changed since it was shown
        self._view_jobs: set[str] = set()
        self._capped: set[int] = set()  # slots at the per-job task cap (`_fits`)
        self._cap_jobs: set[str] = set()  # jobs whose proposal changed since _capped was updated

    def _round_over(self) -> bool:
        return self._ended or not self._masks()[:-1].any()

    def _base(self, job) -> tuple[int, int]:
        """Counts a proposal grows from: a running job's allocation; zero for a pending or a
        released one."""
        if job.status == "running" and job.job_id not in self._released:
            return job.num_ps, job.num_workers
        return 0, 0

    @staticmethod
    def _runs(job, p: int, w: int) -> bool:
        """Whether the job runs with p PS and w workers: a worker, and a PS if it uses any."""
        return w >= 1 and (p >= 1 or not job.uses_ps)

    def proposed(self, job) -> tuple[int, int]:
        """(p, w) the job would run with if the round ended now; (0, 0) for a job still waiting.
        Public for scripted policies and analyses (benchmarks/shape_rules.py, learned_suite.py)."""
        p, w = self._base(job)
        add = self._added.get(job.job_id)
        return (p + len(add["ps"]), w + len(add["worker"])) if add else (p, w)

    def _add(self, slot: int, role: str, node: int) -> None:
        job = self.slots()[slot]
        self._take(node, job.model.ps if role == "ps" else job.model.worker)
        self._changed(job.job_id)
        self._added.setdefault(job.job_id, {"ps": [], "worker": []})[role].append(node)

    def _changed(self, jid: str) -> None:
        """Every change of a job's proposal goes here, for the observation and the task cap."""
        self._view_jobs.add(jid)
        self._cap_jobs.add(jid)

    def _take(self, node: int, d, sign: int = 1) -> None:
        """Every change of the round's capacity goes here, so that _fits redoes only its node."""
        self._cap.take(node, d, sign)
        self._cap_gpus -= sign * d.gpu
        self._dirty.add(node)
        self._view_nodes.add(node)

    def _fits(self) -> np.ndarray:
        """(slots, 2 roles, nodes): where one more PS / worker of each slot's job fits the round's
        remaining capacity, within the per-job task cap. The capacity test is kept for the round
        and redone only on the nodes an action changed (the slots are fixed within a round)."""
        slots = self.slots()
        if not slots:
            return np.zeros((0, 2, self.cluster.n_nodes), dtype=bool)
        if self._fit is None or self._dirty:
            if self._fit is None:
                self._need = Capacity.needs([d for j in slots for d in (j.model.ps, j.model.worker)])
                self._fit = self._cap.fits_many(self._need).reshape(len(slots), 2, -1)
                self._slot_of = {j.job_id: i for i, j in enumerate(slots)}
                # the (slot, role) pairs that can take a task: all-reduce jobs have no PS
                self._allowed = np.ones((len(slots), 2, 1), dtype=bool)
                self._allowed[[not j.uses_ps for j in slots], 0] = False
                self._capped, self._cap_jobs = set(), self._cap_jobs | set(self._added)
            else:  # one node at a time (a step changes one or two)
                for a in self._dirty:
                    self._fit[:, :, a] = self._cap.fits_many_at(a, self._need).reshape(len(slots), 2)
            self._dirty.clear()
        for jid in self._cap_jobs:  # only jobs given tasks this round can be at the cap
            i = self._slot_of[jid]
            if jid in self._added and sum(self.proposed(slots[i])) >= self.max_tasks_per_job:
                self._capped.add(i)
            else:
                self._capped.discard(i)
        self._cap_jobs.clear()
        ok = self._fit & self._allowed
        if self._capped:
            ok[sorted(self._capped)] = False
        return ok

    def _end_round(self) -> Decision:
        d = Decision()
        for job in self.slots():
            jid = job.job_id
            add = self._added.get(jid, {"ps": [], "worker": []})
            p0, w0 = self._base(job)
            p, w = p0 + len(add["ps"]), w0 + len(add["worker"])
            if not self._runs(job, p, w):
                if jid in self._released:
                    d.preempt.append(jid)
                continue
            if not add["ps"] and not add["worker"] and jid not in self._released:
                continue
            if (p, w) != (job.num_ps, job.num_workers):
                d.allocate[jid] = (p, w)
            if jid in self._released:  # the new shape, keeping tasks that stay where they are
                d.place.update(_keep_in_place(jid, "ps", job.ps_tasks(), add["ps"]))
                d.place.update(_keep_in_place(jid, "w", job.worker_tasks(), add["worker"]))
            else:
                for i, n in enumerate(add["ps"]):
                    d.place[f"{jid}/ps{p0 + i}"] = n
                for i, n in enumerate(add["worker"]):
                    d.place[f"{jid}/w{w0 + i}"] = n
        return d

    def _release(self, slot: int) -> None:
        """Free a job's placed tasks and this round's additions for it, for the rest of the round."""
        job = self.slots()[slot]
        for t in job.tasks.values():
            if t.node >= 0:
                self._take(t.node, job.model.ps if t.role == "ps" else job.model.worker, -1)
        for role, nodes in self._added.pop(job.job_id, {}).items():
            for n in nodes:
                self._take(n, job.model.ps if role == "ps" else job.model.worker, -1)
        self._released.add(job.job_id)
        self._changed(job.job_id)

    def _shown(self) -> dict[str, np.ndarray]:
        """The round so far is part of the state: nodes and the free-GPU fraction show the capacity
        left after this round's proposals, each job slot its proposed (p, w), and the queue
        features leave out the jobs this round starts. Without this the observation
        does not change within a round, and a policy cannot tell how much it has already added.
        The round view's arrays replace the state's (same keys, same order)."""
        return {**self._state_obs(), **self._round_view()}

    def _round_view(self) -> dict[str, np.ndarray]:
        """The round's observation, built from the state once per round (and state generation)
        and then redone only on the nodes and job slots the actions since changed."""
        state = self._state_obs()
        slots = self.slots()
        if self._view is None or self._view_gen != self._obs_gen:
            self._view = {k: state[k].copy() for k in ("nodes", "jobs", "global")}
            self._view_gen = self._obs_gen
            self._starting: dict[int, float] = {}  # slot -> GPUs asked, of jobs the round starts
            nodes, jobs = range(self.cluster.n_nodes), range(len(slots))
        else:
            nodes = sorted(self._view_nodes)
            jobs = sorted({self._slot_index[jid] for jid in self._view_jobs})
        self._view_nodes.clear()
        self._view_jobs.clear()
        view, cap = self._view, self._cap
        for a in nodes:  # the other columns are the state's, within [0, 1] already
            row = view["nodes"][a]
            # clipped in float64 before the float32 cast, which equals clipping after it (the
            # cast is monotone, 0 and 1 are exact, and no value here is a negative zero)
            row[1] = min(max(cap.cpu.item(a) / self._cpus_l[a], 0.0), 1.0)
            row[2] = min(max(cap.mem.item(a) / self._mem_l[a], 0.0), 1.0)
            row[3] = min(max(cap.gpu.item(a) / self._gpus_div[a], 0.0), 1.0)
        for i in jobs:  # a pending job's proposal starts from zero
            job = slots[i]
            p, w = self.proposed(job)
            view["jobs"][i, 2] = min(p / 16, 1.0)
            view["jobs"][i, 3] = min(w / 32, 1.0)
            self._starting.pop(i, None)
            if job.status != "running" and self._runs(job, p, w):  # starts now
                self._starting[i] = job.spec.num_workers * job.model.worker.gpu
        n_wait, gpus_wait = self._waiting
        for i in sorted(self._starting):
            n_wait, gpus_wait = n_wait - 1, gpus_wait - self._starting[i]
        glob = view["global"]
        glob[:] = state["global"]
        glob[3] = self._cap_gpus / self._n_gpus_div  # exact integers: cap.gpu.sum()'s quotient
        self._set_queue(glob, n_wait, gpus_wait)
        return view

    def _act(self, a: int) -> None:
        if a == self.action_space.n - 1:
            self._ended = True
        else:
            self._do(a)


class AllocationOptions(Options):
    placer: str = "spread"
    work_conserving: Bool = False
    max_adds_per_round: Int = Field(default=0, ge=0, description="0: no bound")
    shapes: Any = None  # checked by _check_shapes
    grow_running: Bool = True
    shrink_running: Bool = False

    @field_validator("placer")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in PLACERS:
            raise ValueError(f"unknown placer; known: {sorted(PLACERS)}")
        return v


class AllocationEnv(_ProposalEnv):
    """DLClusterAlloc-v0: how many PS and workers each job gets; a placer puts the tasks.

    ## Action Space
    `Discrete(2 * max_jobs + 1)`: (slot, +PS | +worker) at index 2 * slot + role, last = end of
    round; with `shapes`, `Discrete(len(shapes) * max_jobs + 1)`: (slot, shape k). Observation,
    rewards and episode end: see ClusterEnv.

    ## Arguments
    `placer` ("spread" | "pack"), `work_conserving`, `max_adds_per_round`, `shapes`,
    `grow_running`, `shrink_running`, as below.

    `work_conserving=True` masks end-of-round while a job slot that would not run yet (no PS
    or no worker in its proposal) can still get the task it lacks: every job that fits is
    started, and the policy decides only how big. Without it, ending every round is the likeliest
    single action of an untrained policy, and a JCT reward that pays off only hours later rarely
    teaches it otherwise (as the placement env's defer did).

    `max_adds_per_round=k` bounds the tasks one job gains per round (DL2 grows a job by one task
    per decision): without it a policy that keeps adding makes rounds of thousands of steps.

    `shapes=[[p, w], ...]` replaces the +PS / +worker actions by one action per (slot, shape):
    the job grows to (p, w), its new tasks placed workers first by the placer, as
    placers.place_job does. A shape is offered once per job and round, only if it is a growth
    (p and w no smaller, not equal) and all its new tasks fit; so a round has at most one action
    per job plus the end. Why: micro-action allocation did not learn here (README, issue 5
    findings) because a job's size took many correlated actions; a shape is one.
    `grow_running=False` offers shapes to pending jobs only: a job is sized once, when it starts
    (as Tiresias and Gandiva size jobs; each growth of a running job costs it a checkpoint pause).
    `shrink_running=True` (with shapes and grow_running) also offers a running job each smaller
    shape of the grid (p and w no larger; an all-reduce job's w smaller): it keeps its first p PS
    and w workers where they are and the engine drops the others (Job.resize), so the action
    always fits and frees their resources for the rest of the round. So a policy can shrink a job
    it grew when others arrive: Gandiva's grow-shrink, without which Gandiva's avg JCT on suite
    v2's qualifying instance rises 63% (README, "Growing and shrinking running jobs")."""

    extra_options = AllocationOptions

    def __init__(self, scenario="default", placer: str = "spread", work_conserving: bool = False,
                 max_adds_per_round: int = 0, shapes=None, grow_running: bool = True,
                 shrink_running: bool = False, **kw):
        super().__init__(scenario, **kw)
        o = self._extra(placer=placer, work_conserving=work_conserving,
                        max_adds_per_round=max_adds_per_round, shapes=shapes,
                        grow_running=grow_running, shrink_running=shrink_running)
        self.placer_name = o.placer
        self.placer = get_placer(self.placer_name)
        self.work_conserving = o.work_conserving
        self.max_adds = o.max_adds_per_round
        self.shapes = _check_shapes(o.shapes, self.max_tasks_per_job)
        if self.shapes and self.max_adds:
            raise ValueError("max_adds_per_round: does not apply with shapes (one action per job)")
        self.grow_running = o.grow_running
        if not self.grow_running and not self.shapes:
            raise ValueError("grow_running: False applies only with shapes")
        self.shrink_running = o.shrink_running
        if self.shrink_running and not (self.shapes and self.grow_running):
            raise ValueError("shrink_running: True applies only with shapes and grow_running True")
        self._check_shapes_fit()
        self.per_job = len(self.shapes) if self.shapes else 2
        self.action_space = spaces.Discrete(self.per_job * self.max_jobs + 1)

    def _check_shapes_fit(self) -> None:
        """A shape no job of the scenario could ever run at is refused: offered alone, it would
        leave every job pending until the horizon."""
        w = self.scenario.workload
        models = sorted(set(w.models) | {j.model for j in w.jobs})
        for i, (p, n) in enumerate(self.shapes or ()):
            why = {m: never_fits(self.cluster, self.zoo.models[m], p, n) for m in models}
            if all(why.values()):
                m = models[0]
                raise ConfigError(f"shapes[{i}]: ({p}, {n}): no job of scenario "
                                  f"{self.scenario.name!r} can ever run at it ({m}: {why[m]})")

    def _begin_round(self) -> None:
        super()._begin_round()
        self._shaped: set[str] = set()
        self._shrunk: dict[str, tuple[int, int]] = {}  # job -> the smaller (p, w) it keeps

    def encode_shape(self, slot: int, p: int, w: int) -> int:
        """The action growing `slot`'s job to (p, w); ValueError if (p, w) is not a shape."""
        try:
            return slot * self.per_job + self.shapes.index((p, w))
        except (AttributeError, ValueError):
            raise ValueError(f"({p}, {w}) is not one of the env's shapes {self.shapes}") from None

    def _pick(self, slot: int, role: str) -> int:
        job = self.slots()[slot]
        nodes = self._added.get(job.job_id, {"ps": [], "worker": []})
        placed = self._held_nodes(job) + nodes["worker"] + nodes["ps"]
        d = job.model.ps if role == "ps" else job.model.worker
        return self.placer(self.cluster, self._cap, d, placed)

    def _held_nodes(self, job) -> list[int]:
        """Nodes of the job's placed tasks; the simulator does not change within a round."""
        held = self._held.get(job.job_id)
        if held is None:
            held = self._held[job.job_id] = [t.node for t in job.tasks.values() if t.node >= 0]
        return held

    def _grow(self, slot: int, p: int, w: int) -> list[tuple[str, int]] | None:
        """Add the tasks that take slot's job to (p, w), workers first; all or nothing: the
        (role, node) added, or None with nothing added."""
        job = self.slots()[slot]
        p0, w0 = self.proposed(job)
        if not job.uses_ps:  # an all-reduce job takes a shape's workers only
            p = p0
        done: list[tuple[str, int]] = []
        if self._add_n(slot, "worker", w - w0, done) and self._add_n(slot, "ps", p - p0, done):
            return done
        self._ungrow(job, done)
        return None

    def _add_n(self, slot: int, role: str, k: int, done: list[tuple[str, int]]) -> bool:
        """Add k tasks of a role where the placer puts them, appending each to `done`; False at
        the first that fits nowhere (those before it stay added)."""
        for _ in range(k):
            n = self._pick(slot, role)
            if n < 0:
                return False
            self._add(slot, role, n)
            done.append((role, n))
        return True

    def _ungrow(self, job, done: list[tuple[str, int]]) -> None:
        """Take back what _grow added, leaving the round's state as it was before."""
        if not done:
            return
        add = self._added[job.job_id]
        self._changed(job.job_id)
        for role, _ in reversed(done):
            self._take(add[role].pop(), job.model.ps if role == "ps" else job.model.worker, -1)
        if not add["ps"] and not add["worker"]:
            del self._added[job.job_id]

    def _do(self, a: int) -> None:
        if not self.shapes:
            slot, role = a // 2, ROLES[a % 2]
            self._add(slot, role, self._pick(slot, role))
            return
        slot, k = divmod(a, self.per_job)
        job = self.slots()[slot]
        if self.is_shrink(job, *self.shapes[k]):
            self._shrink(job, *self.shapes[k])
        else:
            self._grow(slot, *self.shapes[k])
        self._shaped.add(job.job_id)

    def is_shrink(self, job, p: int, w: int) -> bool:
        """Whether (p, w) shrinks a running job (shrink_running): no larger in p and w, not equal
        (an all-reduce job's p is ignored, as in _grow). Public beside `proposed`."""
        if not self.shrink_running or job.status != "running":
            return False
        p0, w0 = self.proposed(job)
        if not job.uses_ps:
            p = p0
        return p <= p0 and w <= w0 and (p, w) != (p0, w0)

    def _shrink(self, job, p: int, w: int) -> None:
        """Keep the job's first p PS and w workers (Job.resize drops the highest-numbered) and
        give the others' resources back to the round."""
        if not job.uses_ps:
            p = job.num_ps
        for t in job.ps_tasks()[p:] + job.worker_tasks()[w:]:
            self._take(t.node, job.model.ps if t.role == "ps" else job.model.worker, -1)
        self._shrunk[job.job_id] = (p, w)
        self._changed(job.job_id)

    def proposed(self, job) -> tuple[int, int]:
        return self._shrunk.get(job.job_id) or super().proposed(job)

    def _end_round(self) -> Decision:
        d = super()._end_round()
        d.allocate.update(self._shrunk)  # no tasks placed: the engine drops the highest-numbered
        return d

    def _shape_fits(self) -> np.ndarray:
        """(slots, shapes): the shape actions that would succeed now (computed at every step).
        Jobs of one model with the same proposal and nodes get the same placements, so they
        share a probe."""
        slots = self.slots()
        ok = np.zeros((len(slots), self.per_job), dtype=bool)
        probed: dict[tuple, np.ndarray] = {}
        for i, job in enumerate(slots):
            if job.job_id in self._shaped or (not self.grow_running and job.status == "running"):
                continue
            add = self._added.get(job.job_id, {"ps": [], "worker": []})
            placed = tuple(self._held_nodes(job))
            key = (id(job.model), job.uses_ps, self.proposed(job), placed, tuple(add["worker"]),
                   tuple(add["ps"]))
            if key not in probed:
                probed[key] = self._probe(i, job)
                if self.shrink_running and job.status == "running":  # a shrink always fits
                    probed[key] |= [self.is_shrink(job, *s) for s in self.shapes]
            ok[i] = probed[key]
        return ok

    def _probe(self, slot: int, job) -> np.ndarray:
        """Which shapes slot's job can grow to, tried on the round's capacity and undone, so the
        mask is exactly what _grow will manage. _grow places workers first, so the first w
        workers land alike for every shape with w or more, and the first p PS alike for every
        shape with p or more and the same w: growing one task at a time through the shapes in
        order places far fewer tasks than growing each shape afresh."""
        p0, w0 = self.proposed(job)
        row = np.zeros(self.per_job, dtype=bool)
        workers: list[tuple[str, int]] = []
        for w in sorted({w for _, w in self.shapes if w >= w0}):
            if not self._add_n(slot, "worker", w - w0 - len(workers), workers):
                break
            ps: list[tuple[str, int]] = []
            if not job.uses_ps:  # all-reduce: every shape with w workers is the same growth
                for k, (_, ww) in enumerate(self.shapes):
                    if ww == w:
                        row[k] = w != w0
                continue
            for p in sorted({p for p, ww in self.shapes if ww == w and p >= p0}):
                if not self._add_n(slot, "ps", p - p0 - len(ps), ps):
                    break
                row[self.shapes.index((p, w))] = (p, w) != (p0, w0)
            self._ungrow(job, ps)
        self._ungrow(job, workers)
        return row

    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[-1] = True
        if self._ended:
            return mask
        fits = self._shape_fits() if self.shapes else self._fits().any(axis=2)
        if self.max_adds:
            for i, job in enumerate(self.slots()):
                add = self._added.get(job.job_id)
                if add and len(add["ps"]) + len(add["worker"]) >= self.max_adds:
                    fits[i] = False
        mask[: fits.size] = fits.ravel()
        if self.work_conserving:
            for i, job in enumerate(self.slots()):
                p, w = self.proposed(job)
                if self.shapes:  # _runs: an all-reduce job runs without a PS
                    startable = not self._runs(job, p, w) and fits[i].any()
                else:
                    startable = (p < 1 and fits[i, 0]) or (w < 1 and fits[i, 1])
                if startable:
                    mask[-1] = False
                    break
        return mask


def _check_shapes(shapes, max_tasks: int) -> list[tuple[int, int]] | None:
    """shapes: None, or distinct (p, w) pairs of positive ints with p + w <= max_tasks."""
    if shapes is None:
        return None
    if isinstance(shapes, (str, bytes)) or not hasattr(shapes, "__iter__"):
        raise ValueError(f"shapes: expected a list of [p, w] pairs, got {shapes!r}")
    out: list[tuple[int, int]] = []
    for i, s in enumerate(shapes):
        ok = (not isinstance(s, (str, bytes)) and hasattr(s, "__len__") and len(s) == 2
              and all(is_int(x) and x >= 1 for x in s))
        if not ok or s[0] + s[1] > max_tasks:
            raise ValueError(f"shapes[{i}]: {s!r} is not a [p, w] pair of ints >= 1 with "
                             f"p + w <= {max_tasks}")
        if tuple(s) in out:
            raise ValueError(f"shapes[{i}]: {tuple(s)} appears twice")
        out.append(tuple(s))
    if not out:
        raise ValueError("shapes: empty; give at least one [p, w] pair, or leave it out")
    return out


class JointEnv(_ProposalEnv):
    """DLCluster-v0 and DLClusterJoint-v0: allocation and placement together.

    ## Action Space
    `Discrete(2 * max_jobs * max_nodes + max_jobs + 1)`: (slot, +PS | +worker, node) at
    `encode(slot, role, node)`, then release slot j at `encode_release(j)`, last = end of round.
    Observation, rewards and episode end: see ClusterEnv.

    ## Arguments
    Those of ClusterEnv only.
    """

    def __init__(self, scenario="default", **kw):
        super().__init__(scenario, **kw)
        self._n_add = 2 * self.max_jobs * self.max_nodes
        self.action_space = spaces.Discrete(self._n_add + self.max_jobs + 1)

    def encode(self, slot: int, role: str, node: int) -> int:
        return (slot * 2 + ROLES.index(role)) * self.max_nodes + node

    def _begin_round(self) -> None:
        super()._begin_round()
        self._holds: np.ndarray | None = None  # slots whose job holds nodes, for the release mask

    def encode_release(self, slot: int) -> int:
        return self._n_add + slot

    def _do(self, a: int) -> None:
        if a >= self._n_add:
            self._release(a - self._n_add)
            return
        slot, rest = divmod(a, 2 * self.max_nodes)
        role, node = divmod(rest, self.max_nodes)
        self._add(slot, ROLES[role], node)

    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[-1] = True
        if self._ended:
            return mask
        fits = self._fits()
        view = mask[: self._n_add].reshape(self.max_jobs, 2, self.max_nodes)
        view[: len(fits), :, : self.cluster.n_nodes] = fits
        if len(fits):  # a job holding nodes can be released once a round (slots fixed within it)
            if self._holds is None:  # the simulator does not change within a round
                self._holds = np.array([j.n_placed > 0 for j in self.slots()])
            release = mask[self._n_add : self._n_add + len(fits)]
            release[:] = self._holds
            for jid in self._released:
                release[self._slot_of[jid]] = False
        return mask

"""Gandiva (seed 002, lecture notes on Xiao et al., OSDI'18): reactive getNode with affinity and
over-subscription, then an introspective pass — migration, packing by profiling, grow-shrink.

Paper -> code:
- Reactive mode, Algorithm 1 `getNode` (`get_node`): line 1-2 same-affinity servers, least loaded;
  line 5-6 those if they have free GPUs; line 7-8 unallocated (affinity 0) servers; line 9-10 any free
  GPUs (affinity relaxed, fragmentation allowed); line 11-12 over-subscription of the same-affinity
  servers; line 13-14 queue.
- Time-slicing of over-subscribed GPUs is the engine's (round robin with the suspend/resume cost per
  quantum): Gandiva only puts several workers on one GPU with `place = (node, gpu_slot)`. The round
  robin is per server (the engine's default `Overheads.time_slice: server`): a server's time-sliced
  workers rotate over its time-sliced GPUs, seed 002's "weighted round-robin scheduling to give each
  job its fair time-share" with migration (i) of time-sliced jobs to vacated GPUs, at the
  suspend/resume cost, not a checkpoint. Fig. 9 (six 1-GPU jobs on 4 GPUs, each at 4/6) is a claim of
  `dlcluster reproduce gandiva`: each of the six gets 70.8% of its speed alone (ResNext-50; the
  step's PS update and overhead do not slow down). Under `time_slice: gpu` two of the six would keep
  a GPU each and four share two GPUs at 1/2.
- Introspective mode (every decision point; the scenario's tick is Gandiva's interval):
  migration of time-sliced (or packed) jobs to vacated GPUs, of fragmented jobs to a co-located
  placement, and defragmentation (moving other jobs off a server to bring a fragmented job
  together there); packing by profiling; grow-shrink.

Choices where the paper is ambiguous:
- Affinity of a server = the number of GPUs per server of the jobs placed on it (Xiao et al.'s full
  paper, not seed 002: "if a job that requires two GPUs is assigned to a server, the affinity of that
  server is changed to two"; seed 002 has only Algorithm 1's findNodes(job.gpu, affinity)).
  A job of g GPUs uses k = min(g, GPUs per server) per server on ceil(g / k) servers; that k is its
  affinity. A server's affinity returns to 0 when its last GPU worker leaves. A job placed with the
  affinity relaxed gives an unallocated server it lands on its own k.
- Height (load) of a server = GPU workers on it / its GPUs (over-subscribed ones counted, the paper's
  M / N). minLoadNodes takes the least loaded (ties: more free GPUs, then lower index). Line 5's
  "height < 1 — same affinity with free GPUs" is read as: each chosen server has k free GPUs, so the
  job gets GPUs of its own there.
- Over-subscription puts the job's workers on the GPUs of the chosen servers with the fewest workers,
  ties broken by the lowest summed profiled utilisation (the GPU Gandiva's packing heuristic would
  pick), never on a packed GPU when an unpacked one is as light; a packed GPU that gets a third
  worker returns to time-slicing.
- PS tasks (Gandiva's jobs have none; the simulator's do) go on the job's worker servers, round
  robin, else on the least-loaded node that fits. Jobs without GPU workers are placed by the load
  balancer. Jobs keep the (p, w) they asked for, except while grown.
- Queued jobs are retried in arrival order at every decision point; a queued job does not block
  later ones (getNode is per job).
- Packing candidates are the GPUs that over-subscription already shares among k >= 2 jobs, whose
  GPU memory together fits the GPU ("If the memory requirements of the packing jobs combined are
  higher than GPU memory, the overhead of 'paging' from CPU memory is significantly high that
  packing is not effective", Table 1 note) and whose summed profiled utilisation is at most
  `pack_util_max` (unbounded by default: the paper gives no number, so every set that fits in
  memory is tried, lowest utilisation first, and the profile decides). k-way: all the jobs
  time-sliced on a GPU are packed together, up to the GPU's memory (Table 1's "Packing Max" packs
  as many as pay: a pair cannot exceed +100%). A set is tried after one interval of time-slicing
  together (its measured time-sliced speeds are the reference) and only during overload (no free
  GPU left); it is kept while the mean over its jobs of packed speed / time-sliced speed
  (JobView.last_speed) exceeds 1, i.e. their normalised total throughput beats time-slicing (seed
  002: "Because their aggregate performance improves, packing is retained; otherwise ... packing is
  undone and the jobs continue to use time-slicing"); otherwise it is undone and that set is never retried. A packed GPU that gets
  another job (over-subscription) returns to time-slicing, so the larger set is profiled
  time-sliced for an interval before it is packed; so does one that loses a job while two or more
  stay (seed 002: "The scheduler continues to profile their performance": the smaller set was
  never measured packed against time-sliced; before, it stayed packed, unjudged, until empty).
  The greedy's re-pairing moves (moving the
  lowest-utilisation job onto the lowest-utilisation GPU) are not made: this engine charges a full
  checkpoint for a GPU change inside a server, where Gandiva pays a suspend/resume.
- Defragmentation (seed 002, Job Migration (iii): "defragmentation of the cluster so that incoming
  jobs get GPUs with good locality"; which jobs move, those of the non-idle server with the most
  free GPUs, is Xiao et al.'s full paper) is done for the jobs that getNode's relaxed branch had
  to spread over several servers — incoming jobs never wait here while enough GPUs are free: on the
  server holding most of such a job's workers, other jobs move away, each whole to one other server
  (the GPUs the job itself leaves count as free), and the job's other workers join. A job that needs
  several servers is only re-placed when getNode's first two branches find it fewer servers.
- Migration to vacated GPUs moves the later-placed workers off a shared GPU to a free one (same
  server first, then the job's servers, then same-affinity, unallocated, any), and a 1-server job's
  PS follows its worker to a new server. Packed pairs are split too: packing is for overload only.
- Not done: seed 002's migration (ii), "migrating interfering jobs away from each other". The engine
  has no interference between jobs on separate GPUs other than shared NICs, host paths and cores,
  and nothing in the view says which neighbour slows a job down; Gandiva finds the culprit by
  profiling ("comparing mini_batch_time before and after"), which would need a move-and-measure
  search not built here.
- Grow-shrink: no job declares itself elastic in the simulator, so every job with GPU workers may
  grow (`grow_shrink=False` turns it off). Only when nothing waits and no GPU is shared, a running
  job grows onto the free GPUs of the servers it already uses (Gandiva's Fig. 11: 1 -> 4 GPUs in one
  server), up to `grow_max_factor` x its requested workers. Grown jobs shrink back to their request,
  latest arrival first, while pending jobs want more GPUs than are free, and for good if their measured
  speed at the grown size is not above their speed at the requested size.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.checks import check_bool, check_int, check_real
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity, place_job, spread

EPS = 1e-9


@dataclass
class _Trial:
    """A packed set under (or past) evaluation: time-sliced speeds and progress when it began."""

    jobs: frozenset[str]
    ts_speed: dict[str, float]
    steps: dict[str, float]


class _Plan:
    """The cluster as this decision leaves it: workers per GPU (job ids), GPU modes, host capacity."""

    def __init__(self, view: ClusterView):
        c = view.cluster
        self.c = c
        self.res: list[list[str]] = [[t.rpartition("/")[0] for t in o] for o in view.gpu_owners]
        self.packed = [bool(x) for x in view.gpu_packed]
        self.cap = Capacity.of(view)
        self.gpu_nodes = [n for n in range(c.n_nodes) if c.gpus[n] > 0]
        self.max_gpus = int(c.gpus.max()) if c.n_gpus else 0
        self.util = {j.job_id: j.gpu_util for j in view.jobs}  # profiled GPU utilisation
        self.where: dict[str, tuple[int, int]] = {}  # task -> (node, global gpu or -1)
        for job in view.jobs:
            for t in job.tasks:
                if t.node >= 0:
                    self.where[t.task_id] = (t.node, t.gpu)

    def gpus_of(self, n: int) -> range:
        base = int(self.c.gpu_base[n])
        return range(base, base + int(self.c.gpus[n]))

    def free(self, n: int) -> list[int]:
        return [g for g in self.gpus_of(n) if not self.res[g]]

    def n_free(self) -> int:
        return sum(1 for r in self.res if not r)

    def load(self, n: int) -> float:
        return sum(len(self.res[g]) for g in self.gpus_of(n)) / self.c.gpus[n]

    def idle(self, n: int) -> bool:
        return all(not self.res[g] for g in self.gpus_of(n))

    def host_room(self, n: int, d: Demand) -> int:
        """How many tasks of demand d the node's CPU, memory and bandwidth still hold."""
        room = math.inf
        for have, need in ((self.cap.cpu[n], d.cpu), (self.cap.mem[n], d.mem_gb), (self.cap.bw[n], d.bw_MBps * 1e6)):
            if need > 0:
                room = min(room, math.floor((have + 1e-6) / need))
        return int(min(room, 1 << 30))

    def put(self, tid: str, jid: str, d: Demand, node: int, gpu: int) -> None:
        self.cap.cpu[node] -= d.cpu
        self.cap.mem[node] -= d.mem_gb
        self.cap.bw[node] -= d.bw_MBps * 1e6
        if gpu >= 0:
            self.res[gpu].append(jid)
        self.where[tid] = (node, gpu)

    def lift(self, tid: str, jid: str, d: Demand) -> tuple[int, int]:
        node, gpu = self.where.pop(tid)
        self.cap.cpu[node] += d.cpu
        self.cap.mem[node] += d.mem_gb
        self.cap.bw[node] += d.bw_MBps * 1e6
        if gpu >= 0:
            self.res[gpu].remove(jid)
        return node, gpu

    def tasks(self, job: JobView, role: str) -> list[str]:
        """The job's tasks of this role that stay placed in this decision."""
        return [t.task_id for t in job.tasks if t.role == role and t.task_id in self.where]


class Gandiva(Scheduler):
    name = "gandiva"

    def __init__(
        self,
        packing: bool = True,
        migration: bool = True,
        grow_shrink: bool = True,
        pack_util_max: float = math.inf,
        grow_max_factor: int = 4,
        oversubscription: bool = True,
    ):
        """`oversubscription=False` drops Algorithm 1's lines 11-12 (a job that finds no free GPUs
        queues instead of time-slicing): an ablation, not the paper's Gandiva. `pack_util_max`
        may be inf, its default: no bound on the summed utilisation of a packed GPU."""
        owner = type(self).__name__
        flags = {"packing": packing, "migration": migration, "grow_shrink": grow_shrink,
                 "oversubscription": oversubscription}
        for key, v in flags.items():
            check_bool(v, key, owner)  # "no" would switch the mechanism on
        check_real(pack_util_max, "pack_util_max", owner, gt=0, inf=True, note="inf: no bound")
        check_int(grow_max_factor, "grow_max_factor", owner, ge=1)
        self.packing, self.migration, self.grow_shrink = packing, migration, grow_shrink
        self.oversubscription = oversubscription
        self.pack_util_max = pack_util_max
        self.grow_max_factor = grow_max_factor

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.affinity: dict[int, int] = {}  # server -> GPUs per server of its jobs (absent = 0)
        self.trials: dict[int, _Trial] = {}  # GPU -> packed set being profiled or kept
        self.rejected: set[frozenset[str]] = set()  # sets whose packing lost
        self.seen: dict[int, tuple[frozenset[str], dict[str, float]]] = {}  # time-sliced sets last time
        self.no_grow: set[str] = set()
        self.last_branch: dict[str, str] = {}  # job -> getNode branch that placed it (for tests)

    # ------------------------------------------------------------------ decision point
    def decide(self, view: ClusterView) -> Decision:
        d = Decision()
        plan = _Plan(view)
        jobs = {j.job_id: j for j in view.jobs}
        self._refresh_affinity(plan)
        if self.grow_shrink:
            self._shrink(view, plan, d, jobs)
        self._reactive(view, plan, d)
        if self.migration:
            self._to_vacated(plan, d, jobs)
            self._colocate(plan, d, jobs)
        if self.packing:
            self._pack(plan, d, jobs)
        if self.grow_shrink:
            self._grow(view, plan, d, jobs)
        self._remember(plan, d, jobs)
        return d

    def _refresh_affinity(self, plan: _Plan) -> None:
        for n in plan.gpu_nodes:
            if plan.idle(n):
                self.affinity.pop(n, None)

    # ------------------------------------------------------------------ reactive mode
    def _reactive(self, view: ClusterView, plan: _Plan, d: Decision) -> None:
        for job in view.pending:
            if any(t.task_id in plan.where for t in job.tasks):
                continue  # placed earlier in this decision
            if job.worker_demand.gpu == 0:
                self._place_cpu_job(view, plan, d, job)
                continue
            branch, gpus = self.get_node(plan, job)
            if gpus is None or not self._commit(plan, d, job, gpus):
                self.last_branch[job.job_id] = "queue"
                continue
            self.last_branch[job.job_id] = branch

    def get_node(self, plan: _Plan, job: JobView) -> tuple[str, list[int] | None]:
        """Gandiva Algorithm 1: the branch taken and one GPU per worker (None: queued)."""
        g = job.num_workers
        k = min(g, plan.max_gpus)
        need = [k] * (g // k) + ([g % k] if g % k else [])  # workers per server
        wd = job.worker_demand
        nodes0 = [  # line 1: findNodes(job.gpu, affinity = job.gpu)
            n for n in plan.gpu_nodes
            if self.affinity.get(n, 0) == k and plan.c.gpus[n] >= k and plan.host_room(n, wd) >= k
        ]
        nodes1 = sorted(nodes0, key=lambda n: (plan.load(n), -len(plan.free(n)), n))[: len(need)]  # line 2
        nodes2 = [  # line 3: findNodes(job.gpu, affinity = 0)
            n for n in plan.gpu_nodes if self.affinity.get(n, 0) == 0 and plan.idle(n) and plan.host_room(n, wd) >= 1
        ]
        nodes3 = self._relaxed(plan, wd, g)  # line 4: findNodes(job.gpu)
        if len(nodes1) == len(need) and all(len(plan.free(n)) >= m for n, m in zip(nodes1, need)):
            return "same-affinity", [x for n, m in zip(nodes1, need) for x in plan.free(n)[:m]]  # 5-6
        out: list[int] = []
        for n in sorted(nodes2, key=lambda n: (-int(plan.c.gpus[n]), n)):  # numGPUs(nodes2) >= job.gpu
            out += plan.free(n)[: min(k, g - len(out), plan.host_room(n, wd))]
        if len(out) == g:
            return "unallocated", out  # lines 7-8
        if nodes3:
            return "relaxed", nodes3  # lines 9-10
        if self.oversubscription and len(nodes1) == len(need):  # lines 11-12: over-subscription
            out = []
            for n, m in zip(nodes1, need):
                util = {}
                for gpu in plan.gpus_of(n):
                    util[gpu] = (len(plan.res[gpu]), plan.packed[gpu], sum(plan.util[j] for j in plan.res[gpu]), gpu)
                out += sorted(util, key=util.get)[:m]
            return "oversubscribe", out
        return "queue", None  # lines 13-14

    def _relaxed(self, plan: _Plan, wd: Demand, g: int) -> list[int]:
        """Free GPUs anywhere, fewest servers first (most free GPUs first); [] if too few."""
        out: list[int] = []
        for n in sorted(plan.gpu_nodes, key=lambda n: (-len(plan.free(n)), n)):
            out += plan.free(n)[: min(g - len(out), plan.host_room(n, wd))]
            if len(out) == g:
                return out
        return []

    def _commit(self, plan: _Plan, d: Decision, job: JobView, gpus: list[int]) -> bool:
        """Place the job's workers on `gpus` and its PS near them; all or nothing."""
        c, jid = plan.c, job.job_id
        wd, pd = job.worker_demand, job.ps_demand
        done: list[tuple[str, Demand]] = []
        for i, gpu in enumerate(gpus):
            tid = f"{jid}/w{i}"
            node = int(c.gpu_node[gpu])
            if plan.host_room(node, wd) < 1:
                break
            plan.put(tid, jid, wd, node, gpu)
            done.append((tid, wd))
        servers = list(dict.fromkeys(int(c.gpu_node[g]) for g in gpus))
        if len(done) == len(gpus):
            for i in range(job.num_ps):
                tid = f"{jid}/ps{i}"
                node = next((servers[(i + j) % len(servers)] for j in range(len(servers))
                             if plan.host_room(servers[(i + j) % len(servers)], pd) >= 1), -1)
                if node < 0:
                    node = spread(c, plan.cap, pd, [])
                if node < 0:
                    break
                plan.put(tid, jid, pd, node, -1)
                done.append((tid, pd))
        if len(done) < len(gpus) + job.num_ps:
            for tid, dem in done:
                plan.lift(tid, jid, dem)
            return False
        for tid, _ in done:
            node, gpu = plan.where[tid]
            d.place[tid] = (node, int(c.gpu_slot[gpu])) if gpu >= 0 else node
        k = min(len(gpus), plan.max_gpus)
        for n in servers:
            self.affinity.setdefault(n, k)
        for gpu in set(gpus):
            tr = self.trials.get(gpu)
            if plan.packed[gpu] and (tr is None or frozenset(plan.res[gpu]) != tr.jobs):
                self._unpack(plan, d, gpu)  # a new job on a packed GPU: time-sliced, profiled again
        return True

    def _place_cpu_job(self, view: ClusterView, plan: _Plan, d: Decision, job: JobView) -> None:
        got = place_job(view.cluster, plan.cap, spread, job.ps_demand, job.worker_demand, job.num_ps, job.num_workers)
        if got is None:
            self.last_branch[job.job_id] = "queue"
            return
        for role, nodes in (("ps", got[0]), ("w", got[1])):
            for i, n in enumerate(nodes):
                d.place[f"{job.job_id}/{role}{i}"] = n
                plan.where[f"{job.job_id}/{role}{i}"] = (n, -1)
        self.last_branch[job.job_id] = "cpu"

    # ------------------------------------------------------------------ introspective mode
    def _move(self, plan: _Plan, d: Decision, job: JobView, tid: str, node: int, gpu: int) -> None:
        dem = job.worker_demand if gpu >= 0 else job.ps_demand
        _, old = plan.lift(tid, job.job_id, dem)
        plan.put(tid, job.job_id, dem, node, gpu)
        d.place[tid] = (node, int(plan.c.gpu_slot[gpu])) if gpu >= 0 else node
        for g in (old, gpu):
            if g >= 0 and plan.packed[g]:
                self._unpack(plan, d, g)

    def _follow_ps(self, plan: _Plan, d: Decision, job: JobView) -> None:
        """A job whose workers all sit on one server takes its PS along when they fit there."""
        nodes = {plan.where[t][0] for t in plan.tasks(job, "worker")}
        if len(nodes) != 1:
            return
        (n,) = nodes
        for t in plan.tasks(job, "ps"):
            if plan.where[t][0] != n and plan.host_room(n, job.ps_demand) >= 1:
                self._move(plan, d, job, t, n, -1)

    def _to_vacated(self, plan: _Plan, d: Decision, jobs: dict[str, JobView]) -> None:
        """Migration (i): workers sharing a GPU move to vacated GPUs anywhere in the cluster."""
        shared = sorted((g for g, r in enumerate(plan.res) if len(r) > 1), key=lambda g: (-len(plan.res[g]), g))
        for gpu in shared:
            while len(plan.res[gpu]) > 1 and plan.n_free():
                jid = plan.res[gpu][-1]
                job = jobs[jid]
                if job.status != "running":
                    break
                tid = next(t for t, (_, g) in plan.where.items() if g == gpu and t.rpartition("/")[0] == jid)
                target = self._free_gpu_for(plan, job, int(plan.c.gpu_node[gpu]))
                if target < 0:
                    break
                self._move(plan, d, job, tid, int(plan.c.gpu_node[target]), target)
                self._follow_ps(plan, d, job)

    def _free_gpu_for(self, plan: _Plan, job: JobView, home: int) -> int:
        """A free GPU for one of the job's workers: same server, the job's servers, same affinity,
        unallocated, any; -1 if none has host room."""
        wd = job.worker_demand
        mine = {plan.where[t][0] for t in plan.tasks(job, "worker")}
        k = min(job.num_workers, plan.max_gpus)
        for n in sorted(plan.gpu_nodes, key=lambda n: (
            n != home, n not in mine, self.affinity.get(n, 0) != k, self.affinity.get(n, 0) != 0, plan.load(n), n,
        )):
            free = plan.free(n)
            if free and (n == home or plan.host_room(n, wd) >= 1):
                self.affinity.setdefault(n, k)
                return free[0]
        return -1

    def _colocate(self, plan: _Plan, d: Decision, jobs: dict[str, JobView]) -> None:
        """Migration for locality: a running job spread over more servers than it needs moves to a
        same-affinity or unallocated placement on fewer servers, else defragments one."""
        for job in jobs.values():
            if job.status != "running" or job.worker_demand.gpu == 0:
                continue
            workers = plan.tasks(job, "worker")
            servers = {plan.where[t][0] for t in workers}
            k = min(len(workers), plan.max_gpus)
            if len(servers) <= math.ceil(len(workers) / k):
                continue
            saved = {t: plan.lift(t, job.job_id, job.worker_demand) for t in workers}
            branch, gpus = self.get_node(plan, job)
            better = branch in ("same-affinity", "unallocated") and (
                len({int(plan.c.gpu_node[g]) for g in gpus}) < len(servers)
            )
            for t, (n, g) in saved.items():
                plan.put(t, job.job_id, job.worker_demand, n, g)
            if better:
                for t, gpu in zip(workers, gpus):
                    self._move(plan, d, job, t, int(plan.c.gpu_node[gpu]), gpu)
                for n in {int(plan.c.gpu_node[g]) for g in gpus}:
                    self.affinity.setdefault(n, k)
                self._follow_ps(plan, d, job)
            elif len(workers) <= plan.max_gpus:
                self._defragment(plan, d, jobs, job)

    def _defragment(self, plan: _Plan, d: Decision, jobs: dict[str, JobView], job: JobView) -> None:
        """Migration (iii), defragmentation: make room for a fragmented job on one server by moving
        the other jobs there, each to free GPUs of a single other server, then bring the job's
        workers together. Servers are tried by most of the job's workers, then fewest others."""
        mine = plan.tasks(job, "worker")
        g = len(mine)
        at = {n: [t for t in mine if plan.where[t][0] == n] for n in {plan.where[t][0] for t in mine}}

        def others(n: int) -> list[str]:
            return [t for t, (m, gpu) in plan.where.items() if m == n and gpu >= 0 and t not in at[n]]

        for dst in sorted(at, key=lambda n: (-len(at[n]), len(others(n)), n)):
            if plan.c.gpus[dst] < g:
                continue
            snap = (copy.deepcopy((plan.res, plan.packed, plan.cap, plan.where)), dict(self.affinity), dict(self.trials))
            trial = Decision()
            for t in mine:  # the job leaves its other servers first: their GPUs may take the others
                if plan.where[t][0] != dst:
                    plan.lift(t, job.job_id, job.worker_demand)
            by_job: dict[str, list[str]] = {}
            for t in others(dst):
                by_job.setdefault(t.rpartition("/")[0], []).append(t)
            ok = True
            for jid in sorted(by_job, key=lambda j: len(by_job[j])):
                if len(plan.free(dst)) >= g - len(at[dst]):
                    break
                other = jobs[jid]
                tids = by_job[jid]
                dest = next((
                    n for n in sorted(plan.gpu_nodes, key=lambda n: (self.affinity.get(n, 0) != len(tids), plan.load(n), n))
                    if n != dst and len(plan.free(n)) >= len(tids) and plan.host_room(n, other.worker_demand) >= len(tids)
                ), -1)
                if other.status != "running" or dest < 0:
                    ok = False
                    break
                for t, gpu in zip(tids, plan.free(dest)[: len(tids)]):
                    self._move(plan, trial, other, t, dest, gpu)
                self.affinity.setdefault(dest, len(tids))
                self._follow_ps(plan, trial, other)
            free = plan.free(dst)
            away = [t for t in mine if t not in plan.where]
            if ok and len(free) >= len(away) and plan.host_room(dst, job.worker_demand) >= len(away):
                for t, gpu in zip(away, free):
                    plan.put(t, job.job_id, job.worker_demand, dst, gpu)
                    trial.place[t] = (dst, int(plan.c.gpu_slot[gpu]))
                self._follow_ps(plan, trial, job)
                d.place.update(trial.place)
                d.gpu_mode.update(trial.gpu_mode)
                return
            (plan.res, plan.packed, plan.cap, plan.where), self.affinity, self.trials = snap

    # ------------------------------------------------------------------ packing
    def _unpack(self, plan: _Plan, d: Decision, gpu: int) -> None:
        plan.packed[gpu] = False
        d.gpu_mode[plan.c.gpu_key(gpu)] = "timeslice"
        self.trials.pop(gpu, None)

    def _pack(self, plan: _Plan, d: Decision, jobs: dict[str, JobView]) -> None:
        """Packing by profiling: judge the packed sets, then try new ones during overload."""
        for gpu, tr in list(self.trials.items()):
            if frozenset(plan.res[gpu]) != tr.jobs or len(plan.res[gpu]) != len(tr.jobs) or not plan.packed[gpu]:
                self.trials.pop(gpu)
                if plan.packed[gpu] and len(plan.res[gpu]) >= 2:  # a member left: profile again
                    self._unpack(plan, d, gpu)
                continue
            if not all(jobs[j].steps_done > tr.steps[j] for j in tr.jobs):
                continue  # not measured packed yet
            # in job-id order: a frozenset iterates in an order that depends on PYTHONHASHSEED
            gain = np.mean([jobs[j].last_speed / tr.ts_speed[j] for j in sorted(tr.jobs)])
            tr.steps = {j: jobs[j].steps_done for j in tr.jobs}
            if gain <= 1.0:  # loses to time-slicing: undo, never retry this set
                self.rejected.add(tr.jobs)
                self._unpack(plan, d, gpu)
        if plan.n_free():
            return  # packing is considered only during overload
        mem = plan.c.gpu_memory
        cands = []
        for gpu, r in enumerate(plan.res):
            group = frozenset(r)
            if len(r) < 2 or len(group) != len(r) or plan.packed[gpu] or group in self.rejected:
                continue
            prev = self.seen.get(gpu)
            if prev is None or prev[0] != group or not all(jobs[j].steps_done > prev[1][j] for j in group):
                continue  # not time-sliced together for a measured interval yet
            if sum(jobs[j].gpu_mem_gb for j in group) > mem[plan.c.gpu_node[gpu]] + EPS:
                continue  # up to the GPU's memory (Table 1 note)
            utils = sorted(jobs[j].gpu_util for j in group)
            if sum(utils) <= self.pack_util_max + EPS:
                cands.append((utils[0], sum(utils), gpu, group))
        for _, _, gpu, group in sorted(cands, key=lambda c: c[:3]):
            plan.packed[gpu] = True
            d.gpu_mode[plan.c.gpu_key(gpu)] = "pack"
            self.trials[gpu] = _Trial(group, {j: jobs[j].last_speed for j in group}, {j: jobs[j].steps_done for j in group})

    # ------------------------------------------------------------------ grow-shrink
    def _shrink(self, view: ClusterView, plan: _Plan, d: Decision, jobs: dict[str, JobView]) -> None:
        """Grown jobs go back to the workers they asked for: for good when growing did not make
        them faster, and, latest arrival first, while pending jobs want more GPUs than are free."""
        wanted = sum(j.num_workers for j in view.pending if j.worker_demand.gpu)
        grown = [j for j in view.running if j.num_workers > j.requested[1]]
        for job in sorted(grown, key=lambda j: (j.arrival_s, j.job_id), reverse=True):
            p, w0 = job.num_ps, job.requested[1]
            big, base = job.observed_speed.get((p, job.num_workers)), job.observed_speed.get((p, w0))
            no_gain = big is not None and base is not None and big <= base
            if not (no_gain or wanted > plan.n_free()):
                continue
            if no_gain:
                self.no_grow.add(job.job_id)
            d.allocate[job.job_id] = (p, w0)
            for i in range(w0, job.num_workers):
                tid = f"{job.job_id}/w{i}"
                _, gpu = plan.lift(tid, job.job_id, job.worker_demand)
                if gpu >= 0 and plan.packed[gpu]:
                    self._unpack(plan, d, gpu)

    def _grow(self, view: ClusterView, plan: _Plan, d: Decision, jobs: dict[str, JobView]) -> None:
        """Under-utilised cluster (nothing pending, no shared GPU, free GPUs): running jobs grow
        onto the free GPUs of their own servers."""
        if view.pending or any(len(r) > 1 for r in plan.res) or not plan.n_free():
            return
        for job in view.running:
            jid, w = job.job_id, job.num_workers
            if jid in self.no_grow or job.worker_demand.gpu == 0 or w != job.requested[1] or jid in d.allocate:
                continue
            if any(t.task_id in d.place for t in job.tasks):
                continue  # moved in this decision already
            servers = sorted({plan.where[t][0] for t in plan.tasks(job, "worker")})
            room = self.grow_max_factor * w - w
            new: list[tuple[int, int]] = []
            for n in servers:
                for gpu in plan.free(n)[: max(0, min(room - len(new), plan.host_room(n, job.worker_demand)))]:
                    new.append((n, gpu))
            if not new:
                continue
            d.allocate[jid] = (job.num_ps, w + len(new))
            for i, (n, gpu) in enumerate(new):
                tid = f"{jid}/w{w + i}"
                plan.put(tid, jid, job.worker_demand, n, gpu)
                d.place[tid] = (n, int(plan.c.gpu_slot[gpu]))

    # ------------------------------------------------------------------ memory
    def _remember(self, plan: _Plan, d: Decision, jobs: dict[str, JobView]) -> None:
        """GPUs that stay time-sliced by the same set of jobs, with each job's progress now: next
        time their last speeds are time-sliced measurements."""
        self.seen = {
            g: (frozenset(r), {j: jobs[j].steps_done for j in r})
            for g, r in enumerate(plan.res)
            if len(r) >= 2 and not plan.packed[g]
        }

"""D²S (seed 001, §3): every unscheduled task assigned at once by a minimum-cost flow that trades data
transfer time against waiting for a busy node, with applications weighted by their residual time.

The flow graph (§3.2, Fig. 2): Source -> App p (capacity: p's unscheduled tasks, cost ft^p, Eq. 5)
-> Task (capacity 1, cost 0) -> Node m (capacity 1, cost: transfer time tt, Eq. 1 for map tasks,
Eq. 2 for reduce tasks) -> Sink (capacity: free slots of m, cost 0 - a free node has no waiting
time; plus, for a busy node, its busy slots at cost nt^m = the remaining time of its quickest task,
Eq. 3-4). The maximum flow of least total cost is the assignment (Eq. 6-7). Costs are integer
milliseconds. Algorithm 1 of the paper is one way to find that optimum (a residual-graph method);
any exact min-cost-flow solver finds a flow of the same cost: networkx (`max_flow_min_cost`,
network simplex) for graphs under SOLVER_THRESHOLD_ARCS arcs, OR-Tools' C++ SimpleMinCostFlow at
or above it (tests check both give the same cost).

Mapping the paper's MapReduce applications onto PS/worker jobs (the paper trains DNNs as
MapReduce applications; this simulator's jobs are PS/worker):
- application = job; map task = worker (its input split is the job's shard for that worker,
  `shard_nodes[i % len]`); reduce task = PS (it fetches every worker's output, Eq. 2).
- idm (Eq. 1) = the bytes the worker reads over the job's remaining epoch budget
  (remaining steps * input bytes per step / workers; steps are local batches); odm (Eq. 2) = the
  bytes a worker sends that PS over the same budget (param_bytes / p per exchange, one exchange per
  local batch of its own: remaining steps / workers, `exchanges_per_worker`; the bytes the engine
  moves). A scheduler does not know the convergence point, so the user's epoch budget
  (`max_epochs`) stands for the job's length.
- band (Eq. 1-2) = the path's capacity: the two NICs, and both rack uplinks across racks (the view
  shows reserved, not measured, link use); same node = no transfer.
- Progress pr (Eq. 5) = steps done / budget steps; "used time" ut = the time the job has run, which
  makes Eq. 5 the usual progress-rate estimate of the remaining time (Hadoop's). A job that never
  ran has ft = 0, so pending jobs tie on the Source -> App arcs and rank by arrival (+1 ms per place
  in that order on their Source -> App arc). (Reading ut as time since submission instead would make
  the flow, which minimises cost, serve the most recently submitted jobs first and starve the
  oldest, against the paper's aim of keeping applications in step.) nt^m uses Eq. 5 for the running
  jobs on m; a job with no progress yet gives no estimate (Eq. 5 would say 0 and invite every task
  to wait).
- Applications with unscheduled tasks (Fig. 2: "Application 1 has two tasks to be scheduled and
  only one unscheduled task for application 2"; Capacity(Source, App) = the tasks it may get): a
  job's map tasks (workers) start as slots allow, as MapReduce runs an application's map tasks in
  waves. A pending job starts with the workers that got a free slot (at least one) and its PS; a
  running job short of the workers it asked for keeps its missing workers in the flow, with its
  Eq. 5 residual time ft > 0 on its Source -> App arc, and grows when they get a slot (the engine
  charges the checkpoint pause of a resize). This is where Eq. 5 acts: when the slots (free, and
  busy ones to wait for) cannot take every unscheduled task, the applications with the least
  residual time keep their tasks in the flow (issue 12: with whole-job starts only pending jobs,
  ft = 0, were ever in the flow, and Eq. 5 never acted). Placed workers take the job's next worker
  indices (worker i reads shard i), matched to their nodes by least input transfer.
- Eq. (6) is one joint minimum over map (Eq. 1) and reduce (Eq. 2) transfer: each worker arc to
  node m pays its input reads and its exchange with the job's PS node (`joint_worker_cost`: the
  running job's PS, or the pending job's best PS node). Reduce tasks (PS) still start after their
  maps in a second flow (their input is the maps' output), with Eq. 2 costs from the workers' nodes;
  a job whose PS gets no free slot does not start and its workers give their slots back.
- Slots: a node's free slots = how many of the smallest pending demand fit in its free CPU, memory
  and GPUs; a task has an arc only to nodes where it fits (the paper's "the node has abilities to
  satisfy requirements of tasks"); every placement is re-checked against the node's capacity. A
  task sent to wait for a busy node stays unscheduled (D²S chose to wait).
- Eq. 2's max ties on many nodes (e.g. every node when the workers span both racks), so ties are
  broken by the total fetch time (a 1e-3 / w weight on the sum: a PS joins its workers rather than
  an idle node of the same max). Remaining ties between equal-cost assignments are the solver's.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
from ortools.graph.python import min_cost_flow
from scipy.optimize import linear_sum_assignment

from dlclusterenv.api import ClusterView, Decision, JobView, Scheduler
from dlclusterenv.cluster import Cluster
from dlclusterenv.config import Demand
from dlclusterenv.placers import Capacity

# networkx's network simplex is pure Python: fine for a few thousand arcs, slow past that; at and
# above this many arcs the OR-Tools C++ solver is used (same optimal cost, tests/test_baseline_d2s.py).
SOLVER_THRESHOLD_ARCS = 2000
# D2S(merge="auto") builds the compact graph from this many per-task Task -> Node arcs (the
# issue-14 scale, 10,000 tasks x 1,000 nodes, has about 10^7)
MERGE_THRESHOLD_ARCS = 1_000_000
_MS = 1000.0


@dataclass
class FlowGraph:
    """The D²S graph (Fig. 2) as arrays; apps, tasks and targets (nodes) are numbered from 0.
    Costs are integers (milliseconds)."""

    app_cap: np.ndarray  # Source -> App p: how many of its tasks may be scheduled
    app_cost: np.ndarray  # ... at cost ft^p (Eq. 5)
    task_app: np.ndarray  # App -> Task: each task's app (capacity 1, cost 0)
    target_cap: np.ndarray  # Node -> Sink: slots
    target_cost: np.ndarray  # ... at cost nt (waiting time, Eq. 3-4)
    arc_task: np.ndarray  # Task -> Node arcs (capacity 1): tail task,
    arc_target: np.ndarray  # head node,
    arc_cost: np.ndarray  # cost tt (transfer time, Eq. 1-2)
    # Compact form (D2S(merge=True)). A "task" may stand for k identical tasks (same app, same
    # arcs and costs): App -> Task and its Task -> Node arcs then have capacity k (None: 1). And
    # hubs (rack vertices): arc_target >= len(target_cap) names hub arc_target - len(target_cap),
    # and hub h reaches targets hub_target[hub_src == h] at cost 0 (uncapacitated).
    task_cap: np.ndarray | None = None
    hub_src: np.ndarray | None = None
    hub_target: np.ndarray | None = None

    def n_hubs(self) -> int:
        return 0 if self.hub_src is None or not len(self.hub_src) else int(self.hub_src.max()) + 1

    def n_arcs(self) -> int:
        hub = 0 if self.hub_src is None else len(self.hub_src)
        return len(self.app_cap) + len(self.task_app) + len(self.arc_task) + len(self.target_cap) + hub

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """(tails, heads, capacities, costs, sink); vertices: Source 0, apps, tasks, targets, hubs,
        Sink; arcs in the order App, Task, Task -> Node (or hub), Node -> Sink, hub -> Node."""
        a, t, m, h = len(self.app_cap), len(self.task_app), len(self.target_cap), self.n_hubs()
        app0, task0, tgt0, sink = 1, 1 + a, 1 + a + t, 1 + a + t + m + h
        cap = np.ones(t, np.int64) if self.task_cap is None else _i64(self.task_cap)
        parts = [  # (tails, heads, capacities, costs) of the layers
            (np.zeros(a), app0 + np.arange(a), self.app_cap, self.app_cost),
            (app0 + _i64(self.task_app), task0 + np.arange(t), cap, np.zeros(t)),
            (task0 + _i64(self.arc_task), tgt0 + _i64(self.arc_target), cap[_i64(self.arc_task)],
             self.arc_cost),
            (tgt0 + np.arange(m), np.full(m, sink), self.target_cap, self.target_cost),
        ]
        if h:
            k = len(self.hub_src)
            parts.append((tgt0 + m + _i64(self.hub_src), tgt0 + _i64(self.hub_target),
                          np.full(k, int(cap.sum())), np.zeros(k)))
        tails, heads, caps, costs = (_i64(np.concatenate([p[k] for p in parts])) for k in range(len(parts[0])))
        return tails, heads, caps, costs, sink


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def solve(g: FlowGraph, solver: str = "auto") -> tuple[np.ndarray, int]:
    """Maximum flow of minimum cost from Source to Sink, on a graph of single tasks. Returns (per
    task the target it is sent to, -1 if none; total cost)."""
    if g.task_cap is not None and (_i64(g.task_cap) != 1).any():
        raise ValueError("solve: the graph has merged tasks; use solve_flow")
    tasks, targets, _, cost = solve_flow(g, solver)
    sent = np.full(len(g.task_app), -1, dtype=np.int64)
    sent[tasks] = targets
    return sent, cost


def solve_flow(g: FlowGraph, solver: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Maximum flow of minimum cost from Source to Sink. Returns (task, target, units) of the
    assignment, and the total cost. Units through a hub are paired with the hub's targets in
    order: any pairing is optimal, as a task's arc to a hub costs at least its cost to each of
    the hub's targets and exactly that to each it has no direct arc to (see D2S._stage), so a
    pairing that cost less than the flow would be a cheaper flow."""
    if solver == "auto":
        solver = "ortools" if g.n_arcs() >= SOLVER_THRESHOLD_ARCS else "networkx"
    if solver not in ("networkx", "ortools"):
        raise ValueError(f"unknown solver {solver!r}; use 'auto', 'networkx' or 'ortools'")
    none = np.zeros(0, dtype=np.int64)
    if len(g.arc_task) == 0:
        return none, none, none, 0  # no task can reach a node: the maximum flow is 0
    tails, heads, caps, costs, sink = g.edges()
    fn = _solve_networkx if solver == "networkx" else _solve_ortools
    used, cost = fn(tails, heads, caps, costs, sink)
    first = len(g.app_cap) + len(g.task_app)  # the Task -> Node arcs, in g.arc_* order
    flow = used[first : first + len(g.arc_task)]
    task, target = _i64(g.arc_task), _i64(g.arc_target)
    m, on = len(g.target_cap), flow > 0
    direct = on & (target < m)
    out = [(task[direct], target[direct], flow[direct])]
    if g.n_hubs():
        hub_flow = used[first + len(g.arc_task) + m :]
        into: dict[int, list] = {}
        for i in np.flatnonzero(on & (target >= m)).tolist():
            into.setdefault(int(target[i]) - m, []).append([int(task[i]), int(flow[i])])
        pairs = []
        for i in np.flatnonzero(hub_flow > 0).tolist():
            src, left, q = into[int(g.hub_src[i])], int(hub_flow[i]), int(g.hub_target[i])
            while left:
                k = min(left, src[-1][1])
                pairs.append((src[-1][0], q, k))
                left -= k
                src[-1][1] -= k
                if not src[-1][1]:
                    src.pop()
        if pairs:
            out.append(tuple(_i64(x) for x in zip(*pairs)))
    t, q, u = (np.concatenate([o[k] for o in out]) for k in range(3))
    return t, q, u, cost


def _solve_networkx(tails, heads, caps, costs, sink) -> tuple[np.ndarray, int]:
    G = nx.DiGraph()
    for u, v, c, w in zip(tails.tolist(), heads.tolist(), caps.tolist(), costs.tolist()):
        G.add_edge(u, v, capacity=c, weight=w)
    flow = nx.max_flow_min_cost(G, 0, sink)
    used = np.array([flow[u][v] for u, v in zip(tails.tolist(), heads.tolist())], dtype=np.int64)
    return used, int(nx.cost_of_flow(G, flow))


def _solve_ortools(tails, heads, caps, costs, sink) -> tuple[np.ndarray, int]:
    smcf = min_cost_flow.SimpleMinCostFlow()
    arcs = smcf.add_arcs_with_capacity_and_unit_cost(tails, heads, caps, costs)
    total = int(caps[tails == 0].sum())  # every task could be sent; the solver sends what fits
    smcf.set_node_supply(0, total)
    smcf.set_node_supply(sink, -total)
    status = smcf.solve_max_flow_with_min_cost()
    if status != smcf.OPTIMAL:
        raise RuntimeError(f"OR-Tools min-cost flow failed with status {status}")
    return np.asarray(smcf.flows(arcs), dtype=np.int64), int(smcf.optimal_cost())


# ----------------------------------------------------------------------------- the cost model
def bandwidth(cluster: Cluster) -> np.ndarray:
    """band[d, m] in bytes/s: the capacity of the path from node d to node m; inf on the diagonal.
    Symmetric (the same NICs and uplinks either way), which `joint_worker_cost` relies on."""
    nic = cluster.nic
    band = np.minimum(nic[:, None], nic[None, :])
    rack = cluster.node_rack
    up = cluster.uplink[rack]
    cross = rack[:, None] != rack[None, :]
    band = np.where(cross, np.minimum(band, np.minimum(up[:, None], up[None, :])), band)
    np.fill_diagonal(band, np.inf)
    return band


def budget_steps(job: JobView) -> float:
    """Steps left in the user's epoch budget: the job length a scheduler can know."""
    return max(job.max_epochs * job.steps_per_epoch - job.steps_done, 0.0)


def progress(job: JobView) -> float:
    return min(job.steps_done / max(job.max_epochs * job.steps_per_epoch, 1), 1.0)


def residual_time(job: JobView) -> float:
    """Eq. (5): ft = ut (1 - pr) / pr for pr > 0, else ut; ut = the time the job has run."""
    pr = progress(job)
    return job.run_s * (1.0 - pr) / pr if pr > 0 else job.run_s


def worker_transfer(
    job: JobView, input_bytes_per_step: float, band: np.ndarray, workers: int | None = None
) -> np.ndarray:
    """Eq. (1): tt[i, m] = idm_i / band[d_i, m], seconds, for worker i (of `workers`, default the
    job's) on node m; worker i reads shard i."""
    n, w = band.shape[0], workers or job.num_workers
    if not job.shard_nodes or input_bytes_per_step <= 0:
        return np.zeros((w, n))
    idm = budget_steps(job) * input_bytes_per_step / w
    shards = np.asarray(job.shard_nodes)[np.arange(w) % len(job.shard_nodes)]
    return idm / band[shards]


def exchanges_per_worker(job: JobView) -> float:
    """How many exchanges one worker makes with its PS over the rest of the epoch budget: the
    budget's local batches shared by the job's workers (weak scaling: a sync step of w workers
    does w local batches, one exchange each; an async worker exchanges once per local batch of
    its own, so the same), one exchange per `exchange_every` of them. The workers are the ones the
    job asked for (or runs, if more), as Eq. (1)'s idm divides the input by (`decide`)."""
    w = max(job.requested[1], job.num_workers, 1)
    return budget_steps(job) / w / job.exchange_every


def ps_transfer(job: JobView, worker_nodes: list[int], band: np.ndarray) -> np.ndarray:
    """Eq. (2): tt[r] = max over the job's workers m of odm / band[m, r], seconds, per node r;
    ties of the max broken by the total (+ 1e-3 / w of the sum, under 0.1% of the max)."""
    odm = exchanges_per_worker(job) * job.param_bytes / job.num_ps
    fetch = odm / band[np.asarray(worker_nodes)]
    return fetch.max(axis=0) + 1e-3 / len(worker_nodes) * fetch.sum(axis=0)


def exchange_bytes(job: JobView) -> float:
    """Eq. (2)'s odm summed over the job's p PS: the bytes one worker sends its PS over the rest of
    the epoch budget (p x param_bytes / p per exchange, `exchanges_per_worker` of them)."""
    return exchanges_per_worker(job) * job.param_bytes


# the candidate PS nodes tried per job by `joint_worker_cost` on large clusters (all on small ones)
PS_CANDIDATES = 16


def joint_worker_cost(
    job: JobView, tt_in: np.ndarray, band: np.ndarray, cap: Capacity, full: Capacity,
    ps_nodes: list[int] | None = None, memo: dict | None = None,
) -> tuple[np.ndarray, int]:
    """Eq. (6) as one joint minimum over the map (Eq. 1) and reduce (Eq. 2) transfers, made
    expressible on the worker arcs: worker i on node m costs tt_in[i, m] (its input reads) plus the
    exchange with the job's PS node r, exchange_bytes / band[m, r] (0 on r itself).

    r is the job's PS node if it has one (`ps_nodes`, a running job growing), else its best PS
    node: among the nodes where its PS fits now (else fits at all), the one whose total (every
    worker sent greedily, in index order, to its cheapest node with a free worker slot, the PS
    taking its share of r) is least; ties to the lowest index. On clusters of more than
    PS_CANDIDATES nodes the candidates are the job's shard nodes and the nodes with the most free
    worker slots, up to PS_CANDIDATES in all.

    Choices where Eq. 6 does not fit a flow: the joint minimum needs one r for all of a job's
    workers, which per-task arcs cannot choose, so r is chosen first (above) and the flow decides
    the workers given r; Eq. 2 takes the max over the workers' fetches, the arcs add them up (the
    PS's NIC carries every remote worker's exchange, so they share it and the sum is its busy time).
    `memo`: a dict kept over calls while cap and full do not change (fits and slots per demand).
    Returns (cost[i, m] in seconds, r)."""
    exb = exchange_bytes(job)  # ex[m, r] = exb / band[m, r], 0 on the diagonal: the columns used
    if ps_nodes:
        ex = exb / band[:, np.asarray(ps_nodes)]
        return tt_in + ex.sum(axis=1)[None, :] / len(ps_nodes), int(ps_nodes[0])
    ok = _per_demand(Capacity.fits, cap, job.ps_demand, memo)
    use, ok = (cap, ok) if ok.any() else (full, _per_demand(Capacity.fits, full, job.ps_demand, memo))
    w_free = _per_demand(slots, use, job.worker_demand, memo)
    cands = np.flatnonzero(ok)
    if len(cands) > PS_CANDIDATES:
        shard = [n for n in dict.fromkeys(job.shard_nodes) if ok[n]]
        rest = cands[np.argsort(-w_free[cands], kind="stable")[: PS_CANDIDATES + len(shard)]]
        cands = np.array(list(dict.fromkeys(shard + rest.tolist()))[:PS_CANDIDATES])
    if not len(cands):
        return tt_in + (exb / band[:, 0])[None, :], 0
    ex_t = exb / band[cands]  # ex[:, cands].T, (candidates, nodes): band is symmetric (`bandwidth`)
    # the worker slots left on each candidate r once the PS takes its share of r
    one = Capacity(use.cpu[cands], use.mem[cands], use.bw[cands], use.gpu[cands])  # copies (fancy indexing)
    one.take(slice(None), job.ps_demand)  # on every candidate at once
    left_r = slots(one, job.worker_demand)
    best, best_k = np.inf, 0
    for k, total in enumerate(_greedy_totals(tt_in, ex_t, w_free, cands, left_r)):
        if total < best - 1e-9:
            best, best_k = total, k
    return tt_in + ex_t[best_k][None, :], int(cands[best_k])


def _greedy_totals(tt_in: np.ndarray, ex_t: np.ndarray, w_free: np.ndarray, cands: np.ndarray,
                   left_r: np.ndarray) -> list[float]:
    """Per candidate PS node r = cands[k]: the total of sending workers i = 0, 1, ... in turn to
    argmin_m cost[i, m] over the nodes with a worker slot left (ties to the lowest index; every
    node if none is left), cost = tt_in + ex_t[k], slots w_free with left_r[k] on r.

    Exactly that loop, faster: every candidate steps at once (one row each), and workers with
    equal tt_in rows share one row of costs in which nodes without a slot are inf; each keeps its
    argmin (its next node), recomputed only for the candidates whose node just ran out of slots.
    Where no node with a slot has a finite cost, the loop's own fallback runs. The costs are added
    in worker order, as the loop did, so the totals are equal to the last bit."""
    index: dict[bytes, int] = {}
    reps, cls = [], []
    for i, row in enumerate(tt_in):
        c = index.setdefault(row.tobytes(), len(index))
        if c == len(reps):
            reps.append(i)
        cls.append(c)
    R, rows = len(cands), np.arange(len(cands))
    tt, ex_t = tt_in[reps], np.ascontiguousarray(ex_t)  # (distinct rows, nodes); vals below is C-ordered
    left = np.repeat(w_free[None, :], R, axis=0)  # slots left per candidate and node
    left[rows, cands] = left_r
    vals = np.where(w_free > 0, tt, np.inf)[None, :, :] + ex_t[:, None, :]  # (candidates, rows, nodes)
    vals[rows, :, cands] = np.where(left_r[:, None] > 0, tt[:, cands].T + ex_t[rows, cands][:, None], np.inf)
    head = vals.argmin(axis=2)  # each candidate's and row's next node
    n = len(w_free)
    flat_left, flat_vals = left.reshape(-1), vals.reshape(-1)  # views (C order), indexed flat below
    at_left, at_vals = rows * n, rows * (len(reps) * n)
    totals = np.zeros(R)
    for c in cls:
        m = head[:, c]
        v = flat_vals[at_vals + c * n + m]
        if v.max() == np.inf:  # no node with a slot at a finite cost: the loop's fallback
            m = m.copy()
            for k in np.flatnonzero(v == np.inf).tolist():
                cost = tt[c] + ex_t[k]
                free = np.flatnonzero(left[k] > 0)
                m[k] = free[np.argmin(cost[free])] if len(free) else np.argmin(cost)
                v[k] = cost[m[k]]
        totals += v
        i = at_left + m
        now = flat_left[i] - 1
        flat_left[i] = now
        if not now.all():  # these nodes ran out of slots: the next node of their candidates' rows
            out = np.flatnonzero(now == 0)
            vals[out, :, m[out]] = np.inf
            head[out] = vals[out].argmin(axis=2)
    return totals.tolist()


def waiting_times(view: ClusterView) -> np.ndarray:
    """nt^m (Eq. 3-4): remaining time (Eq. 5) of the quickest running job with a task on m;
    inf where no running job on m has made progress yet."""
    nt = np.full(view.cluster.n_nodes, np.inf)
    for job in view.running:
        if progress(job) <= 0 or job.run_s <= 0:
            continue
        ft = residual_time(job)
        for t in job.tasks:
            if t.node >= 0:
                nt[t.node] = min(nt[t.node], ft)
    return nt


def _ms(seconds) -> np.ndarray:
    """Integer milliseconds (the flow's costs); unbounded times are capped."""
    return np.rint(np.minimum(np.asarray(seconds, dtype=float), 1e12) * _MS).astype(np.int64)


def slots(cap: Capacity, d: Demand) -> np.ndarray:
    """How many tasks of demand `d` fit on each node in `cap` (at most 2^31)."""
    k = np.full(len(cap.cpu), 2**31, dtype=np.int64)
    for free, need in ((cap.cpu, d.cpu), (cap.mem, d.mem_gb), (cap.gpu, d.gpu), (cap.bw, d.bw_MBps * 1e6)):
        if need > 0:
            k = np.minimum(k, np.floor(np.maximum(free, 0) / need + 1e-9).astype(np.int64))
    return k


def _cat(parts: list) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _key(d: Demand) -> tuple:
    return d.cpu, d.mem_gb, d.gpu, d.bw_MBps


def _per_demand(fn, cap: Capacity, d: Demand, memo: dict | None) -> np.ndarray:
    """fn(cap, d), kept in `memo` (if any) per function, capacity and demand."""
    if memo is None:
        return fn(cap, d)
    key = (fn, id(cap), _key(d))
    if key not in memo:
        memo[key] = fn(cap, d)
    return memo[key]


def _smallest(demands: list[Demand]) -> Demand:
    return Demand(
        cpu=min(d.cpu for d in demands),
        mem_gb=min(d.mem_gb for d in demands),
        gpu=min(d.gpu for d in demands),
        bw_MBps=min(d.bw_MBps for d in demands),
    )


@dataclass
class _Group:
    """One job's tasks of one kind in a round: ids, their common demand, tt[task, node] seconds."""

    job: JobView
    task_ids: list[str]
    demand: Demand
    tt: np.ndarray
    partial: bool = False  # map tasks: start those that get a slot (else all or none)


# ----------------------------------------------------------------------------- the scheduler
class D2S(Scheduler):
    name = "d2s"

    def __init__(self, solver: str = "auto", merge: bool | str = "auto"):
        """`merge`: build the compact graph, the same optimum with far fewer arcs: a job's tasks
        with the same costs to every node are one vertex of capacity k, and tasks reach a rack's
        nodes through a rack vertex (`_hub_arcs`). False: the paper's Fig. 2 graph, one vertex per
        task and one arc per task and node. "auto": the compact graph where the paper's would have
        MERGE_THRESHOLD_ARCS Task -> Node arcs or more. Why not always: equal-cost optima are
        broken by the solver, differently on the two graphs, so a run's decisions (not its costs)
        may differ; below the threshold the paper's graph keeps every reproduced figure."""
        if solver not in ("auto", "networkx", "ortools"):
            raise ValueError(f"unknown solver {solver!r}; use 'auto', 'networkx' or 'ortools'")
        if merge not in (True, False, "auto"):
            raise ValueError(f"merge: expected true, false or 'auto', got {merge!r}")
        self.solver = solver
        self.merge = merge

    def _stage(self, cap: Capacity, full: Capacity, nt: np.ndarray, ft: dict, rank: dict, groups: list):
        """Build and solve one flow over `groups`. Returns (placed: job -> {task: node}, waiting
        job ids, short job ids); placed jobs are charged on `cap`."""
        n = len(cap.cpu)
        smallest = _smallest([gr.demand for gr in groups])
        free = slots(cap, smallest)
        busy = np.maximum(slots(full, smallest) - free, 0)
        free_nodes = np.flatnonzero(free > 0)
        wait_nodes = np.flatnonzero((busy > 0) & np.isfinite(nt))
        tgt_node = np.concatenate([free_nodes, wait_nodes])
        free_idx, wait_idx = np.full(n, -1), np.full(n, -1)
        free_idx[free_nodes] = np.arange(len(free_nodes))
        wait_idx[wait_nodes] = len(free_nodes) + np.arange(len(wait_nodes))
        by_demand: dict[tuple, tuple] = {}  # the nodes a task fits (free, wait), once per demand
        for gr in groups:
            d = gr.demand
            if _key(d) not in by_demand:
                by_demand[_key(d)] = (np.flatnonzero(cap.fits(d) & (free_idx >= 0)),
                                      np.flatnonzero(full.fits(d) & (wait_idx >= 0)))
        fits = [by_demand[_key(gr.demand)] for gr in groups]
        merge = self.merge
        if merge == "auto":  # the paper's graph unless it would be large
            merge = sum(len(gr.task_ids) * (len(f) + len(w)) for gr, (f, w) in zip(groups, fits)) \
                >= MERGE_THRESHOLD_ARCS
        app_cap, app_cost, task_app, task_cap, arc_task, arc_target, arc_cost = ([] for _ in range(7))
        hubs: dict[tuple, tuple] = {}  # (free or wait, demand) -> its rack layout and hubs
        hub_src, hub_target = [], []
        members = []  # per graph task: the stage's tasks (numbered across groups) it stands for
        pos = {jid: k for k, jid in enumerate(sorted({gr.job.job_id for gr in groups}, key=rank.__getitem__))}
        t = first = 0  # graph tasks and stage tasks so far
        m_all = len(tgt_node)
        for a, gr in enumerate(groups):
            k = len(gr.task_ids)
            app_cap.append(k)
            # Source -> App: residual time, Eq. (5), + 1 ms per place in the (ft, arrival) order so
            # that of equal applications the earlier is served first (not the solver's whim)
            app_cost.append(_ms(ft[gr.job.job_id]) + pos[gr.job.job_id])
            ms = _ms(gr.tt)
            if merge:  # a group's tasks share demand and fits, so equal cost rows are equal tasks
                rows: dict[bytes, list[int]] = {}
                for i, row in enumerate(ms):
                    rows.setdefault(row.tobytes(), []).append(first + i)
                cls = [np.array(v) for v in rows.values()]
                ms = ms[[c[0] - first for c in cls]]
            else:
                cls = [np.array([first + i]) for i in range(k)]
            u = len(cls)
            task_app += [a] * u
            task_cap += [len(c) for c in cls]
            members += cls
            # Task -> Node: transfer time (Eq. 1-2), to nodes where the task fits now (free slots)
            # and to busy nodes it fits when empty (wait for them)
            for kind, (idx, nodes) in enumerate(((free_idx, fits[a][0]), (wait_idx, fits[a][1]))):
                if not len(nodes):
                    continue
                if merge:
                    nodes = self._hub_arcs(gr, kind, nodes, idx, ms, t, m_all, hubs, hub_src, hub_target,
                                           arc_task, arc_target, arc_cost)
                arc_task.append(np.repeat(t + np.arange(u), len(nodes)))
                arc_target.append(np.tile(idx[nodes], u))
                arc_cost.append(ms[:, nodes].ravel())
            t += u
            first += k
        g = FlowGraph(
            app_cap=np.array(app_cap),
            app_cost=np.array(app_cost),
            task_app=np.array(task_app),
            # Node -> Sink: free slots cost no waiting; busy slots cost nt^m (Eq. 3-4)
            target_cap=np.concatenate([free[free_nodes], busy[wait_nodes]]),
            target_cost=np.concatenate([np.zeros(len(free_nodes), np.int64), _ms(nt[wait_nodes])]),
            arc_task=_cat(arc_task),
            arc_target=_cat(arc_target),
            arc_cost=_cat(arc_cost),
            task_cap=np.array(task_cap),
            hub_src=np.array(hub_src, dtype=np.int64),
            hub_target=np.array(hub_target, dtype=np.int64),
        )
        self.last_arcs = g.n_arcs()
        tasks, targets, units, self.last_cost = solve_flow(g, self.solver)
        sent = np.full(first, -1, dtype=np.int64)
        used = np.zeros(len(members), dtype=np.int64)  # of each merged task, the tasks sent so far
        for c, q, f in zip(tasks.tolist(), targets.tolist(), units.tolist()):  # in order
            sent[members[c][used[c] : used[c] + f]] = q
            used[c] += f
        placed, waiting, short = {}, set(), set()
        starts = np.cumsum([0] + [len(gr.task_ids) for gr in groups])
        order = sorted(range(len(groups)), key=lambda a: rank[groups[a].job.job_id])
        for a in order:
            gr, got = groups[a], sent[starts[a] : starts[a + 1]]
            jid = gr.job.job_id
            unsent = int((got < 0).sum())
            if unsent:
                self.last_unsent[jid] = self.last_unsent.get(jid, 0) + unsent
            if gr.partial:  # map tasks: those with a free slot start, the others stay unscheduled
                where = {}
                for tid, k in zip(gr.task_ids, got.tolist()):
                    if 0 <= k < len(free_nodes) and cap.fits_at(int(tgt_node[k]), gr.demand):
                        m = int(tgt_node[k])
                        cap.take(m, gr.demand)
                        where[tid] = m
                if where:
                    placed[jid] = where
                elif (got >= len(free_nodes)).any():
                    waiting.add(jid)
                else:
                    short.add(jid)
                continue
            if (got >= len(free_nodes)).any():
                waiting.add(jid)  # the flow sends a task to wait for a busy node
                continue
            if (got < 0).any():
                short.add(jid)
                continue
            nodes = tgt_node[got]
            done = 0
            while done < len(nodes) and cap.fits_at(int(nodes[done]), gr.demand):
                cap.take(int(nodes[done]), gr.demand)
                done += 1
            if done < len(nodes):  # slots counted by the smallest demand: this one did not fit
                for m in nodes[:done]:
                    cap.take(int(m), gr.demand, -1)
                short.add(jid)
                continue
            placed[jid] = dict(zip(gr.task_ids, (int(m) for m in nodes)))
        return placed, waiting, short

    def _hub_arcs(self, gr, kind, nodes, idx, ms, t, m_all, hubs, hub_src, hub_target,
                  arc_task, arc_target, arc_cost) -> np.ndarray:
        """Route the group's tasks (rows of ms, graph tasks t...) to the eligible `nodes` of each
        rack of two or more through one hub per (free or wait, rack, demand): one arc per task and
        rack at cost x = the task's most expensive node there, plus direct arcs to the nodes that
        cost it less (its shard's node, its PS's node). Every node reached only through the hub
        costs the task exactly x, so the optimum is that of the per-node arcs. Returns the nodes
        that keep per-node arcs for every task (racks with a single eligible node). The eligible
        nodes depend on the demand only, so their rack layout and hubs are made once per stage."""
        d = gr.demand
        key = (kind, *_key(d))
        if key not in hubs:
            rack = self._rack[nodes]
            order = np.argsort(rack, kind="stable")
            nodes, rack = nodes[order], rack[order]
            starts = np.flatnonzero(np.r_[True, rack[1:] != rack[:-1]])
            sizes = np.diff(np.r_[starts, len(nodes)])
            multi = sizes >= 2
            col_rack = np.repeat(np.arange(len(starts)), sizes)
            h0 = hub_src[-1] + 1 if hub_src else 0
            ids = h0 + np.arange(int(multi.sum()))
            for h, r in zip(ids.tolist(), np.flatnonzero(multi).tolist()):
                hub_src.extend([h] * int(sizes[r]))
                hub_target.extend(idx[nodes[starts[r] : starts[r] + sizes[r]]].tolist())
            hubs[key] = (nodes, starts, multi, col_rack, multi[col_rack], m_all + ids)
        nodes, starts, multi, col_rack, in_multi, hub_ids = hubs[key]
        if not len(hub_ids):
            return nodes
        cost = ms[:, nodes]  # (u, eligible nodes)
        x = np.maximum.reduceat(cost, starts, axis=1)  # (u, racks)
        u = len(ms)
        arc_task.append(np.repeat(t + np.arange(u), len(hub_ids)))
        arc_target.append(np.tile(hub_ids, u))
        arc_cost.append(x[:, multi].ravel())
        cheaper = (cost < x[:, col_rack]) & in_multi[None, :]  # direct arcs inside hubbed racks
        ti, ci = np.nonzero(cheaper)
        arc_task.append(t + ti)
        arc_target.append(idx[nodes[ci]])
        arc_cost.append(cost[ti, ci])
        return nodes[~in_multi]

    def _workers(self, job: JobView, band, cap, full, input_tt: dict, memo: dict) -> _Group:
        """Flow 1's group for a job: its unscheduled map tasks (workers), pending job or running one
        short of the workers it asked for, with the joint cost of Eq. 6 (`joint_worker_cost`;
        `memo` is its per-demand cache, kept while cap does not change)."""
        w0 = job.num_workers if job.status == "running" else 0
        w_req = job.requested[1] if job.status == "running" else job.num_workers
        idx = np.arange(w0, w_req)
        tt_in = input_tt[job.job_id][idx]
        if job.comm == "allreduce":  # no reduce task: map costs only (Eq. 1); the paper has no
            tt = tt_in               # all-reduce, so the exchange among workers is not priced
        else:
            ps = [t.node for t in job.tasks if t.role == "ps"] if job.status == "running" else None
            tt, _ = joint_worker_cost(job, tt_in, band, cap, full, ps_nodes=ps, memo=memo)
        return _Group(job, [f"{job.job_id}/w{i}" for i in idx], job.worker_demand, tt, partial=True)

    def decide(self, view: ClusterView) -> Decision:
        c = view.cluster
        cap = Capacity.of(view)
        full = Capacity(c.cpus * 1.0, c.memory * 1.0, c.nic * 1.0, c.gpus.astype(np.int64))  # nodes empty
        band = bandwidth(c)
        self._rack = c.node_rack
        nt = waiting_times(view)
        # the applications with unscheduled tasks: pending jobs, and running jobs short of the
        # workers they asked for (they started with the slots there were, as map tasks do)
        jobs = {j.job_id: j for j in view.pending}
        jobs.update({j.job_id: j for j in view.running if j.num_workers < j.requested[1]})
        ft = {jid: residual_time(j) for jid, j in jobs.items()}  # Eq. (5), Source -> App costs
        self.last_ft = ft  # for tests and diagnostics: this round's Eq. 5 costs,
        self.last_unsent = {}  # and per job the tasks the flow sent nowhere (no slot, none to wait for)
        rank = {jid: (ft[jid], j.arrival_s, k) for k, (jid, j) in enumerate(jobs.items())}
        input_tt = {  # Eq. (1) for every worker the job asked for
            jid: worker_transfer(j, j.input_bytes_per_step, band, max(j.requested[1], j.num_workers))
            for jid, j in jobs.items()
        }
        d = Decision()
        active = list(jobs)
        while active:
            # flow 1: the map tasks (workers) of every application with unscheduled ones
            memo: dict = {}  # cap does not change while the groups are built
            groups = [self._workers(jobs[j], band, cap, full, input_tt, memo) for j in active]
            placed_w, waiting, short = self._stage(cap, full, nt, ft, rank, groups)
            # flow 2: the reduce tasks (PS) of the pending jobs that got workers, Eq. (2); a running
            # job keeps its PS
            groups = []
            for jid, where in placed_w.items():
                j = jobs[jid]
                if j.status == "pending" and j.comm == "ps":
                    tt = np.tile(ps_transfer(j, list(where.values()), band), (j.num_ps, 1))
                    groups.append(_Group(j, [f"{jid}/ps{i}" for i in range(j.num_ps)], j.ps_demand, tt))
            placed_p, failed = {}, set()
            if groups:
                placed_p, waiting_p, short_p = self._stage(cap, full, nt, ft, rank, groups)
                failed = waiting_p | short_p
            for jid in sorted(failed):  # no PS, no start: the workers give their slots back
                for n in placed_w.pop(jid).values():
                    cap.take(n, jobs[jid].worker_demand, -1)
            for jid, where in placed_w.items():
                self._emit(d, jobs[jid], where, placed_p.get(jid, {}), input_tt[jid])
            # the slots given back may serve the jobs that got none; every other job is settled
            active = [j for j in active if j in short] if failed else []
        return d

    @staticmethod
    def _emit(d: Decision, job: JobView, workers: dict, ps: dict, tt_in: np.ndarray) -> None:
        """Put the placed workers into the decision as the job's next worker indices (worker i
        reads shard i), matched to the nodes by least input transfer (Eq. 1); a job that runs with
        fewer workers than it has, or grows, gets its new (p, w)."""
        w0 = job.num_workers if job.status == "running" else 0
        nodes = list(workers.values())
        idx = np.arange(w0, w0 + len(nodes))
        rows, cols = linear_sum_assignment(np.minimum(tt_in[idx][:, nodes], 1e18))
        for r, col in zip(rows, cols):
            d.place[f"{job.job_id}/w{idx[r]}"] = nodes[col]
        d.place.update(ps)
        w = w0 + len(nodes)
        if w != job.num_workers:
            d.allocate[job.job_id] = (job.num_ps, w)

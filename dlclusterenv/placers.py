"""Named task placers: given free capacity and a job's (p, w), choose nodes for its tasks.

Used by the allocation env (DL2-style: the policy allocates, a placer places) and by baselines. A
placer works on a `Capacity` copy, so trying a placement never touches the simulator.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from .api import ClusterView, Decision
from .cluster import Cluster
from ._kernels import _jit
from .config import Demand


@dataclass
class Capacity:
    """Free resources per node that a planner can spend (cpu cores, GB, bytes/s, GPUs)."""

    cpu: np.ndarray
    mem: np.ndarray
    bw: np.ndarray
    gpu: np.ndarray

    @classmethod
    def of_sim(cls, sim) -> "Capacity":
        c = sim.cluster
        return cls(c.cpus - sim.used_cpu, c.memory - sim.used_mem, c.nic - sim.used_bw, sim.free_gpus.copy())

    @classmethod
    def of(cls, view: ClusterView) -> "Capacity":
        return cls(
            view.free_cpu.copy(),
            view.free_mem.copy(),
            view.free_bw.copy(),
            view.free_gpus.astype(np.int64),
        )

    @classmethod
    def without(cls, view: ClusterView, jobs) -> "Capacity":
        """What is free plus what `jobs` (JobViews) hold now: the room of a planner that may move
        them all."""
        cap = cls.of(view)
        for j in jobs:
            for t in j.tasks:
                if t.node >= 0:
                    cap.take(t.node, t.demand, -1)
        return cap

    def fits(self, d: Demand) -> np.ndarray:
        eps = 1e-9
        return (
            (self.cpu + eps >= d.cpu)
            & (self.mem + eps >= d.mem_gb)
            & (self.bw + 1e-3 >= d.bw_MBps * 1e6)
            & (self.gpu >= d.gpu)
        )

    @staticmethod
    def needs(demands: list[Demand]) -> np.ndarray:
        """(len(demands), 4): what `fits_many` compares, built once where demands repeat."""
        return np.array([(d.cpu, d.mem_gb, d.bw_MBps * 1e6, d.gpu) for d in demands], dtype=float)

    def fits_many(self, demands: list[Demand] | np.ndarray) -> np.ndarray:
        """`fits` for several demands (or their `needs`) at once: a (len, nodes) boolean array."""
        need = demands if isinstance(demands, np.ndarray) else self.needs(demands)
        free = np.stack([self.cpu + 1e-9, self.mem + 1e-9, self.bw + 1e-3, self.gpu.astype(float)])
        return (free[None, :, :] >= need[:, :, None]).all(axis=1)

    def fits_many_at(self, node: int, need: np.ndarray) -> np.ndarray:
        """Column `node` of `fits_many(need)` alone (the same float64 comparisons): where a step
        changed one node's capacity."""
        free = np.array((self.cpu[node] + 1e-9, self.mem[node] + 1e-9, self.bw[node] + 1e-3, float(self.gpu[node])))
        return (free >= need).all(axis=1)

    def take(self, node: int | slice, d: Demand, sign: int = 1) -> None:
        self.cpu[node] -= sign * d.cpu
        self.mem[node] -= sign * d.mem_gb
        self.bw[node] -= sign * d.bw_MBps * 1e6
        self.gpu[node] -= sign * d.gpu

    def fits_at(self, node: int, d: Demand) -> bool:
        """`fits(d)[node]` without computing every node (the same float64 comparisons)."""
        eps = 1e-9
        return bool(
            self.cpu[node] + eps >= d.cpu
            and self.mem[node] + eps >= d.mem_gb
            and self.bw[node] + 1e-3 >= d.bw_MBps * 1e6
            and self.gpu[node] >= d.gpu
        )

    def load(self, c: Cluster) -> np.ndarray:
        """Fraction of the node in use, by its most used of CPU, memory and GPU."""
        used = np.maximum(1 - self.cpu / c.cpus, 1 - self.mem / c.memory)
        if c.n_gpus:  # (np.maximum pairwise: the values np.max over the stacked rows gives)
            used = np.maximum(used, np.where(c.gpus > 0, 1 - self.gpu / np.maximum(c.gpus, 1), 0.0))
        return used


def spread(cluster: Cluster, cap: Capacity, d: Demand, job_nodes: list[int]) -> int:
    """Load balancing (DRF's placement in Optimus' evaluation): the least-loaded node that fits;
    ties to the lowest index. -1 if none fits."""
    ok = np.flatnonzero(cap.fits(d))
    if len(ok) == 0:
        return -1
    return int(ok[np.argmin(cap.load(cluster)[ok])])


def _stay(ok: np.ndarray, job_nodes: list[int]) -> int:
    """The latest of the job's nodes among the fitting nodes `ok`; -1 if none."""
    fit = set(ok.tolist())
    return next((n for n in reversed(job_nodes) if n in fit), -1)


def pack(cluster: Cluster, cap: Capacity, d: Demand, job_nodes: list[int]) -> int:
    """Keep a job on few nodes: the latest node of this job that still fits, else the fullest
    node that fits (best fit). -1 if none fits."""
    ok = np.flatnonzero(cap.fits(d))
    if len(ok) == 0:
        return -1
    n = _stay(ok, job_nodes)
    return n if n >= 0 else int(ok[np.argmax(cap.load(cluster)[ok])])


def consolidate(cluster: Cluster, cap: Capacity, d: Demand, job_nodes: list[int]) -> int:
    """Keep a job on few nodes without splintering others' free space: the latest node of this
    job that still fits, else the node with the most free GPUs (a GPU task) or cores that fits;
    ties to the lowest index. Optimus places this way ([code] __place: the job's servers, then
    the emptiest); best fit (`pack`) instead starts a big job on the fullest node and spreads it
    over the crumbs, and on a busy cluster an 8-worker job then crosses several NICs. -1 if none."""
    ok = np.flatnonzero(cap.fits(d))
    if len(ok) == 0:
        return -1
    n = _stay(ok, job_nodes)
    return n if n >= 0 else int(ok[np.argmax(cap.gpu[ok] if d.gpu > 0 else cap.cpu[ok])])


PLACERS = {"spread": spread, "pack": pack, "consolidate": consolidate}


def get_placer(name: str, *, also: tuple[str, ...] = ()):
    """The named placer; a KeyError listing the known names (and the caller's own `also`) for any
    other value, a list included (it was a raw TypeError: unhashable)."""
    try:
        return PLACERS[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown placer {name!r}; known: {sorted(PLACERS) + list(also)}") from None


def _fill_workers(cluster: Cluster, cap: Capacity, placer, d: Demand, w: int,
                  nodes: list[int]) -> bool | None:
    """The w workers' nodes as `pack` (score: load) / `consolidate` (free GPUs or cores) choose
    them one task at a time, appended to `nodes` and charged to `cap` in the same order (so the
    same floats): True; False, with what was placed left charged, where they run out of nodes, as
    the per-task loop does.

    Why one pass does: a worker stays on the job's latest node while it fits (the workers share
    one demand, so the nodes left before never fit again: capacity only shrinks here), and
    otherwise goes to the first maximum of the score over the nodes that fit, which is the same
    for every node the job has not touched: so the nodes are taken in one stable sort of the
    score, each filled until it no longer fits. NaN scores (a node without cores or memory)
    leave it to the per-task loop (None)."""
    ok = np.flatnonzero(cap.fits(d))
    # the score whose first maximum the placer picks once the job's latest node is full
    score = (cap.load(cluster) if placer is pack else cap.gpu if d.gpu > 0 else cap.cpu)[ok]
    if np.isnan(score).any():
        return None
    for n in ok[np.argsort(-score, kind="stable")].tolist():
        while len(nodes) < w:
            cap.take(n, d)
            nodes.append(n)
            if not cap.fits_at(n, d):
                break
        if len(nodes) == w:
            return True
    return False


_MAX_EXACT = 2.0**52  # integral doubles below this add and subtract exactly in any order


def integral(*values) -> bool:
    """Whether every value (arrays or scalars) is a whole number of magnitude below 2^52: then
    charging and releasing them is exact in any order, and `worker_nodes` can count."""
    for v in values:
        v = np.asarray(v, dtype=float)
        if not (np.all(np.abs(v) < _MAX_EXACT) and np.array_equal(v, np.floor(v))):
            return False
    return True


class WorkerOrder:
    """The nodes in the order `pack` (score: load) or `consolidate` (free GPUs) fills them with
    GPU workers, kept sorted as `cap` changes, so that where a job without PS would go is
    counted, not placed (Tiresias' walk trials, issue 14): `nodes(d, w)` is the worker list of
    `place_job(cluster, cap, placer, ps, d, 0, w)`, without charging. Exact only while every free
    value of `cap` and every charge is a whole number (`integral`: Philly's nodes and tasks are;
    the caller keeps to that): then a worker fits exactly where each free value is at least its
    demand (the fit tolerances cannot reach the next whole number), a node holds min(free //
    demand) workers, and the per-task loop fills the nodes in the stable order of the score
    (`_fill_workers`), here a sorted list of (-score, node) over the nodes with a free GPU, the
    only ones a GPU worker fits. The caller names the nodes whose capacity it changed (`touch`).
    Not for a cluster with a node without cores or memory (NaN load: see `usable`)."""

    def __init__(self, cluster: Cluster, cap: Capacity, placer) -> None:
        self.cap, self.pack, self.cluster, self.placer = cap, placer is pack, cluster, placer
        self.cpus, self.mem = cluster.cpus.tolist(), cluster.memory.tolist()
        self.gpus = cluster.gpus.tolist() if cluster.n_gpus else None
        ok = np.flatnonzero(cap.gpu >= 1)
        score = (cap.load(cluster) if self.pack else cap.gpu)[ok]
        order = np.argsort(-score, kind="stable")
        self.keys = list(zip((-score[order]).tolist(), ok[order].tolist()))
        self.key = {k[1]: k for k in self.keys}  # node -> its entry in keys
        self.dirty: set[int] = set()
        # (demand's charges, w, most) -> (what `nodes` returned, the last key its scan read):
        # kept while no node changed at or before that key (see `nodes`)
        self.memo: dict[tuple, tuple] = {}

    @staticmethod
    def usable(cluster: Cluster, placer) -> bool:
        return (placer is pack or placer is consolidate) and bool(
            np.all(cluster.cpus > 0) and np.all(cluster.memory > 0))

    def touch(self, nodes) -> None:
        self.dirty.update(nodes)

    def _score(self, n: int) -> float:
        """Capacity.load's value (the same float operations) or the free GPUs of node n."""
        c = self.cap
        if not self.pack:
            return int(c.gpu[n])
        return self._load(n, float(c.cpu[n]), float(c.mem[n]), int(c.gpu[n]))

    def _load(self, n: int, cpu: float, mem: float, gpu: int) -> float:
        """Capacity.load of node n with these free values."""
        used = max(1 - cpu / self.cpus[n], 1 - mem / self.mem[n])
        if self.gpus is not None:
            g = self.gpus[n]
            used = max(used, 1 - gpu / max(g, 1) if g > 0 else 0.0)
        return used

    @staticmethod
    def _count(d: Demand, cpu: float, mem: float, bw: float, gpu: int) -> int:
        """Workers of demand d (d.gpu >= 1) a node with these free values holds (`_scan`)."""
        count = gpu // d.gpu
        for x, v in ((cpu, d.cpu), (mem, d.mem_gb), (bw, d.bw_MBps * 1e6)):
            if v > 0:
                count = min(count, int(x // v))
            elif x < 0:
                count = 0
        return count

    def placed_state(self, d: Demand, w: int, most: int, releases: list[np.ndarray]) -> int:
        """The first state of a walk that gives back `releases` one after another (each a
        released job's charges per node, each node once: a (k, 5) float array of rows (node,
        cores, GB, bytes/s, GPUs), whole numbers, as Tiresias' kept running jobs hold them) at
        which `nodes(d, w, most)` is a node list: 0 now (`cap`, before the first release), r
        after the r-th release, -1 at none. Tiresias' walks of consolidated jobs ask this once
        instead of making a trial per state (issue 14, branch tires14; it replaced
        never_one_node, which answered only "certainly at none" and only for `most` 1).

        Why one pass does: at any state, `nodes(d, w, most)` is a node list exactly when the
        first `most` nodes in key order that hold a worker hold w together. Those are nodes no
        release touches (the first `most` such, the same at every state: they keep their
        values and keys) or touched nodes; the touched nodes' values are followed release by
        release (whole numbers: the sums are exact, in any order) and their keys made as
        `_score` makes them."""
        if self.dirty:
            self._refresh()
        c = self.cap
        charges = np.concatenate(releases) if releases else np.zeros((0, 5))
        nodes = charges[:, 0].astype(np.int64)
        given = set(nodes.tolist())
        fixed = []  # (key, workers held) of the first `most` untouched nodes that hold one
        for key in self.keys:
            n = key[1]
            if n in given:
                continue
            got = self._count(d, float(c.cpu[n]), float(c.mem[n]), float(c.bw[n]), int(c.gpu[n]))
            if got >= 1:
                fixed.append((*key, got))
                if len(fixed) == most:
                    break
        fixed = np.array(fixed, dtype=float).reshape(len(fixed), 3)
        # the touched nodes, compiled (a walk gives back ~180 charges over ~130 releases)
        ends = np.cumsum(np.fromiter(map(len, releases), np.int64, len(releases)))
        gpus = self.cluster.gpus if self.gpus is not None else np.zeros(0, np.int64)
        return int(_placed_state(
            nodes, charges, ends, c.cpu, c.mem, c.bw, c.gpu, self.cluster.cpus, self.cluster.memory,
            gpus, self.gpus is not None, self.pack, float(d.cpu), float(d.mem_gb), d.bw_MBps * 1e6,
            int(d.gpu), w, most, fixed))

    def rebase(self, cap: Capacity) -> np.ndarray:
        """Follow a new capacity `cap` (the next round's) instead of the current one: the nodes
        whose values differ (returned) are touched, so the order and the kept results stay
        exact."""
        old, self.cap = self.cap, cap
        diff = np.flatnonzero((old.cpu != cap.cpu) | (old.mem != cap.mem) | (old.bw != cap.bw)
                              | (old.gpu != cap.gpu))
        self.dirty.update(diff.tolist())
        return diff

    def _refresh(self) -> None:
        keys, key = self.keys, self.key
        low = None  # the first key a changed node had or has
        for n in self.dirty:
            if n < 0:
                continue
            old = key.pop(n, None)
            if old is not None:
                del keys[bisect.bisect_left(keys, old)]
                low = old if low is None or old < low else low
            if self.cap.gpu[n] >= 1:
                key[n] = k = (-self._score(n), n)
                bisect.insort(keys, k)
                low = k if low is None or k < low else low
        self.dirty.clear()
        if low is not None and self.memo:
            self.memo = {m: r for m, r in self.memo.items() if r[1] < low}

    SPREAD = "spread"  # nodes(): the first `most` nodes do not hold the workers

    def nodes(self, d: Demand, w: int, most: int | None = None) -> list[int] | str | None:
        """The w workers' nodes, or None where they do not all fit (d.gpu must be 1); with
        `most`, SPREAD as soon as the first `most` nodes they go to cannot hold them all (they
        are then placed on more nodes, or not at all: which is not worked out).

        Incremental (a walk's trials share the cluster state): a scan reads the nodes in key
        order up to the one it stops at, and its result depends on those nodes alone; so it is
        kept, and returned again, until a node that had or has a key at or before that one
        changes (`_refresh` drops it then). A scan that read every node (None) ends at an
        infinite key: any change of a node with a free GPU drops it."""
        if self.dirty:
            self._refresh()
        m = (d.cpu, d.mem_gb, d.bw_MBps, d.gpu, w, most)
        got = self.memo.get(m)
        if got is None:
            got = self.memo[m] = self._scan(d, w, most)
        out = got[0]
        return list(out) if isinstance(out, list) else out

    _END = (math.inf, math.inf)  # after every key

    def _scan(self, d: Demand, w: int, most: int | None) -> tuple:
        """(`nodes`' result, the key of the last node read)."""
        c = self.cap
        need = ((c.cpu, d.cpu), (c.mem, d.mem_gb), (c.bw, d.bw_MBps * 1e6))
        out: list[int] = []
        left = w
        used = 0
        for key in self.keys:
            n = key[1]
            count = int(c.gpu[n]) // d.gpu
            for f, v in need:
                x = float(f[n])
                if v > 0:
                    count = min(count, int(x // v))
                elif x < 0:
                    count = 0
            if count >= 1:
                k = min(count, left)
                out += [n] * k
                left -= k
                if not left:
                    return out, key
                used += 1
                if used == most:
                    return self.SPREAD, key
        return None, self._END


def place_job(
    cluster: Cluster, cap: Capacity, placer, ps: Demand, worker: Demand, p: int, w: int,
    ps_placer=None,
):
    """Place p PS and w workers (workers first) with a per-task placer, all or nothing.

    Each call gets the job's nodes placed so far (its workers first, so a PS placer sees them as
    `nodes[:w]`); `ps_placer`, if given, places the PS instead of `placer`. Returns
    (ps_nodes, worker_nodes) with `cap` charged, or None with `cap` unchanged. The workers of
    `pack` and `consolidate` are placed in one pass (`_fill_workers`: the same nodes and the same
    charges in the same order as task by task; issue 14, Tiresias' preemption walks)."""
    nodes: list[int] = []
    out: dict[str, list[int]] = {"ps": [], "w": []}
    if w > 1 and (placer is pack or placer is consolidate):
        filled = _fill_workers(cluster, cap, placer, worker, w, nodes)
        if filled is False:
            for m in nodes:
                cap.take(m, worker, -1)
            return None
        out["w"] = list(nodes)  # all w of them, or none (None: left to the loop)
    for role, d, k, choose in (("w", worker, w - len(out["w"]), placer),
                               ("ps", ps, p, ps_placer or placer)):
        for _ in range(k):
            n = choose(cluster, cap, d, nodes)
            if n < 0:
                for m, dd in zip(nodes, [worker] * len(out["w"]) + [ps] * len(out["ps"])):
                    cap.take(m, dd, -1)
                return None
            cap.take(n, d)
            nodes.append(n)
            out[role].append(n)
    return out["ps"], out["w"]


def start_pending(view: ClusterView, placer, d: Decision, *, blocking: bool) -> Decision:
    """Start pending jobs in arrival order, each whole with the (p, w) it has, where `placer` puts
    its tasks. A job that does not fit stops the round when `blocking` (strict FIFO), else is
    skipped."""
    cap = Capacity.of(view)
    for job in view.pending:
        got = place_job(
            view.cluster, cap, placer, job.ps_demand, job.worker_demand, job.num_ps, job.num_workers
        )
        if got is None:
            if blocking:
                break
            continue
        add_placement(d, job.job_id, *got)
    return d


def add_placement(d: Decision, job_id: str, ps_nodes: list[int], worker_nodes: list[int]) -> None:
    """Put a job's PS i on ps_nodes[i] and worker i on worker_nodes[i] in the decision."""
    for i, n in enumerate(ps_nodes):
        d.place[f"{job_id}/ps{i}"] = n
    for i, n in enumerate(worker_nodes):
        d.place[f"{job_id}/w{i}"] = n


# WorkerOrder.placed_state's walk over the charges given back, compiled: the Python code's
# float and integer operations on the same values (WorkerOrder._count, WorkerOrder._load or the
# free GPUs as `_score` makes them, Python's min / max and tuple order, here written out), so the
# same answers as WorkerOrder.nodes at each state (tests/test_placers.py).


@_jit
def _count_of(cpu, mem, bw, gpu, dc, dm, db, dg):
    """WorkerOrder._count: workers of demand (dc, dm, db, dg) a node with these free values holds."""
    count = gpu // dg
    for x, v in ((cpu, dc), (mem, dm), (bw, db)):
        if v > 0:
            k = int(x // v)
            if k < count:
                count = k
        elif x < 0:
            count = 0
    return count


@_jit
def _load_of(n, cpu, mem, gpu, cpus, mems, gpus, has_gpus):
    """WorkerOrder._load: Capacity.load of node n with these free values."""
    used = 1 - cpu / cpus[n]
    b = 1 - mem / mems[n]
    if b > used:  # Python's max: the first unless the second is greater
        used = b
    if has_gpus:
        g = gpus[n]
        b = 1 - gpu / max(g, 1) if g > 0 else 0.0
        if b > used:
            used = b
    return used


@_jit
def _state_key(j, n, v, g, held, key, cpus, mems, gpus, has_gpus, pack, dc, dm, db, dg):
    """held[j] and key[j] of node n, touched node j, with free values v[j] and g[j] GPUs."""
    held[j] = _count_of(v[j, 0], v[j, 1], v[j, 2], g[j], dc, dm, db, dg)
    if pack:
        key[j] = -_load_of(n, v[j, 0], v[j, 1], g[j], cpus, mems, gpus, has_gpus)
    else:
        key[j] = -float(g[j])


@_jit
def _placed_state(nodes, charges, ends, cpu, mem, bw, gpu, cpus, mems, gpus, has_gpus, pack,
                  dc, dm, db, dg, w, most, fixed):
    """placed_state after the untouched nodes are read (`fixed`: rows (key's first value,
    node, workers held), in key order): `charges`' rows (node, cores, GB, bytes/s, GPUs), the
    releases one after another, release r's ending at ends[r]. Per touched node: its free
    values, how many workers it holds and its key, made again when a release gives it back
    something; at each state the `most` least keys of the untouched and touched nodes that
    hold a worker, taken in key order, decide."""
    m = len(nodes)
    pos = np.full(len(cpu), -1, np.int64)  # node -> its place among the touched ones
    order = np.empty(m, np.int64)
    k = 0
    for i in range(m):
        if pos[nodes[i]] < 0:
            pos[nodes[i]] = k
            order[k] = nodes[i]
            k += 1
    v = np.empty((k, 3))
    g = np.empty(k, np.int64)
    held = np.empty(k, np.int64)  # workers it holds
    key = np.empty(k)  # its key's first value (the second is the node)
    for j in range(k):
        n = order[j]
        v[j, 0], v[j, 1], v[j, 2], g[j] = cpu[n], mem[n], bw[n], gpu[n]
        _state_key(j, n, v, g, held, key, cpus, mems, gpus, has_gpus, pack, dc, dm, db, dg)
    i = 0
    for r in range(len(ends) + 1):
        if r > 0:  # the r-th release (a node once per release)
            while i < ends[r - 1]:
                j = pos[nodes[i]]
                v[j, 0] += charges[i, 1]
                v[j, 1] += charges[i, 2]
                v[j, 2] += charges[i, 3]
                g[j] += int(charges[i, 4])
                _state_key(j, nodes[i], v, g, held, key, cpus, mems, gpus, has_gpus, pack,
                           dc, dm, db, dg)
                i += 1
        # the first `most` nodes that hold a worker, in key order (keys compared as Python's
        # tuples: distinct, as the nodes are), and the workers they hold together
        p0, p1 = -math.inf, -math.inf  # the key last taken
        total = 0
        for _ in range(most):
            b0, b1, got = math.inf, math.inf, 0
            for f in range(len(fixed)):
                f0, f1 = fixed[f, 0], fixed[f, 1]
                if (f0 > p0 or (f0 == p0 and f1 > p1)) and (f0 < b0 or (f0 == b0 and f1 < b1)):
                    b0, b1, got = f0, f1, int(fixed[f, 2])
            for j in range(k):
                if held[j] >= 1:
                    k0, k1 = key[j], float(order[j])
                    if (k0 > p0 or (k0 == p0 and k1 > p1)) and (k0 < b0 or (k0 == b0 and k1 < b1)):
                        b0, b1, got = k0, k1, held[j]
            if got == 0:  # no more nodes hold a worker
                break
            total += got
            p0, p1 = b0, b1
        if total >= w:
            return r
    return -1

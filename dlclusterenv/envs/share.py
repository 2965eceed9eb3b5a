"""DLClusterShare: the joint env's rounds of micro-actions, plus the three decisions that Gandiva and
FlowCon make and the other envs cannot express: a worker on a chosen GPU of a node (sharing an
occupied GPU), a GPU's sharing mode, and a task's soft CPU limit.

Actions, Discrete (N = max_nodes, G = max_gpus, J = max_jobs, T = max_tasks, B = 4096):
- +PS of job slot j on node n (J*N);
- +worker of slot j on GPU slot g of node n (J*N*G); the GPU may be occupied (time-slicing, or
  packing once the GPU is set to pack). A worker that uses no GPU takes g = 0, meaning the node;
- release slot j (J): as in the joint env, its tasks are freed for the round and what is added
  back is its new shape. Unlike the joint env, the i-th PS / worker added back *is* ps_i / w_i
  (a re-add where that task sits now does not move it), so every migration, including a worker
  changing GPU inside its node, is expressible exactly;
- GPU g of node n to time-slicing or to packing (N*G*2): only changes are offered; packing needs
  two workers on the GPU and their GPU memory to fit, and while a GPU is declared packed it takes
  another worker only if the memory fits (the simulator's rules, so a round never fails to apply);
- CPU limit of task t of slot j (J*T; t counts the job's PS, then its workers, after the round's
  actions so far), followed by base-B digits (B + 1): the first digit d gives d / B (d = B is
  1.0, no limit), each further one adds d / B^k; up to 6 digits. A learned policy needs one digit
  (limits on a 1/4096 grid); six express every float limit >= 2^-20 exactly, which is what
  FlowCon's limits need: they are shares of measured growth efficiencies (Alg. 1), reals with no
  finite grid, and a rounded limit would change every speed and so every metric;
- end of round (last).

Why digits and not a Box: SB3's MaskablePPO needs Discrete or MultiDiscrete actions with masks,
and gymnasium's check_env a standard space; a per-task Box would also waste its dimensions on the
tasks no decision touches. A digit is only valid while a limit is being written; any other action
closes it (a limit still at 0 is not written).

Observation: the shared one, plus `gpus` (N*G x 5: valid, workers on it / 4, packed, summed
profiled utilisation / 2, GPU memory in use), `tasks` (J*T x 7: valid, worker, node, GPU slot,
placed where it is now, CPU limit, share of its node's cores in use) and `cursor` (a limit being
written: open, slot, task, digits so far, value). `gpus`, `tasks` and `cursor` show the round's
proposal so far; the rest shows the cluster at the decision point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from gymnasium import spaces
from pydantic import Field

from ..api import Decision
from ..config import ConfigError
from .core import ClusterEnv, Int, Options

DIGIT_BASE = 4096  # 12 bits per digit
MAX_DIGITS = 6  # 72 bits: every float in [2^-20, 1] is an exact multiple of 2^-72
GPU_F, TASK_ROW_F, CURSOR_F = 5, 7, 5


@dataclass
class _Proposal:
    """One job's tasks after the round's actions so far: (node, global GPU or -1, kept) per PS and
    per worker in index order; `kept` = the task is where it sits in the simulator."""

    ps: list[tuple[int, int, bool]] = field(default_factory=list)
    w: list[tuple[int, int, bool]] = field(default_factory=list)
    seq: dict[str, int] = field(default_factory=dict)  # task id -> action order of its (re-)add


@dataclass
class _Cursor:
    slot: int
    index: int
    task_id: str
    digits: int = 0
    num: int = 0  # the value is num / B^digits


class ShareOptions(Options):
    max_tasks: Int = Field(default=64, ge=2)
    max_gpus: Int | None = Field(default=None, ge=1)


class ShareEnv(ClusterEnv):
    """DLClusterShare-v0: the joint env plus GPU choice, GPU sharing modes and CPU limits.

    ## Action Space
    `Discrete(J*N + J*N*G + J + N*G*2 + J*T + 4097 + 1)`, laid out as in the module docstring.

    ## Observation Space
    ClusterEnv's, plus `gpus` (N*G, 5), `tasks` (J*T, 7) and `cursor` (5,) (module docstring).
    Rewards and episode end: see ClusterEnv.

    ## Arguments
    `max_tasks` (default 64, task rows per job slot), `max_gpus` (default: the most GPUs of a
    node).
    """

    extra_options = ShareOptions
    extra_obs_keys = ("gpus", "tasks", "cursor")

    def __init__(self, scenario="default", max_tasks: int = 64, max_gpus: int | None = None, **kw):
        super().__init__(scenario, **kw)
        o = self._extra(max_tasks=max_tasks, max_gpus=max_gpus)
        self.max_tasks = o.max_tasks
        c = self.cluster
        need = max(int(c.gpus.max()), 1) if c.n_nodes else 1
        self.max_gpus = need if o.max_gpus is None else o.max_gpus
        if self.max_gpus < need:
            raise ConfigError(f"max_gpus: must be an integer >= {need} (the most GPUs of a node), "
                              f"got {self.max_gpus!r}")
        N, G, J, T = self.max_nodes, self.max_gpus, self.max_jobs, self.max_tasks
        self._o_w = J * N
        self._o_rel = self._o_w + J * N * G
        self._o_mode = self._o_rel + J
        self._o_lim = self._o_mode + N * G * 2
        self._o_dig = self._o_lim + J * T
        self.end = self._o_dig + DIGIT_BASE + 1
        self.action_space = spaces.Discrete(self.end + 1)
        self.observation_space = spaces.Dict(
            {
                **self.observation_space.spaces,
                "gpus": spaces.Box(0.0, 1.0, (N * G, GPU_F), np.float32),
                "tasks": spaces.Box(0.0, 1.0, (J * T, TASK_ROW_F), np.float32),
                "cursor": spaces.Box(0.0, 1.0, (CURSOR_F,), np.float32),
            }
        )
        # each real GPU's place in the (node, GPU slot) grid, and its memory
        self._gpu_cell = (c.gpu_node * G + c.gpu_slot).astype(np.int64)
        if np.array_equal(self._gpu_cell, np.arange(c.n_gpus)):  # every node has G GPUs: the
            self._gpu_cell = slice(0, c.n_gpus)  # grid's first cells, a slice (no fancy indexing)
        self._gpu_cap = c.gpu_memory[c.gpu_node].astype(float)
        self._gpu_valid = np.zeros(N * G, np.float32)
        self._gpu_valid[self._gpu_cell] = 1.0

    # ------------------------------------------------------------------ action encoding
    def encode_ps(self, slot: int, node: int) -> int:
        return slot * self.max_nodes + node

    def encode_worker(self, slot: int, node: int, gpu_slot: int) -> int:
        return self._o_w + (slot * self.max_nodes + node) * self.max_gpus + gpu_slot

    def encode_release(self, slot: int) -> int:
        return self._o_rel + slot

    def encode_mode(self, node: int, gpu_slot: int, mode: str) -> int:
        return self._o_mode + (node * self.max_gpus + gpu_slot) * 2 + ("timeslice", "pack").index(mode)

    def encode_limit(self, slot: int, task_index: int) -> int:
        return self._o_lim + slot * self.max_tasks + task_index

    def encode_digit(self, d: int) -> int:
        return self._o_dig + d

    def effective_mode(self, gpu: int) -> int:
        """The GPU's mode once the round is applied (1 pack, 0 timeslice)."""
        return int(self._modes()[gpu])

    # ------------------------------------------------------------------ round
    def _begin_round(self) -> None:
        sim, c = self.sim, self.cluster
        self._ended = False
        self._cursor: _Cursor | None = None
        self._seq = 0
        self._slots = self.slots()
        self._cpu = c.cpus - sim.used_cpu
        self._mem = c.memory - sim.used_mem
        self._bw = c.nic - sim.used_bw
        self._sim_occ = np.array([len(o) for o in sim.gpu_tasks], np.int64)
        self._occ = self._sim_occ.copy()
        self._stay = self._sim_occ.copy()  # workers there now that stay there
        self._sim_mode = sim.gpu_mode.astype(np.int64)
        self._mode_set: dict[int, int] = {}
        self._gmem = np.zeros(c.n_gpus)
        self._gutil = np.zeros(c.n_gpus)
        for g, owners in enumerate(sim.gpu_tasks):
            for tid in owners:
                m = sim.jobs[tid.rpartition("/")[0]].model
                self._gmem[g] += m.gpu_mem_gb
                self._gutil[g] += m.gpu_util
        self._released: set[str] = set()
        self._limits: dict[str, dict[str, float]] = {}
        self._orig: dict[str, _Proposal] = {}
        self._prop: dict[str, _Proposal] = {}
        for job in self._slots:
            now = _Proposal(
                [(t.node, -1, True) for t in job.ps_tasks()],
                [(t.node, t.gpu, True) for t in job.worker_tasks()],
            )
            self._orig[job.job_id] = now
            running = job.status == "running"
            self._prop[job.job_id] = _Proposal(list(now.ps), list(now.w)) if running else _Proposal()
        # per-slot demands, for vectorised masks
        ps = [j.model.ps for j in self._slots]
        wk = [j.model.worker for j in self._slots]
        self._need = np.array(
            [[(d.cpu, d.mem_gb, d.bw_MBps * 1e6) for d in pair] for pair in zip(ps, wk)], float
        ).reshape(len(self._slots), 2, 3)
        self._w_gpu = np.array([d.gpu > 0 for d in wk], bool)
        self._w_mem = np.array([j.model.gpu_mem_gb for j in self._slots], float)
        self._task_block = np.zeros((self.max_jobs, self.max_tasks, TASK_ROW_F), np.float32)
        self._cores = sim.rates().task_cores
        for i in range(len(self._slots)):
            self._task_rows(i)
        self._struct_mask = self._gpu_block = None

    def _round_over(self) -> bool:
        return self._ended or not self._masks()[:-1].any()

    def _modes(self) -> np.ndarray:
        """Modes after the round: the simulator resets a GPU all of whose workers leave, and
        explicit mode changes are applied last."""
        m = np.where((self._sim_occ > 0) & (self._stay == 0), 0, self._sim_mode)
        for g, mode in self._mode_set.items():
            m[g] = mode
        return m

    def _declared(self) -> np.ndarray:
        """The mode the simulator checks GPU memory against: this round's, else the current one
        (before the reset of emptied GPUs)."""
        m = self._sim_mode.copy()
        for g, mode in self._mode_set.items():
            m[g] = mode
        return m

    def declared_mode(self, gpu: int) -> int:
        return int(self._declared()[gpu])

    def _host_take(self, node: int, need: np.ndarray, sign: int) -> None:
        self._cpu[node] -= sign * need[0]
        self._mem[node] -= sign * need[1]
        self._bw[node] -= sign * need[2]

    def _gpu_take(self, g: int, slot: int, sign: int) -> None:
        job = self._slots[slot]
        self._occ[g] += sign
        self._gmem[g] += sign * job.model.gpu_mem_gb
        self._gutil[g] += sign * job.model.gpu_util

    def _act(self, a: int) -> None:
        if a == self.end:
            self._ended = True
            self._cursor = None
            return
        if self._o_dig <= a < self.end:
            self._digit(a - self._o_dig)
            return
        self._cursor = None
        if a >= self._o_lim:
            slot, t = divmod(a - self._o_lim, self.max_tasks)
            p = self._prop[self._slots[slot].job_id]
            jid = self._slots[slot].job_id
            tid = f"{jid}/ps{t}" if t < len(p.ps) else f"{jid}/w{t - len(p.ps)}"
            self._cursor = _Cursor(slot, t, tid)
            return
        if a >= self._o_mode:
            cell, mode = divmod(a - self._o_mode, 2)
            node, s = divmod(cell, self.max_gpus)
            self._mode_set[int(self.cluster.gpu_base[node] + s)] = mode
        elif a >= self._o_rel:
            self._release(a - self._o_rel)
        elif a >= self._o_w:
            rest, s = divmod(a - self._o_w, self.max_gpus)
            slot, node = divmod(rest, self.max_nodes)
            self._add_worker(slot, node, s)
        else:
            slot, node = divmod(a, self.max_nodes)
            self._add_ps(slot, node)
        self._struct_mask = self._gpu_block = None

    def _add_ps(self, slot: int, node: int) -> None:
        jid = self._slots[slot].job_id
        p, orig = self._prop[jid], self._orig[jid]
        i = len(p.ps)
        kept = jid in self._released and i < len(orig.ps) and orig.ps[i][0] == node
        self._host_take(node, self._need[slot, 0], 1)
        p.ps.append((node, -1, kept))
        p.seq[f"{jid}/ps{i}"] = self._seq
        self._seq += 1
        self._task_rows(slot)

    def _add_worker(self, slot: int, node: int, s: int) -> None:
        jid = self._slots[slot].job_id
        p, orig = self._prop[jid], self._orig[jid]
        i = len(p.w)
        g = int(self.cluster.gpu_base[node] + s) if self._w_gpu[slot] else -1
        kept = jid in self._released and i < len(orig.w) and orig.w[i][:2] == (node, g)
        self._host_take(node, self._need[slot, 1], 1)
        if g >= 0:
            self._gpu_take(g, slot, 1)
            self._stay[g] += kept
        p.w.append((node, g, kept))
        p.seq[f"{jid}/w{i}"] = self._seq
        self._seq += 1
        self._task_rows(slot)

    def _release(self, slot: int) -> None:
        jid = self._slots[slot].job_id
        p = self._prop[jid]
        for node, _, _ in p.ps:
            self._host_take(node, self._need[slot, 0], -1)
        for node, g, kept in p.w:
            self._host_take(node, self._need[slot, 1], -1)
            if g >= 0:
                self._gpu_take(g, slot, -1)
                self._stay[g] -= kept
        self._prop[jid] = _Proposal()
        self._released.add(jid)
        self._limits.pop(jid, None)
        self._task_rows(slot)

    def _digit(self, d: int) -> None:
        cur = self._cursor
        cur.digits += 1
        cur.num = cur.num * DIGIT_BASE + d
        if cur.num > 0:
            value = cur.num / (1 << (12 * cur.digits))  # exact: int / int rounds correctly
            self._limits.setdefault(self._slots[cur.slot].job_id, {})[cur.task_id] = value
            self._task_block[cur.slot, cur.index, 5] = value

    def _end_round(self) -> Decision:
        d = Decision()
        order: list[tuple[int, str, object]] = []
        occ = self._occ.copy()
        for job in self._slots:
            jid = job.job_id
            p = self._prop[jid]
            released = jid in self._released
            if (len(p.ps) < 1 and job.uses_ps) or len(p.w) < 1:  # a PS job needs a PS and a worker
                if released:
                    d.preempt.append(jid)
                for _, g, _ in p.w:
                    if g >= 0:
                        occ[g] -= 1
                continue
            if not released and not p.seq:  # unchanged: only its limits, if any
                d.cpu_limits.update(self._limits.get(jid, {}))
                continue
            if (len(p.ps), len(p.w)) != (job.num_ps, job.num_workers):
                d.allocate[jid] = (len(p.ps), len(p.w))
            for prefix, tasks in (("ps", p.ps), ("w", p.w)):
                for i, (node, g, _) in enumerate(tasks):
                    tid = f"{jid}/{prefix}{i}"
                    if tid in p.seq:
                        target = (node, int(self.cluster.gpu_slot[g])) if g >= 0 else node
                        order.append((p.seq[tid], tid, target))
            d.cpu_limits.update(self._limits.get(jid, {}))
        for _, tid, target in sorted(order, key=lambda x: x[0]):  # the order actions were taken
            d.place[tid] = target
        c = self.cluster
        for g, mode in self._mode_set.items():
            if mode == 0 or occ[g] > 0:  # packing an emptied GPU is moot (the simulator resets it)
                d.gpu_mode[c.gpu_key(g)] = ("timeslice", "pack")[mode]
        return d

    # ------------------------------------------------------------------ masks
    def _compute_masks(self) -> np.ndarray:
        if self._struct_mask is None:
            self._struct_mask = self._structural_mask()
        mask = self._struct_mask.copy()
        cur = self._cursor
        if cur is not None and not self._ended:
            dig = mask[self._o_dig : self.end]
            full = 1 << (12 * cur.digits)
            if cur.digits == 0:
                dig[:] = True  # d / B for d in 0..B; B is 1.0
            elif cur.digits < MAX_DIGITS and cur.num < full:
                dig[:DIGIT_BASE] = True
                if cur.num == 0 and cur.digits == MAX_DIGITS - 1:
                    dig[0] = False  # the last digit must make the limit positive
        return mask

    def _structural_mask(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[self.end] = True
        if self._ended:
            return mask
        c = self.cluster
        N, G, J, T, n = self.max_nodes, self.max_gpus, self.max_jobs, self.max_tasks, c.n_nodes
        k = len(self._slots)
        modes, declared = self._modes(), self._declared()
        if k:
            free = np.stack([self._cpu + 1e-9, self._mem + 1e-9, self._bw + 1e-3], axis=1)  # (n, 3)
            fit = (free[None, None] >= self._need[:, :, None, :]).all(axis=3)  # (k, 2, n)
            sizes = np.array([len(self._prop[j.job_id].ps) + len(self._prop[j.job_id].w) for j in self._slots])
            fit &= (sizes < T)[:, None, None]
            uses_ps = np.array([j.uses_ps for j in self._slots])
            mask[: J * N].reshape(J, N)[:k, :n] = fit[:, 0] & uses_ps[:, None]  # all-reduce: no PS
            # workers on GPUs: a GPU declared packed (by this round, else now) takes one more
            # worker only if the GPU memory of all of them fits (the simulator's check)
            ok = (declared == 0) | (self._occ == 0)
            ok = ok[None, :] | (self._gmem[None, :] + self._w_mem[:, None] <= self._gpu_cap[None, :] + 1e-9)
            ok &= fit[:, 1][:, c.gpu_node]
            ok &= self._w_gpu[:, None]
            wgrid = mask[self._o_w : self._o_rel].reshape(J, N * G)
            wgrid[:k, self._gpu_cell] = ok
            cpu_w = ~self._w_gpu  # workers without a GPU: slot 0 of the node
            mask[self._o_w : self._o_rel].reshape(J, N, G)[:k, :n, 0] |= fit[:, 1] & cpu_w[:, None]
            for i, job in enumerate(self._slots):
                mask[self._o_rel + i] = job.n_placed > 0 and job.job_id not in self._released
                mask[self._o_lim + i * T : self._o_lim + i * T + min(int(sizes[i]), T)] = True
        mgrid = mask[self._o_mode : self._o_lim].reshape(N * G, 2)
        mgrid[self._gpu_cell, 0] = declared == 1
        mgrid[self._gpu_cell, 1] = (modes == 0) & (self._occ >= 2) & (self._gmem <= self._gpu_cap + 1e-9)
        return mask

    # ------------------------------------------------------------------ observation
    def _task_rows(self, slot: int) -> None:
        job = self._slots[slot]
        p = self._prop[job.job_id]
        rows = self._task_block[slot]
        rows[:] = 0.0
        lims = self._limits.get(job.job_id, {})
        c = self.cluster
        N, G = max(self.max_nodes - 1, 1), max(self.max_gpus - 1, 1)
        for t, (prefix, (node, g, kept)) in enumerate(
            [("ps", x) for x in p.ps] + [("w", x) for x in p.w]
        ):
            if t >= self.max_tasks:
                break
            i = t if prefix == "ps" else t - len(p.ps)
            tid = f"{job.job_id}/{prefix}{i}"
            old = job.tasks.get(tid)
            lim = lims.get(tid, old.cpu_limit if old is not None else 1.0)
            cores = self._cores.get(tid, 0.0) / c.cpus[node] if kept else 0.0
            rows[t] = (1.0, prefix == "w", node / N, (c.gpu_slot[g] / G) if g >= 0 else 0.0, kept, lim, min(cores, 1.0))

    def _write_own(self, out: dict[str, np.ndarray]) -> None:
        if self._gpu_block is None:  # changes only with placements and modes
            gpus = np.zeros((self.max_nodes * self.max_gpus, GPU_F), np.float32)
            cell = self._gpu_cell
            gpus[:, 0] = self._gpu_valid
            gpus[cell, 1] = np.minimum(self._occ / 4.0, 1.0)
            gpus[cell, 2] = self._modes()
            gpus[cell, 3] = np.minimum(np.maximum(self._gutil, 0.0) / 2.0, 1.0)
            gpus[cell, 4] = np.clip(self._gmem / np.maximum(self._gpu_cap, 1e-9), 0.0, 1.0)
            self._gpu_block = gpus
        out["gpus"][...] = self._gpu_block
        out["tasks"][...] = self._task_block.reshape(-1, TASK_ROW_F)
        cur, cursor = self._cursor, out["cursor"]
        cursor[:] = 0.0
        if cur is not None:
            value = cur.num / (1 << (12 * cur.digits)) if cur.digits else 0.0
            cursor[:] = (1.0, cur.slot / self.max_jobs, cur.index / self.max_tasks, cur.digits / MAX_DIGITS, value)

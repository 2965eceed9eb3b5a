"""DLClusterPlace: one pending PS or worker task per step, placed on a node or deferred.

Jobs keep the (p, w) they asked for; the policy only chooses where each task goes (DLTAP's and the
Kubernetes scheduler's problem). Tasks are offered job by job in arrival order, workers before PS
(the order DLTAP places them). Deferring a task skips it until the next decision point.
Action: Discrete(max_nodes + 1), index max_nodes = defer. With `work_conserving=True` defer is
allowed only when the task fits on no node, as in the Kubernetes scheduler; without it a policy
can hold jobs back (and, rewarded on traffic alone, learns to never start them).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..placers import Capacity
from .core import Bool, ClusterEnv, Options


class PlacementOptions(Options):
    work_conserving: Bool = False


class PlacementEnv(ClusterEnv):
    """DLClusterPlace-v0: where each pending task goes; jobs keep the size they asked for.

    ## Action Space
    `Discrete(max_nodes + 1)`: the node for the focal task (`obs["task"]`), or `max_nodes` = defer
    it to the next decision point. Observation, rewards and episode end: see ClusterEnv.

    ## Arguments
    `work_conserving` (default False): defer only when the task fits on no node.
    """

    extra_options = PlacementOptions

    def __init__(self, scenario="default", work_conserving: bool = False, **kw):
        super().__init__(scenario, **kw)
        self.work_conserving = self._extra(work_conserving=work_conserving).work_conserving
        self.action_space = spaces.Discrete(self.max_nodes + 1)
        self.defer = self.max_nodes
        self._fit_cache: dict = {}  # id(demand) -> (demand, where it fits), for _fit_gen
        self._fit_gen = -1
        self._focal_cache: tuple = (-1, None, None, None, None, None)  # see _focal_parts

    def _begin_round(self) -> None:
        self._queue = [
            (job, t.task_id)
            for job in self.slots()
            for t in job.worker_tasks() + job.ps_tasks()
            if t.node < 0
        ]
        self._queue.reverse()  # pop from the end

    def focal_task(self) -> str | None:
        return self._queue[-1][1] if self._queue else None

    def _focal(self):
        if not self._queue:
            return None, None
        job, tid = self._queue[-1]
        return job, job.tasks[tid].role

    def _round_over(self) -> bool:
        return not self._queue

    def _act(self, a: int) -> None:
        job, tid = self._queue.pop()
        if a == self.defer:
            return
        sim = self.sim
        before = (id(sim), sim.version, sim.now)
        sim.place_one(tid, a)
        if self._patch_state(before, (a,), (job,)):  # still this generation: patch its caches
            for d, fit in self._fit_cache.values():
                fit[a] = self._fits_at(a, d)
            _, cached, counts, share, _, _ = self._focal_cache
            if cached is job:
                counts[a] += 1.0
                share[a] = counts[a] / max(len(job.tasks), 1)

    # ------------------------------------------------------------------ masks
    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        job, role = self._focal()
        if job is not None:
            mask[: self.cluster.n_nodes] = self._fits(job.model.ps if role == "ps" else job.model.worker)
        mask[self.defer] = not (self.work_conserving and mask.any())
        return mask

    def _fits(self, d) -> np.ndarray:
        """`Capacity.of_sim(sim).fits(d)`, kept per demand for the state generation and patched
        on the node a placement changes (the tasks of a job share two demands)."""
        self._state_obs()  # a state rebuild starts a new generation
        if self._fit_gen != self._obs_gen:
            self._fit_cache, self._fit_gen = {}, self._obs_gen
        hit = self._fit_cache.get(id(d))
        if hit is None:
            hit = self._fit_cache[id(d)] = (d, Capacity.of_sim(self.sim).fits(d))
        return hit[1]

    def _fits_at(self, a: int, d) -> bool:
        """`fits(d)[a]` on the simulator's free capacity: the same float64 operations, one node
        (in Python floats, whose arithmetic is float64's)."""
        c, sim = self.cluster, self.sim
        return (
            c.cpus.item(a) - sim.used_cpu.item(a) + 1e-9 >= d.cpu
            and c.memory.item(a) - sim.used_mem.item(a) + 1e-9 >= d.mem_gb
            and c.nic.item(a) - sim.used_bw.item(a) + 1e-3 >= d.bw_MBps * 1e6
            and sim.free_gpus.item(a) >= d.gpu
        )

    # ------------------------------------------------------------------ observation
    def _write_own(self, out: dict[str, np.ndarray]) -> None:
        """The state, plus the focal task: its job's share of tasks per node (column 6), the nodes
        holding its data (7) and the `task` features (ClusterEnv's Observation Space)."""
        job, role = self._focal()
        if job is None:
            return
        share, data, task = self._focal_parts(job, role)
        nodes, n = out["nodes"], self.cluster.n_nodes
        nodes[:n, 6] = share
        nodes[:n, 7] = data
        out["task"][...] = task

    def _focal_parts(self, job, role: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node columns 6 and 7 and the `task` row of the focal task, kept for the state
        generation; `_act` adds the placements it makes (the only way a job's tasks change within
        a generation). Column 6 is the tasks per node over the job's tasks, in float32."""
        gen, cached, counts, share, data, task = self._focal_cache
        if gen != self._obs_gen or cached is not job:
            n = self.cluster.n_nodes
            counts = np.zeros(n, np.float32)
            for t in job.tasks.values():
                if t.node >= 0:
                    counts[t.node] += 1.0
            share = counts / max(len(job.tasks), 1)
            data = np.zeros(n, np.float32)
            data[list(job.spec.shard_nodes)] = 1.0
            task = {}
            self._focal_cache = (self._obs_gen, job, counts, share, data, task)
        row = task.get(role)
        if row is None:
            d = job.model.ps if role == "ps" else job.model.worker
            row = task[role] = np.array((
                role == "ps",
                role == "worker",
                d.cpu / self._max_cpus,
                d.mem_gb / self._max_mem,
                d.gpu,
                self._slot_index.get(job.job_id, 0) / self.max_jobs,
            ), np.float32)
        return share, data, row

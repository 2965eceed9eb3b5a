"""DLClusterGrow-v0: a learned growth limit per job over Pollux (issue 15, branch pgrow13).

A hybrid: the agent decides how far Pollux may grow each job, Pollux decides everything else.
Pollux (baselines/pollux.py) caps a job at `max_growth` (2, its reference implementation's
max_replicas) times the largest worker count it was measured at, to guard its fitted throughput
model, which assumes that sizes never measured scale. Lifting the cap helps a lot on some windows
and hurts on others (README, "v5"), so how far to let a job grow is a decision of the state.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from gymnasium import spaces
from pydantic import field_validator

from ..api import Decision
from ..checks import is_real
from .core import Bool, ClusterEnv, Options

GROWTHS = (1.0, 2.0, 4.0, 8.0, 64.0)  # 2: Pollux's own; 64: only max_workers (64) caps
GROW_F = 6  # features of the `growth` observation rows


class GrowOptions(Options):
    growths: Any = GROWTHS
    must_choose: Bool = False

    @field_validator("growths")
    @classmethod
    def _growths(cls, v: Any) -> tuple[float, ...]:
        """A non-empty list of distinct finite numbers > 0."""
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise ValueError(f"expected a list of growth limits (numbers > 0), got {v!r}")
        out: list[float] = []
        for i, g in enumerate(v):
            g = g.item() if isinstance(g, np.generic) else g
            if not (is_real(g) and g > 0):
                raise ValueError(f"[{i}]: {g!r} is not a finite number > 0")
            if float(g) in out:
                raise ValueError(f"[{i}]: {g!r} appears twice")
            out.append(float(g))
        if not out:
            raise ValueError("empty; give at least one growth limit")
        return tuple(out)


class GrowEnv(ClusterEnv):
    """DLClusterGrow-v0: the growth limit Pollux gives each job; Pollux allocates under it.

    ## What the agent decides, and what Pollux still decides
    When a job arrives (a decision point of the simulator), the agent picks its growth limit g
    from `growths`: for the rest of its life Pollux gives it at most floor(g x the largest worker
    count it has been measured at) workers (at least 1, at most Pollux's max_workers, 64). Pollux
    (`baselines.pollux.PolluxGrowth`: fit, fair share, fitness, re-allocation penalty, GA,
    placement, rounds) decides every allocation under those caps, at every decision point, as
    it does when run alone. Choosing g = 2 for every job is Pollux exactly (same decisions:
    tests/test_grow_env.py), g = 64 for every job is Pollux(max_growth=64). A job beyond the job
    window (`max_jobs`) is capped at Pollux's own 2 until it enters the window and gets a choice.
    Why at arrival: a choice per Pollux round (every 60 s) would be thousands of steps per
    episode, and each episode costs a whole Pollux run (seconds of CPU), so training could see
    few episodes; one choice per job is 60 steps per 60-job window.

    ## Action Space
    `Discrete(len(growths) * max_jobs + 1)`: (slot, growth k) at slot * len(growths) + k, last =
    end of round (the alloc layout of DLClusterAlloc-v0 with shapes, so agents.policies'
    entity policy serves it). Only the slots of jobs awaiting their choice are valid. End of round
    is always valid: the jobs still awaiting keep Pollux's own x2 and are offered again at the next
    decision point; with `must_choose=True` it is masked while a job awaits (every job gets its
    limit at its arrival, as work_conserving makes DLClusterAlloc start every job). The round ends
    by itself when no job awaits. Invalid actions follow ClusterEnv's rule (a no-op costing
    `invalid_penalty`).

    ## Observation Space
    ClusterEnv's, plus `growth` (max_jobs, 6) per job slot: awaits its choice now, its growth
    limit (log2 g / log2 max(growths), 0 until chosen), the largest worker count Pollux measured
    it at / 64, its current cap / 64, Pollux's fitted scaling at its current size (fitted
    throughput at w workers / (w x at 1), 1 while unmeasured), the GPUs it asked for / 64.

    ## Rewards, Episode End
    ClusterEnv's (use `reward: jct` with `shaping: true` and `shaping_gamma` = the learner's
    gamma, as the allocation configs do).

    ## Arguments
    ClusterEnv's, `growths` (the growth limits offered, distinct numbers > 0; default
    1, 2, 4, 8, 64) and `must_choose` (above).
    """

    extra_options = GrowOptions
    extra_obs_keys = ("growth",)

    def __init__(self, scenario="default", growths=GROWTHS, must_choose: bool = False, **kw):
        super().__init__(scenario, **kw)
        o = self._extra(growths=growths, must_choose=must_choose)
        self.growths, self.must_choose = o.growths, o.must_choose
        self.per_job = len(self.growths)
        self.action_space = spaces.Discrete(self.per_job * self.max_jobs + 1)
        self.observation_space = spaces.Dict({
            **self.observation_space.spaces,
            "growth": spaces.Box(0.0, 1.0, (self.max_jobs, GROW_F), np.float32)})
        from baselines.pollux import PolluxGrowth  # baselines import dlclusterenv, not the reverse

        self.pollux = PolluxGrowth()
        self._pollux_sim = None  # the simulator Pollux was last reset for
        self._log_growth = math.log2(max(self.growths)) if max(self.growths) > 1 else 1.0

    # ------------------------------------------------------------------ round
    def _begin_round(self) -> None:
        if self._pollux_sim is not self.sim:  # a new episode: Pollux seeded as Simulator.run seeds it
            self.pollux.reset(self.sim.seed)
            self._pollux_sim = self.sim
        self._ended = False

    def awaiting(self) -> list[int]:
        """Slots whose job has no growth limit yet (they get one this round)."""
        return [i for i, j in enumerate(self.slots()) if j.job_id not in self.pollux.growth]

    def _round_over(self) -> bool:
        return self._ended or not self.awaiting()

    def _act(self, a: int) -> None:
        if a == self.action_space.n - 1:
            self._ended = True
            return
        slot, k = divmod(a, self.per_job)
        self.pollux.growth[self.slots()[slot].job_id] = self.growths[k]

    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros(self.action_space.n, dtype=bool)
        waiting = [] if self.sim.done else self.awaiting()
        for i in waiting:
            mask[i * self.per_job:(i + 1) * self.per_job] = True
        mask[-1] = not (waiting and self.must_choose)
        return mask

    def _end_round(self) -> Decision:
        """Pollux's decision under the chosen caps, timed as Simulator.decide times a scheduler."""
        view = self.sim.view()
        t0 = time.perf_counter()
        d = self.pollux.decide(view)
        self.sim.totals.decision_s.append(time.perf_counter() - t0)
        return d

    # ------------------------------------------------------------------ observation
    def _write_own(self, out: dict[str, np.ndarray]) -> None:
        rows = out["growth"]
        rows[:] = 0.0
        px = self.pollux
        for i, j in enumerate(self.slots()):
            g = px.growth.get(j.job_id)
            most = px.largest_measured(j)
            rows[i] = (g is None, 0.0 if g is None else max(math.log2(g), 0.0) / self._log_growth,
                       min(most / 64, 1.0), min(px.cap_at(j, px.max_growth if g is None else g) / 64, 1.0),
                       self._scaling(j), min(j.spec.num_workers * j.model.worker.gpu / 64, 1.0))

    def _scaling(self, job) -> float:
        """Pollux's fitted scaling where the job runs now (1 when it does not run)."""
        if job.status != "running":
            return 1.0
        multi = len({t.node for t in job.worker_tasks() if t.node >= 0}) > 1
        return self.pollux.scaling(job.job_id, job.num_workers, multi)

"""Shared machinery of the Gym envs: scenario set-up, observations, rewards, rendering.

Every env is a sequence of micro-decisions at each simulator decision point; when the policy ends
the round (or nothing is left to decide) the simulator runs to the next decision point and the
reward for the elapsed time is paid. Observations are fixed-size arrays with masks, so the same
policy can run on clusters and job counts of other sizes (pad with `max_nodes` / `max_jobs`).

Invalid actions follow one rule: an integer action outside `action_masks()` (or out of range) is
a no-op that costs `invalid_penalty` and sets `info["invalid_action"]`; it never raises and never
changes the cluster. An action that is not an integer (a float, a string, None, an array of more
than one element) is a ValueError naming the env id and the value, raised before anything changes:
truncating 1.5 to 1 would execute an action the policy never chose. Python and numpy integers and
one-element integer arrays are integers. A finished episode (also the one `reset()` returns for a
scenario without jobs) offers only the end-of-round / defer action, which changes nothing.

Options (keyword arguments or a `config=` YAML of them) are validated on construction, so a wrong
one fails at `gym.make` with a ConfigError naming the option and the value, not later at reset.
"""

from __future__ import annotations

import math
import os
from typing import Annotated, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from .. import efficiency
from ..api import Decision
from ..checks import is_real
from ..config import ConfigError, read_yaml, validate
from ..jobs import Job
from ..sim import EPS, Simulator
from ..workload import Scenario, build, generate_jobs

REWARDS = ("jct", "makespan", "traffic", "utilisation")
NODE_F, JOB_F, TASK_F, GLOBAL_F = 8, 10, 6, 7


SHAPED = ("traffic", "jct")
MAX_JOBS = 16  # default job window (max_jobs)
_KEY_COLS = (1, 2, 3, 9)  # job-row features of its key's state (the rest move with the clock)


def _plain(v: Any) -> Any:
    """numpy scalars as Python ones: np.int64(16) is an integer option, np.float32(1.7) is not."""
    return v.item() if isinstance(v, np.generic) else v


# Strict option types: "16", True and 1.7 are not integers, "no" is not a bool, nan and inf are
# not numbers (each would otherwise be coerced into a different option than the one written).
Int = Annotated[int, BeforeValidator(_plain), Field(strict=True)]
Num = Annotated[float, BeforeValidator(_plain), Field(strict=True, allow_inf_nan=False)]
Bool = Annotated[bool, BeforeValidator(_plain), Field(strict=True)]


class Options(BaseModel):
    """Base of every env's option model: unknown options are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvOptions(Options):
    """The options every env takes (a scenario's content is checked when it is built)."""

    scenario: Any = "default"
    max_nodes: Int | None = Field(default=None, ge=1)
    max_jobs: Int = Field(default=MAX_JOBS, ge=1)
    reward: Any = "jct"
    time_scale_s: Num = Field(default=3600.0, gt=0)
    invalid_penalty: Num = Field(default=1.0, ge=0)
    max_steps: Int = Field(default=1_000_000, ge=1)
    shaping: Any = False
    shaping_gamma: Num = Field(default=1.0, gt=0, le=1, description="the learner's discount")
    job_progress: Bool = True

    @field_validator("scenario")
    @classmethod
    def _scenario(cls, v: Any) -> Any:
        if not isinstance(v, (str, os.PathLike, dict, Scenario)):
            raise ValueError("expected a preset name, a YAML path, a dict or a Scenario")
        return v

    @field_validator("reward")
    @classmethod
    def _reward(cls, v: Any) -> dict[str, float]:
        """A term name or {term: weight}; all-zero weights would make every reward 0."""
        weights = {v: 1.0} if isinstance(v, str) else v
        if not isinstance(weights, dict):
            raise ValueError(f"expected one of {REWARDS} or a mapping of them to weights")
        for k, w in weights.items():
            if k not in REWARDS:
                raise ValueError(f"unknown {k!r}; choose from {REWARDS}")
            w = _plain(w)
            if not is_real(w):
                raise ValueError(f"{k}: weight {w!r} is not a finite number")
        if not any(_plain(w) != 0 for w in weights.values()):
            raise ValueError("needs at least one term with a non-zero weight")
        return {k: float(_plain(w)) for k, w in weights.items()}


def _shaping_terms(shaping, weights: dict[str, float]) -> tuple[str, ...]:
    """`shaping`: True (every shapeable term of the reward), False, or a list of terms."""
    if isinstance(shaping, bool):
        return tuple(k for k in SHAPED if k in weights) if shaping else ()
    if isinstance(shaping, str) or not isinstance(shaping, (list, tuple)):
        raise ConfigError(f"shaping: expected true, false or a list of {SHAPED}, got {shaping!r}")
    for k in shaping:
        if k not in SHAPED:
            raise ConfigError(f"shaping: {k!r} has no potential; choose from {SHAPED}")
        if k not in weights:
            raise ConfigError(f"shaping: {k!r} is not a term of the reward {sorted(weights)}")
    return tuple(shaping)


class ClusterEnv(gym.Env):
    """Base of the DLCluster envs: a scenario's jobs scheduled one micro-decision per step.

    ## Description
    At each simulator decision point (arrival, completion, `engine.tick_s`) the policy takes a
    round of micro-actions (the subclass's Action Space); when it ends the round, or nothing is
    left to decide, the round is applied as one Decision and the simulator runs to the next point.

    ## Observation Space
    `Dict` of float32 arrays in [0, 1] (N = max_nodes, J = max_jobs; padding rows are 0):
    - `nodes` (N, 8): valid, free CPU / memory / GPU fractions, GPUs / most GPUs of a node, rack
      index / (racks - 1), share of the focal job's tasks on the node, holds the focal job's data;
    - `node_mask` (N,), `job_mask` (J,): 1 for real nodes and occupied job slots;
    - `jobs` (J, 10), active jobs in arrival order: valid, running, PS / 16, workers / 32, progress
      toward max epochs, 1 - exp(-age / time_scale_s), last / first loss, GPUs per worker,
      log10(parameter bytes) / 12, placed share of its tasks;
    - `task` (6,): the focal task (placement env) or 0: is PS, is worker, CPU and memory demand
      over the largest node's, GPUs, slot / J;
    - `global` (7,): 1 - exp(-time / (100 time_scale_s)), pending / J, running / J, free GPU and
      free CPU fractions of the cluster, the queue q / (q + J) with q the jobs waiting (all of them,
      not only those in the job window, so a long queue still shows), and the waiting demand
      g / (g + G): g the GPUs the waiting jobs asked for (their submitted workers), G the cluster's
      GPUs. The last two tell a policy how loaded the cluster is beyond the free GPUs (issue 15:
      a job's best size depends on how many others wait for the same GPUs).

    ## Rewards
    Per step, the weighted `reward` terms over the simulated time since the last step (`_reward`):
    `jct` (minus jobs in system x hours; the default), `makespan`, `traffic` (minus cross-node GB),
    `utilisation`; minus `invalid_penalty` for an action outside `action_masks()`.

    ## Starting State
    `reset(seed)` draws the scenario's jobs with that seed and runs to the first decision point.

    ## Episode End
    `terminated` only when every job of the scenario has arrived and finished. `truncated` when
    the episode is cut with jobs unfinished: the scenario's `engine.horizon_s`, the `max_steps`
    cap, or a stall (jobs left that nothing can ever start). `info["episode_end"]` says which
    ("finished", "horizon", "max_steps", "stalled") and `info["metrics"]` carries the simulator's
    metrics. The ids register no `max_episode_steps`: an episode's length grows with the
    scenario's jobs and tasks (a random placement episode: 93 steps on `tiny`, 740 on `default`,
    more again on a trace replay of thousands of jobs), so no one number fits every scenario, and
    gymnasium's TimeLimit would ignore a `max_steps` given in a `config=` YAML; pass `max_steps=`
    (or `gym.make(..., max_episode_steps=n)`) instead.

    ## Arguments
    `scenario` (preset, YAML path, dict or Scenario), `config` (YAML of these arguments),
    `max_nodes` / `max_jobs` (padding, so one policy fits several clusters), `reward` (a term or
    {term: weight}), `time_scale_s`, `invalid_penalty`, `max_steps`, `shaping` (potential-based
    shaping of the traffic / jct terms), `shaping_gamma` (the discount the shaping is exact
    under: give the learner's gamma), `job_progress` (False: the `jobs` rows' progress and loss
    columns are 0, an ablation of what a policy learns without each job's progress; README "Retrained
    on the current engine"), `render_mode` ("ansi" or "rgb_array"); plus each env's own.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    extra_options: type[Options] = Options  # a subclass's own options
    extra_obs_keys: tuple[str, ...] = ()  # a subclass's own observation arrays, in order

    def __init__(
        self,
        scenario: str | dict = "default",
        *,
        config: str | None = None,
        max_nodes: int | None = None,
        max_jobs: int = MAX_JOBS,
        reward: str | dict[str, float] = "jct",
        time_scale_s: float = 3600.0,
        invalid_penalty: float = 1.0,
        max_steps: int = 1_000_000,
        shaping: bool | list[str] = False,
        shaping_gamma: float = 1.0,
        job_progress: bool = True,
        render_mode: str | None = None,
    ):
        given = dict(scenario=scenario, max_nodes=max_nodes, max_jobs=max_jobs, reward=reward,
                     time_scale_s=time_scale_s, invalid_penalty=invalid_penalty,
                     max_steps=max_steps, shaping=shaping, shaping_gamma=shaping_gamma,
                     job_progress=job_progress)
        self._where = type(self).__name__
        if config is not None:  # YAML whose keys are these keyword arguments (they win)
            kw = read_yaml(config) or {}
            if not isinstance(kw, dict):
                raise ConfigError(f"{config}: expected a mapping of env keyword arguments")
            allowed = set(EnvOptions.model_fields) | set(self.extra_options.model_fields)
            for k in kw:
                if k not in allowed:
                    raise ConfigError(f"{config}: {k}: unknown env option (known: {sorted(allowed)})")
            given.update((k, kw.pop(k)) for k in list(kw) if k in EnvOptions.model_fields)
            self._config_extra = kw
            self._where = str(config)
        else:
            self._config_extra = {}
        o = validate(EnvOptions, given, self._where)
        scenario, max_nodes, max_jobs = o.scenario, o.max_nodes, o.max_jobs
        weights = o.reward
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode: unknown {render_mode!r}")
        self.scenario, self.cluster, self.zoo, _ = build(scenario, 0)
        self._efficiency = efficiency.make(self.scenario.efficiency)
        n = self.cluster.n_nodes
        self.max_nodes = max_nodes or n
        if self.max_nodes < n:
            raise ConfigError(f"max_nodes: {self.max_nodes} < the cluster's {n} nodes")
        self.max_jobs = max_jobs
        self.reward_weights = weights
        self.time_scale_s = o.time_scale_s
        self.invalid_penalty = o.invalid_penalty
        self.max_steps = o.max_steps
        self.shaping = _shaping_terms(o.shaping, weights)
        self.shaping_gamma = o.shaping_gamma
        self.job_progress = o.job_progress
        if self.shaping_gamma != 1.0 and not self.shaping:
            raise ConfigError(f"shaping_gamma: {self.shaping_gamma} applies only with shaping")
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {
                "nodes": spaces.Box(0.0, 1.0, (self.max_nodes, NODE_F), np.float32),
                "node_mask": spaces.Box(0.0, 1.0, (self.max_nodes,), np.float32),
                "jobs": spaces.Box(0.0, 1.0, (self.max_jobs, JOB_F), np.float32),
                "job_mask": spaces.Box(0.0, 1.0, (self.max_jobs,), np.float32),
                "task": spaces.Box(0.0, 1.0, (TASK_F,), np.float32),
                "global": spaces.Box(0.0, 1.0, (GLOBAL_F,), np.float32),
            }
        )
        self._static_nodes = np.zeros((self.max_nodes, NODE_F), np.float32)
        c = self.cluster
        self._static_nodes[:n, 0] = 1.0
        self._static_nodes[:n, 4] = c.gpus / max(int(c.gpus.max()), 1)
        self._static_nodes[:n, 5] = c.node_rack / max(c.n_racks - 1, 1)
        self._node_mask = np.zeros(self.max_nodes, np.float32)
        self._node_mask[:n] = 1.0
        self._slot_masks = np.tril(np.ones((self.max_jobs + 1, self.max_jobs), np.float32), -1)
        self._max_cpus, self._max_mem = float(c.cpus.max()), float(c.memory.max())
        self._total_cpus = float(c.cpus.sum())
        # per-node constants as Python numbers: a patch reads one node at a time, and a Python
        # float's arithmetic is the float64 arithmetic of the arrays' elements (same bits)
        self._cpus_l, self._mem_l = c.cpus.tolist(), c.memory.tolist()
        self._gpus_div = np.maximum(c.gpus, 1).tolist()
        self._n_gpus_div = max(c.n_gpus, 1)
        self._no_task = np.zeros(TASK_F, np.float32)
        self._obs_gen = 0  # counts state rebuilds: what is cached on the state names its generation
        self._fit_memo: tuple[dict, dict] = ({}, {})  # generate_jobs' fit verdicts (same cluster, zoo)
        self.sim: Simulator | None = None
        self._mask = None
        self.decision_index = 0
        self.decision_hook = None  # set by adapter.SchedulerAdapter

    def _extra(self, **given) -> Options:
        """The subclass's own options, those of the config YAML over the keyword arguments."""
        return validate(self.extra_options, {**given, **self._config_extra}, self._where)

    # ------------------------------------------------------------------ episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        specs = generate_jobs(self.scenario, self.cluster, self.zoo, episode_seed, self.scenario.name,
                              self._fit_memo)
        eng = self.scenario.engine
        self.sim = Simulator(
            self.cluster, specs, self.zoo, seed=episode_seed, tick_s=eng.tick_s, horizon_s=eng.horizon_s,
            efficiency=self._efficiency,
        )
        self.steps = 0
        self.decision_index = 0
        self._mark = self._totals()
        self._mask = None
        self._job_block = np.zeros((self.max_jobs, JOB_F), np.float32)  # rows of the job slots
        self._job_keys: list[tuple | None] = [None] * self.max_jobs  # the state each row shows
        self._rows_now = math.nan  # the time the rows show
        self._row_consts: dict[str, tuple] = {}  # job id -> its row's fixed parts (_job_row)
        self._state_stamp = None  # (sim, version, now) that _state_cache shows
        self._new_round()
        self._settle()
        return self._obs(), self._info()

    def step(self, action):
        reward, terminated, truncated, info = self._step(action)
        return self._obs(), reward, terminated, truncated, info

    def _step(self, action) -> tuple[float, bool, bool, dict]:
        """`step` without building the observation (the batched env writes it into its rows)."""
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        a = self._action_index(action)
        self.steps += 1
        valid = 0 <= a < self.action_space.n and bool(self._masks()[a])
        reward = 0.0
        if not valid:
            reward -= self.invalid_penalty
        elif not self.sim.done:  # a finished episode's only valid action changes nothing
            self._act(a)
            self._mask = None
        self._settle()
        reward += self._reward()
        end = self._episode_end()
        terminated = end == "finished"
        truncated = end is not None and not terminated
        info = self._info()
        info["invalid_action"] = not valid
        if end is not None:
            info["episode_end"] = end
            m = self.sim.metrics()
            info["metrics"] = m.summary()
            info["metrics"]["decision_latency_ms"] = m.decision_latency_ms
        return reward, terminated, truncated, info

    def _episode_end(self) -> str | None:
        """Why the episode is over, or None. Only "finished" (every job of the scenario arrived
        and done) is `terminated`; the rest cut an episode whose jobs are not all done, so they
        are `truncated` and a learner bootstraps the value there: "horizon" (the scenario's
        engine.horizon_s), "max_steps" (the step cap) and "stalled" (jobs left that nothing can
        ever start: the simulator stops instead of waiting forever, see Simulator.advance)."""
        sim = self.sim
        if sim.done:
            if not sim.active_jobs() and len(sim.jobs) == len(sim.specs):
                return "finished"
            return "horizon" if sim.now >= sim.horizon_s - EPS else "stalled"
        return "max_steps" if self.steps >= self.max_steps else None

    def _action_index(self, action) -> int:
        """The action as a Python int; anything else is a ValueError (see the module docstring)."""
        a = action
        if isinstance(a, np.ndarray) and a.size == 1:
            a = a.reshape(())[()]
        if isinstance(a, np.generic):
            a = a.item()
        if isinstance(a, int) and not isinstance(a, bool):
            return a
        env_id = self.spec.id if self.spec is not None else type(self).__name__
        raise ValueError(f"{env_id}: action {action!r} is not an integer; the actions are the "
                         f"integers 0..{self.action_space.n - 1} of {self.action_space}")

    def _settle(self) -> None:
        """Run the simulator while there is nothing for the policy to decide."""
        while not self.sim.done and self._round_over():
            self.sim.apply(self._end_round())
            self.sim.advance()
            self.decision_index += 1
            self._mask = None
            self._new_round()

    def _new_round(self) -> None:
        """A decision point: let an attached Scheduler adapter decide, then open the round."""
        self._begin_round()
        if self.decision_hook is not None and not self.sim.done:
            self.decision_hook(self)

    # Subclasses define the round: _begin_round(), _round_over(), _act(a), _compute_masks(), and
    # may override _end_round() (the Decision applied when the round closes), _shown() (arrays
    # that replace the state's whole) and _write_own()
    # (what the observation shows beyond the state, e.g. the placement env's focal task).
    def _end_round(self) -> Decision:
        return Decision()

    def _masks(self) -> np.ndarray:
        """The valid-action mask, computed once per state (private: callers get a copy)."""
        if self._mask is None:
            self._mask = self._compute_masks()
        return self._mask

    def action_masks(self) -> np.ndarray:
        """Valid actions now (for sb3-contrib's MaskablePPO)."""
        return self._masks().copy()

    # ------------------------------------------------------------------ reward
    def _totals(self) -> tuple[float, ...]:
        sim = self.sim
        t = sim.totals
        phi = -sim.projected_cross_node_bytes() if "traffic" in self.shaping else 0.0
        phi_jct = -sim.projected_job_seconds() if "jct" in self.shaping else 0.0
        return (t.job_seconds, sim.now, t.cross_node_bytes, t.gpu_busy_s, phi, phi_jct)

    def _reward(self) -> float:
        """Weighted sum of the chosen terms over the time just simulated:
        jct: minus jobs in system x hours (sums to minus total JCT); makespan: minus hours elapsed;
        traffic: minus GB across nodes; utilisation: busy GPU fraction x hours. With `shaping`, the
        traffic and jct terms also get the potential-based shaping F = gamma Phi(s') - Phi(s) (Ng
        et al., ICML'99, Theorem 1), gamma = `shaping_gamma`: for traffic, Phi = minus the
        cross-node GB the placed tasks will still move; for jct, Phi = minus the hours the running
        jobs still need at their current speeds. So a placement is charged its traffic, and a job's
        size its time, when they are chosen, not hours later. The discounted sum of F over an
        episode telescopes to gamma^T Phi(s_T) - Phi(s_0), and Phi(s_T) = 0 at the end of a
        finished episode (nothing runs), so the shaped discounted return is the unshaped one minus
        Phi(s_0) for every policy, and the optimal policy is unchanged, exactly when gamma is the
        learner's per-step discount. With shaping_gamma 1 under a learner's gamma < 1 (the old
        rule) the shaping is exact only undiscounted and favours postponing a charge, e.g.
        deferring a job's start under jct shaping (pending jobs are not in Phi)."""
        now, mark, g = self._totals(), self._mark, self.shaping_gamma
        self._mark = now
        total = 0  # the weighted terms summed in the order given, each computed only if weighted
        for k, w in self.reward_weights.items():
            if k == "jct":
                term = (g * now[5] - mark[5] - (now[0] - mark[0])) / self.time_scale_s
            elif k == "makespan":
                term = -(now[1] - mark[1]) / self.time_scale_s
            elif k == "traffic":
                term = (g * now[4] - mark[4] - (now[2] - mark[2])) / 1e9
            else:  # utilisation
                term = (now[3] - mark[3]) / max(self.cluster.n_gpus, 1) / self.time_scale_s
            total += w * term
        return total

    # ------------------------------------------------------------------ observation
    def slots(self) -> list[Job]:
        """Visible job slots: active jobs in arrival order, at most max_jobs."""
        return self.sim.active_jobs()[: self.max_jobs]

    def _obs(self) -> dict[str, np.ndarray]:
        """A fresh observation (callers may write into it): copies of the shown arrays
        (`_shown`), then the env's own parts (`_write_own`)."""
        out = {k: v.copy() for k, v in self._shown().items()}
        for k in self.extra_obs_keys:
            out[k] = np.empty(self.observation_space[k].shape, np.float32)
        self._write_own(out)
        return out

    def _write_obs(self, out: dict[str, np.ndarray]) -> None:
        """Write the observation into `out`'s arrays: the batched env's rows, so that a batched
        step copies each array once."""
        for k, v in self._shown().items():
            out[k][...] = v
        self._write_own(out)

    def _shown(self) -> dict[str, np.ndarray]:
        """The arrays an observation starts from, in the observation's key order: the state's,
        or a subclass's whole replacements of some (the allocation envs' round view), so that
        each array is copied once, not copied and then overwritten."""
        return self._state_obs()

    def _write_own(self, out: dict[str, np.ndarray]) -> None:
        """What a subclass shows over `_shown()` (`out` holds its arrays): the focal task, its
        own arrays (`extra_obs_keys`)."""

    def _state_obs(self) -> dict[str, np.ndarray]:
        """What the simulator's state shows (no focal task), rebuilt only when the simulator
        changed: its `version` is bumped by every change a view could show, and `now` covers a
        clock that moved with nothing running. Within that, a job row is recomputed only when its
        job's state changed. An action whose effect the env knows (a placement) patches the rows
        it changed instead (`_patch_state`); this rebuild is the reference the patches are tested
        against (tests/test_env_incremental.py, tests/test_env_patch.py). Callers copy what
        they change."""
        c, sim = self.cluster, self.sim
        stamp = (id(sim), sim.version, sim.now)
        if self._state_stamp == stamp:
            return self._state_cache
        self._obs_gen += 1  # caches derived from the state (focal counts, fit masks) are stale
        n = c.n_nodes
        nodes = self._static_nodes.copy()
        # free CPUs and GPUs, kept for the patches (each patch redoes its nodes' entries)
        self._free_cpu = c.cpus - sim.used_cpu
        self._free_gpus_seen = sim.free_gpus.tolist()
        self._free_gpu_total = sum(self._free_gpus_seen)
        nodes[:n, 1] = self._free_cpu / c.cpus
        nodes[:n, 2] = (c.memory - sim.used_mem) / c.memory
        nodes[:n, 3] = sim.free_gpus / np.maximum(c.gpus, 1)
        slots = self.slots()
        now = sim.now
        block, keys = self._job_block, self._job_keys
        if now != self._rows_now:  # progress, age and loss move only with the clock
            keys[:] = [None if k is None else () for k in keys]  # () : stale, None: zeros
            self._rows_now = now
        changed, rows = [], []
        for i, j in enumerate(slots):  # rows are recomputed only when their job's state changed
            key = (j.job_id, j.n_placed, j.status, j.num_ps, j.num_workers)
            if keys[i] != key:
                changed.append(i)
                rows.append(self._job_row(j))
                keys[i] = key
        if changed:  # one write for all changed rows; all features are >= 0
            block[changed] = np.minimum(np.array(rows, np.float32), 1.0)
        for i in range(len(slots), self.max_jobs):
            if keys[i] is not None:
                block[i] = 0.0
                keys[i] = None
        self._slot_index = {j.job_id: i for i, j in enumerate(slots)}
        self._count_waiting()
        self._state_cache = {
            "nodes": nodes,
            "node_mask": self._node_mask,
            "jobs": block,
            "job_mask": self._slot_masks[len(slots)],
            "task": self._no_task,
            "global": self._glob(),
        }
        self._state_stamp = stamp
        return self._state_cache

    def _job_row(self, j: Job) -> tuple:
        """A job slot's features (before the clip to 1) at the simulator's time. What does not
        change in a job's life (the work of its max epochs, arrival, GPUs per worker, model
        size) is computed once per job and episode."""
        k = self._row_consts.get(j.job_id)
        if k is None:
            m = j.model
            k = self._row_consts[j.job_id] = (
                j.steps_per_epoch * m.convergence.max_epochs, j.spec.arrival_s, m.worker.gpu,
                math.log10(m.param_bytes) / 12)
        if self.job_progress:
            loss = j.obs_loss
            progress = j.steps_done / k[0]
            ratio = loss[-1][1] / loss[0][1] if loss and loss[0][1] > 0 else 1.0
        else:
            progress = ratio = 0.0
        running, ps, workers, placed = self._key_features(j)
        return (
            1.0,
            running,
            ps,
            workers,
            progress,
            1.0 - math.exp((k[1] - self.sim.now) / self.time_scale_s),
            ratio,
            k[2],
            k[3],
            placed,
        )

    @staticmethod
    def _key_features(j: Job) -> tuple:
        """The row's features (columns _KEY_COLS) that follow its key, not the clock."""
        return (j.status == "running", j.num_ps / 16, j.num_workers / 32, j.n_placed / max(len(j.tasks), 1))

    def _count_waiting(self) -> None:
        """The active jobs not running: how many, and the GPUs they asked for; and the running."""
        active = self.sim.active_jobs()
        waiting = [j for j in active if j.status != "running"]
        self._waiting = (len(waiting), sum(j.spec.num_workers * j.model.worker.gpu for j in waiting))
        self._n_running = len(active) - len(waiting)

    def _glob(self) -> np.ndarray:
        """The `global` features. Each is >= 0 and clipped to 1 before the float32 cast, which
        equals clipping after it (the cast is monotone and 1 is exact)."""
        queue, waiting, demand = self._queue_features(*self._waiting)
        return np.array([min(v, 1.0) for v in (
            1.0 - math.exp(-self.sim.now / (100 * self.time_scale_s)),
            queue,
            self._n_running / self.max_jobs,
            self._free_gpu_total / self._n_gpus_div,  # exact integers: the same quotient
            self._free_cpu.sum() / self._total_cpus,  # the same array summed in the same order
            waiting,
            demand,
        )], np.float32)

    def _patch_state(self, before: tuple, nodes: tuple[int, ...], jobs: tuple[Job, ...]) -> bool:
        """After an action that changed only `nodes`' resources and `jobs`' tasks (not the
        clock, not the set of active jobs), bring the state cache from stamp `before` to now by
        recomputing what they show, equal to a rebuild. False (nothing done; the next read
        rebuilds) if the cache did not show `before` or the clock moved."""
        sim = self.sim
        if self._state_stamp != before or sim.now != before[2]:
            return False
        cache = self._state_cache
        node_rows, free_cpu, seen = cache["nodes"], self._free_cpu, self._free_gpus_seen
        for a in nodes:  # Python floats: the float64 operations of the rebuild, one node
            row, cpus, mem = node_rows[a], self._cpus_l[a], self._mem_l[a]
            free_cpu[a] = f = cpus - sim.used_cpu.item(a)
            g = sim.free_gpus.item(a)
            self._free_gpu_total += g - seen[a]
            seen[a] = g
            row[1] = f / cpus
            row[2] = (mem - sim.used_mem.item(a)) / mem
            row[3] = g / self._gpus_div[a]
        status_changed = False
        for j in jobs:
            i = self._slot_index.get(j.job_id)
            if i is None:
                continue
            key = (j.job_id, j.n_placed, j.status, j.num_ps, j.num_workers)
            old = self._job_keys[i]
            if old != key:  # the clock stands: only the key's columns can have changed
                status_changed |= old[2] != j.status
                row = self._job_block[i]
                for col, v in zip(_KEY_COLS, self._key_features(j)):
                    row[col] = min(v, 1.0)  # as the rebuild's clip (see _glob)
                self._job_keys[i] = key
        if status_changed:
            self._count_waiting()
            cache["global"] = self._glob()
        else:  # the resources' features only
            glob = cache["global"]
            glob[3] = min(self._free_gpu_total / self._n_gpus_div, 1.0)
            glob[4] = min(free_cpu.sum() / self._total_cpus, 1.0)
        self._state_stamp = (id(sim), sim.version, sim.now)
        return True

    def _set_queue(self, glob: np.ndarray, n: int, gpus: float) -> None:
        """The queue features of `global` for n waiting jobs that asked for `gpus` GPUs."""
        glob[1], glob[5], glob[6] = self._queue_features(n, gpus)

    def _queue_features(self, n: int, gpus: float) -> tuple[float, float, float]:
        return (min(n / self.max_jobs, 1.0), n / (n + self.max_jobs),
                gpus / (gpus + max(self.cluster.n_gpus, 1)))

    def _info(self) -> dict:
        sim = self.sim
        active = len(sim.active_jobs())
        return {
            "time": sim.now,
            "decision_index": self.decision_index,
            "jobs_active": active,
            "jobs_done": len(sim.jobs) - active,
            "action_mask": self._masks().copy(),
        }

    # ------------------------------------------------------------------ render
    def render(self):
        if self.render_mode == "ansi":
            return self._ansi()
        if self.render_mode == "rgb_array":
            return self._rgb()
        return None

    def _ansi(self) -> str:
        sim, c = self.sim, self.cluster
        lines = [f"t={sim.now:.1f}s active={len(sim.active_jobs())} done={len(sim.jobs) - len(sim.active_jobs())}"]
        for i, name in enumerate(c.node_names):
            base = c.gpu_base[i]
            g = " ".join(
                (sim.gpu_tasks[base + s][0].rpartition("/")[0] if sim.gpu_tasks[base + s] else ".")
                for s in range(c.gpus[i])
            )
            lines.append(f"{name:>8} cpu {sim.used_cpu[i]:5.1f}/{c.cpus[i]:<5g} gpu [{g}]")
        for j in self.slots():
            lines.append(
                f"  {j.job_id:>10} {j.spec.model:<14} {j.status:<8} p={j.num_ps} w={j.num_workers} "
                f"epoch {j.epochs_done}/{j.model.convergence.max_epochs}"
            )
        return "\n".join(lines) + "\n"

    def _rgb(self) -> np.ndarray:
        """Racks, nodes, GPUs coloured by job, the job list and the simulated time (envs.render)."""
        from .render import frame

        return frame(self)

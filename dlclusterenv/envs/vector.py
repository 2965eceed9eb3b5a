"""Native batched envs: `gym.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`.

One call steps N episodes of one env class in this process; each sub-env writes its observation
straight into its rows of preallocated batched arrays (`ClusterEnv._write_obs`), as Gymnasium's own
CartPoleVectorEnv does; there is no per-env wrapper stack, no subprocess, no per-env observation
dict and no per-step copy of a whole batch. The observation, action and
mask layouts are those of SyncVectorEnv over the single env (a Dict of arrays with a leading N axis,
MultiDiscrete actions, `action_masks()` of shape (N, n_actions)).

Autoreset follows Gymnasium's `AutoresetMode` (`autoreset_mode=`, default NEXT_STEP as in
CartPoleVectorEnv): NEXT_STEP resets an ended episode on the next `step()`, whose action for it
is ignored (reward 0, not terminated); SAME_STEP resets it in the step that ended it and returns
the last observation and info as `info["final_obs"]` / `info["final_info"]`; DISABLED never
resets, `reset(options={"reset_mask": m})` resets the envs where m is True.

Sub-env i is the single env with the same options, reset first with seed + i, then drawing its
episode seeds from its own generator, so the batch equals N single envs step by step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, create_empty_array

from ..checks import is_int
from ..config import ConfigError
from .allocation import AllocationEnv, JointEnv
from .core import ClusterEnv
from .grow import GrowEnv
from .placement import PlacementEnv
from .share import ShareEnv


_MISSING = object()


class ClusterVectorEnv(VectorEnv):
    env_cls: type[ClusterEnv] = ClusterEnv  # set by each registered subclass

    def __init__(self, num_envs: int = 1, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 **kwargs: Any):
        if not (is_int(num_envs) and num_envs >= 1):
            raise ConfigError(f"num_envs: expected an integer >= 1, got {num_envs!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ConfigError(f"autoreset_mode: unknown {autoreset_mode!r}; choose from "
                              f"{[m.value for m in AutoresetMode]}") from None
        self.envs = [self.env_cls(**kwargs) for _ in range(num_envs)]
        first = self.envs[0]
        self.num_envs = num_envs
        self.metadata = {**first.metadata, "autoreset_mode": mode}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, num_envs)
        self.action_space = batch_space(first.action_space, num_envs)
        self._obs = create_empty_array(first.observation_space, num_envs)
        self._keys = tuple(self._obs)
        # each sub-env's rows of the batch buffers: its observation is written there directly
        self._rows = [{k: v[i] for k, v in self._obs.items()} for i in range(num_envs)]
        self._mask_buf = np.zeros((num_envs, first.action_space.n), dtype=bool)
        self._ended = np.zeros(num_envs, dtype=bool)  # NEXT_STEP: reset on the next step

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        seeds = self._seeds(seed)
        options = dict(options or {})
        which = np.asarray(options.pop("reset_mask", np.ones(self.num_envs, bool)), dtype=bool)
        if which.shape != (self.num_envs,):
            raise ValueError(f"reset_mask: expected shape ({self.num_envs},), got {which.shape}")
        infos: dict = {}
        for i in np.flatnonzero(which):
            obs, info = self.envs[i].reset(seed=seeds[i], options=options or None)
            self._write(i, obs)
            infos = self._add_info(infos, info, i)
        self._ended[which] = False
        return self._copy_obs(), infos

    def step(self, actions):
        rewards, terms, truncs, per_env = self.step_raw(actions)
        return self._copy_obs(), rewards, terms, truncs, self._merge_infos(per_env)

    def _merge_infos(self, per_env: list[dict]) -> dict:
        """Gymnasium's `_add_info` over the envs in turn, done a key at a time: a scalar or array
        that every env reports with one type is batched in one call (the usual step: `_add_info`
        per env and key was a fifth of a batched step); any other key takes `_add_info`."""
        infos: dict = {}
        rest: dict[str, list[tuple[int, Any]]] = {}
        every = np.ones(self.num_envs, dtype=np.bool_)
        for key, v0 in per_env[0].items():
            vals = [info.get(key, _MISSING) for info in per_env]
            t = type(v0)
            same = all(type(v) is t for v in vals) and key != "final_obs"
            if same and (t in (int, float, bool) or issubclass(t, np.number)):
                infos[key], infos[f"_{key}"] = np.array(vals, dtype=t), every.copy()
            elif same and t is np.ndarray and all(v.shape == v0.shape and v.dtype == v0.dtype for v in vals):
                infos[key], infos[f"_{key}"] = np.stack(vals), every.copy()
            else:
                rest[key] = [(i, v) for i, v in enumerate(vals) if v is not _MISSING]
        for i, info in enumerate(per_env[1:], 1):  # keys the first env does not report, in the
            for key in [k for k in info if k not in per_env[0]]:  # env's order (a set's varies)
                rest.setdefault(key, []).append((i, info[key]))
        for key, pairs in rest.items():
            for i, v in sorted(pairs, key=lambda p: p[0]):
                infos = self._add_info(infos, {key: v}, i)
        return infos

    def action_masks(self) -> np.ndarray:
        """(num_envs, n_actions): each sub-env's valid actions now."""
        buf = self._mask_buf
        for i, e in enumerate(self.envs):
            buf[i] = e._masks()
        return buf.copy()

    def render(self):
        return tuple(e.render() for e in self.envs)

    def close_extras(self, **kwargs) -> None:
        for e in getattr(self, "envs", ()):  # none if __init__ failed
            e.close()

    # ------------------------------------------------------------------ batched stepping
    def step_raw(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """Step every sub-env (the observation lands in the batch buffer, read it with
        `batch_obs()`); rewards, terminated, truncated and the list of per-env info dicts,
        without merging them (what the SB3 adapter needs)."""
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"actions: expected shape ({self.num_envs},), got {actions.shape}")
        mode = self.metadata["autoreset_mode"]
        rewards = np.zeros(self.num_envs, np.float64)
        terms = np.zeros(self.num_envs, bool)
        truncs = np.zeros(self.num_envs, bool)
        infos: list[dict] = []
        ended, rows = self._ended, self._rows
        for i, (env, a) in enumerate(zip(self.envs, actions.tolist())):
            if ended[i]:  # NEXT_STEP: this step only resets; its action is ignored
                obs, info = env.reset()
                ended[i] = False
                self._write(i, obs)
                infos.append(info)
                continue
            reward, term, trunc, info = env._step(a)  # the observation goes straight to its rows
            rewards[i], terms[i], truncs[i] = reward, term, trunc
            if (term or trunc) and mode != AutoresetMode.DISABLED:
                if mode == AutoresetMode.NEXT_STEP:
                    ended[i] = True
                else:  # SAME_STEP
                    final_obs, final_info = env._obs(), info
                    obs, info = env.reset()
                    self._write(i, obs)
                    infos.append({**info, "final_obs": final_obs, "final_info": final_info})
                    continue
            env._write_obs(rows[i])
            infos.append(info)
        return rewards, terms, truncs, infos

    def batch_obs(self) -> dict[str, np.ndarray]:
        """The batch buffer itself (overwritten by the next step or reset)."""
        return self._obs

    def _write(self, i: int, obs: dict[str, np.ndarray]) -> None:
        buf = self._obs
        for k in self._keys:
            buf[k][i] = obs[k]

    def _copy_obs(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self._obs.items()}

    def _seeds(self, seed) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed: expected {self.num_envs} seeds, got {len(seeds)}")
        return seeds


class PlacementVectorEnv(ClusterVectorEnv):
    env_cls = PlacementEnv


class AllocationVectorEnv(ClusterVectorEnv):
    env_cls = AllocationEnv


class JointVectorEnv(ClusterVectorEnv):
    env_cls = JointEnv


class ShareVectorEnv(ClusterVectorEnv):
    env_cls = ShareEnv


class GrowVectorEnv(ClusterVectorEnv):
    env_cls = GrowEnv

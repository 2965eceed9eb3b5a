"""Native batched envs: `gym.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`.

One call steps N episodes of one env class; each sub-env writes its observation straight into its
rows of preallocated batched arrays (`ClusterEnv._write_obs`), as Gymnasium's own
CartPoleVectorEnv does; there is no per-env wrapper stack, no per-env observation dict and no
per-step copy of a whole batch. The observation, action and mask layouts are those of
SyncVectorEnv over the single env (a Dict of arrays with a leading N axis, MultiDiscrete actions,
`action_masks()` of shape (N, n_actions)).

`workers=K` (default 1) splits the N sub-envs into K contiguous blocks, each stepped by its own
process (`_serve`) in parallel; the batch arrays (observations, masks, actions, rewards,
terminated, truncated) live in shared memory, so a step ships only the command and the per-env
info dicts through a pipe. What a sub-env does does not depend on K: the batch equals the
one-process batch bit for bit (tested). The processes start with `context` (multiprocessing start
method, default "spawn": safe beside torch's threads); `close()` stops them.

Autoreset follows Gymnasium's `AutoresetMode` (`autoreset_mode=`, default NEXT_STEP as in
CartPoleVectorEnv): NEXT_STEP resets an ended episode on the next `step()`, whose action for it
is ignored (reward 0, not terminated); SAME_STEP resets it in the step that ended it and returns
the last observation and info as `info["final_obs"]` / `info["final_info"]`; DISABLED never
resets, `reset(options={"reset_mask": m})` resets the envs where m is True.

Sub-env i is the single env with the same options, reset first with seed + i, then drawing its
episode seeds from its own generator, so the batch equals N single envs step by step.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import signal
import traceback
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..checks import is_int
from ..config import ConfigError
from .allocation import AllocationEnv, JointEnv
from .core import ClusterEnv
from .grow import GrowEnv
from .placement import PlacementEnv
from .share import ShareEnv


_MISSING = object()


class _Block:
    """Sub-envs lo .. lo + len(envs) - 1 of a batch, stepped in this process; they write their
    rows of the batch arrays `bufs` (the whole batch's, or shared memory a worker maps)."""

    def __init__(self, envs: list[ClusterEnv], bufs: dict[str, Any], lo: int, mode: AutoresetMode):
        self.envs, self.mode = envs, mode
        hi = lo + len(envs)
        self.obs = {k: v[lo:hi] for k, v in bufs["obs"].items()}
        self.rows = [{k: v[i] for k, v in self.obs.items()} for i in range(len(envs))]
        self.rewards, self.terms, self.truncs = (bufs[k][lo:hi] for k in ("rewards", "terms", "truncs"))
        self.masks_buf, self.actions = bufs["masks"][lo:hi], bufs["actions"][lo:hi]
        self.ended = np.zeros(len(envs), dtype=bool)  # NEXT_STEP: reset on the next step

    def reset(self, which: np.ndarray, seeds: list, options: dict | None) -> list[tuple[int, dict]]:
        out = []
        for i in np.flatnonzero(which):
            obs, info = self.envs[i].reset(seed=seeds[i], options=options)
            self._write(i, obs)
            self.masks_buf[i] = self.envs[i]._masks()
            out.append((int(i), info))
        self.ended[which] = False
        return out

    def step(self, actions: list) -> list[dict]:
        """Step every sub-env of the block with `actions`; the per-env info dicts."""
        mode, ended, rows = self.mode, self.ended, self.rows
        rewards, terms, truncs = self.rewards, self.terms, self.truncs
        rewards[:] = 0.0
        terms[:] = False
        truncs[:] = False
        infos: list[dict] = []
        for i, (env, a) in enumerate(zip(self.envs, actions)):
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
        self.masks()  # each env's info holds its mask already: the rows cost a copy, and a worker's
        return infos  # batch reads them without asking it again

    def step_shared(self) -> list[dict]:
        """`step` with the actions the parent wrote into the shared action array."""
        return self.step(self.actions.tolist())

    def masks(self) -> None:
        for i, e in enumerate(self.envs):
            self.masks_buf[i] = e._masks()

    def call(self, indices: list[int], name: str, args: tuple, kwargs: dict) -> list:
        """Attribute `name` of each sub-env in `indices`: called with the arguments when it is a
        method (Gymnasium's `VectorEnv.call`), else its value."""
        out = []
        for i in indices:
            attr = getattr(self.envs[i], name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return out

    def set_attr(self, indices: list[int], name: str, values: list) -> None:
        for i, v in zip(indices, values):
            setattr(self.envs[i], name, v)

    def close(self) -> None:
        for e in self.envs:
            e.close()

    def _write(self, i: int, obs: dict[str, np.ndarray]) -> None:
        row = self.rows[i]
        for k, v in row.items():
            v[...] = obs[k]


def _serve(conn, env_cls: type[ClusterEnv], kwargs: dict, lo: int, n: int, mode: AutoresetMode,
           layout: dict, raw: dict) -> None:
    """A worker process: builds sub-envs lo .. lo + n - 1 over the shared batch arrays and runs
    the parent's commands (a `_Block` method name and its arguments) until "close" or until the
    parent is gone. An error is sent back with its traceback; the worker goes on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it closes us
    block = None
    try:
        block = _Block([env_cls(**kwargs) for _ in range(n)], _views(layout, raw), lo, mode)
        conn.send(("ok", None))
        while True:
            cmd, args = conn.recv()
            if cmd == "close":
                block.close()
                conn.send(("ok", None))
                return
            try:
                conn.send(("ok", getattr(block, cmd)(*args)))
            except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it
                _send_error(conn, exc)
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return  # the parent is gone
    except Exception as exc:  # noqa: BLE001 - building the sub-envs failed
        _send_error(conn, exc)


def _send_error(conn, exc: Exception) -> None:
    """Send `exc` with its traceback; one that cannot be pickled goes as a RuntimeError of its text."""
    tb = traceback.format_exc()
    try:
        pickle.dumps(exc)
    except Exception:  # noqa: BLE001 - any pickling failure
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    conn.send(("error", (exc, tb)))


def _layout(space: Any, num_envs: int, n_actions: int) -> dict:
    """Shape and dtype of each batch array."""
    return {
        "obs": {k: ((num_envs, *s.shape), np.dtype(s.dtype)) for k, s in space.spaces.items()},
        "masks": ((num_envs, n_actions), np.dtype(bool)),
        "actions": ((num_envs,), np.dtype(np.int64)),
        "rewards": ((num_envs,), np.dtype(np.float64)),
        "terms": ((num_envs,), np.dtype(bool)),
        "truncs": ((num_envs,), np.dtype(bool)),
    }


def _views(layout: dict, raw: dict | None) -> dict:
    """The batch arrays: numpy arrays over the shared buffers `raw`, or fresh ones (None)."""

    def view(shape_dtype, buf):
        shape, dtype = shape_dtype
        if buf is None:
            return np.zeros(shape, dtype)
        return np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape))).reshape(shape)

    out = {k: view(v, None if raw is None else raw[k]) for k, v in layout.items() if k != "obs"}
    out["obs"] = {k: view(v, None if raw is None else raw["obs"][k]) for k, v in layout["obs"].items()}
    return out


class _Workers:
    """The worker processes of `workers > 1`: each owns one contiguous block of sub-envs; a
    command goes to every worker before any answer is read, so they run in parallel."""

    def __init__(self, env_cls, kwargs: dict, num_envs: int, workers: int, mode: AutoresetMode,
                 layout: dict, context: str | None):
        ctx = mp.get_context(context)

        def shared(shape: tuple, dtype: np.dtype):
            return ctx.RawArray("B", max(1, int(np.prod(shape)) * dtype.itemsize))

        self.raw = {k: shared(*v) for k, v in layout.items() if k != "obs"}
        self.raw["obs"] = {k: shared(*v) for k, v in layout["obs"].items()}
        sizes = [len(b) for b in np.array_split(np.arange(num_envs), workers)]
        self.bounds = [(sum(sizes[:j]), sizes[j]) for j in range(workers)]
        self.conns, self.procs = [], []
        try:
            for lo, n in self.bounds:
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child, env_cls, kwargs, lo, n, mode, layout, self.raw),
                                   name=f"dlclusterenv-vector-{lo}", daemon=True)
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
            self._gather()
        except BaseException:
            self.close()
            raise

    def ask(self, cmd: str, args_per_worker: list[tuple]) -> list:
        """Send `cmd` to every worker (its own arguments each), then collect the answers."""
        for conn, args in zip(self.conns, args_per_worker):
            conn.send((cmd, args))
        return self._gather()

    def _gather(self) -> list:
        answers, error = [], None
        for j, conn in enumerate(self.conns):
            try:
                status, value = conn.recv()
            except EOFError:
                status, value = "error", (RuntimeError(f"vector worker {j} died (exit code "
                                                       f"{self.procs[j].exitcode})"), "")
            if status == "error" and error is None:
                exc, tb = value
                lo, n = self.bounds[j]
                exc.add_note(f"in vector worker {j} (sub-envs {lo}..{lo + n - 1}):\n{tb}")
                error = exc
            answers.append(value)
        if error is not None:
            raise error
        return answers

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("close", ()))
            except (BrokenPipeError, OSError):
                pass
        for conn, proc in zip(self.conns, self.procs):
            try:
                if conn.poll(5):
                    conn.recv()
            except (EOFError, OSError):
                pass
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
            conn.close()
        self.conns, self.procs = [], []


class ClusterVectorEnv(VectorEnv):
    env_cls: type[ClusterEnv] = ClusterEnv  # set by each registered subclass

    def __init__(self, num_envs: int = 1, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 workers: int = 1, context: str | None = "spawn", **kwargs: Any):
        if not (is_int(num_envs) and num_envs >= 1):
            raise ConfigError(f"num_envs: expected an integer >= 1, got {num_envs!r}")
        if not (is_int(workers) and 1 <= workers <= num_envs):
            raise ConfigError(f"workers: expected an integer from 1 to num_envs ({num_envs}), got {workers!r}")
        if context is not None and context not in mp.get_all_start_methods():
            raise ConfigError(f"context: unknown start method {context!r}; choose from "
                              f"{mp.get_all_start_methods()}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ConfigError(f"autoreset_mode: unknown {autoreset_mode!r}; choose from "
                              f"{[m.value for m in AutoresetMode]}") from None
        first = self.env_cls(**kwargs)
        self.num_envs = num_envs
        self.metadata = {**first.metadata, "autoreset_mode": mode}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, num_envs)
        self.action_space = batch_space(first.action_space, num_envs)
        layout = _layout(first.observation_space, num_envs, first.action_space.n)
        self._workers: _Workers | None = None
        if workers == 1:
            bufs = _views(layout, None)
            self.envs = [first, *(self.env_cls(**kwargs) for _ in range(num_envs - 1))]
            self._block = _Block(self.envs, bufs, 0, mode)
        else:  # the sub-envs live in the workers; `first` only gave the spaces
            first.close()
            self._workers = _Workers(self.env_cls, kwargs, num_envs, workers, mode, layout, context)
            bufs = _views(layout, self._workers.raw)
        self._obs, self._masks_buf = bufs["obs"], bufs["masks"]
        self._masks_fresh = False  # the mask rows are those of the sub-envs' current states
        self._actions, self._rewards, self._terms, self._truncs = (
            bufs[k] for k in ("actions", "rewards", "terms", "truncs"))

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        seeds = self._seeds(seed)
        options = dict(options or {})
        which = np.asarray(options.pop("reset_mask", np.ones(self.num_envs, bool)), dtype=bool)
        if which.shape != (self.num_envs,):
            raise ValueError(f"reset_mask: expected shape ({self.num_envs},), got {which.shape}")
        infos: dict = {}
        for i, info in self._run("reset", lambda lo, n: (which[lo:lo + n], seeds[lo:lo + n], options or None),
                                 indexed=True):
            infos = self._add_info(infos, info, i)
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
        """(num_envs, n_actions): each sub-env's valid actions now. The workers write them with
        each step and reset, so they are asked again only after a `call` or `set_attr` (which may
        change a sub-env); in one process they are read from the sub-envs each time (a caller may
        have changed one through `envs`)."""
        if self._workers is None or not self._masks_fresh:
            self._run("masks", lambda lo, n: ())
            self._masks_fresh = True
        return self._masks_buf.copy()

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        """Gymnasium's `VectorEnv.call`: each sub-env's method `name` called with the arguments,
        or its attribute's value."""
        return tuple(self.call_at(range(self.num_envs), name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple:
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute `name` of every sub-env: one value for all, or a list of one per env."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        self.set_attr_at(range(self.num_envs), name, values)

    def call_at(self, indices, name: str, *args: Any, **kwargs: Any) -> list:
        """`call` on the sub-envs `indices` only, in that order."""
        indices = self._indices(indices)
        found = dict(self._run("call", lambda lo, n: (self._local(indices, lo, n), name, args, kwargs),
                               pair=indices))
        return [found[i] for i in indices]

    def set_attr_at(self, indices, name: str, values: list) -> None:
        """Set attribute `name` of the sub-envs `indices` to `values` (one per index)."""
        indices = self._indices(indices)
        if len(values) != len(indices):
            raise ValueError(f"set_attr: expected {len(indices)} values, got {len(values)}")
        by_env = dict(zip(indices, values))
        self._run("set_attr", lambda lo, n: (self._local(indices, lo, n), name,
                                             [by_env[i] for i in indices if lo <= i < lo + n]))

    def _indices(self, indices) -> list[int]:
        indices = [int(i) for i in indices]
        bad = [i for i in indices if not 0 <= i < self.num_envs]
        if bad:
            raise IndexError(f"sub-env index {bad[0]} out of range 0..{self.num_envs - 1}")
        return indices

    @staticmethod
    def _local(indices: list[int], lo: int, n: int) -> list[int]:
        """The indices of `indices` in block [lo, lo + n), block-local, in order."""
        return [i - lo for i in indices if lo <= i < lo + n]

    def render(self):
        return self.call("render")

    def close_extras(self, **kwargs) -> None:
        if getattr(self, "_workers", None) is not None:
            self._workers.close()
            self._workers = None
        elif getattr(self, "_block", None) is not None:  # none if __init__ failed
            self._block.close()

    # ------------------------------------------------------------------ batched stepping
    def step_raw(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """Step every sub-env (the observation lands in the batch buffer, read it with
        `batch_obs()`); rewards, terminated, truncated and the list of per-env info dicts,
        without merging them (what the SB3 adapter needs)."""
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"actions: expected shape ({self.num_envs},), got {actions.shape}")
        if self._workers is None:
            infos = self._block.step(actions.tolist())
        else:
            self._actions[:] = actions
            self._masks_fresh = False  # until every worker has stepped (and written its rows)
            infos = [info for part in self._workers.ask("step_shared", [()] * len(self._workers.conns))
                     for info in part]
            self._masks_fresh = True
        return self._rewards.copy(), self._terms.copy(), self._truncs.copy(), infos

    def batch_obs(self) -> dict[str, np.ndarray]:
        """The batch buffer itself (overwritten by the next step or reset)."""
        return self._obs

    def _run(self, cmd: str, args_of, indexed: bool = False, pair: list[int] | None = None) -> list:
        """Run `_Block.cmd` on every block (args_of(lo, n) gives its arguments). With `indexed`,
        the blocks answer (local index, value) pairs: made global here. With `pair`, the blocks
        answer one value per index of theirs in `pair`: returned as (global index, value)."""
        self._masks_fresh = cmd in ("reset", "masks")  # a call or set_attr may change a sub-env
        if self._workers is None:
            parts, bounds = [getattr(self._block, cmd)(*args_of(0, self.num_envs))], [(0, self.num_envs)]
        else:
            bounds = self._workers.bounds
            parts = self._workers.ask(cmd, [args_of(lo, n) for lo, n in bounds])
        if indexed:
            return [(lo + i, v) for (lo, _), part in zip(bounds, parts) for i, v in part]
        if pair is not None:
            return [(i, v) for (lo, n), part in zip(bounds, parts)
                    for i, v in zip([i for i in pair if lo <= i < lo + n], part)]
        return parts

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

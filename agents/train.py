"""`dlcluster train`: PPO / MaskablePPO on any DLCluster env id, configured by YAML.

    dlcluster train --config configs/agents/smoke.yaml --out runs/smoke
    dlcluster train --resume runs/smoke          # continue from the last checkpoint

A config (configs/agents/*.yaml) is validated strictly by pydantic: an unknown key, a wrong type, an
unknown env id, policy, baseline or hyperparameter is a ConfigError naming the file, the key and the
value. Policies are SB3 names ("MultiInputPolicy") or dotted import paths
("agents.policies.PlacePolicy"), so new policy classes plug in without code changes here.

What a run directory holds:
- config.yaml: the resolved config (every default filled in); the model is re-created from it.
- tb/: TensorBoard. SB3's own scalars (rollout/ep_rew_mean, train/*) plus, at every episode end of
  every training env, episode/reward and the scheduling metrics from info["metrics"]
  (episode/avg_jct_s, makespan_s, cross_node_gb, gpu_util, jobs_unfinished), and every eval_every
  steps eval/<metric>/policy beside eval/<metric>/<baseline> on the held-out eval seeds.
- checkpoints/step_<num_timesteps>.zip every checkpoint_every steps, taken at rollout boundaries
  (after the PPO update, before the next rollout), so a checkpoint holds every step it counts.
- model.zip: the final model; run.json: timesteps, cumulative wall time, BC statistics.

What `--resume DIR` restores: from the last checkpoint's SB3 zip, the policy and value weights, the
optimizer (Adam) state, num_timesteps and the update count (so the learning-rate and clip schedules
continue where they were); TensorBoard steps continue from num_timesteps in the same tb/ folder; the
config comes from DIR/config.yaml (a --config given with --resume may only raise total_timesteps).
A run killed before its first checkpoint has nothing to restore: `--resume` starts it again from
step 0 (BC warm start included, its partial tb/ removed), so it ends as the uninterrupted run would.
Not restored: the envs' episodes in progress (the envs are reset; their seeds are seed +
num_timesteps + env index, so a resumed run is reproducible but does not replay the workloads the
interrupted run would have seen) and SB3's 100-episode reward window.

Seeds: the model (torch, numpy, random, action sampling) is seeded with `seed`; vec env i resets
first with seed + i and then draws its episode seeds from its own generator; BC episodes use
seed + i; evaluation uses the config's held-out `eval.seeds`, which must differ from all of these.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import re
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import gymnasium as gym
import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

import dlclusterenv
from dlclusterenv.config import ConfigError, read_yaml

EPISODE_METRICS = ("avg_jct_s", "makespan_s", "cross_node_gb", "gpu_util", "jobs_unfinished")
_CHECKPOINT = re.compile(r"step_(\d+)\.zip$")


def algo_class(name: str):
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    return {"ppo": PPO, "maskable_ppo": MaskablePPO}[name]


def import_path(dotted: str):
    """`package.module.Name` -> the object; ValueError naming what is missing."""
    module, _, name = dotted.rpartition(".")
    if not module:
        raise ValueError(f"{dotted!r} is not a dotted import path (package.module.Name)")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot import {dotted!r}: {e}") from None


def _resolve_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    """policy_kwargs whose key ends in _class or _fn name classes and functions by dotted path
    (features_extractor_class, optimizer_class, activation_fn); YAML cannot hold the objects."""
    return {
        k: import_path(v) if isinstance(v, str) and k.endswith(("_class", "_fn")) else v
        for k, v in kw.items()
    }


class _KeyError(ValueError):
    """A check across fields, reported under the key it is about (not the config's root)."""

    def __init__(self, key: str, value: Any, msg: str):
        super().__init__(msg)
        self.key, self.value = key, value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvSpec(_Strict):
    id: str
    kwargs: dict[str, Any] = Field(default_factory=dict, description="gym.make keyword arguments")

    @field_validator("id")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in dlclusterenv.ENV_IDS:
            raise ValueError(f"unknown env id; registered: {', '.join(dlclusterenv.ENV_IDS)}")
        return v


class EvalSpec(_Strict):
    scenario: str | None = Field(default=None, description="default: the training env's scenario")
    seeds: list[Annotated[int, Field(ge=0)]] = Field(default=[1000, 1001, 1002], min_length=1,
                                                     description="reset refuses negative seeds")
    baselines: list[str] = Field(default_factory=list)

    @field_validator("baselines")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        import baselines

        bad = [b for b in v if b not in baselines.REGISTRY]
        if bad:
            raise ValueError(f"unknown baseline(s) {bad}; valid: {', '.join(baselines.names())}")
        return v


class BCSpec(_Strict):
    """Behaviour-cloning warm start (agents/bc.py) before RL."""

    heuristic: str
    episodes: int = Field(ge=1)
    epochs: int = Field(ge=1)
    batch_size: int = Field(default=256, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="env kwargs changed while recording the demonstrations, e.g. "
                    "{work_conserving: false} so an all-or-nothing heuristic can be followed; "
                    "the spaces must stay the training env's")

    @field_validator("heuristic")
    @classmethod
    def _known(cls, v: str) -> str:
        import baselines

        if v not in baselines.REGISTRY:
            raise ValueError(f"unknown heuristic; valid: {', '.join(baselines.names())}")
        return v


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class PPOHyperparameters(BaseModel):
    """Ranges of the (Maskable)PPO hyperparameters that SB3 takes unchecked: n_steps or n_epochs 0
    and batch_size -1 failed deep in learn() (an UnboundLocalError, a reshape error), gamma 2 or
    ent_coef nan as nan logits, each a traceback after the run directory was written. Numbers are
    strict: YAML reads 3e-4 (no dot) as a string, which SB3 refused only once the model was built.
    Only checked; the config keeps its own dict, and names SB3 does not take are refused by
    TrainConfig._consistent."""

    model_config = ConfigDict(extra="allow")

    learning_rate: float = Field(None, gt=0, strict=True, allow_inf_nan=False)
    n_steps: int = Field(None, ge=1, strict=True)
    batch_size: int = Field(None, ge=1, strict=True)
    n_epochs: int = Field(None, ge=1, strict=True)
    gamma: float = Field(None, ge=0, le=1, strict=True)
    gae_lambda: float = Field(None, ge=0, le=1, strict=True)
    clip_range: float = Field(None, gt=0, strict=True, allow_inf_nan=False)
    clip_range_vf: float | None = Field(None, gt=0, strict=True, allow_inf_nan=False)
    normalize_advantage: bool = Field(None, strict=True)
    ent_coef: float = Field(None, strict=True, allow_inf_nan=False)
    vf_coef: float = Field(None, ge=0, strict=True, allow_inf_nan=False)
    max_grad_norm: float = Field(None, gt=0, strict=True, allow_inf_nan=False)
    target_kl: float | None = Field(None, gt=0, strict=True, allow_inf_nan=False)
    stats_window_size: int = Field(None, ge=1, strict=True)

    @model_validator(mode="after")
    def _advantage_over_more_than_one(self) -> PPOHyperparameters:
        if self.batch_size == 1 and self.normalize_advantage is not False:  # SB3's default: True
            raise ValueError("batch_size: 1 normalises each advantage by the spread of one sample "
                             "(nan); give batch_size >= 2 or normalize_advantage: false")
        return self


class SuiteSpec(_Strict):
    """Train on one instance of a benchmark suite (dlclusterenv.benchmark): its train split's
    scenarios (trace windows at the instance's load) replace env.kwargs.scenario, env i taking
    train run i mod the split's runs; the test split is never built here."""

    name: str = Field(description="a suite of configs/benchmarks or a YAML path")
    instance: str = Field(description="ENTRY@LOADx, as the suite's leaderboard names it")

    def train_runs(self) -> list[tuple[Any, int]]:
        """(scenario, suite seed) of every run of the instance's train split."""
        from dlclusterenv.benchmark import instances, load_suite

        suite, path = load_suite(self.name)
        found = {i.key: i for i in instances(suite, path, say=lambda m: None)}
        if self.instance not in found:
            raise ValueError(f"{self.instance!r} is not an instance of suite {suite.name} here; "
                             f"known: {sorted(found)}")
        return [(sc, seed) for _, sc, seed in found[self.instance].runs("train")]

    def test_seeds(self) -> set[int]:
        from dlclusterenv.benchmark import load_suite

        suite, _ = load_suite(self.name)
        entry = next(e for e in suite.scenarios if self.instance.startswith(e.name + "@"))
        return set(entry.test.seeds)


class TrainConfig(_Strict):
    env: EnvSpec
    algo: Literal["ppo", "maskable_ppo"]
    policy: str
    policy_kwargs: dict[str, Any] = Field(default_factory=dict)
    n_envs: int = Field(default=1, ge=1)
    # batched: one native batched env (dlclusterenv.envs.vector) behind agents.vec.BatchedVecEnv
    vec: Literal["dummy", "subproc", "batched"] = "dummy"
    seed: int = Field(default=0, ge=0)
    total_timesteps: int = Field(ge=1)
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    device: str = Field(default="cpu", pattern=r"^(cpu|auto|cuda(:\d+)?)$")
    torch_threads: int | None = Field(
        default=None, ge=1, description="torch's CPU threads while training (None: torch's default, "
        "which honours OMP_NUM_THREADS); part of the run's bits: float sums split by thread")
    checkpoint_every: int = Field(ge=1, description="env steps (all envs together)")
    eval_every: int = Field(default=0, ge=0, description="env steps; 0: no evaluation")
    eval: EvalSpec = EvalSpec()
    bc: BCSpec | None = None
    suite: SuiteSpec | None = None

    @field_validator("policy_kwargs")
    @classmethod
    def _importable(cls, v: dict[str, Any]) -> dict[str, Any]:
        _resolve_kwargs(v)
        return v

    @field_validator("hyperparameters")
    @classmethod
    def _in_range(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            PPOHyperparameters.model_validate(v)
        except ValidationError as e:
            err = e.errors()[0]
            key = ".".join(["hyperparameters", *map(str, err["loc"])])
            msg, value = err["msg"].removeprefix("Value error, "), err.get("input")
            if isinstance(value, str) and _is_float(value):
                msg += f"; YAML reads {value} as text: write it with a dot, e.g. {float(value)!r}"
            raise _KeyError(key, value, msg) from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        algo = algo_class(self.algo)
        if self.policy in algo.policy_aliases:
            policy = algo.policy_aliases[self.policy]
        elif "." in self.policy:
            try:
                policy = import_path(self.policy)
            except ValueError as e:
                raise _KeyError("policy", self.policy, str(e)) from None
        else:
            raise _KeyError("policy", self.policy, "neither an SB3 name "
                            f"({', '.join(algo.policy_aliases)}) nor a dotted import path")
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

        maskable = isinstance(policy, type) and issubclass(policy, MaskableActorCriticPolicy)
        if maskable != (self.algo == "maskable_ppo"):
            raise _KeyError("policy", self.policy, f"{'a' if maskable else 'not a'} maskable "
                            f"policy, but algo is {self.algo!r}")
        own = {"policy", "env", "seed", "device", "policy_kwargs", "tensorboard_log", "verbose",
               "_init_setup_model"}
        allowed = set(inspect.signature(algo.__init__).parameters) - own - {"self"}
        bad = sorted(set(self.hyperparameters) - allowed)
        if bad:
            raise _KeyError("hyperparameters", bad, f"unknown for {self.algo}; valid: "
                            f"{', '.join(sorted(allowed))}")
        train_seeds = set(range(self.seed, self.seed + self.n_envs))
        if self.bc:
            train_seeds |= set(range(self.seed, self.seed + self.bc.episodes))
        clash = sorted(train_seeds & set(self.eval.seeds))
        if clash:
            raise _KeyError("eval.seeds", clash, "also training seeds (seed + env index, seed + BC "
                            "episode); evaluation must be held out")
        if "config" in self.env.kwargs:
            raise _KeyError("env.kwargs.config", self.env.kwargs["config"],
                            "give the env options here directly, not as a file")
        try:
            gym.make(self.env.id, **self.env.kwargs).close()
        except (ConfigError, TypeError, ValueError) as e:
            raise _KeyError("env.kwargs", self.env.kwargs, f"{self.env.id} rejects them: {e}") from None
        if self.suite is not None:
            try:
                self.suite.train_runs()
            except (ConfigError, ValueError) as e:
                raise _KeyError("suite.instance", self.suite.instance, str(e)) from None
            clash = sorted(train_seeds & self.suite.test_seeds())
            if clash:
                raise _KeyError("seed", self.seed, f"training episode seeds {clash} are test seeds "
                                f"of {self.suite.name} {self.suite.instance}")
            if self.eval_every:
                raise _KeyError("eval_every", self.eval_every, "with suite, evaluate with "
                                "`dlcluster benchmark` on the test split, not during training")
            if self.vec == "batched":
                raise _KeyError("vec", self.vec, "batched runs one scenario; with suite use dummy or subproc")
        return self


def load_config(path: str | Path) -> TrainConfig:
    raw = read_yaml(path)
    try:
        return TrainConfig.model_validate(raw if raw is not None else {})
    except ValidationError as err:
        lines = []
        for e in err.errors():
            keyed = e.get("ctx", {}).get("error")
            if isinstance(keyed, _KeyError):
                loc, msg, value = keyed.key, str(keyed), keyed.value
            else:
                loc, msg, value = ".".join(map(str, e["loc"])) or "<root>", e["msg"], e.get("input")
            shown = repr(value)
            lines.append(f"{path}: {loc}: {msg} (value: {shown if len(shown) <= 80 else shown[:77] + '...'})")
        raise ConfigError("\n".join(lines)) from None


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def save_config(cfg: TrainConfig, path: Path) -> None:
    _atomic_write(path, yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))


def _env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """Module-level, so SubprocVecEnv can pickle it by reference."""
    return gym.make(env_id, **kwargs)


def make_vec(cfg: TrainConfig, seed: int):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

    vec_cls = SubprocVecEnv if cfg.vec == "subproc" else DummyVecEnv
    if cfg.suite is not None:  # env i on train run i mod len(runs); reset seeds as make_vec_env's
        runs = cfg.suite.train_runs()
        fns = [partial(_env, cfg.env.id, {**cfg.env.kwargs, "scenario": runs[i % len(runs)][0]})
               for i in range(cfg.n_envs)]
        venv = VecMonitor(vec_cls(fns))
        venv.seed(seed)
        return venv
    if cfg.vec == "batched":  # seeded as make_vec_env seeds: env i resets first with seed + i
        from .vec import BatchedVecEnv

        venv = VecMonitor(BatchedVecEnv(cfg.env.id, cfg.n_envs, **cfg.env.kwargs))
        venv.seed(seed)
        return venv
    return make_vec_env(
        partial(_env, cfg.env.id, cfg.env.kwargs),
        n_envs=cfg.n_envs,
        seed=seed,
        vec_env_cls=vec_cls,
    )


def checkpoints(out: Path) -> list[tuple[int, Path]]:
    """(num_timesteps, path) of every checkpoint in out/checkpoints, oldest first."""
    found = []
    for p in (out / "checkpoints").glob("step_*.zip"):
        m = _CHECKPOINT.search(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def _callback(cfg: TrainConfig, out: Path, run: dict, t0: float):
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.logger import TensorBoardOutputFormat

    from .callbacks import SimMetricsCallback
    from .learned import evaluate_model

    class TrainingCallback(BaseCallback):
        """Checkpoints and evaluations at rollout boundaries (the model is then fixed, and a
        checkpoint has every step it counts); episode metrics come from SimMetricsCallback."""

        def _on_training_start(self) -> None:
            fmts = [f for f in self.logger.output_formats if isinstance(f, TensorBoardOutputFormat)]
            self.tb = fmts[0].writer
            t = self.num_timesteps
            self.next_ckpt = (t // cfg.checkpoint_every + 1) * cfg.checkpoint_every
            # a fresh run is evaluated at step 0 too (the untrained or BC-initialised policy)
            self.next_eval = 0 if t == 0 or not cfg.eval_every else (t // cfg.eval_every + 1) * cfg.eval_every
            self.last_eval = t
            self.baseline_cache: dict = {}

        def _on_rollout_start(self) -> None:
            t = self.num_timesteps
            if t >= self.next_ckpt:
                save_checkpoint(self.model, out, run, t0)
                self.next_ckpt = (t // cfg.checkpoint_every + 1) * cfg.checkpoint_every
            if cfg.eval_every and t >= self.next_eval:
                self.evaluate(t)

        def _on_training_end(self) -> None:
            """The final policy is evaluated too (a resumed run then starts after it)."""
            if cfg.eval_every and self.last_eval < self.num_timesteps:
                self.evaluate(self.num_timesteps)

        def evaluate(self, t: int) -> None:
            self.last_eval = t
            self.next_eval = (t // cfg.eval_every + 1) * cfg.eval_every
            scores, stuck = evaluate_model(self.model, cfg, cfg.eval.scenario, cfg.eval.seeds,
                                           cfg.eval.baselines, self.baseline_cache)
            self.tb.add_scalar("eval/stuck_seeds/policy", stuck, t)
            means = {name: {k: float(np.mean([m[k] for m in ms])) for k in EPISODE_METRICS}
                     for name, ms in scores.items() if ms}
            run["last_eval"] = {"step": int(t), "seeds": list(cfg.eval.seeds), **{
                k: {name: v[k] for name, v in means.items()} for k in ("avg_jct_s", "jobs_unfinished")}}
            for name, v in means.items():
                for k, x in v.items():
                    self.tb.add_scalar(f"eval/{k}/{name}", x, t)
            self.tb.flush()

        def _on_step(self) -> bool:
            return True

    return CallbackList([SimMetricsCallback(), TrainingCallback()])


def save_checkpoint(model, out: Path, run: dict, t0: float) -> Path:
    """checkpoints/step_<T>.zip (the SB3 zip: weights, optimizer state, num_timesteps) and
    run.json with the cumulative wall time."""
    path = out / "checkpoints" / f"step_{model.num_timesteps}.zip"
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.zip")
    model.save(tmp)
    os.replace(tmp, path)
    run.update(num_timesteps=int(model.num_timesteps),
               wall_s=run.get("wall_s_before", 0.0) + time.perf_counter() - t0)
    _atomic_write(out / "run.json", json.dumps({k: v for k, v in run.items() if k != "wall_s_before"},
                                               indent=2))
    return path


def new_model(cfg: TrainConfig, env):
    """A fresh, seeded model of the config on `env` (a VecEnv or a gym.Env)."""
    algo = algo_class(cfg.algo)
    policy = cfg.policy if cfg.policy in algo.policy_aliases else import_path(cfg.policy)
    try:
        return algo(policy, env, seed=cfg.seed, device=cfg.device,
                    policy_kwargs=_resolve_kwargs(cfg.policy_kwargs), **cfg.hyperparameters)
    except (TypeError, ValueError, AssertionError) as e:
        raise ConfigError(f"hyperparameters / policy_kwargs: {cfg.algo} rejects them: {e}") from None


@contextlib.contextmanager
def torch_threads(n: int | None):
    """torch on n CPU threads meanwhile (None: as it is), its count given back after (two threads
    on two busy cores spin at their barriers: README, "Training a scheduler")."""
    import torch as th

    before = th.get_num_threads()
    if n:
        th.set_num_threads(n)
    try:
        yield
    finally:
        th.set_num_threads(before)


def train(cfg: TrainConfig, out: Path, resume: bool = False, progress_bar: bool = True):
    """Train (or resume) into `out`; returns the model. See the module docstring for what is
    saved and restored. With `torch_threads`, torch runs on that many CPU threads meanwhile."""
    with torch_threads(cfg.torch_threads):
        return _train(cfg, out, resume, progress_bar)


def _train(cfg: TrainConfig, out: Path, resume: bool, progress_bar: bool):
    from stable_baselines3.common.logger import configure

    out = Path(out)
    found = checkpoints(out) if resume else []
    if found:
        run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    elif resume:  # killed before its first checkpoint: start again from step 0, as a fresh run
        shutil.rmtree(out / "tb", ignore_errors=True)
        run = {}
    else:
        if (out / "config.yaml").exists():
            raise ConfigError(f"--out {out} already holds a run; resume it with --resume {out} "
                              "or choose another directory")
        out.mkdir(parents=True, exist_ok=True)
        run = {}
    run["wall_s_before"] = run.get("wall_s", 0.0)
    t0 = time.perf_counter()
    if found:
        step, path = found[-1]
        venv = make_vec(cfg, cfg.seed + step)
        model = algo_class(cfg.algo).load(path, env=venv, device=cfg.device)
        model.set_random_seed(cfg.seed + step)
    else:
        venv = make_vec(cfg, cfg.seed)
        try:
            model = new_model(cfg, venv)
        except ConfigError:
            venv.close()
            raise
    # saved once SB3 has taken the config: saved before, a config it refused made --out "a run"
    # that only --resume (with the refused config) could enter
    save_config(cfg, out / "config.yaml")
    model.set_logger(configure(str(out / "tb"), ["tensorboard"]))
    if cfg.bc and not found:
        from .bc import warm_start

        run["bc"] = warm_start(model, cfg, model.logger)
    remaining = cfg.total_timesteps - model.num_timesteps
    if remaining > 0:
        model.learn(remaining, callback=_callback(cfg, out, run, t0), reset_num_timesteps=False,
                    progress_bar=progress_bar)
    save_checkpoint(model, out, run, t0)
    tmp = out / ".model.tmp.zip"
    model.save(tmp)
    os.replace(tmp, out / "model.zip")
    venv.close()
    return model


def describe(cfg: TrainConfig, out: Path, at: int = 0) -> str:
    """What a run is about to do, printed before the first (slow) step."""
    scenario = cfg.env.kwargs.get("scenario", "default")
    head = f"resuming {out} at step {at:,} of" if at else f"training into {out}:"
    bc = f"; first a BC warm start from {cfg.bc.heuristic} ({cfg.bc.episodes} episodes)" if cfg.bc and not at else ""
    return (f"{head} {cfg.total_timesteps:,} steps of {cfg.algo} ({cfg.policy}) on {cfg.env.id}, scenario "
            f"{scenario}, {cfg.n_envs} envs, seed {cfg.seed}{bc}; checkpoints every {cfg.checkpoint_every:,} "
            f"steps; TensorBoard: tensorboard --logdir {out / 'tb'}")


def summary(out: Path) -> str:
    """The finished run in a few lines, from its run.json."""
    run = json.loads((out / "run.json").read_text())
    lines = [f"done: {run['num_timesteps']:,} steps in {run['wall_s']:.0f} s wall; model {out / 'model.zip'}"]
    if "bc" in run:
        lines.append(f"BC warm start: accuracy {run['bc']['accuracy']:.2f} (chance {run['bc']['chance']:.2f}) "
                     f"on {run['bc']['states']} states")
    ev = run.get("last_eval")
    if ev:
        jct = ", ".join(f"{n} {v:,.0f} s" for n, v in ev["avg_jct_s"].items())
        left = ", ".join(f"{n} {v:g}" for n, v in ev["jobs_unfinished"].items())
        lines.append(f"evaluation at step {ev['step']:,} on seeds {ev['seeds']}: avg JCT {jct}; "
                     f"unfinished jobs {left}")
    return "\n".join(lines)


def train_cli(config: str | None, out: str | None, resume: str | None) -> Path:
    """The `dlcluster train` command: argument rules, a line saying what it is about to do,
    train(), and a summary."""
    if resume:
        if out and Path(out).resolve() != Path(resume).resolve():
            raise ConfigError(f"--resume {resume} continues in place; --out {out} must be omitted or the same")
        saved_path = Path(resume) / "config.yaml"
        if not saved_path.exists():
            raise ConfigError(f"--resume {resume}: no config.yaml there (not a training run)")
        cfg = load_config(saved_path)
        if config:
            new = load_config(config)
            diff = [k for k in TrainConfig.model_fields
                    if k != "total_timesteps" and getattr(new, k) != getattr(cfg, k)]
            if diff:
                raise ConfigError(f"--config {config} differs from {saved_path} in {diff}; with "
                                  "--resume only total_timesteps may change")
            if new.total_timesteps < cfg.total_timesteps:
                raise ConfigError(f"--config {config}: total_timesteps {new.total_timesteps} is below "
                                  f"the run's {cfg.total_timesteps}; with --resume it may only grow")
            cfg = new
        found = checkpoints(Path(resume))
        at = found[-1][0] if found else 0
        if at >= cfg.total_timesteps and (Path(resume) / "model.zip").exists():
            print(f"nothing left to train: {resume} is at step {at:,} of its total_timesteps "
                  f"{cfg.total_timesteps:,}; to train on, pass --config with a larger total_timesteps")
            return Path(resume)
        print(describe(cfg, Path(resume), at), flush=True)
        train(cfg, Path(resume), resume=True)
        print(summary(Path(resume)))
        return Path(resume)
    if not config or not out:
        raise ConfigError("dlcluster train needs --config FILE --out DIR (or --resume DIR)")
    cfg = load_config(config)
    print(describe(cfg, Path(out)), flush=True)
    train(cfg, Path(out))
    print(summary(Path(out)))
    return Path(out)

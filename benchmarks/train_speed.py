"""Training speed by torch device: where a PPO run's wall time goes (rollouts vs updates), on CPU
and on a GPU, with the same config, seed and env steps.

    python benchmarks/train_speed.py --config configs/agents/alloc_default.yaml \
        [--devices cpu cuda] [--timesteps 8192] [--n-envs 8] [--vec subproc] [--torch-threads N]
        [--eval-seed 1000] [--eval-steps 200]

For each device: the config's model trained for `--timesteps` env steps (no BC warm start, no
evaluations or checkpoints during the run, so only SB3's own loop is timed), the wall time of its
rollouts (the envs and the policy's forward passes: `on_rollout_start` to `on_rollout_end`) and of
its updates (the rest of `learn`), then the model saved, loaded back on the CPU as `dlcluster
evaluate` loads a learned policy (`agents.learned`), and stepped `--eval-steps` times on a held-out
seed: a model trained on a GPU must run where the baselines run (steps, not an episode: an
untrained policy that ends every round at once idles an allocation episode to its horizon).
Why: whether a GPU pays for these small entity / MLP policies, whose rollouts are CPU-bound env
steps, is a question of the update's share, which this measures rather than assumes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from agents.learned import env_for, fit_spaces
from agents.train import TrainConfig, algo_class, load_config, make_vec, new_model, torch_threads


class _RolloutClock(BaseCallback):
    """Sums the wall time SB3 spends collecting rollouts (the rest of `learn` is updates); notes
    torch's CPU threads as the rollouts saw them."""

    def __init__(self):
        super().__init__()
        self.rollout_s, self.rollouts, self._t0, self.threads = 0.0, 0, 0.0, 0

    def _on_rollout_start(self) -> None:
        self.threads = th.get_num_threads()
        self._t0 = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.rollout_s += time.perf_counter() - self._t0
        self.rollouts += 1

    def _on_step(self) -> bool:
        return True


def config_for(base: TrainConfig, device: str, timesteps: int, n_envs: int | None,
               vec: str | None, torch_threads: int | None = None) -> TrainConfig:
    """`base` with the benchmark's overrides, validated as a config file would be."""
    raw = base.model_dump()
    raw.update(device=device, total_timesteps=timesteps, checkpoint_every=timesteps, eval_every=0,
               bc=None)
    if n_envs:
        raw["n_envs"] = n_envs
    if vec:
        raw["vec"] = vec
    if torch_threads:
        raw["torch_threads"] = torch_threads
    return TrainConfig.model_validate(raw)


def predict_steps(model, env, seed: int, steps: int, masked: bool) -> int:
    """Steps `model` on `env` from a reset with `seed`, deterministically; the steps taken."""
    obs, _ = env.reset(seed=seed)
    for n in range(1, steps + 1):
        kw = {"action_masks": env.unwrapped.action_masks()} if masked else {}
        a, _ = model.predict(obs, deterministic=True, **kw)
        obs, _, term, trunc, _ = env.step(int(a))
        if term or trunc:
            return n
    return steps


def measure(cfg: TrainConfig, eval_seed: int, eval_steps: int) -> dict:
    venv = make_vec(cfg, cfg.seed)
    model = new_model(cfg, venv)
    clock = _RolloutClock()
    t0 = time.perf_counter()
    with torch_threads(cfg.torch_threads):  # as agents.train.train runs a config
        model.learn(cfg.total_timesteps, callback=clock)
    wall = time.perf_counter() - t0
    venv.close()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.zip"
        model.save(path)
        env = env_for(cfg, None)
        loaded = fit_spaces(algo_class(cfg.algo).load(path, device="cpu"), env)
        done = predict_steps(loaded, env, eval_seed, eval_steps, masked=cfg.algo == "maskable_ppo")
    return {"device": str(model.device), "threads": clock.threads,
            "steps": model.num_timesteps, "wall_s": wall,
            "rollout_s": clock.rollout_s, "update_s": wall - clock.rollout_s,
            "updates": clock.rollouts, "cpu_steps": done}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--devices", nargs="+", default=["cpu"])
    ap.add_argument("--timesteps", type=int, default=8192)
    ap.add_argument("--n-envs", type=int, default=None, help="default: the config's")
    ap.add_argument("--vec", choices=["dummy", "subproc", "batched"], default=None)
    ap.add_argument("--torch-threads", type=int, default=None, help="default: the config's, else torch's")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--eval-steps", type=int, default=200)
    args = ap.parse_args(argv)
    base = load_config(args.config)
    print(f"{'device':>8} {'threads':>7} {'steps':>7} {'wall s':>8} {'steps/s':>8} {'rollout s':>10} "
          f"{'update s':>9} {'per update':>10} {'CPU steps':>10}")
    for device in args.devices:
        cfg = config_for(base, device, args.timesteps, args.n_envs, args.vec, args.torch_threads)
        r = measure(cfg, args.eval_seed, args.eval_steps)
        print(f"{r['device']:>8} {r['threads']:>7} {r['steps']:>7} {r['wall_s']:>8.1f} "
              f"{r['steps'] / r['wall_s']:>8.0f} {r['rollout_s']:>10.1f} {r['update_s']:>9.1f} "
              f"{r['update_s'] / max(r['updates'], 1):>10.2f} {r['cpu_steps']:>10}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

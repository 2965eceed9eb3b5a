"""Behaviour-cloning warm start: how closely a policy imitates its heuristic, and how the BC-only
policy (no RL yet) schedules compared with that heuristic (issue #5; agents/bc.py).

    python benchmarks/bc_warmstart.py --config configs/agents/place_dltap.yaml [--episodes 4]
        [--epochs 10] [--eval-seed 1000]

Demonstrations: the config's bc.heuristic through the adapter on seeds seed .. seed+episodes-1 of
the config's env; cloning with the config's bc settings into a fresh model of the config's policy.
Prints accuracy on those states and on a held-out episode (eval seed) beside chance (a uniform
pick among the valid actions), then the BC-only policy's metrics beside the heuristic's on the
eval seed (deterministic actions, masked as in evaluation).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import torch as th

from agents.bc import accuracy, clone, collect
from agents.learned import episode
from agents.train import load_config, new_model
from dlclusterenv import make_sim


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--episodes", type=int, help="default: the config's bc.episodes")
    ap.add_argument("--epochs", type=int, help="default: the config's bc.epochs")
    ap.add_argument("--eval-seed", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    a = ap.parse_args()
    th.set_num_threads(a.threads)
    import baselines

    cfg = load_config(a.config)
    if cfg.bc is None:
        raise SystemExit(f"{a.config}: no bc section")
    episodes, epochs = a.episodes or cfg.bc.episodes, a.epochs or cfg.bc.epochs
    masked = cfg.algo == "maskable_ppo"
    t0 = time.perf_counter()
    demos = collect(cfg.env.id, cfg.env.kwargs, cfg.bc.heuristic, [cfg.seed + i for i in range(episodes)])
    held = collect(cfg.env.id, cfg.env.kwargs, cfg.bc.heuristic, [a.eval_seed])  # BCError if skipped
    t1 = time.perf_counter()
    env = gym.make(cfg.env.id, **cfg.env.kwargs)
    model = new_model(cfg, env)
    before = accuracy(model.policy, held, masked)
    hist = clone(model.policy, demos, epochs=epochs, batch_size=cfg.bc.batch_size,
                 learning_rate=cfg.bc.learning_rate, seed=cfg.seed, masked=masked,
                 log=lambda r: print(f"  epoch {r['epoch']:>3}  loss {r['loss']:.4f}  accuracy {r['accuracy']:.3f}"))
    t2 = time.perf_counter()
    print(f"{cfg.bc.heuristic} on {cfg.env.id} {cfg.env.kwargs}: {len(demos)} states from {episodes} episodes "
          f"({t1 - t0:.1f} s), {epochs} epochs ({t2 - t1:.1f} s)")
    for seed, why in demos.skipped.items():
        print(f"skipped seed {seed}: {why}")
    print(f"accuracy: training states {hist[-1]['accuracy']:.3f}; held-out episode (seed {a.eval_seed}, "
          f"{len(held)} states) {accuracy(model.policy, held, masked):.3f} (untrained {before:.3f}, "
          f"chance {held.chance:.3f})")
    scenario = cfg.env.kwargs.get("scenario", "default")
    bc = episode(model, env, a.eval_seed, masked)
    ref = make_sim(scenario, a.eval_seed).run(baselines.make(cfg.bc.heuristic))
    for name, m in (("BC policy", bc), (cfg.bc.heuristic, ref)):
        print(f"{name:<12} avg JCT {m.avg_jct_s:10,.0f} s  makespan {m.makespan_s:10,.0f} s  "
              f"cross-node {m.cross_node_gb:12,.0f} GB  unfinished {m.jobs_unfinished}")
    print(f"BC policy / {cfg.bc.heuristic} avg JCT: {bc.avg_jct_s / ref.avg_jct_s:.3f}")


if __name__ == "__main__":
    main()

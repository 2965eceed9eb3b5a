"""benchmarks/train_speed.py: the overrides it trains with, and the split of a run's wall time."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.train import load_config
from benchmarks.train_speed import config_for, main, measure

SMOKE = Path(__file__).resolve().parents[1] / "configs" / "agents" / "smoke.yaml"


def test_overrides_leave_only_sb3s_loop_to_time():
    base = load_config(SMOKE)
    cfg = config_for(base, "cpu", 128, n_envs=3, vec="subproc")
    assert base.bc is not None and base.eval_every > 0  # what the overrides take away
    assert (cfg.bc, cfg.eval_every, cfg.total_timesteps, cfg.n_envs, cfg.vec) == (None, 0, 128, 3, "subproc")
    assert config_for(base, "cpu", 128, None, None).n_envs == base.n_envs


def test_a_run_splits_into_its_rollouts_and_updates_and_steps_on_the_cpu():
    # smoke: 2 envs x 64 steps a rollout, so 256 steps are two rollouts and two updates
    r = measure(config_for(load_config(SMOKE), "cpu", 256, None, None), eval_seed=1000, eval_steps=7)
    assert (r["device"], r["steps"], r["updates"], r["cpu_steps"]) == ("cpu", 256, 2, 7)
    assert 0 < r["rollout_s"] < r["wall_s"] and r["update_s"] == pytest.approx(r["wall_s"] - r["rollout_s"])


def test_the_cli_prints_a_row_per_device_with_its_threads(capsys):
    import torch

    before = torch.get_num_threads()
    main(["--config", str(SMOKE), "--timesteps", "128", "--eval-steps", "3", "--torch-threads", "3"])
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].split()[0] == "device" and len(rows) == 2
    assert rows[1].split()[:3] == ["cpu", "3", "128"] and rows[1].split()[-1] == "3"
    assert torch.get_num_threads() == before  # given back after the run

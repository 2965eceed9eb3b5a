"""Training on a benchmark suite instance's train split (TrainConfig.suite, issue 15 item 5): the
envs run the instance's train scenarios, the test split is refused, bad specs name the key."""

from __future__ import annotations

import pytest
import yaml

from agents.learned import run_learned
from agents.train import load_config, make_vec, train
from dlclusterenv.benchmark import instances, load_suite
from dlclusterenv.config import ConfigError
from helpers import shared_file

CFG = {
    "env": {"id": "DLClusterAlloc-v0",
            "kwargs": {"scenario": "tiny", "placer": "consolidate", "work_conserving": True,
                       "grow_running": False, "shapes": [[1, 1], [1, 2]], "shaping": True,
                       "shaping_gamma": 0.9}},
    "suite": {"name": "tiny", "instance": "tiny@2x"},
    "algo": "maskable_ppo",
    "policy": "agents.policies.AllocPolicy",
    "n_envs": 2,
    "seed": 0,
    "total_timesteps": 128,
    "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "gamma": 0.9},
    "checkpoint_every": 128,
}


def _cfg(tmp_path, **patch):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({**CFG, **patch}))
    return p


def test_suite_envs_run_the_train_split_scenarios(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    venv = make_vec(cfg, 0)
    loads = venv.get_attr("scenario")
    venv.close()
    assert [s.workload.load for s in loads] == [2.0, 2.0]  # the instance's load, not tiny's 1x
    assert all(s.workload.ps_fraction == 0.5 for s in loads)  # the suite entry's mix
    plain = load_config(_cfg(tmp_path, suite=None))
    v2 = make_vec(plain, 0)
    assert v2.get_attr("scenario")[0].workload.load == 1.0
    v2.close()


def test_suite_training_then_scoring_on_the_test_split(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    train(cfg, tmp_path / "run", progress_bar=False)
    suite, path = load_suite("tiny")
    inst = next(i for i in instances(suite, path) if i.key == "tiny@2x")
    _, sc, seed = inst.runs("test")[0]
    m = run_learned(f"maskableppo:{tmp_path / 'run' / 'model.zip'}", sc, seed).summary()
    assert m["jobs_unfinished"] == 0


@pytest.mark.parametrize("patch, key", [
    ({"suite": {"name": "tiny", "instance": "tiny@3x"}}, "suite.instance"),
    ({"suite": {"name": "nosuch", "instance": "tiny@2x"}}, "suite.instance"),
    ({"seed": 999}, "seed"),  # env 1 would reset first with the test seed 1000
    ({"eval_every": 64}, "eval_every"),
])
def test_bad_suite_specs_name_the_key(tmp_path, patch, key):
    with pytest.raises(ConfigError, match=key):
        load_config(_cfg(tmp_path, **patch))


def test_shape_choices_plot_shares_sum_to_one_per_state_bin():
    from dlclusterenv.plots import shape_choices

    recs = [{"waiting": w, "free_gpus": g, "shape": s}
            for w, g, s in [(0, 60, 2), (1, 50, 2), (3, 20, 1), (12, 8, 0), (30, 2, 0), (30, 2, 1)]]
    fig = shape_choices(recs, [(1, 1), (1, 2), (8, 8)])
    for ax in fig.axes[:2]:
        heights: dict[float, float] = {}
        for bar in ax.patches:
            heights[bar.get_x()] = heights.get(bar.get_x(), 0.0) + bar.get_height()
        assert len(heights) >= 3 and all(h == pytest.approx(1.0) for h in heights.values())
    # waiting 30 (two decisions, two shapes): half 1x1, half 1x2
    last = [b for b in fig.axes[0].patches if b.get_x() == max(p.get_x() for p in fig.axes[0].patches)]
    assert sorted(round(b.get_height(), 3) for b in last) == [0.0, 0.5, 0.5]


def test_the_1x_suite_config_validates_and_differs_from_the_7x_one_in_load_and_time_scale():
    """configs/agents/suite_6c71a0_1x.yaml (issue 15's transfer target: trained at 1x) loads,
    validates, and trains on 6c71a0's two train windows at 1x; the env is the 7x config's but for
    the time scale. Skipped without the Philly trace (the configs' scenario reads it)."""
    shared_file("traces", "philly_jobs.csv")
    one, seven = (load_config(f"configs/agents/{n}.yaml") for n in ("suite_6c71a0_1x", "suite_6c71a0"))
    assert one.suite.instance == "philly-6c71a0-nov@1x"
    runs = one.suite.train_runs()
    assert [sc.workload.load for sc, _ in runs] == [1.0, 1.0]
    windows = [(sc.workload.trace.start, sc.workload.trace.end) for sc, _ in runs]
    assert windows == [(sc.workload.trace.start, sc.workload.trace.end) for sc, _ in seven.suite.train_runs()]
    assert {k: v for k, v in one.env.kwargs.items() if k != "time_scale_s"} == \
        {k: v for k, v in seven.env.kwargs.items() if k != "time_scale_s"}
    assert (one.env.kwargs["time_scale_s"], seven.env.kwargs["time_scale_s"]) == (3600.0, 36000.0)
    assert one.model_dump(exclude={"env", "suite"}) == seven.model_dump(exclude={"env", "suite"})


def test_the_grow_config_differs_from_the_7x_one_only_in_growing_running_jobs():
    """configs/agents/suite_6c71a0_grow.yaml (README "Growing running jobs") is the 7x config
    with grow_running true. Skipped without the Philly trace."""
    shared_file("traces", "philly_jobs.csv")
    grow, seven = (load_config(f"configs/agents/{n}.yaml") for n in ("suite_6c71a0_grow", "suite_6c71a0"))
    assert (grow.env.kwargs["grow_running"], seven.env.kwargs["grow_running"]) == (True, False)
    assert {k: v for k, v in grow.env.kwargs.items() if k != "grow_running"} == \
        {k: v for k, v in seven.env.kwargs.items() if k != "grow_running"}
    assert grow.model_dump(exclude={"env"}) == seven.model_dump(exclude={"env"})


def test_the_shrink_config_is_the_grow_config_with_shrinks():
    """configs/agents/suite_6c71a0_shrink.yaml: the grow config plus shrink_running true."""
    shared_file("traces", "philly_jobs.csv")
    resize, grow = (load_config(f"configs/agents/{n}.yaml") for n in ("suite_6c71a0_shrink", "suite_6c71a0_grow"))
    assert resize.env.kwargs == {**grow.env.kwargs, "shrink_running": True}
    assert resize.model_dump(exclude={"env"}) == grow.model_dump(exclude={"env"})


def test_the_grow_noprogress_config_is_the_grow_config_without_progress_columns():
    """configs/agents/suite_6c71a0_grow_noprogress.yaml: the grow config with job_progress false,
    to the 40,960 steps its README policy was scored at."""
    shared_file("traces", "philly_jobs.csv")
    nop, grow = (load_config(f"configs/agents/{n}.yaml") for n in ("suite_6c71a0_grow_noprogress", "suite_6c71a0_grow"))
    assert nop.env.kwargs == {**grow.env.kwargs, "job_progress": False}
    assert (nop.total_timesteps, grow.total_timesteps) == (40960, 50000)
    assert nop.model_dump(exclude={"env", "total_timesteps"}) == grow.model_dump(exclude={"env", "total_timesteps"})


def test_the_order_config_fixes_the_train_tuned_shape_so_only_the_start_order_is_learned():
    """configs/agents/suite_6c71a0_order.yaml: the grow / no-progress config with one shape, the
    train-tuned constant's (8x8, `fixed-8x8` on the train split), and no resizing; its env offers
    a start per waiting job that fits and, while one fits, no end of the round."""
    shared_file("traces", "philly_jobs.csv")
    order, nop = (load_config(f"configs/agents/{n}.yaml") for n in ("suite_6c71a0_order", "suite_6c71a0_grow_noprogress"))
    assert order.env.kwargs == {**nop.env.kwargs, "shapes": [[8, 8]], "grow_running": False}
    assert order.model_dump(exclude={"env"}) == nop.model_dump(exclude={"env"})
    env = make_vec(order, order.seed).envs[0].unwrapped
    env.reset(seed=0)
    assert env.action_space.n == env.max_jobs + 1
    mask = env.action_masks()
    waiting = [i for i, j in enumerate(env.slots()) if j.status != "running"]
    assert waiting and mask[waiting].all() and not mask[-1]

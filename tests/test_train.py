"""agents.train / learned / bc: a short run trains, checkpoints, resumes without losing steps, logs
the scheduling metrics to TensorBoard and evaluates on the leaderboard; same seed, same weights;
BC imitates a heuristic above chance; bad configs and specs are errors naming the key."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch as th
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.bc import BCError, accuracy, clone, collect
from agents.learned import parse_spec, run_learned
from agents.train import checkpoints, load_config, train
from dlclusterenv.cli import main
from dlclusterenv.config import ConfigError

# Episodes truncated at 100 steps so that some end inside a few-hundred-step run.
BASE = {
    "env": {"id": "DLClusterPlace-v0",
            "kwargs": {"scenario": "tiny", "reward": {"jct": 1.0}, "max_steps": 100}},
    "algo": "maskable_ppo",
    "policy": "agents.policies.NodeScoringPolicy",
    "n_envs": 2,
    "seed": 0,
    "total_timesteps": 256,
    "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
    "checkpoint_every": 128,
    "eval_every": 256,
    "eval": {"seeds": [1000], "baselines": ["fifo"]},
}


def _write(path, cfg: dict):
    path.write_text(yaml.safe_dump(cfg))
    return path


def _scalars(tb_dir) -> dict[str, list[tuple[int, float]]]:
    ea = EventAccumulator(str(tb_dir))
    ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


def test_train_checkpoint_resume_tensorboard_and_evaluate(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--config", str(_write(tmp_path / "a.yaml", BASE)), "--out", str(run)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"training into {run}: 256 steps of maskable_ppo")
    assert "done: 256 steps in" in said and "evaluation at step 256 on seeds [1000]: avg JCT policy" in said
    assert [t for t, _ in checkpoints(run)] == [128, 256]
    assert (run / "model.zip").is_file() and load_config(run / "config.yaml").total_timesteps == 256
    first = _scalars(run / "tb")
    for tag in ("episode/reward", "episode/avg_jct_s", "episode/makespan_s", "episode/cross_node_gb",
                "episode/gpu_util", "eval/avg_jct_s/policy", "eval/avg_jct_s/fifo",
                "eval/cross_node_gb/policy", "rollout/ep_rew_mean"):
        assert first.get(tag), tag
    assert [s for s, _ in first["eval/avg_jct_s/policy"]] == [0, 256]

    # resume with a longer budget: steps continue from the last checkpoint, nothing is lost
    more = _write(tmp_path / "b.yaml", {**BASE, "total_timesteps": 512})
    assert main(["train", "--resume", str(run), "--config", str(more)]) == 0
    assert [t for t, _ in checkpoints(run)] == [128, 256, 384, 512]
    assert json.loads((run / "run.json").read_text())["num_timesteps"] == 512
    after = _scalars(run / "tb")
    steps = [s for s, _ in after["eval/avg_jct_s/policy"]]
    assert steps == [0, 256, 512]  # TensorBoard steps continue where the first run stopped
    assert max(s for s, _ in after["train/value_loss"]) == 512
    from sb3_contrib import MaskablePPO

    assert MaskablePPO.load(run / "model.zip", device="cpu").num_timesteps == 512
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    assert "nothing left to train" in capsys.readouterr().out and len(checkpoints(run)) == 4

    # the saved model is a policy like any other on the leaderboard
    out = tmp_path / "eval"
    spec = f"maskableppo:{run / 'model.zip'}"
    assert main(["evaluate", "--scenario", "tiny", "--policies", f"fifo,{spec}", "--seeds", "1",
                 "--out", str(out), "--workers", "1"]) == 0
    with open(out / "runs.csv") as f:
        rows = {r["policy"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"fifo", spec}
    m = run_learned(spec, "tiny", 0)
    assert float(rows[spec]["avg_jct_s"]) == pytest.approx(m.avg_jct_s)
    assert m.jobs_finished + m.jobs_unfinished == 8
    assert m.decision_latency_ms > 0  # wall time per predict, measured as for a baseline
    with open(out / "timing.csv") as f:
        assert float({r["policy"]: r for r in csv.DictReader(f)}[spec]["decision_latency_ms"]) > 0
    # a bigger cluster needs a size-agnostic (EntityPolicy) model; the node scorer is refused
    with pytest.raises(ConfigError, match="cannot move"):
        run_learned(spec, "dltap", 0)


def test_same_seed_same_weights_ppo(tmp_path):
    cfg = {**BASE, "algo": "ppo", "policy": "MultiInputPolicy", "total_timesteps": 128,
           "eval_every": 0, "n_envs": 1, "vec": "dummy"}
    a = train(load_config(_write(tmp_path / "c.yaml", cfg)), tmp_path / "a", progress_bar=False)
    b = train(load_config(tmp_path / "c.yaml"), tmp_path / "b", progress_bar=False)
    sa, sb = a.policy.state_dict(), b.policy.state_dict()
    assert all(th.equal(sa[k], sb[k]) for k in sa)
    c = train(load_config(_write(tmp_path / "d.yaml", {**cfg, "seed": 1})), tmp_path / "c",
              progress_bar=False)
    assert not all(th.equal(sa[k], c.policy.state_dict()[k]) for k in sa)


def test_bc_imitates_dltap_above_chance():
    import gymnasium as gym
    from sb3_contrib import MaskablePPO

    from agents.policies import NodeScoringPolicy

    kw = {"scenario": "tiny"}
    demos = collect("DLClusterPlace-v0", kw, "dltap", [0, 1])
    held = collect("DLClusterPlace-v0", kw, "dltap", [7])
    assert np.array_equal(demos.actions, collect("DLClusterPlace-v0", kw, "dltap", [0, 1]).actions)
    model = MaskablePPO(NodeScoringPolicy, gym.make("DLClusterPlace-v0", **kw), seed=0, device="cpu")
    clone(model.policy, demos, epochs=8, batch_size=64, learning_rate=1e-3, seed=0, masked=True)
    # BC must remove at least 40% of the errors of a uniform choice among the unmasked nodes (the
    # chance level moves with how loaded `tiny` is, which the speed model sets)
    assert 1 - accuracy(model.policy, held, masked=True) < 0.6 * (1 - held.chance)
    # DLTAP defers a job that does not fit whole; a work-conserving env forbids that deferral
    with pytest.raises(BCError, match="masked action"):
        collect("DLClusterPlace-v0", {**kw, "work_conserving": True}, "dltap", [0])


@pytest.mark.parametrize(
    "patch, key",
    [
        ({"algo": "dqn"}, "algo"),
        ({"n_envs": "two"}, "n_envs"),
        ({"surprise": 1}, "surprise"),
        ({"env": {"id": "DLClusterNope-v0"}}, "env.id"),
        ({"env": {"id": "DLClusterPlace-v0", "kwargs": {"reward": "speed"}}}, "env.kwargs"),
        ({"policy": "agents.policies.Nope"}, "policy"),
        ({"policy": "MultiInputPolicy", "algo": "ppo", "hyperparameters": {"n_step": 8}},
         "hyperparameters"),
        ({"algo": "ppo"}, "maskable"),
        ({"eval": {"seeds": [1], "baselines": []}}, "eval.seeds"),
        ({"eval": {"baselines": ["fifo", "nope"]}}, "eval.baselines"),
        ({"eval": {"seeds": [-1]}}, "eval.seeds.0"),  # was a traceback at the first evaluation, mid-training
        ({"policy_kwargs": {"features_extractor_class": "agents.nope.X"}}, "policy_kwargs"),
        ({"device": "tpu"}, "device"),
        ({"torch_threads": 0}, "torch_threads"),
        # SB3 takes these unchecked and fails inside learn() (badin16)
        ({"hyperparameters": {"n_steps": 0}}, "hyperparameters.n_steps: Input should be greater than or equal to 1"),
        ({"hyperparameters": {"n_epochs": 0}}, "hyperparameters.n_epochs"),
        ({"hyperparameters": {"batch_size": -1}}, "hyperparameters.batch_size"),
        ({"hyperparameters": {"gamma": 2}}, "hyperparameters.gamma: Input should be less than or equal to 1"),
        ({"hyperparameters": {"ent_coef": float("nan")}}, "hyperparameters.ent_coef"),
        ({"hyperparameters": {"learning_rate": "3e-4"}}, "hyperparameters.learning_rate: Input should be a valid number"),
        ({"hyperparameters": {"batch_size": 1}}, "batch_size: 1 normalises"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, patch, key):
    path = _write(tmp_path / "bad.yaml", {**BASE, **patch})
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(path) in str(e.value) and key in str(e.value)


def test_bad_learned_specs_and_resume_arguments(tmp_path, capsys):
    with pytest.raises(ConfigError, match="unknown learned-policy prefix 'dqn'"):
        parse_spec("dqn:x.zip")
    with pytest.raises(ConfigError, match="not found"):
        parse_spec(f"ppo:{tmp_path / 'missing.zip'}")
    (tmp_path / "model.zip").write_bytes(b"")
    _write(tmp_path / "config.yaml", BASE)
    with pytest.raises(ConfigError, match="algo 'maskable_ppo', not 'ppo'"):
        parse_spec(f"ppo:{tmp_path / 'model.zip'}")
    assert main(["train", "--resume", str(tmp_path / "nothing")]) == 2
    assert main(["train", "--config", str(tmp_path / "config.yaml")]) == 2
    assert "needs --config FILE --out DIR" in capsys.readouterr().err


def test_bc_env_kwargs_record_where_the_heuristic_can_be_followed(tmp_path):
    """DLTAP cannot be followed on a work-conserving placement env, but its demonstrations from
    the plain env (same spaces) warm-start RL on the work-conserving one."""
    wc = {**BASE["env"]["kwargs"], "work_conserving": True}
    cfg = {**BASE, "env": {"id": "DLClusterPlace-v0", "kwargs": wc}, "total_timesteps": 128,
           "eval_every": 0, "bc": {"heuristic": "dltap", "episodes": 1, "epochs": 1}}
    with pytest.raises(BCError, match="masked action"):
        train(load_config(_write(tmp_path / "a.yaml", cfg)), tmp_path / "a", progress_bar=False)
    cfg["bc"]["env_kwargs"] = {"work_conserving": False}
    train(load_config(_write(tmp_path / "b.yaml", cfg)), tmp_path / "b", progress_bar=False)
    assert json.loads((tmp_path / "b" / "run.json").read_text())["bc"]["states"] > 0
    cfg["bc"]["env_kwargs"] = {"max_jobs": 3}
    with pytest.raises(BCError, match="spaces"):
        train(load_config(_write(tmp_path / "c.yaml", cfg)), tmp_path / "c", progress_bar=False)


def test_smoke_config_trains_a_policy_that_starts_jobs(tmp_path):
    """The README's first training command gives a model that runs jobs (issue 18: on the plain
    placement env it learned to defer every task)."""
    import pathlib

    smoke = pathlib.Path(__file__).parents[1] / "configs" / "agents" / "smoke.yaml"
    assert main(["train", "--config", str(smoke), "--out", str(tmp_path / "smoke")]) == 0
    m = run_learned(f"maskableppo:{tmp_path / 'smoke' / 'model.zip'}", "tiny", 0)
    assert m.jobs_finished > 0


def test_torch_threads_hold_while_training_and_are_restored(tmp_path, monkeypatch):
    import agents.train as tr

    seen = []
    monkeypatch.setattr(tr, "_train", lambda *a: seen.append(th.get_num_threads()))
    cfg = {**BASE, "eval_every": 0}
    before = th.get_num_threads()
    for threads in (3, None):
        tr.train(load_config(_write(tmp_path / "c.yaml", {**cfg, "torch_threads": threads})), tmp_path / "o")
        assert th.get_num_threads() == before
    assert seen == [3, before]


def test_a_config_sb3_refuses_leaves_out_free_for_the_corrected_one(tmp_path, capsys):
    """config.yaml was saved before SB3 built the model: a refused config left --out holding "a
    run", so the corrected config was turned away ("--out already holds a run; resume it") and
    --resume would have trained with the refused one."""
    out = tmp_path / "run"
    refused = _write(tmp_path / "bad.yaml", {**BASE, "hyperparameters": {"rollout_buffer_kwargs": {"nope": 1}}})
    assert main(["train", "--config", str(refused), "--out", str(out)]) == 2
    assert "maskable_ppo rejects them" in capsys.readouterr().err
    assert not (out / "config.yaml").exists()
    good = _write(tmp_path / "good.yaml", {**BASE, "total_timesteps": 64, "checkpoint_every": 64, "eval_every": 0})
    assert main(["train", "--config", str(good), "--out", str(out)]) == 0
    assert load_config(out / "config.yaml") == load_config(good)

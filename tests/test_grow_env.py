"""DLClusterGrow-v0 (dlclusterenv/envs/grow.py): the agent sets each job's growth limit at its
arrival, Pollux allocates under it. x2 everywhere is Pollux exactly, x64 everywhere is
Pollux(max_growth=64): the env adds no behaviour of its own."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import dlclusterenv  # noqa: F401  (registers the ids)
from baselines.pollux import Pollux, PolluxGrowth
from dlclusterenv.config import ConfigError
from helpers import shared_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from decision_log import decision_log  # noqa: E402


@functools.cache
def pollux_log(max_growth: float = 2.0) -> list[str]:
    """benchmarks/decision_log.py's lines of Pollux alone on tiny, seed 0."""
    return decision_log("tiny", Pollux(max_growth=max_growth), 0)


def make(**kw):
    return gym.make("DLClusterGrow-v0", scenario=kw.pop("scenario", "tiny"), **kw)


def play(env, choose, seed=0):
    """One episode; choose(env, mask) -> action. The log lines of benchmarks/decision_log.py (every
    Pollux decision, every job's finish time, the summary), the rewards and the observations."""
    u = env.unwrapped
    log, rewards, observations = [], [], []
    decide = u.pollux.decide

    def logged(view):
        d = decide(view)
        log.append(repr((view.time, sorted(d.allocate.items()), sorted((k, repr(v)) for k, v in d.place.items()),
                         list(d.preempt), sorted(d.cpu_limits.items()), sorted(d.gpu_mode.items()), d.wake_at)))
        return d

    u.pollux.decide = logged
    obs, _ = env.reset(seed=seed)
    observations.append(obs)
    while True:
        obs, r, te, tr, info = env.step(choose(u, u.action_masks()))
        assert not info["invalid_action"]
        rewards.append(r)
        observations.append(obs)
        if te or tr:
            break
    for jid in sorted(u.sim.jobs):
        j = u.sim.jobs[jid]
        log.append(f"{jid} {j.status} {j.finish_s!r}" if j.status == "done" else f"{jid} unfinished")
    log.append(repr(sorted(u.sim.metrics().summary().items())))
    return log, rewards, observations


def always(k):
    """Growth index k for every job (the first awaiting slot), end of round when nothing awaits."""
    def choose(u, mask):
        ok = np.flatnonzero(mask[:-1])
        return int(ok[0] - ok[0] % u.per_job + k) if len(ok) else len(mask) - 1
    return choose


def test_growth_two_everywhere_is_pollux_exactly():
    """Also on a second episode of the same env: Pollux is reset with each episode's seed."""
    env = make()
    assert env.unwrapped.growths[1] == 2.0
    log, _, _ = play(env, always(1))
    assert log == pollux_log()
    log, _, _ = play(env, always(1), seed=1)
    assert log == decision_log("tiny", Pollux(), 1)


def test_uncapped_everywhere_is_pollux_max_growth_64_and_differs():
    log64, _, _ = play(make(), always(4))
    assert log64 == pollux_log(64.0)
    assert log64 != pollux_log()  # the choice changes decisions


def test_growths_option_sets_what_is_offered():
    """`growths` changes the action space and what a choice means: [64] alone is Pollux uncapped."""
    env = make(growths=[64])
    assert env.action_space.n == env.unwrapped.max_jobs + 1
    log, _, _ = play(env, always(0))
    assert log == pollux_log(64.0)


def test_spaces_and_masks():
    env = make(max_jobs=8, must_choose=True)
    u = env.unwrapped
    obs, _ = env.reset(seed=0)
    assert env.action_space.n == 5 * 8 + 1 and obs["growth"].shape == (8, 6)
    assert env.observation_space.contains(obs)
    mask = u.action_masks()
    awaiting = u.awaiting()
    assert awaiting and not mask[-1]  # end of round only once every visible job has its limit
    for i in range(8):
        assert mask[i * 5:(i + 1) * 5].all() == (i in awaiting) and mask[i * 5:(i + 1) * 5].any() == (i in awaiting)
    assert (obs["growth"][awaiting, 0] == 1).all()  # "awaits its choice"
    slot = awaiting[0]
    obs, r, *_ = env.step(slot * 5 + 3)  # x8
    assert u.pollux.growth[u.slots()[slot].job_id] == 8.0 or slot not in u.awaiting()
    # a masked action is a no-op costing invalid_penalty
    taken = u.action_masks()
    bad = int(np.flatnonzero(~taken)[0])
    before = dict(u.pollux.growth)
    _, r, _, _, info = env.step(bad)
    assert info["invalid_action"] and r <= -1.0 and u.pollux.growth == before


def test_end_of_round_leaves_pollux_own_cap_unless_must_choose():
    """By default end of round is valid and leaves the awaiting jobs at Pollux's x2 (asked again
    next round): ending every round is Pollux exactly. must_choose masks it while a job awaits."""
    env = make()
    env.reset(seed=0)
    assert env.unwrapped.awaiting() and env.unwrapped.action_masks()[-1]
    log, _, _ = play(env, lambda u, mask: len(mask) - 1)
    assert log == pollux_log() and not env.unwrapped.pollux.growth
    strict = make(must_choose=True)
    strict.reset(seed=0)
    assert strict.unwrapped.awaiting() and not strict.unwrapped.action_masks()[-1]


def test_same_seed_same_trajectory():
    def seeded(seed):
        rng = np.random.default_rng(seed)
        return lambda u, mask: int(rng.choice(np.flatnonzero(mask)))

    a = play(make(), seeded(3), seed=1)
    b = play(make(), seeded(3), seed=1)
    assert a[0] == b[0] and a[1] == b[1]
    assert all(all(np.array_equal(x[k], y[k]) for k in x) for x, y in zip(a[2], b[2]))


def test_observation_rows_show_the_choice_and_pollux_state():
    _, _, observations = play(make(), always(3))  # x8
    for o in observations:
        rows, valid = o["growth"], o["job_mask"] > 0
        chosen = valid & (rows[:, 0] == 0)
        assert np.allclose(rows[chosen, 1], np.log2(8) / np.log2(64)) and (rows[valid & ~chosen, 1] == 0).all()
        assert (rows[~valid] == 0).all() and (rows >= 0).all() and (rows <= 1).all()
    assert any((o["growth"][:, 2] > 0).any() for o in observations)  # measured sizes show
    assert any((o["growth"][:, 0] == 0).any() for o in observations)  # chosen limits show


@pytest.mark.parametrize("bad", [[], [2, 2], [0], [-1], ["x"], "x", [float("nan")], [True]])
def test_bad_growths_name_the_option(bad):
    with pytest.raises(ConfigError, match="growths"):
        make(growths=bad)


def test_pollux_growth_caps_per_job_and_scaling():
    p = PolluxGrowth()
    p.reset(0)

    class J:
        job_id = "a"

    p._most["a"] = 3
    assert p.cap(J) == 6  # max_growth 2 until set
    p.growth["a"] = 4.0
    assert p.cap(J) == 12 and p.cap_at(J, 64.0) == 64
    assert p.scaling("a", 4, False) == 1.0  # no fit yet
    p._theta["a"] = ((), np.array([1.0, 0.5, 0.1, 0.2, 0.1, 1.0]))  # sync time grows with workers
    assert 0 < p.scaling("a", 4, True) < p.scaling("a", 4, False) < p.scaling("a", 2, False) < 1


def test_grow_policy_is_picked_and_learns_a_step():
    from sb3_contrib import MaskablePPO

    from agents.policies import GrowPolicy, policy_for

    env = make(max_jobs=8)
    assert policy_for(env) is GrowPolicy
    model = MaskablePPO(GrowPolicy, env, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.learn(16)
    obs, _ = env.reset(seed=0)
    a, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.unwrapped.action_masks()[int(a)]


def test_the_policy_reads_the_growth_rows():
    """GrowPolicy's encoder takes the `growth` rows with the job rows: changing them changes the
    logits (an env's own per-job features are not dropped)."""
    from sb3_contrib import MaskablePPO

    from agents.policies import GrowPolicy, action_logits

    env = make(max_jobs=8)
    model = MaskablePPO(GrowPolicy, env, seed=0, device="cpu")
    obs, _ = env.reset(seed=0)
    other = {**obs, "growth": obs["growth"].copy()}
    other["growth"][:, 4] = 0.25
    assert not np.allclose(action_logits(model, obs).numpy(), action_logits(model, other).numpy())


def test_growth_constants_are_pollux_with_one_max_growth():
    from benchmarks import pollux_growth as pg
    from dlclusterenv.schedulers import make as make_policy

    assert pg.GRID[0] == 2.0 and pg.GRID[-1] == 64.0
    for g in pg.GRID:
        s = make_policy(f"benchmarks.pollux_growth:Growth{g:g}")
        assert type(s).__mro__[1] is Pollux and s.max_growth == g
    assert pg.Growth2().name == "pollux-growth2"
    with pytest.raises(SystemExit, match="--instance: 'nope'"):
        pg.main(["--instance", "nope"])
    shared_file("traces", "philly_jobs.csv")  # the instance below is a Philly one
    with pytest.raises(SystemExit, match="test seeds"):
        pg.main(["--seeds", "0,1000"])


def test_decision_plot_labels_and_job_size_panel():
    from dlclusterenv.plots import shape_choices

    recs = [{"waiting": w, "free_gpus": g, "job_gpus": j, "shape": s}
            for w, g, j, s in [(0, 60, 1, 0), (3, 20, 8, 1), (12, 8, 16, 2), (30, 2, 2, 0)]]
    fig = shape_choices(recs, [], labels=["x2", "x4", "x8"])
    assert len(fig.axes) == 3 and "asked for" in fig.axes[2].get_xlabel()
    assert [t.get_text() for t in fig.axes[2].get_legend().get_texts()] == ["x2", "x4", "x8"]
    plain = [{k: v for k, v in r.items() if k != "job_gpus"} for r in recs]
    assert len(shape_choices(plain, [(1, 1), (1, 2), (2, 4)]).axes) == 2


def test_bad_must_choose_names_the_option():
    with pytest.raises(ConfigError, match="must_choose"):
        make(must_choose="yes")


def test_hindsight_bound_picks_each_runs_best_growth_over_pollux():
    from benchmarks import pollux_growth as pg

    jct = {(0, 1000): {2.0: 100.0, 4.0: 90.0, 8.0: 95.0, 64.0: 120.0},  # x4 best here
           (1, 1000): {2.0: 200.0, 4.0: 210.0, 8.0: 180.0, 64.0: 140.0}}  # x64 best here
    rows = [{"growth": g, "window": w, "seed": s, "avg_jct_s": v} for (w, s), d in jct.items() for g, v in d.items()]
    h = pg.hindsight(rows)
    assert h[2.0]["mean"] == 1.0 and h["best"]["n"] == 2
    assert h["best"]["mean"] == pytest.approx((0.9 + 0.7) / 2)
    assert h[64.0]["mean"] == pytest.approx((1.2 + 0.7) / 2) and h[4.0]["mean"] == pytest.approx((0.9 + 1.05) / 2)
    assert all(h["best"]["mean"] < h[g]["mean"] for g in pg.GRID)


def rule_growths(rule) -> dict[str, float]:
    """The growth limit each job of tiny (seed 0) got from `rule`."""
    from dlclusterenv import make_sim

    make_sim("tiny", 0).run(rule)
    return dict(rule.growth)


def test_growth_rule_sets_each_jobs_limit_from_its_feature():
    from benchmarks.pollux_growth import GrowthRule
    from dlclusterenv import make_sim

    sim = make_sim("tiny", 0)
    sim.run(Pollux())
    sizes = {j.job_id: j.spec.num_workers for j in sim.jobs.values()}
    assert len(set(sizes.values())) > 1  # tiny's jobs ask for different sizes, so tau splits them
    tau = sorted(set(sizes.values()))[0]
    by_size = rule_growths(GrowthRule("size", tau, hi=8.0, lo=4.0))
    assert by_size == {k: 8.0 if w <= tau else 4.0 for k, w in sizes.items()}
    assert rule_growths(GrowthRule("size", 64, hi=8.0, lo=4.0)) == dict.fromkeys(sizes, 8.0)  # tau
    assert set(rule_growths(GrowthRule("load", 1e-9, hi=8.0, lo=4.0)).values()) == {4.0}  # load > 0
    assert set(rule_growths(GrowthRule("load", 1e9, hi=8.0, lo=4.0)).values()) == {8.0}
    # tiny, seed 0: GPUs asked over the cluster's at each arrival 0.125, 0.375, ..., 1.75 (8 jobs)
    light = rule_growths(GrowthRule("load", 0.5, hi=8.0, lo=4.0))
    assert sorted(light.values()) == [4.0] * 6 + [8.0] * 2


def test_growth_rule_with_one_limit_is_pollux_with_it():
    from benchmarks.pollux_growth import GrowthRule

    assert decision_log("tiny", GrowthRule("load", 0.5, hi=2.0, lo=2.0), 0) == pollux_log()
    assert decision_log("tiny", GrowthRule("size", 2, hi=64.0, lo=64.0), 0) == pollux_log(64.0)


@pytest.mark.parametrize("kw, field", [({"feature": "queue"}, "feature"), ({"tau": 0}, "tau"),
                                       ({"hi": float("nan")}, "hi"), ({"lo": -2}, "lo")])
def test_growth_rule_bad_arguments_name_the_field(kw, field):
    from benchmarks.pollux_growth import GrowthRule

    args = {"feature": "load", "tau": 0.5, **kw}
    with pytest.raises(ValueError, match=field):
        GrowthRule(**args)


def test_run_splits_avg_jct_by_job_size(monkeypatch):
    from benchmarks import pollux_growth as pg

    r = pg.run_one((2.0, 0, "tiny", 0))
    # tiny, seed 0, workers asked for in arrival order: 1, 2, 2, 2, 3, 2, 2, 2
    assert (r["jobs_small"], r["jobs_big"]) == (7, 1)
    whole = (r["avg_jct_small_s"] * r["jobs_small"] + r["avg_jct_big_s"] * r["jobs_big"]) / 8
    assert whole == pytest.approx(r["avg_jct_s"], rel=1e-12)
    monkeypatch.setattr(pg, "SMALL", 1)
    assert pg.run_one((2.0, 0, "tiny", 0))["jobs_small"] == 1


def test_rules_and_by_size_tables_on_a_tiny_instance(monkeypatch, tmp_path, capsys):
    import json
    from types import SimpleNamespace

    from benchmarks import pollux_growth as pg

    inst = SimpleNamespace(entry=SimpleNamespace(test=SimpleNamespace(seeds=[1000])),
                           runs=lambda split: [(0, "tiny", 0)] if split == "train" else [])
    a = SimpleNamespace(seeds="0", workers=1, instance="tiny-test", out=str(tmp_path / "r.json"))
    monkeypatch.setattr(pg, "RULES", (("size", 2, 64.0, 2.0),))
    pg.rules(inst, a)
    out = json.loads((tmp_path / "r.json").read_text())
    rules, jct = out["rules"], {str(r["growth"]): r["avg_jct_s"] for r in out["runs"]}
    assert list(rules) == ["x2 for every job", "x64 for every job", "pollux-growth-size<=2?x64:x2"]
    assert rules["x2 for every job"]["over_x2"]["mean"] == 1.0
    assert rules["x64 for every job"]["over_x2"]["mean"] == jct["64.0"] / jct["2.0"] != 1.0
    pg.by_size(inst, a)
    by = json.loads((tmp_path / "r.json").read_text())["by_size"]
    assert len(by) == 4 and by["x2 for every job"]["all"] == rules["x2 for every job"]["train_avg_jct_s"]
    assert "small jobs" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="test seeds"):
        pg.rules(inst, SimpleNamespace(**{**vars(a), "seeds": "1000"}))

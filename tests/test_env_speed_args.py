"""benchmarks/env_speed.py refuses counts it cannot time (a zero --repeats was a bare max() error),
and its --profile lists where a step's time goes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import env_speed  # noqa: E402


@pytest.mark.parametrize(("args", "name"), [(["--repeats", "0"], "--repeats"), (["--steps", "0"], "--steps"),
                                            (["--num-envs", "16", "0"], "--num-envs"),
                                            (["--profile", "0"], "--profile"), (["--top", "0"], "--top")])
def test_a_count_below_one_is_a_usage_error_naming_it(args, name, capsys):
    with pytest.raises(SystemExit) as e:
        env_speed.main(args)
    assert e.value.code == 2 and f"{name}: 0 is not a positive whole number" in capsys.readouterr().err


def test_profile_lists_the_step_and_the_simulator_per_step(capsys):
    rows = env_speed.profile(env_speed.gym.make("DLClusterPlace-v0", scenario="tiny"), 60, 400)
    by_name = {fn.rpartition("(")[2].rstrip(")"): (own, incl, calls) for fn, own, incl, calls in rows}
    own, incl, calls = by_name["_step"]
    assert calls == 1.0 and incl >= own > 0  # one env step per step, its callees included
    assert by_name["advance"][1] > 0 and by_name["advance"][1] < incl  # the simulator is inside it
    env_speed.main(["--profile", "30", "--top", "5", "--scenario", "tiny", "--ids", "DLClusterJoint-v0"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("DLClusterJoint-v0 on tiny, 30 random masked steps") and len(out) == 2 + 5


def test_the_default_ids_leave_out_the_slow_grow_env_and_no_num_envs_skips_the_batched_part(capsys):
    ap_ids = [i for i in env_speed.dlclusterenv.ENV_IDS if i not in env_speed.SLOW_IDS]
    assert "DLClusterGrow-v0" in env_speed.dlclusterenv.ENV_IDS and "DLClusterGrow-v0" not in ap_ids
    env_speed.main(["--scenario", "tiny", "--steps", "20", "--repeats", "1", "--num-envs",
                    "--ids", "DLClusterJoint-v0"])
    out = capsys.readouterr().out
    assert "DLClusterJoint-v0" in out and "batched" not in out
    env_speed.main(["--scenario", "tiny", "--steps", "20", "--repeats", "1", "--num-envs", "2",
                    "--ids", "DLClusterJoint-v0", "--no-sync"])
    assert "batched, 2 envs" in capsys.readouterr().out


@pytest.mark.parametrize("width", [6, 300])  # the batch at once; row by row
def test_masked_choice_is_uniform_over_each_rows_valid_actions(width):
    masks = np.zeros((3, width), dtype=bool)
    masks[0, [1, 3, 4]] = masks[1, 0] = masks[2, 5] = True
    rng = np.random.default_rng(0)
    draws = np.array([env_speed.masked_choice(masks, rng) for _ in range(3000)])
    assert masks[np.arange(3), draws].all()  # only valid actions
    counts = np.bincount(draws[:, 0], minlength=6)[[1, 3, 4]]
    assert counts.sum() == 3000 and counts.min() > 900  # each of the three about 1,000 times
    assert (draws[:, 1] == 0).all() and (draws[:, 2] == 5).all()
    with pytest.raises(ValueError, match="env 1 has no valid action"):
        env_speed.masked_choice(np.array([[1, 0], [0, 0]], dtype=bool), rng)

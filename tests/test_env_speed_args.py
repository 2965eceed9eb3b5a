"""benchmarks/env_speed.py refuses counts it cannot time (a zero --repeats was a bare max() error)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import env_speed  # noqa: E402


@pytest.mark.parametrize(("args", "name"), [(["--repeats", "0"], "--repeats"), (["--steps", "0"], "--steps"),
                                            (["--num-envs", "16", "0"], "--num-envs")])
def test_a_count_below_one_is_a_usage_error_naming_it(args, name, capsys):
    with pytest.raises(SystemExit) as e:
        env_speed.main(args)
    assert e.value.code == 2 and f"{name}: 0 is not a positive whole number" in capsys.readouterr().err

"""benchmarks/flowcon_alpha_seeds.py: its seed set 0 is the reproduction's alpha-sensitivity
figure, computed the same way, and other sets give other draws."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import flowcon_alpha_seeds as fas  # noqa: E402

from baselines.reproduce import flowcon  # noqa: E402


def test_set_zero_is_the_reproductions_alpha_sensitivity():
    claim = next(c for c in flowcon.run(seeds=3) if c.claim.startswith("alpha sensitivity"))
    s, col = fas.spread(range(3))
    assert s == pytest.approx(claim.sim_value, abs=1e-9)
    assert len(col) == len(flowcon.FIG5)


def test_sets_are_different_draws_and_summarised():
    out = fas.main(["--sets", "2", "--seeds", "2"])
    assert out["sets"] == 2 and out["min"] < out["max"]
    assert out["min"] <= out["median"] <= out["max"]
    with pytest.raises(SystemExit):
        fas.main(["--sets", "0"])

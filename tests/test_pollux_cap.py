"""benchmarks/pollux_cap.py: its four variants differ only where documented (the cap and p)."""

from baselines.pollux import Pollux, PolluxOracle
from benchmarks.pollux_cap import CappedOracle, run, variants


def test_variants_caps_and_power():
    v = variants(1.0)
    assert {s.p for s in v.values()} == {1.0}
    assert type(v["pollux"]) is Pollux and v["pollux"].max_growth == 2.0
    assert v["pollux uncapped"].max_growth == 64.0
    assert type(v["oracle"]) is PolluxOracle and isinstance(v["oracle capped"], CappedOracle)
    assert v["oracle capped"].cap.__func__ is Pollux.cap


def test_run_reports_each_variant():
    r = run("tiny", 0, -1.0)
    assert set(r) == set(variants(-1.0)) and all(x > 0 for x in r.values())

"""benchmarks/optimus_philly_epochs.py: its instrumented Optimus only records (the diagnosis compares
its logs with plain Optimus' JCTs), and its truth variants do read the truth."""

import importlib.util
from pathlib import Path

from baselines.optimus import Optimus
from dlclusterenv import make_sim

_spec = importlib.util.spec_from_file_location(
    "optimus_philly_epochs", Path(__file__).parent.parent / "benchmarks" / "optimus_philly_epochs.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _run(pol):
    sim = make_sim("default", 0)
    pol.sim = sim
    return sim.run(pol).summary(), pol


def test_logged_optimus_decides_as_optimus():
    plain, _ = _run(Optimus())
    logged, pol = _run(bench.LoggedOptimus())
    assert logged == plain
    assert pol.est and all(v[3] >= 1.0 and v[2] >= 1.0 for v in pol.est.values())
    st = bench.stats(pol)
    assert 0.0 <= st["fallback_share"] < 1.0 and st["fit_abs"] >= 0.0


def test_truth_variant_reads_the_truth():
    plain, _ = _run(Optimus())
    truth, pol = _run(bench.LoggedOptimus("all"))
    assert truth != plain  # the estimate matters on default; the truth is what it returned
    assert any(abs(v[2] - v[3]) > 1.0 for v in pol.est.values())  # it logged its own estimate apart


def test_the_old_bias_stream_gives_mains_decisions_before_bias7():
    """The script's loss-stream bias (Job.draw_bias until branch bias7) reproduces Optimus'
    decisions on main 9c985a2 (its MAIN_LOGS digest, seed 0), and the block restores draw_bias."""
    from dlclusterenv.jobs import Job
    from helpers import decision_digest

    shipped = Job.draw_bias
    with bench.bias_drawn(bench._bias_from_loss_stream):
        old = decision_digest("default", "optimus", 0)
    assert Job.draw_bias is shipped
    assert old == "544b38dfd8fb9607"
    assert decision_digest("default", "optimus", 0) != old

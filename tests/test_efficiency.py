"""Statistical efficiency (dlclusterenv/efficiency.py, issue 11): Pollux's E(M) = (phi + M0) / (phi + M)
(Qiao et al., OSDI'21, Eq. 7) applied to a job's progress, phi piecewise in the fraction of its work."""

from __future__ import annotations

import pytest

import baselines
from baselines.fixed import FixedShape
from dlclusterenv import efficiency, make_sim
from dlclusterenv.api import Decision
from dlclusterenv.config import ConfigError
from dlclusterenv.efficiency import PGNS, EfficiencyConfig, PhiTable
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator
from dlclusterenv.workload import load_scenario

from helpers import make_cluster, make_zoo, model_dict

# toy: local batch 2, phi 10 over the first half of the work and 40 over the second
TOY = EfficiencyConfig.model_validate({
    "source": "inline test table",
    "measured": {"toy": {"source": "inline", "m0": 2, "phi": [[0.0, 10.0], [0.5, 40.0]]}},
    "models": {"toy": {"measured": "toy", "local_batch": 2, "why": "itself"}},
})
WORK = 12_000.0  # local batches


def toy_sim(workers: int, eff=None) -> Simulator:
    cluster = make_cluster(nodes_per_rack=1, cpus=32)
    zoo = make_zoo(toy=model_dict())
    spec = JobSpec("j", "toy", 0.0, 1, workers, work_steps=WORK)
    return Simulator(cluster, [spec], zoo, efficiency=eff or efficiency.Efficiency())


def run_alone(sim: Simulator) -> float:
    """Place the job's tasks on node 0 at t = 0 and run it to the end; its speed (local batches/s)."""
    job = sim.jobs["j"]
    sim.apply(Decision(place={t: 0 for t in job.tasks}))
    speed = sim.rates().speed["j"]
    while not sim.done:
        sim.advance()
    return speed


def test_efficiency_formula_known_case():
    t = PhiTable((0.0,), (1000.0,), 32)
    assert t.efficiency(0, 16) == pytest.approx(1032 / 1512)  # M0 = 32, M = 512
    assert t.efficiency(0, 1) == 1.0  # one worker: exactly no loss
    assert t.mean_inverse(16) == pytest.approx(1512 / 1032)
    two = PhiTable((0.0, 0.25), (10.0, 40.0), 2)
    assert two.mean_inverse(16) == pytest.approx(0.25 * 42 / 12 + 0.75 * 72 / 42)


def test_engine_and_scheduler_views_share_one_formula():
    """PhiTable (the engine) and JobView (what schedulers read) both compute efficiency.gain: equal
    to the last bit over a grid of phi, local batch and workers; inf phi in a view means E = 1."""
    import dataclasses
    import math

    from dlclusterenv.efficiency import gain

    view = toy_sim(16, PGNS(TOY)).view().jobs[0]
    for phi in (0.3, 10.0, 1234.5678, 1e9):
        for b in (1, 7, 32, 256):
            t = PhiTable((0.0,), (phi,), b)
            for w in (1, 2, 3, 16, 64):
                v = dataclasses.replace(view, noise_scale=phi, local_batch=b)
                assert t.efficiency(0, w) == v.efficiency(w) == gain(phi, b, w) == (phi + b) / (phi + w * b)
    assert dataclasses.replace(view, noise_scale=math.inf).efficiency(16) == 1.0


def test_sixteen_workers_finish_later_and_at_the_predicted_time():
    plain = toy_sim(16)
    v = run_alone(plain)
    assert plain.jobs["j"].finish_s == pytest.approx(WORK / v, rel=1e-12)
    sim = toy_sim(16, PGNS(TOY))
    assert run_alone(sim) == v  # speed in local batches/s is unchanged
    # half the work at E = 12/42, the other half at E = 42/72
    predicted = (WORK / 2) / (v * 12 / 42) + (WORK / 2) / (v * 42 / 72)
    job = sim.jobs["j"]
    assert job.finish_s == pytest.approx(predicted, rel=1e-12)
    assert job.finish_s > plain.jobs["j"].finish_s * 2
    assert job.steps_done == WORK and job.eff_bucket == 1


def test_one_worker_loses_nothing():
    plain, sim = toy_sim(1), toy_sim(1, PGNS(TOY))
    run_alone(plain), run_alone(sim)
    assert sim.jobs["j"].finish_s == pytest.approx(plain.jobs["j"].finish_s, rel=1e-12)


def test_projected_job_seconds_is_the_exact_remaining_time():
    """The JCT reward's potential integrates the efficiency over the buckets left."""
    sim = toy_sim(16, PGNS(TOY))
    job = sim.jobs["j"]
    sim.apply(Decision(place={t: 0 for t in job.tasks}))
    projected = sim.projected_job_seconds()
    while not sim.done:
        sim.advance()
    assert projected == pytest.approx(job.finish_s, rel=1e-12)


def test_bucket_edge_at_a_decision_point_does_not_stall():
    """Ticks that land on and around the bucket edge: the run ends with the exact work done."""
    v = run_alone(toy_sim(16))
    t_edge = (WORK / 2) / (v * 12 / 42)
    sim = toy_sim(16, PGNS(TOY))
    sim.tick_s = t_edge / 3  # the third tick is the edge itself
    job = sim.jobs["j"]
    sim.apply(Decision(place={t: 0 for t in job.tasks}))
    while not sim.done:
        sim.advance()
    assert job.finish_s == pytest.approx(t_edge + (WORK / 2) / (v * 42 / 72), rel=1e-12)


def _default(eff: str):
    sc, _ = load_scenario("default")
    return sc.model_copy(update={"efficiency": eff})


def test_scenario_field_changes_the_run_and_none_is_the_default():
    rule = FixedShape(8, 8, "consolidate")
    off = make_sim("default", 0).run(rule).summary()
    assert make_sim(_default("none"), 0).run(rule).summary() == off
    on = make_sim(_default("pgns"), 0).run(rule).summary()
    assert on["avg_jct_s"] > off["avg_jct_s"]
    assert make_sim(_default("pgns"), 0).run(rule).summary() == on  # deterministic


def test_bad_efficiency_value_is_named():
    sc, _ = load_scenario("default")
    data = sc.model_dump()
    data["efficiency"] = "pgsn"
    with pytest.raises(ConfigError, match=r"efficiency.*'pgsn'"):
        load_scenario(data)
    with pytest.raises(ConfigError, match="efficiency: unknown 'x'"):
        efficiency.make("x")


def test_unmapped_model_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match=r"no entry for zoo model 'other'"):
        Simulator(make_cluster(), [JobSpec("j", "other", 0.0, 1, 1)], make_zoo(other=model_dict()),
                  efficiency=PGNS(TOY))
    # an async job has E = 1, mapped or not
    Simulator(make_cluster(), [JobSpec("j", "other", 0.0, 1, 1)], make_zoo(other=model_dict(sync=False)),
              efficiency=PGNS(TOY))


@pytest.mark.parametrize("phi, msg", [([[0.1, 5.0]], "begin at 0"), ([[0.0, 5.0], [0.0, 6.0]], "rise"),
                                      ([[0.0, -1.0]], "> 0")])
def test_bad_phi_table_is_named(phi, msg):
    data = TOY.model_dump()
    data["measured"]["toy"]["phi"] = phi
    with pytest.raises(ConfigError, match=rf"measured.toy.*{msg}"):
        efficiency.validate(EfficiencyConfig, data, "inline.yaml")


def test_shipped_config_maps_every_model_of_the_pgns_scenarios():
    cfg = efficiency.load_config()
    for m in cfg.measured.values():
        assert m.scored is not None and m.phi[0][0] == 0.0
    zoo = make_sim("default", 0).zoo
    for name in ("ResNet-50", "VGG-16", "ResNeXt-110", "AlexNet", "Inception-V3", "LSTM-Video",
                 "SuperResolution", "RHN", "MI-LSTM"):
        assert PGNS(cfg).table(name, zoo.models[name]) is not None


def test_replayed_trace_job_keeps_its_duration_with_efficiency(tmp_path):
    """The replay divides the work by the mean 1 / E at the trace's size, so that run at that size
    a job still takes its trace duration (workload.replay_work)."""
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                     "2017-10-01 00:00:00,7200,4,28800,vc1\n2017-10-02 00:00:00,3000,8,24000,vc1\n")
    sc = {"name": "t", "cluster": "tiny", "efficiency": "pgns", "workload": {
        "kind": "trace", "models": {"ResNet-50": 1}, "comm": "allreduce", "trace": {"path": str(trace)}}}
    sim = make_sim(sc, seed=0)
    sim.run(baselines.FIFO(placer="consolidate"))  # each job at its trace size, consolidated
    for spec, dur in zip(sim.specs, (7200.0, 3000.0)):
        job = sim.jobs[spec.job_id]
        assert job.finish_s - job.first_start_s == pytest.approx(dur, rel=1e-6)


def test_fidelity_scores_each_table_on_its_other_file(capsys):
    """`dlcluster fidelity`'s efficiency section: the prediction uses the fit file's table only."""
    from dlclusterenv.fidelity import _print_efficiency

    cfg = efficiency.load_config()
    out = efficiency.fidelity_report(cfg)
    bert = out["models"]["bert"]  # m0 12, phi 423 then 1124 (halves), 12 -> 96
    assert (bert["fit_batch"], bert["batch"]) == (12, 96)
    by_hand = 0.5 * (423 + 96) / (423 + 12) + 0.5 * (1124 + 96) / (1124 + 12)
    assert bert["whole"]["predicted"] == pytest.approx(by_hand)
    assert bert["whole"]["rel_err"] == pytest.approx(by_hand / 1.0207 - 1)
    assert set(out["models"]) == set(cfg.measured)
    assert out["summary"]["whole"]["median_abs_rel_err"] >= 0
    _print_efficiency(out)
    assert "deepspeech2" in capsys.readouterr().out


def test_oracle_sees_the_true_efficiency():
    """optimus-oracle and srtf-oracle read it through view.oracle (Optimus itself does not)."""
    sim = toy_sim(16, PGNS(TOY))
    o = sim.view(oracle=True).oracle
    assert o.efficiency("j", 1) == 1.0
    assert o.efficiency("j", 16) == pytest.approx(1 / (0.5 * 42 / 12 + 0.5 * 72 / 42))
    assert o.remaining_batches("j", 16) == pytest.approx(WORK * (0.5 * 42 / 12 + 0.5 * 72 / 42))
    plain = toy_sim(16).view(oracle=True).oracle
    assert plain.efficiency("j", 16) == 1.0 and plain.remaining_batches("j", 16) == WORK


@pytest.mark.parametrize("policy", ["optimus", "optimus-oracle", "srtf-oracle"])
def test_optimus_and_oracles_run_with_efficiency(policy):
    from dlclusterenv import schedulers

    m = make_sim(_default("pgns"), 0).run(schedulers.make(policy))
    assert m.jobs_unfinished == 0


def _derive():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "derive_efficiency.py"
    spec = importlib.util.spec_from_file_location("derive_efficiency", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_derivation_recovers_m0_and_phi_of_a_synthetic_run():
    """benchmarks/derive_efficiency.py on rows made with M0 = 64 and a run at B = 256 (s = 4):
    per-epoch AdaScale gain r = (nu + 1) / (nu / s + 1); phi = M0 x nu."""
    d = _derive()
    rows, p, it = [], 0.0, 0.0
    for k, nu in enumerate([0.5, 0.5, 2.0, 2.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0]):
        gain = (nu + 1) / (nu / 4 + 1)
        p, it = p + 100.0, it + 100.0 / gain
        rows.append({"progress": p, "iteration": it, "metric": k, "grad_sqr": 1.0, "grad_var": nu})
    assert d.infer_m0(rows, 256) == 64
    table = d.phi_table(rows, 64, 5)
    assert [s for s, _ in table] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert [phi for _, phi in table] == pytest.approx([32.0, 128.0, 512.0, 512.0, 512.0])
    # a run at M0 itself (iterations = progress) is its own unit
    assert d.infer_m0([dict(r, iteration=r["progress"]) for r in rows], 200) == 200

"""GPU types change speed (issue 17): measured single-GPU speed per type, sync jobs wait for the
slowest worker, unmeasured types are refused, presets run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import CONFIG_DIR, ClusterConfig, ConfigError, ModelSpec, load_zoo
from dlclusterenv.jobs import Job, JobSpec
from dlclusterenv.profiles import family_rule_check, gpu_step_table, shared_dir
from dlclusterenv.sim import DEFAULT_PACKING
from dlclusterenv.speed import SpeedError, alone_speed
from dlclusterenv.workload import build

from helpers import model_dict, shared_file

GAVEL_ZOO = load_zoo(CONFIG_DIR / "zoos" / "gavel.yaml")


def typed_cluster(*gpu_models: str, gpus: int = 1):
    """One rack, one node per entry, each with `gpus` GPUs of that model."""
    types = {f"t{i}": {"cpus": 32, "memory_gb": 256, "gpus": gpus, "gpu_memory_gb": 16,
                       "gpu_model": g, "nic_MBps": 1250} for i, g in enumerate(gpu_models)}
    return build_cluster(ClusterConfig.model_validate({
        "name": "typed", "source": "inline test", "node_types": types,
        "racks": [{"uplink_MBps": 1e5, "nodes": [{"type": t, "count": 1} for t in types]}],
        "overheads": {"rpc_s": 0.0}}))


def speed(cluster, model: str, worker_nodes, zoo=GAVEL_ZOO) -> float:
    job = Job(JobSpec("j", model, 0.0, 0, len(worker_nodes)), zoo.models[model],
              np.random.default_rng(0), total_epochs=1)
    return alone_speed(cluster, job, [], worker_nodes, build_cluster("tiny").config.overheads,
                       DEFAULT_PACKING)


def _gavel_json():
    return json.loads(shared_file("profiles", "gavel_throughputs.json").read_text())


@pytest.mark.parametrize("gpu", ["K80", "P100", "V100", "T4"])
def test_single_gpu_speed_is_the_zoo_measurement(gpu):
    cluster = typed_cluster(gpu)
    for name, m in GAVEL_ZOO.models.items():
        if gpu.lower() in m.gpu_step_s:
            assert speed(cluster, name, [0]) == pytest.approx(1.0 / m.gpu_step_s[gpu.lower()], rel=1e-12)


def test_single_gpu_speed_equals_gavel_json():
    data = _gavel_json()
    for gpu in ("k80", "p100", "v100"):
        cluster = typed_cluster(gpu.upper())
        got = speed(cluster, "ResNet-50-b32", [0])
        assert got == pytest.approx(data[gpu]["('ResNet-50 (batch size 32)', 1)"]["null"], rel=1e-12)


def test_zoo_numbers_are_the_derivation():
    _gavel_json()
    table = gpu_step_table(shared_dir())
    for m in GAVEL_ZOO.models.values():
        job = m.source.split("'")[1]
        assert m.gpu_step_s == table[job]


def test_family_rule_predicts_held_out_ratios_within_20_percent():
    _gavel_json()
    assert family_rule_check(shared_dir())["median"] <= 0.20


def test_sync_job_runs_at_its_slowest_worker():
    mixed = speed(typed_cluster("K80", "V100"), "ResNet-50-b32", [0, 1])
    slow = speed(typed_cluster("K80", "K80"), "ResNet-50-b32", [0, 1])
    fast = speed(typed_cluster("V100", "V100"), "ResNet-50-b32", [0, 1])
    assert mixed == pytest.approx(slow, rel=1e-12)
    assert fast > 2 * mixed


def test_alias_v100_variants_run_at_v100_speed():
    a = speed(typed_cluster("V100M32"), "ResNet-18-b32", [0])
    assert a == pytest.approx(speed(typed_cluster("V100"), "ResNet-18-b32", [0]), rel=1e-12)


def test_type_agnostic_model_ignores_gpu_type():
    zoo = type(GAVEL_ZOO)(models={"m": ModelSpec.model_validate(
        model_dict(compute_on="gpu", worker={"gpu": 1}, comm="allreduce", step_compute_s=0.2))})
    assert speed(typed_cluster("K80"), "m", [0], zoo) == speed(typed_cluster("V100"), "m", [0], zoo)


def test_unmeasured_gpu_type_is_a_clear_error():
    with pytest.raises(SpeedError, match=r"'Transformer-b64'.*'t4'"):
        speed(typed_cluster("T4"), "Transformer-b64", [0])
    sc = {"name": "x", "cluster": "alibaba_types", "models_file": "configs/zoos/gavel.yaml",
          "workload": {"kind": "uniform", "num_jobs": 2, "window_s": 10, "models": {"Transformer-b64": 1}}}
    with pytest.raises(ConfigError, match=r"Transformer-b64.*'t4'.*alibaba_types"):
        build(sc)


def test_gpu_step_s_validation():
    with pytest.raises(ValueError, match="lower case"):
        ModelSpec.model_validate(model_dict(compute_on="gpu", worker={"gpu": 1}, gpu_step_s={"V100": 0.1}))
    with pytest.raises(ValueError, match="compute_on is not 'gpu'"):
        ModelSpec.model_validate(model_dict(gpu_step_s={"v100": 0.1}))
    with pytest.raises(ValueError, match="greater than 0"):
        ModelSpec.model_validate(model_dict(compute_on="gpu", worker={"gpu": 1}, gpu_step_s={"v100": 0}))


@pytest.mark.parametrize("scenario", ["hetero_mixed", "alibaba_types"])
def test_presets_build(scenario):
    sc, cluster, zoo, jobs = build(scenario)
    assert len(set(cluster.node_gpu_type)) >= 3 and jobs


# ----------------------------------------------------------------------------- co-location
from dlclusterenv.api import Decision  # noqa: E402
from dlclusterenv.profiles import (colocation_report, colocation_table, fit_colocation,  # noqa: E402
                                   fit_colocation_features, gavel_alone, load_gavel)
from dlclusterenv.sim import Simulator  # noqa: E402
from dlclusterenv.speed import Colocation  # noqa: E402

COLOC = Colocation.load(CONFIG_DIR / "colocation" / "gavel.yaml")


def packed_speeds(gpu_model: str, models: list[str], mode: str = "pack") -> dict[str, float]:
    """Each job's speed over its alone speed, all single-GPU jobs on GPU 0 of one node."""
    cluster = typed_cluster(gpu_model)
    specs = [JobSpec(f"j{i}", m, 0.0, 0, 1) for i, m in enumerate(models)]
    sim = Simulator(cluster, specs, GAVEL_ZOO, seed=0)
    sim.apply(Decision(place={f"j{i}/w0": ("r0-n0", 0) for i in range(len(models))},
                       gpu_mode={"r0-n0/g0": mode}))
    speed = sim.rates().speed
    t = cluster.node_gpu_type[0]
    return [speed[f"j{i}"] * GAVEL_ZOO.models[m].gpu_step_s[t] for i, m in enumerate(models)]


def test_measured_pair_gives_each_job_its_own_factor():
    got = packed_speeds("V100", ["ResNet-50-b32", "A3C"])
    want = [COLOC.pairs["v100", "ResNet-50 (batch size 32)", "A3C"],
            COLOC.pairs["v100", "A3C", "ResNet-50 (batch size 32)"]]
    assert got == pytest.approx(want, rel=1e-9)
    assert abs(want[0] - want[1]) > 0.05  # the pair is asymmetric


def test_k_way_packing_adds_the_pairs_slowdowns():
    models = ["ResNet-18-b32", "LM-b20", "A3C"]
    names = [GAVEL_ZOO.models[m].gavel_job for m in models]
    got = packed_speeds("P100", models)
    want = [1 / (1 + sum(1 / COLOC.pairs["p100", a, b] - 1 for b in names if b != a)) for a in names]
    assert got == pytest.approx(want, rel=1e-9)
    # a third job slows the first two further than its pair alone would
    assert got[0] < packed_speeds("P100", models[:2])[0]


def test_unmeasured_pair_uses_the_fit():
    c = Colocation({"v100": {"fit": {"A": [0.5, 2.0], "B": [1.0, 0.5]}, "pairs": [["A", "A", 0.4, 0.4]]}})
    assert c.factors("v100", ["A", "B"]) == pytest.approx([1 / (1 + 0.5 * 0.5), 1 / (1 + 1.0 * 2.0)])
    assert c.factors("v100", ["A", "A", "B"]) == pytest.approx(
        [1 / (1 + (1 / 0.4 - 1) + 0.25)] * 2 + [1 / (1 + 2 * 2.0)])


def test_unmeasured_gpu_type_uses_the_pairs_mean_over_measured_types():
    got = packed_speeds("T4", ["ResNet-18-b32", "ResNet-50-b32"])
    names = ["ResNet-18 (batch size 32)", "ResNet-50 (batch size 32)"]
    gm = [np.exp(np.mean([np.log(COLOC.pairs[g, a, b]) for g in ("k80", "p100", "v100")]))
          for a, b in (names, names[::-1])]
    assert got == pytest.approx(gm, rel=1e-9)


def test_time_slicing_ignores_colocation():
    got = packed_speeds("V100", ["ResNet-50-b32", "A3C"], mode="timeslice")
    assert got[0] == pytest.approx(got[1], rel=1e-12)


def test_colocation_file_is_the_derivation_and_meets_the_in_sample_target():
    _gavel_json()
    by_gpu = load_gavel(shared_dir() / "profiles" / "gavel_throughputs.json")
    table = colocation_table(by_gpu)
    for g, d in table.items():
        # per job: pytest 9.2's approx refuses a dict whose values are tuples
        assert d["fit"].keys() == COLOC.fit[g].keys()
        for job, v in d["fit"].items():
            assert tuple(v) == pytest.approx(tuple(COLOC.fit[g][job]), rel=1e-6), (g, job)
        for a, b, ra, rb in d["pairs"]:
            assert COLOC.pairs[g, a, b] == ra and COLOC.pairs[g, b, a] == rb
    rep = colocation_report(by_gpu)
    assert all(v["r2"] >= 0.6 for v in rep["in_sample"].values())
    lofo = rep["leave_family_out"]
    assert lofo["rmse"] < lofo["constant_rmse"]


def test_bad_colocation_file_names_it():
    with pytest.raises(ValueError, match="colo.yaml"):
        Colocation({"v100": {"fit": {"A": [1.0]}, "pairs": []}}, "colo.yaml")


def _synthetic_gavel(path, noise=0.0):
    """A small file in Gavel's format: 3 types x 3 families x 2 batches, ratios from a known
    1 / (1 + s_a p_b) whose ln p falls with ln steps/s (so the feature model has something to find)."""
    rng = np.random.default_rng(0)
    jobs = {f"{fam} (batch size {b})": (0.3 + 0.2 * i + 0.05 * k) for i, fam in enumerate(["X", "Y", "Z"])
            for k, b in enumerate([16, 32])}
    data = {}
    for t, (gpu, speedup) in enumerate({"k80": 1.0, "p100": 3.0, "v100": 4.0}.items()):
        alone = {j: speedup * (8.0 - 10 * u) for j, u in jobs.items()}
        entry = {}
        for a in jobs:
            row = {"null": alone[a]}
            for b in jobs:
                s_a, p_b = 0.8 + jobs[a], np.exp(-0.5 * np.log(alone[b]) + 0.2 * t)
                r_a = 1 / (1 + s_a * p_b) + noise * rng.normal()
                s_b, p_a = 0.8 + jobs[b], np.exp(-0.5 * np.log(alone[a]) + 0.2 * t)
                r_b = 1 / (1 + s_b * p_a) + noise * rng.normal()
                row[str((b, 1))] = [r_a * alone[a], r_b * alone[b]]
            entry[str((a, 1))] = row
        data[gpu] = entry
    # mirrors must agree: rebuild (b, a) from (a, b)
    for gpu, entry in data.items():
        for a in jobs:
            for b in jobs:
                if a < b:
                    ra, rb = entry[str((a, 1))][str((b, 1))]
                    entry[str((b, 1))][str((a, 1))] = [rb, ra]
            entry[str((a, 1))][str((a, 1))] = [entry[str((a, 1))][str((a, 1))][0]] * 2
    path.write_text(json.dumps(data))
    return path


def test_fidelity_gavel_pairs_prints_the_scores_of_a_small_file(tmp_path, capsys):
    from dlclusterenv.fidelity import FidelityError, cli

    path = _synthetic_gavel(tmp_path / "gavel.json")
    rep = colocation_report(load_gavel(path))
    cli("gavel-pairs", str(path), None, "T4", "allreduce", None, None)
    out = capsys.readouterr().out
    lf = rep["leave_family_out"]
    assert f"leave one family out: RMSE {lf['rmse']:.3f} (constant {lf['constant_rmse']:.3f}), n {lf['n']}" in out
    for g, v in rep["leave_gpu_out"].items():
        assert f"leave {g} out: RMSE {v['rmse']:.3f} (constant {v['constant_rmse']:.3f}), n {v['n']}" in out
    assert all(f"in sample {g:<5} R^2 1.000" in out for g in ("k80", "p100", "v100"))  # the data follow the form
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(FidelityError, match="bad.json"):
        cli("gavel-pairs", str(tmp_path / "bad.json"), None, "T4", "allreduce", None, None)


def test_feature_model_finds_pressure_falling_with_alone_speed(tmp_path):
    """profiles.fit_colocation_features (tried for issue 17, not adopted): on pairs whose pressure is
    exp(-0.5 ln steps/s + 0.2 t) on the t-th type, it finds a falling pressure, one intercept per type
    rising with t, and the mean intercept for a type it was not fitted on."""
    by_gpu = load_gavel(_synthetic_gavel(tmp_path / "gavel.json"))
    fits = {g: fit_colocation(by_gpu[g]) for g in by_gpu}
    alone = {j: v for j, v in gavel_alone(tmp_path / "gavel.json").items()}
    m = fit_colocation_features(fits, alone)
    assert m.weight["pressure"][0] < 0
    c = m.intercept["pressure"]
    assert c["k80"] < c["p100"] < c["v100"]
    assert m.sp("p40", [2.0])[1] == pytest.approx(np.exp((2.0 - m.mean[0]) / m.sd[0] * m.weight["pressure"][0]
                                                         + np.mean(list(c.values()))))
    # the feature is what moves it: a faster job exerts less pressure, on any type
    assert m.sp("k80", [3.0])[1] < m.sp("k80", [1.0])[1]


# ----------------------------------------------------------------------------- fractional GPUs
def frac_sim(millis, gpus=2):
    cluster = typed_cluster("V100", gpus=gpus)
    specs = [JobSpec(f"j{i}", "ResNet-50-b32", 0.0, 0, 1, gpu_milli=m) for i, m in enumerate(millis)]
    sim = Simulator(cluster, specs, GAVEL_ZOO, seed=0)
    for i in range(len(millis)):
        sim.place_one(f"j{i}/w0", 0)
    return sim


def test_two_half_gpu_tasks_share_one_gpu_by_packing():
    sim = frac_sim([500, 500])
    gpus = {sim.jobs[j].tasks[f"{j}/w0"].gpu for j in ("j0", "j1")}
    assert len(gpus) == 1 and sim.gpu_mode[gpus.pop()] == 1
    assert sim.free_gpus[0] == 1
    pair = COLOC.pairs["v100", "ResNet-50 (batch size 32)", "ResNet-50 (batch size 32)"]
    for j in ("j0", "j1"):
        assert sim.rates().speed[j] == pytest.approx(pair / GAVEL_ZOO.models["ResNet-50-b32"].gpu_step_s["v100"])


def test_fractions_that_do_not_fit_take_another_gpu_and_whole_tasks_never_share():
    sim = frac_sim([600, 600])
    assert sim.jobs["j0"].tasks["j0/w0"].gpu != sim.jobs["j1"].tasks["j1/w0"].gpu
    sim = frac_sim([1000, 300])
    assert sim.jobs["j0"].tasks["j0/w0"].gpu != sim.jobs["j1"].tasks["j1/w0"].gpu
    assert not sim.gpu_mode.any()
    from dlclusterenv.api import DecisionError
    with pytest.raises(DecisionError, match="no free GPU nor one with 800"):
        frac_sim([500, 500, 800], gpus=1)


def test_bad_gpu_milli_is_named():
    cluster = typed_cluster("V100")
    with pytest.raises(ValueError, match="j0: gpu_milli must be an integer in \\[1, 1000\\], got 0"):
        Simulator(cluster, [JobSpec("j0", "ResNet-50-b32", 0.0, 0, 1, gpu_milli=0)], GAVEL_ZOO)


def test_alibaba_fractional_pods_replay_as_shared_gpus(tmp_path):
    import yaml

    data = CONFIG_DIR.parent / "tests" / "data"
    cluster = tmp_path / "openb.yaml"
    cluster.write_text(yaml.safe_dump({
        "name": "openb", "source": "test node list",
        "node_list": {"path": str(data / "openb_node_list_test.csv"), "nodes_per_rack": 2,
                      "nic_MBps": 3125, "uplink_MBps": 6250}}))
    pods = tmp_path / "pods.csv"  # two 0.5-GPU pods at once, then the test list's fractional pod
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                    "deletion_time,scheduled_time\n"
                    "a,4000,8192,1,500,,LS,Running,0,1000,0\nb,4000,8192,1,500,,LS,Running,0,1000,0\n"
                    "c,4000,8192,1,460,,LS,Running,10,500,10\n")
    sc = {"name": "frac", "cluster": str(cluster),
          "workload": {"kind": "trace", "models": {"ResNet-50": 1},
                       "trace": {"path": str(pods), "format": "alibaba_csv"}}}
    _, _, _, specs = build(sc)
    assert [(s.job_id, s.num_workers, s.gpu_milli) for s in specs] == [("a", 1, 500), ("b", 1, 500), ("c", 1, 460)]
    skip = {**sc, "workload": {**sc["workload"], "trace": {**sc["workload"]["trace"], "fractional_gpu": "skip"}}}
    assert build(skip)[3] == []  # every pod is fractional: nothing left to replay
    import baselines
    from dlclusterenv import make_sim

    sim = make_sim(sc)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    sim.decide(fifo)  # the first decision, at t = 0
    a, b = (sim.jobs[j].tasks[f"{j}/w0"] for j in ("a", "b"))
    assert (a.node, a.gpu) == (b.node, b.gpu) and sim.gpu_mode[a.gpu] == 1
    assert sim.run(baselines.make("fifo")).jobs_finished == 3

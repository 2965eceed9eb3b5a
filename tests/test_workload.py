"""Workloads: every arrival process, trace replay honesty, and config errors that name the key."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import baselines
from dlclusterenv import ConfigError, make_sim
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import load_zoo
from dlclusterenv.jobs import convergence_epoch
from dlclusterenv.profiles import shared_dir
from dlclusterenv.traces import TraceError
from dlclusterenv.workload import Scenario, generate_jobs, load_scenario, prepare

ZOO = load_zoo()
TINY = build_cluster("tiny")
MIX = {"ResNet-50": 1, "ResNeXt-110": 1}


def jobs(workload: dict, seed: int = 0, cluster=TINY):
    sc, _ = load_scenario({"name": "t", "cluster": "tiny", "workload": workload})
    return generate_jobs(sc, cluster, ZOO, seed, "t")


def test_uniform_arrivals_in_window_and_seeded():
    a = jobs({"kind": "uniform", "num_jobs": 50, "window_s": 1000, "models": MIX})
    b = jobs({"kind": "uniform", "num_jobs": 50, "window_s": 1000, "models": MIX})
    c = jobs({"kind": "uniform", "num_jobs": 50, "window_s": 1000, "models": MIX}, seed=1)
    at = [s.arrival_s for s in a]
    assert all(0 <= t <= 1000 for t in at) and at == sorted(at)
    assert a == b and a != c


def test_poisson_mean_interarrival():
    a = jobs({"kind": "poisson", "num_jobs": 2000, "rate_per_s": 0.5, "models": MIX})
    gaps = np.diff([0.0] + [s.arrival_s for s in a])
    assert abs(gaps.mean() - 2.0) < 0.15


def test_fixed_schedule_kept():
    a = jobs({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 5, "num_workers": 2}]})
    assert (a[0].model, a[0].arrival_s, a[0].num_workers, a[0].num_ps) == ("ResNet-50", 5, 2, 1)


@pytest.mark.parametrize(
    "workload, needle",
    [
        ({"kind": "uniform", "num_jobs": 3, "window_s": 10, "models": {"NoSuchNet": 1}}, "NoSuchNet"),
        ({"kind": "uniform", "num_jobs": 3, "window_s": 10, "models": MIX, "bogus": 1}, "bogus"),
        ({"kind": "uniform", "num_jobs": "many", "window_s": 10, "models": MIX}, "num_jobs"),
        ({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "num_workers": 99}]}, "99 GPUs"),
    ],
)
def test_bad_workload_names_the_problem(workload, needle):
    with pytest.raises(ConfigError, match=needle):
        jobs(workload)


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="presets: .*default"):
        make_sim("no-such-scenario")


@pytest.mark.skipif(not (shared_dir() / "traces/philly_jobs.csv").exists(), reason="needs ../shared")
def test_philly_replay_is_labelled_synthetic_and_follows_durations():
    sc, _ = load_scenario("philly")
    sc = sc.model_copy(
        update={"workload": sc.workload.model_copy(
            update={"trace": sc.workload.trace.model_copy(update={"first_n": 300})})}
    )
    cluster = build_cluster(sc.cluster)
    specs = generate_jobs(sc, cluster, ZOO, 0, "philly")
    assert len(specs) == 300
    assert all("model" in s.synthetic for s in specs)
    from dlclusterenv.traces import load_philly_csv

    trace = load_philly_csv(shared_dir() / "traces/philly_jobs.csv", vc="11cb48",
                            start="2017-10-09", end="2017-10-16", first_n=300)
    assert [s.num_workers for s in specs] == [j.num_gpus for j in trace.jobs]
    # longer trace jobs get at least as many epochs as shorter ones of the same model and size
    by_key: dict = {}
    for s, j in zip(specs, trace.jobs):
        by_key.setdefault((s.model, s.num_workers), []).append(
            (j.duration_s, convergence_epoch(ZOO.models[s.model], s.epoch_scale)))
    for pairs in by_key.values():
        pairs.sort()
        epochs = [e for _, e in pairs]
        assert epochs == sorted(epochs)


# ----------------------------------------------------------------------------- scenario files
DATA = Path(__file__).parent / "data"


def _scenario_file(tmp_path: Path, workload: dict, cluster: str = "tiny") -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "cluster": cluster, "workload": workload}))
    return path


TRACE_JSON = {"kind": "trace", "models": MIX,
              "trace": {"path": str(DATA / "philly_cluster_job_log.json"), "format": "philly_json"}}
TRACE_PODS = {"kind": "trace", "models": MIX,  # whole-GPU pods only (fractions: test_hetero.py)
              "trace": {"path": str(DATA / "openb_pod_list_test.csv"), "format": "alibaba_csv",
                        "fractional_gpu": "skip"}}


def _with_trace(base: dict, **trace) -> dict:
    return {**base, "trace": {**base["trace"], **trace}}


@pytest.mark.parametrize(
    "workload, needles",
    [
        # unknown key, at the top and inside the trace window
        ({"kind": "uniform", "num_jobs": 3, "window_s": 10, "models": MIX, "bogus": 1},
         ["workload.bogus: Extra inputs are not permitted", "(value: 1)"]),
        (_with_trace(TRACE_JSON, vcs="vcA"),
         ["workload.trace.vcs: Extra inputs are not permitted", "(value: 'vcA')"]),
        # wrong type
        ({"kind": "uniform", "num_jobs": "many", "window_s": 10, "models": MIX},
         ["workload.num_jobs: Input should be a valid integer", "(value: 'many')"]),
        (_with_trace(TRACE_JSON, format="philly_xml"),
         ["workload.trace.format: Input should be 'philly_csv', 'philly_json' or 'alibaba_csv'",
          "(value: 'philly_xml')"]),
        # impossible values
        (_with_trace(TRACE_JSON, first_n=0), ["workload.trace.first_n", "(value: 0)"]),
        (_with_trace(TRACE_JSON, start="yesterday"),
         ["workload.trace: Value error, start: expected YYYY-MM-DD", "'yesterday'"]),
        (_with_trace(TRACE_PODS, start="2023-07-01"),
         ["workload.trace: Value error, start: '2023-07-01': alibaba_csv times are seconds"]),
        (_with_trace(TRACE_JSON, fractional_gpu="whole"),
         ["workload.trace: Value error, fractional_gpu: only for format alibaba_csv"]),
        (_with_trace(TRACE_JSON, vc="vcZ"),
         ["workload.trace.vc: 'vcZ' not in", "philly_cluster_job_log.json (VCs: vcA, vcB)"]),
        ({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "num_workers": 99}]},
         ["workload.jobs.0.num_workers: 99: job j0 (ResNet-50, 1 PS, 99 workers) needs 99 GPUs, "
          "the cluster 'tiny' has 8"]),
        ({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "shard_nodes": [1, 4]}]},
         ["workload.jobs.0.shard_nodes: [1, 4]: node 4 out of range (cluster 'tiny' has 4 nodes)"]),
        ({"kind": "uniform", "num_jobs": 40, "window_s": 10, "models": MIX, "num_workers": [1, 20]},
         ["workload.num_workers: [1, 20]: job j", "GPUs, the cluster 'tiny' has 8"]),
        ({"kind": "uniform", "num_jobs": 3, "window_s": 10, "models": {"NoSuchNet": 1}},
         ["workload: unknown model 'NoSuchNet'"]),
    ],
)
def test_scenario_file_error_names_file_key_and_value(tmp_path, workload, needles):
    path = _scenario_file(tmp_path, workload)
    with pytest.raises(ConfigError) as err:
        make_sim(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    for needle in needles:
        assert needle in message


def test_trace_job_larger_than_the_cluster_names_the_trace_row(tmp_path):
    log = tmp_path / "cluster_job_log"
    big = {"status": "Pass", "vc": "v", "jobid": "big", "user": "u",
           "submitted_time": "2017-10-03 10:00:00",
           "attempts": [{"start_time": "2017-10-03 10:00:00", "end_time": "2017-10-03 11:00:00",
                         "detail": [{"ip": f"m{i}", "gpus": [f"gpu{g}" for g in range(8)]}
                                    for i in range(2)]}]}
    log.write_text(json.dumps([big]))
    path = _scenario_file(tmp_path, _with_trace(TRACE_JSON, path=str(log)))
    with pytest.raises(ConfigError, match=rf"{path}: workload.trace: {log}, jobs\[0\]: 16 GPUs: "
                                          r"job big \(.*16 workers\) needs 16 GPUs, the cluster "
                                          r"'tiny' has 8"):
        make_sim(str(path))


def test_malformed_trace_row_names_the_trace_file_and_line(tmp_path):
    pods = tmp_path / "openb_pod_list_bad.csv"
    lines = (DATA / "openb_pod_list_test.csv").read_text().splitlines()
    lines[3] = lines[3].replace(",8,1000,", ",8,oops,")
    pods.write_text("\n".join(lines) + "\n")
    path = _scenario_file(tmp_path, _with_trace(TRACE_PODS, path=str(pods)))
    with pytest.raises(TraceError, match=rf"{pods}:4: gpu_milli: not a number: 'oops'"):
        make_sim(str(path))
    scenario, trace = prepare(str(path), skip_bad_rows=True)
    assert isinstance(scenario, Scenario) and scenario.workload.trace.skip_bad_rows
    assert trace.n_bad_rows_skipped == 1 and "1 malformed rows skipped" in trace.report()
    # the bad line 4 claimed no name: line 9, a copy of the original line 4, now replays pod 0002
    assert [s.job_id for s in make_sim(scenario).specs] == [
        "openb-pod-0000", "openb-pod-0002", "openb-pod-0006"]
    # without a trace, or with skipping already on, the scenario passes through unchanged
    assert prepare("tiny") == ("tiny", None)
    on = _scenario_file(tmp_path, _with_trace(TRACE_PODS, path=str(pods), skip_bad_rows=True))
    assert prepare(str(on), skip_bad_rows=True)[0] == str(on)


# ----------------------------------------------------------------------------- replays
def test_philly_job_log_replay_maps_gpus_users_and_labels_synthetic():
    specs = jobs(TRACE_JSON)  # trace jobs are all-reduce: workers only
    assert [(s.job_id, s.num_workers, s.num_ps, s.user, s.comm) for s in specs] == [
        ("application_1_0006", 1, 0, "dave", "allreduce"), ("application_1_0001", 2, 0, "alice", "allreduce"),
        ("application_1_0002", 8, 0, "bob", "allreduce")]
    ps = jobs({**TRACE_JSON, "comm": "ps"})  # as PS jobs: one PS per ps_ratio (4) workers
    assert [(s.num_workers, s.num_ps, s.comm) for s in ps] == [(1, 1, "ps"), (2, 1, "ps"), (8, 2, "ps")]
    assert [s.arrival_s for s in specs] == [0.0, 60.0, 90.0]
    assert all(s.synthetic == ("model", "num_ps", "comm", "epoch_scale", "shard_nodes") for s in specs)
    assert specs == jobs(TRACE_JSON)  # same seed, same jobs
    assert any(jobs(TRACE_JSON, seed=k) != specs for k in range(1, 4))  # models are drawn


def test_alibaba_replay_on_its_node_list_cluster(tmp_path):
    cluster = tmp_path / "openb.yaml"
    cluster.write_text(yaml.safe_dump({
        "name": "openb", "source": "hand-written node list",
        "node_list": {"path": str(DATA / "openb_node_list_test.csv"), "nodes_per_rack": 2,
                      "nic_MBps": 3125, "uplink_MBps": 6250}}))
    scenario = {"name": "ali", "cluster": str(cluster), "engine": {"tick_s": 300},
                "workload": {**TRACE_PODS, "users": 2}}
    sim = make_sim(scenario, seed=3)
    assert [(s.job_id, s.num_workers, s.num_ps, s.user) for s in sim.specs] == [
        ("openb-pod-0000", 1, 0, "u0"), ("openb-pod-0002", 8, 0, "u1"),
        ("openb-pod-0006", 1, 0, "u0")]
    metrics = sim.run(baselines.make("fifo"))
    assert metrics.jobs_finished == 3
    assert {r.synthetic for r in metrics.jobs} == {"model;num_ps;comm;epoch_scale;shard_nodes;user"}
    again = make_sim(scenario, seed=3).run(baselines.make("fifo"))
    assert again.summary() == metrics.summary()


def test_cli_skip_bad_rows_overrides_the_scenario_and_prints_the_count(tmp_path, capsys):
    from dlclusterenv.cli import main

    pods = tmp_path / "openb_pod_list_bad.csv"
    lines = (DATA / "openb_pod_list_test.csv").read_text().splitlines()
    lines[1] = lines[1].replace(",LS,Running,0,", ",LS,Running,zero,")
    pods.write_text("\n".join(lines) + "\n")
    path = str(_scenario_file(tmp_path, _with_trace(TRACE_PODS, path=str(pods))))
    assert main(["run", "--scenario", path, "--policy", "fifo"]) == 2
    assert f"{pods}:2: creation_time: not a number: 'zero'" in capsys.readouterr().err
    assert main(["run", "--scenario", path, "--policy", "fifo", "--skip-bad-rows"]) == 0
    captured = capsys.readouterr()
    assert f"trace {pods}: 2 jobs selected; 1 malformed rows skipped" in captured.err
    assert "jobs_finished" in captured.out
    out = tmp_path / "eval"
    assert main(["evaluate", "--scenario", path, "--policies", "fifo", "--seeds", "1",
                 "--workers", "1", "--out", str(out), "--skip-bad-rows"]) == 0
    assert "1 malformed rows skipped" in capsys.readouterr().err
    with open(out / "jobs.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["job_id"] for r in rows] == ["openb-pod-0002", "openb-pod-0006"]
    assert {r["synthetic"] for r in rows} == {"model;num_ps;comm;epoch_scale;shard_nodes;user"}

"""Workloads: every arrival process, trace replay honesty, and config errors that name the key."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

import baselines
from dlclusterenv import ConfigError, make_sim
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import load_zoo
from dlclusterenv.jobs import Job, JobSpec, convergence_epoch, job_epochs
from dlclusterenv.traces import TraceError
from dlclusterenv.sim import DEFAULT_PACKING
from dlclusterenv.speed import alone_speed
from dlclusterenv.workload import (
    Scenario, generate_jobs, load_scenario, prepare, replay_summary, trace_placement,
)
from helpers import PHILLY_CSV, needs_philly

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


def test_exchange_every_and_data_fraction_reach_every_job():
    """Scenario-level keys of the d2s scenarios; their effect on speed is in test_speed_model."""
    base = {"kind": "uniform", "num_jobs": 5, "models": MIX}
    plain = jobs(base)
    assert {(s.exchange_every, s.data_fraction) for s in plain} == {(1, 1.0)}
    fixed = {"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0}]}
    for w in ({**base}, fixed):
        got = jobs({**w, "exchange_every": 7, "data_fraction": 0.25})
        assert {(s.exchange_every, s.data_fraction) for s in got} == {(7, 0.25)}


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


@needs_philly
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

    trace = load_philly_csv(PHILLY_CSV, vc="11cb48",
                            start="2017-10-09", end="2017-10-16", first_n=300)
    assert [s.num_workers for s in specs] == [j.num_gpus for j in trace.jobs]
    # the replay keeps each job's trace duration at its trace placement, uncapped
    for s, j in zip(specs, trace.jobs):
        m = ZOO.models[s.model]
        ps, ws = trace_placement(cluster, m, s.num_ps, s.num_workers)
        speed = alone_speed(cluster, Job(s, m, np.random.default_rng(0), 1), ps, ws,
                            cluster.config.overheads, DEFAULT_PACKING)
        assert s.work_steps / speed == pytest.approx(j.duration_s, rel=1e-9)
    # some run past their model's epoch budget in its own epochs: the old replay (the model's
    # epoch) trained them beyond it; their own epoch makes it exactly the convergence epoch K
    assert any(s.work_steps > ZOO.models[s.model].convergence.max_epochs
               * ZOO.models[s.model].steps_per_epoch for s in specs)
    for s in specs:
        k = convergence_epoch(ZOO.models[s.model], 1.0)
        assert s.steps_per_epoch * k <= s.work_steps and s.work_steps // s.steps_per_epoch == k


def _philly_rows(path: Path, rows: list[tuple[str, float, int]]) -> Path:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["timestamp", "duration", "num_gpus", "gpu_time", "cluster"])
        for when, dur, gpus in rows:
            out.writerow([when, dur, gpus, dur * gpus, "vc1"])
    return path


def test_replayed_job_runs_its_trace_gpu_seconds_at_its_trace_size(tmp_path):
    """Each job alone, placed consolidated (the trace placement) by FIFO: its run time at its
    trace size is its trace duration, so its GPU-seconds are the trace's. Tolerance 1e-6
    relative: the speed model has no noise in the truth (only the schedulers' measurements are
    biased), so what is left is float rounding. Durations far beyond any model's epoch budget
    (30 days) and under one epoch (5 s) are kept as they are."""
    rows = [("2017-10-01 00:00:00", 5.0, 1), ("2017-10-02 00:00:00", 3000.0, 2),
            ("2017-10-03 00:00:00", 7200.0, 4), ("2017-10-04 00:00:00", 30 * 86400.0, 8)]
    trace = _philly_rows(tmp_path / "t.csv", rows)
    sc = {"name": "t", "cluster": "tiny", "workload": {
        "kind": "trace", "models": MIX, "trace": {"path": str(trace)}}}
    sim = make_sim(sc, seed=3)
    sim.run(baselines.FIFO(placer="consolidate"))
    for (_, dur, gpus), spec in zip(rows, sim.specs):
        job = sim.jobs[spec.job_id]
        assert job.num_workers == gpus
        assert (job.finish_s - job.first_start_s) * gpus == pytest.approx(dur * gpus, rel=1e-6)
    last = sim.jobs[sim.specs[-1].job_id]
    assert last.total_steps == last.spec.work_steps  # not capped: its work is its duration's


def test_replayed_job_trains_its_models_convergence_epochs(tmp_path):
    """A replayed job's epoch is its own (work / K, workload.replay_epoch), so it trains K epochs,
    K = its model's convergence epoch, whatever its duration: a 30-day job does not train 10^5
    epochs, and one with less work than K batches (0.05 s) trains K epochs of a fraction of a
    batch. It finishes with exactly K epochs done (the epoch is the largest float with K of them
    in the work), its work exactly the replay's, and its stopping threshold is crossed by its own
    true loss curve at epoch K (stop_delta), as a generated job's is at its convergence epoch.
    Its loss points: K, or K - 1 where the engine's last interval ends a float residue short of
    the K-th boundary and the job is then set to its total (generated jobs do the same). A job
    with no work (duration 0) keeps its model's epoch and finishes with no epoch."""
    rows = [("2017-10-01 00:00:00", 0.05, 1), ("2017-10-01 00:00:00", 5.0, 1),
            ("2017-10-02 00:00:00", 3000.0, 2), ("2017-10-03 00:00:00", 7200.0, 4),
            ("2017-10-04 00:00:00", 30 * 86400.0, 8), ("2017-10-05 00:00:00", 0.0, 1)]
    trace = _philly_rows(tmp_path / "t.csv", rows)
    sc = {"name": "t", "cluster": "tiny", "workload": {
        "kind": "trace", "models": MIX, "trace": {"path": str(trace)}}}
    sim = make_sim(sc, seed=3)
    sim.run(baselines.FIFO(placer="consolidate"))
    *replayed, idle = [sim.jobs[s.job_id] for s in sim.specs]
    assert replayed[0].spec.work_steps < convergence_epoch(replayed[0].model, 1.0)  # tiny
    assert replayed[0].steps_per_epoch < 1
    assert replayed[-1].spec.work_steps > 1e5 * replayed[-1].model.steps_per_epoch  # huge
    for job in replayed:
        m, k = job.model, convergence_epoch(job.model, 1.0)
        assert "steps_per_epoch" in job.spec.synthetic
        assert job.steps_per_epoch == job.spec.steps_per_epoch
        assert job.status == "done" and job.total_steps == job.spec.work_steps
        assert job.steps_done == job.spec.work_steps
        assert job.total_epochs == k and job.epochs_done == k
        assert k < m.convergence.max_epochs  # the zoo's models converge within their budget
        crossed = next(e for e in range(1, k + 2)
                       if (job.true_loss(e - 1) - job.true_loss(e)) / job.true_loss(e - 1)
                       < job.rel_delta)
        assert crossed == k
        assert len(job.obs_loss) in (k - 1, k)
        assert [e for e, _ in job.obs_loss] == list(range(1, len(job.obs_loss) + 1))
    assert idle.spec.work_steps == 0 and idle.spec.steps_per_epoch is None
    assert "steps_per_epoch" not in idle.spec.synthetic and "work_steps" in idle.spec.synthetic
    assert idle.status == "done" and idle.epochs_done == 0 and idle.obs_loss == []


@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, True, "300"])
def test_job_spec_steps_per_epoch_is_validated(value):
    with pytest.raises(ValueError, match=r"job j7: steps_per_epoch: .*must be a finite number"):
        JobSpec("j7", "ResNet-50", 0.0, 0, 1, steps_per_epoch=value)


def test_job_spec_steps_per_epoch_replaces_the_models_epoch():
    m = ZOO.models["ResNet-50"]
    spec = JobSpec("j", "ResNet-50", 0.0, 0, 1, data_fraction=0.5, steps_per_epoch=12.5)
    job = Job(spec, m, np.random.default_rng(0), job_epochs(m, spec))
    assert job.steps_per_epoch == 12.5
    assert job.total_epochs == convergence_epoch(m) and job.total_steps == 12.5 * job.total_epochs
    worked = JobSpec("j", "ResNet-50", 0.0, 0, 1, work_steps=100.0, steps_per_epoch=30.0)
    assert job_epochs(m, worked) == 3  # whole epochs: the last 10 batches end no epoch


def test_trace_workload_refuses_data_fraction(tmp_path):
    trace = _philly_rows(tmp_path / "t.csv", [("2017-10-01 00:00:00", 60.0, 1)])
    with pytest.raises(ConfigError, match="workload: Value error, data_fraction: 0.5: a replayed trace job.s epoch"):
        load_scenario({"name": "t", "cluster": "tiny", "workload": {
            "kind": "trace", "models": MIX, "data_fraction": 0.5, "trace": {"path": str(trace)}}})


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
    assert all(s.synthetic == ("model", "num_ps", "comm", "work_steps", "steps_per_epoch", "shard_nodes") for s in specs)
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
    assert {r.synthetic for r in metrics.jobs} == {"model;num_ps;comm;work_steps;steps_per_epoch;shard_nodes;user"}
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
    assert {r["synthetic"] for r in rows} == {"model;num_ps;comm;work_steps;steps_per_epoch;shard_nodes;user"}


# ----------------------------------------------------------------------------- replay summary
SUMMARY_ROWS = [("2017-10-01 00:00:00", 3600.0, 2), ("2017-10-01 06:00:00", 7200.0, 4),
                ("2017-10-01 12:00:00", 1800.0, 1), ("2017-10-05 00:00:00", 600.0, 1)]


def _summary(tmp_path, cluster: str):
    trace = _philly_rows(tmp_path / "t.csv", SUMMARY_ROWS)
    sc = {"name": "t", "cluster": cluster, "workload": {
        "kind": "trace", "models": MIX, "trace": {"path": str(trace), "end": "2017-10-02"}}}
    scenario, selected = prepare(sc)
    return replay_summary(scenario, selected)


def test_replay_summary_reports_selection_span_and_offered_load(tmp_path):
    s = _summary(tmp_path, "tiny")
    # 3 of 4 rows in the window, 12 h of submits, 10.5 GPU-h on 8 GPUs: 37800 / (8 x 43200)
    assert (s.n_jobs, s.span_s, s.cluster_gpus) == (3, 43200.0, 8)
    assert s.trace_gpu_s == 37800.0 and s.sim_gpu_s == pytest.approx(37800.0, rel=1e-9)
    text = "\n".join(s.lines())
    assert "3 jobs selected; 1 outside the window" in text
    assert "3 jobs over 0.50 days of submits on cluster 'tiny' (8 GPUs)" in text
    assert "trace 10.5 GPU-h = 10.9% of capacity, simulation 10.5 GPU-h = 10.9% of capacity" in text
    assert s.warnings() == [
        "the window selects only 3 of the trace's 4 replayable jobs: move start/end to where the "
        "trace has jobs"]


def test_replay_on_a_cluster_far_larger_than_its_load_warns_with_the_numbers(tmp_path):
    s = _summary(tmp_path, "philly")
    low = [w for w in s.warnings() if "offered load" in w]
    assert low == [f"offered load is {37800 / (2496 * 43200):.2%} of cluster 'philly''s 2,496 GPUs "
                   "over the span (below 5%): the cluster is mostly idle and schedulers will "
                   "barely differ; pick a busier window or a smaller cluster"]


def test_cli_prints_the_replay_summary_and_warnings(tmp_path, capsys):
    from dlclusterenv.cli import main

    trace = _philly_rows(tmp_path / "t.csv", SUMMARY_ROWS)
    path = _scenario_file(tmp_path, {"kind": "trace", "models": MIX, "trace": {"path": str(trace)}})
    assert main(["run", "--scenario", str(path), "--policy", "fifo"]) == 0
    err = capsys.readouterr().err
    assert "replay: 4 jobs over 4.00 days of submits on cluster 'tiny' (8 GPUs)" in err
    assert "warning: the window selects only 4 of the trace's 4 replayable jobs" in err


def test_pod_list_without_time_columns_says_so(tmp_path):
    from dlclusterenv.traces import load_alibaba_pods

    pods = tmp_path / "openb_pod_list_multigpu50.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,1,1000\n")
    with pytest.raises(TraceError, match=rf"{pods}:1: header: missing .*: this pod list has no "
                       r"time columns \(creation_time, scheduled_time, deletion_time\), like the "
                       r"openb multigpu\* lists"):
        load_alibaba_pods(pods)


def test_tick_s_lets_optimus_resize_a_lone_job():
    """engine.tick_s (README, Scenarios): without ticks the only decision point of a lone job is
    its arrival, so Optimus' 600 s reallocation never happens; with 600 s ticks it resizes it."""
    out = {}
    for tick in (None, 600):
        sc = {"name": "t", "cluster": "tiny", "engine": {"tick_s": tick}, "workload": {
            "kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "num_workers": 1}]}}
        sim = make_sim(sc, 0)
        metrics = sim.run(baselines.make("optimus"))
        job = next(iter(sim.jobs.values()))
        out[tick] = (round(metrics.avg_jct_s), job.num_ps, job.num_workers)
    assert out[None][1:] == (1, 1) and out[600][1:] != (1, 1)  # resized only with ticks
    assert out[600][0] < out[None][0]


@needs_philly
def test_busy_philly_preset_loads_the_cluster():
    """philly_busy is the README load table's busy row: most of the cluster's GPU capacity over its
    day of submits, where the one-VC `philly` week offers under 1%."""
    scenario, trace = prepare("philly_busy")
    s = replay_summary(scenario, trace)
    assert (s.n_jobs, s.cluster_gpus) == (1713, 2496)
    assert s.load(s.sim_gpu_s) == pytest.approx(0.694, abs=0.001)
    assert s.warnings() == []


def _tiny_workload(**keys) -> dict:
    """The tiny scenario with its workload's keys replaced."""
    sc = yaml.safe_load(open("configs/scenarios/tiny.yaml"))
    sc["workload"] = {**sc["workload"], **keys}
    return sc


def test_epoch_scale_sets_every_jobs_convergence_point():
    """`epoch_scale` (a generated job's range, a fixed job's value) moves where each job converges:
    at 0.5 every job's work halves (to the epoch), so the same policy finishes them sooner."""
    half, one = (_tiny_workload(epoch_scale=[s, s]) for s in (0.5, 1.0))
    assert {s.epoch_scale for s in make_sim(half, 0).specs} == {0.5}
    fifo = {name: make_sim(sc, 0).run(baselines.make("fifo")).summary() for name, sc in (("half", half), ("one", one))}
    assert fifo["half"]["avg_jct_s"] < 0.75 * fifo["one"]["avg_jct_s"]
    fixed = [jobs({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "epoch_scale": s}]})[0]
             for s in (0.5, 1.0)]
    assert [s.epoch_scale for s in fixed] == [0.5, 1.0]
    model = ZOO.models["ResNet-50"]
    assert convergence_epoch(model, 0.5) < convergence_epoch(model, 1.0)


def test_shards_per_job_places_input_shards_and_changes_locality():
    """`shards_per_job`: every generated job reads that many shards on seeded nodes (0: none), and
    where they lie changes the data-locality of the same policy's run."""
    none, three = (make_sim(_tiny_workload(shards_per_job=k), 0) for k in (0, 3))
    assert {s.shard_nodes for s in none.specs} == {()}
    assert {len(s.shard_nodes) for s in three.specs} == {3}
    assert all(0 <= n < TINY.n_nodes for s in three.specs for n in s.shard_nodes)
    a, b = (sim.run(baselines.make("fifo")).summary() for sim in (none, three))
    assert a["data_local_frac"] != b["data_local_frac"]


def test_ps_ratio_sets_the_ps_of_replayed_ps_jobs():
    """`ps_ratio` (trace replay with comm: ps): ceil(workers / ps_ratio) PS; 4 by default."""
    two = jobs({**TRACE_JSON, "comm": "ps", "ps_ratio": 2})
    assert [(s.num_workers, s.num_ps) for s in two] == [(1, 1), (2, 1), (8, 4)]
    assert [s.num_ps for s in jobs({**TRACE_JSON, "comm": "ps"})] == [1, 1, 2]


def test_window_s_spreads_uniform_arrivals_over_it():
    """`window_s`: uniform arrivals fill [0, window_s] (with the default 0 every job arrives at 0;
    test_uniform_arrivals_in_window_and_seeded holds then too)."""
    for window in (100.0, 10_000.0):
        at = [s.arrival_s for s in jobs({"kind": "uniform", "num_jobs": 50, "window_s": window, "models": MIX})]
        assert 0 <= min(at) < 0.1 * window and 0.9 * window < max(at) <= window


def test_num_ps_num_workers_and_models_shape_generated_jobs():
    """`num_ps` / `num_workers` (inclusive ranges; default the model's 1 / 1) size every generated
    PS job, and `models` weights the draw (weight 0: never drawn)."""
    base = {"kind": "uniform", "num_jobs": 40, "window_s": 10, "models": MIX}
    assert {(s.num_ps, s.num_workers) for s in jobs(base)} == {(1, 1)}
    sized = jobs({**base, "num_ps": [2, 2], "num_workers": [2, 3]})
    assert {s.num_ps for s in sized} == {2} and {s.num_workers for s in sized} == {2, 3}
    assert {s.model for s in jobs(base)} == set(MIX)
    assert {s.model for s in jobs({**base, "models": {"ResNet-50": 1, "ResNeXt-110": 0}})} == {"ResNet-50"}

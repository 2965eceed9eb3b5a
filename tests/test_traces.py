"""Trace loaders: the real Philly file and its quirks, hand-written rows of the Philly job log
and the Alibaba 2023 pod and node lists, windows, bad rows and what is left out."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from dlclusterenv import ConfigError, build_cluster
from dlclusterenv.profiles import shared_dir
from dlclusterenv.traces import (
    TraceError,
    TraceSet,
    TraceWarning,
    alibaba_cluster_config,
    load_alibaba_nodes,
    load_alibaba_pods,
    load_philly_csv,
    load_philly_json,
)

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


@pytest.fixture(scope="module")
def philly_path() -> Path:
    path = shared_dir() / "traces" / "philly_jobs.csv"
    if not path.exists():
        pytest.skip(f"shared data file absent: {path}")
    return path


@pytest.fixture(scope="module")
def philly(philly_path) -> TraceSet:
    return load_philly_csv(philly_path)


def _csv(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- the real file
def test_real_file_rows_duplicates_and_order(philly, philly_path):
    assert len(philly) == 82_247 - 65
    assert philly.n_duplicates_dropped == 65
    assert philly.n_bad_rows_skipped == 0
    assert philly.source == str(philly_path)
    keys = [(j.submit_s, j.line) for j in philly]
    assert keys == sorted(keys)
    assert philly.jobs[0].submit_s == 0.0
    assert len({j.job_id for j in philly}) == len(philly)
    assert all(j.num_gpus >= 1 and j.duration_s > 0 for j in philly)
    assert max(j.num_gpus for j in philly) == 128
    assert "synthetic" in philly.synthetic_note and "model" in philly.synthetic_note


def test_real_file_vc_filter(philly_path):
    """6214e9 has 41,226 rows in the file, 33 of them repeats of an earlier row."""
    trace = load_philly_csv(philly_path, vc="6214e9")
    assert len(trace) == 41_193
    assert {j.vc for j in trace} == {"6214e9"}
    assert trace.jobs[0].submit_s == 0.0


def test_real_file_window_matches_filtering_the_full_trace(philly, philly_path):
    trace = load_philly_csv(
        philly_path, vc="11cb48", start="2017-10-01", end="2017-10-08 00:00:00", first_n=500
    )
    t0 = datetime(2017, 9, 4, 10, 30, 41)  # earliest timestamp in the file: submit_s 0 above
    lo, hi = ((datetime(2017, 10, d) - t0).total_seconds() for d in (1, 8))
    expected = [j.line for j in philly if j.vc == "11cb48" and lo <= j.submit_s < hi][:500]
    assert len(expected) == 500
    assert [j.line for j in trace] == expected
    assert trace.jobs[0].submit_s == 0.0 and trace.jobs[-1].submit_s < hi - lo


# ----------------------------------------------------------------------------- hand-written rows
def test_quirks_unsorted_duplicates_blank_lines(tmp_path):
    path = _csv(
        tmp_path,
        "2017-10-01 00:01:40,50.0,2,100.0,vcB",   # line 2
        "2017-10-01 00:00:00,10.0,1,10.0,vcA",    # line 3: earliest
        "2017-10-01 00:01:40,30.0,1,30.0,vcA",    # line 4: same submit as line 2
        "2017-10-01 00:00:00,10.0,1,10.0,vcA",    # line 5: exact duplicate of line 3
        "",
    )
    trace = load_philly_csv(path)
    assert [(j.line, j.submit_s) for j in trace] == [(3, 0.0), (2, 100.0), (4, 100.0)]
    assert [j.job_id for j in trace] == ["philly-3", "philly-2", "philly-4"]
    assert trace.n_duplicates_dropped == 1
    assert trace.jobs[1].num_gpus == 2 and trace.jobs[1].vc == "vcB"
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.jobs[0].submit_s = 1.0


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("2017-10-01 00:00:05,20.0,1,20.0", "fields"),
        ("2017-10-01 00:00:05,,1,20.0,vcA", "duration"),
        ("2017-10-01 00:00:05,long,1,20.0,vcA", "duration"),
        ("2017-10-01 00:00:05,-20.0,1,20.0,vcA", "duration"),
        ("2017-10-01 00:00:05,20.0,0,0.0,vcA", "num_gpus"),
        ("2017-10-01 00:00:05,20.0,1.5,30.0,vcA", "num_gpus"),
        ("2017-13-01 00:00:05,20.0,1,20.0,vcA", "timestamp"),
        ("10/01/2017 00:00,20.0,1,20.0,vcA", "timestamp"),
        ("2017-10-01 00:00:05,20.0,2,20.0,vcA", "gpu_time"),
        ("2017-10-01 00:00:05,20.0,1,20.0,", "cluster"),
    ],
)
def test_bad_row_names_file_line_and_field(tmp_path, row, field):
    path = _csv(tmp_path, "2017-10-01 00:00:00,10.0,1,10.0,vcA", row)
    with pytest.raises(TraceError) as err:
        load_philly_csv(path)
    message = str(err.value)
    assert f"{path}:3:" in message and field in message
    assert isinstance(err.value, ValueError)


def test_skip_bad_rows_counts_them(tmp_path):
    path = _csv(
        tmp_path,
        "2017-10-01 00:00:00,10.0,1,10.0,vcA",
        "2017-10-01 00:00:05,oops,1,10.0,vcA",
        "2017-10-01 00:00:06,10.0,0,0.0,vcA",
        "2017-10-01 00:00:10,10.0,1,10.0,vcA",
        "not a row",
    )
    with pytest.warns(TraceWarning, match="skipped 3 malformed rows"):
        trace = load_philly_csv(path, skip_bad_rows=True)
    assert trace.n_bad_rows_skipped == 3
    assert "3 malformed rows skipped" in trace.report()
    assert [j.line for j in trace] == [2, 5]


def test_bad_header(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("time,duration,num_gpus,gpu_time,cluster\n")
    with pytest.raises(TraceError, match=r"trace\.csv:1: header"):
        load_philly_csv(path)


def test_time_scale_and_first_n(tmp_path):
    path = _csv(
        tmp_path,
        "2017-10-01 00:00:00,100.0,1,100.0,vcA",
        "2017-10-01 00:00:10,200.0,4,800.0,vcB",
        "2017-10-01 00:01:00,300.0,1,300.0,vcA",
        "2017-10-01 00:02:00,400.0,1,400.0,vcA",
    )
    half = load_philly_csv(path, time_scale=0.5)
    assert [(j.submit_s, j.duration_s) for j in half] == [
        (0.0, 50.0), (5.0, 100.0), (30.0, 150.0), (60.0, 200.0)
    ]
    first = load_philly_csv(path, vc="vcA", first_n=2, start=5)
    assert [(j.line, j.submit_s) for j in first] == [(4, 0.0), (5, 60.0)]
    by_offset = load_philly_csv(path, start=10, end=120)
    by_date = load_philly_csv(path, start="2017-10-01 00:00:10", end="2017-10-01 00:02:00")
    assert [j.line for j in by_offset] == [j.line for j in by_date] == [3, 4]
    assert len(load_philly_csv(path, first_n=0)) == 0
    with pytest.raises(ValueError, match="vc: 'vcC' not in .*vcA, vcB"):
        load_philly_csv(path, vc="vcC")
    for bad in [dict(time_scale=0), dict(time_scale=float("inf")), dict(first_n=-1),
                dict(start="yesterday"), dict(time_scale=True), dict(first_n=True)]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            load_philly_csv(path, **bad)
    # numpy numbers (a sweep's) are numbers: np.int64(2) was refused as "not an integer, got 2"
    assert [j.line for j in load_philly_csv(path, first_n=np.int64(2))] == [2, 3]


# ----------------------------------------------------------------------------- Philly job log JSON
DATA = Path(__file__).parent / "data"
JOB_LOG = DATA / "philly_cluster_job_log.json"
PODS = DATA / "openb_pod_list_test.csv"
NODES = DATA / "openb_node_list_test.csv"


def _job(**fields) -> dict:
    """A well-formed cluster_job_log entry, with some fields replaced."""
    job = {
        "status": "Pass", "vc": "vcA", "jobid": "application_9_0001", "user": "alice",
        "submitted_time": "2017-10-03 10:00:00",
        "attempts": [{"start_time": "2017-10-03 10:00:05", "end_time": "2017-10-03 10:10:05",
                      "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}],
    }
    job.update(fields)
    return job


def _json(tmp_path: Path, data) -> Path:
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(data, indent=1))
    return path


def test_job_log_gpus_durations_and_drops():
    trace = load_philly_json(JOB_LOG)
    assert [j.job_id for j in trace] == ["application_1_0006", "application_1_0001",
                                         "application_1_0002"]
    # 0006: its first attempt has no end (not the last, so it adds nothing), its last ran 300 s
    # on 1 GPU; 0001: one 600 s attempt on 2 GPUs; 0002: 60 s + 120 s, ending on 2 x 4 GPUs
    assert [(j.submit_s, j.duration_s, j.num_gpus) for j in trace] == [
        (0.0, 300.0, 1), (60.0, 600.0, 2), (90.0, 180.0, 8)]
    assert [(j.vc, j.user, j.line) for j in trace] == [
        ("vcB", "dave", 6), ("vcA", "alice", 1), ("vcA", "bob", 2)]
    assert trace.n_duplicates_dropped == 1 and trace.n_bad_rows_skipped == 0
    assert trace.dropped == {
        "jobs still running when the log ended (length unknown)": 1,
        "jobs without GPUs in any attempt": 1,
        "jobs without an attempt that has both start and end time": 1,
        "jobs without attempts (never started)": 1,
    }
    assert "1 duplicate rows dropped" in trace.report()
    assert "synthetic" in trace.synthetic_note and "model" in trace.synthetic_note


def test_job_log_windows():
    a = load_philly_json(JOB_LOG, vc="vcA", time_scale=2.0)
    assert [(j.job_id, j.submit_s, j.duration_s) for j in a] == [
        ("application_1_0001", 0.0, 1200.0), ("application_1_0002", 60.0, 360.0)]
    by_date = load_philly_json(JOB_LOG, start="2017-10-03 10:00:00", end="2017-10-03 10:00:31")
    by_offset = load_philly_json(JOB_LOG, start=60, end=91)  # seconds after 09:59:00
    assert [j.line for j in by_date] == [j.line for j in by_offset] == [1, 2]
    assert [j.line for j in load_philly_json(JOB_LOG, first_n=1)] == [6]
    with pytest.raises(ValueError, match="vc: 'vcZ' not in .*VCs: vcA, vcB"):
        load_philly_json(JOB_LOG, vc="vcZ")


@pytest.mark.parametrize(
    ("job", "where"),
    [
        (_job(jobid=None), "jobs[1]: jobid: expected a non-empty string, got None"),
        (_job(vc=7), "vc: expected a non-empty string, got 7"),
        (_job(user=""), "user: expected"),
        (_job(submitted_time="03/10/2017"), "submitted_time: expected YYYY-MM-DD"),
        (_job(submitted_time=None), "submitted_time: missing"),
        (_job(attempts={"start_time": None}), "attempts: expected a list"),
        (_job(attempts=["x"]), "attempts[0]: expected a JSON object"),
        (_job(attempts=[{"start_time": "2017-10-03 10:00:05", "end_time": 5, "detail": []}]),
         "attempts[0].end_time: expected"),
        (_job(attempts=[{"start_time": "2017-10-03 10:00:05",
                         "end_time": "2017-10-03 09:00:00", "detail": []}]),
         "attempts[0].end_time: '2017-10-03 09:00:00' is before start_time"),
        (_job(attempts=[{"start_time": None, "end_time": None}]), "attempts[0].detail: expected"),
        (_job(attempts=[{"start_time": None, "end_time": None, "detail": [{"ip": "m1"}]}]),
         "attempts[0].detail[0]: expected {ip: str, gpus: list}"),
        (_job(jobid="application_9_0000", user="bob"), "jobid: repeats jobs[0]"),
        ("not a job", "jobs[1]: expected a JSON object"),
    ],
)
def test_job_log_bad_entry_names_file_job_and_field(tmp_path, job, where):
    path = _json(tmp_path, [_job(jobid="application_9_0000"), job])
    with pytest.raises(TraceError) as err:
        load_philly_json(path)
    message = str(err.value)
    assert message.startswith(f"{path}: jobs[1]") and where in message
    if isinstance(job, dict) and isinstance(job.get("jobid"), str):
        assert f"(jobid {job['jobid']!r})" in message


def test_job_log_not_a_list_or_not_json(tmp_path):
    with pytest.raises(TraceError, match="expected a JSON list of jobs"):
        load_philly_json(_json(tmp_path, {"jobs": []}))
    path = tmp_path / "broken"
    path.write_text('[\n {"jobid": "a",\n  "vc": }\n]')
    with pytest.raises(TraceError, match=r"broken:3: not valid JSON"):
        load_philly_json(path)


def test_job_log_skip_bad_rows_counts_and_warns(tmp_path):
    path = _json(tmp_path, [_job(jobid="a1"), _job(jobid="a2", vc=None), "junk", _job(jobid="a3")])
    with pytest.warns(TraceWarning, match="skipped 2 malformed rows"):
        trace = load_philly_json(path, skip_bad_rows=True)
    assert trace.n_bad_rows_skipped == 2 and [j.job_id for j in trace] == ["a1", "a3"]
    assert "2 malformed rows skipped" in trace.report()


# ----------------------------------------------------------------------------- Alibaba 2023
def test_alibaba_pods_mapping_and_drops():
    trace = load_alibaba_pods(PODS)
    assert [(j.job_id, j.submit_s, j.duration_s, j.num_gpus, j.vc, j.line) for j in trace] == [
        ("openb-pod-0000", 0.0, 11900.0, 1, "LS", 2),
        ("openb-pod-0002", 200.0, 7000.0, 8, "Burstable", 4),
        ("openb-pod-0006", 1000.0, 500.0, 1, "BE", 8),
    ]
    assert all(j.user is None for j in trace)
    assert trace.n_duplicates_dropped == 1 and trace.n_bad_rows_skipped == 0
    assert trace.dropped == {
        "CPU-only pods": 1, "fractional-GPU pods (gpu_milli < 1000)": 1,
        "pods never scheduled": 1, "pods without deletion_time (length unknown)": 1,
    }
    whole = load_alibaba_pods(PODS, fractional_gpu="whole")
    assert [(j.job_id, j.submit_s, j.duration_s, j.num_gpus) for j in whole][1] == (
        "openb-pod-0001", 50.0, 4940.0, 1)
    assert "fractional-GPU pods (gpu_milli < 1000)" not in whole.dropped
    assert all(j.gpu_milli == 1000 for j in whole)
    shared = load_alibaba_pods(PODS, fractional_gpu="share")  # fractions kept, to share GPUs
    assert [(j.job_id, j.num_gpus, j.gpu_milli) for j in shared][1] == ("openb-pod-0001", 1, 460)
    assert "fractional-GPU pods (gpu_milli < 1000)" not in shared.dropped
    assert "users" in trace.synthetic_note


def test_alibaba_pod_windows():
    ls = load_alibaba_pods(PODS, vc="LS")
    assert [j.job_id for j in ls] == ["openb-pod-0000"]
    late = load_alibaba_pods(PODS, start=100, end=1000.5, time_scale=0.5)
    assert [(j.job_id, j.submit_s, j.duration_s) for j in late] == [
        ("openb-pod-0002", 0.0, 3500.0), ("openb-pod-0006", 400.0, 250.0)]
    assert [j.job_id for j in load_alibaba_pods(PODS, first_n=2)] == [
        "openb-pod-0000", "openb-pod-0002"]
    with pytest.raises(ValueError, match="start: this trace's times are seconds"):
        load_alibaba_pods(PODS, start="2023-01-01")
    with pytest.raises(ValueError, match="QoS classes: BE, Burstable, LS"):
        load_alibaba_pods(PODS, vc="Guaranteed")
    with pytest.raises(ValueError, match="fractional_gpu"):
        load_alibaba_pods(PODS, fractional_gpu="half")


POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time\n")
GOOD_POD = "p0,1000,1024,1,1000,,LS,Running,0,100,10"


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("p1,1000,1024,two,1000,,LS,Running,0,100,10", "num_gpu: not a number"),
        ("p1,1000,1024,1.5,1000,,LS,Running,0,100,10", "num_gpu: not an integer"),
        ("p1,1000,1024,1,1500,,LS,Running,0,100,10", "gpu_milli: must be a finite number in [0, 1"),
        ("p1,1000,1024,1,0,,LS,Running,0,100,10", "gpu_milli: 0 with num_gpu 1"),
        ("p1,1000,1024,0,500,,LS,Running,0,100,10", "gpu_milli: 500 with num_gpu 0"),
        ("p1,-5,1024,1,1000,,LS,Running,0,100,10", "cpu_milli: must be"),
        ("p1,1000,lots,1,1000,,LS,Running,0,100,10", "memory_mib: not a number"),
        ("p1,1000,1024,1,1000,,LS,Running,,100,10", "creation_time: missing value"),
        ("p1,1000,1024,1,1000,,LS,Running,50,100,10", "scheduled_time: 10 is before creation_time"),
        ("p1,1000,1024,1,1000,,LS,Running,0,5,10", "deletion_time: 5 is before scheduled_time 10"),
        ("p1,1000,1024,1,1000,,LS,Running,20,5,", "deletion_time: 5 is before creation_time 20"),
        ("p1,1000,1024,1,1000,,LS,Running,0,nan,10", "deletion_time: must be a finite number"),
        ("p1,1000,1024,1,1000,,LS,Running,0,100", "fields: expected 11"),
        (",1000,1024,1,1000,,LS,Running,0,100,10", "name: missing value"),
        ("p0,1000,1024,2,1000,,LS,Running,0,100,10", "name: 'p0' already on line 2"),
    ],
)
def test_alibaba_bad_pod_names_file_line_and_field(tmp_path, row, field):
    path = tmp_path / "openb_pod_list_x.csv"
    path.write_text(POD_HEADER + GOOD_POD + "\n" + row + "\n")
    with pytest.raises(TraceError) as err:
        load_alibaba_pods(path)
    assert str(err.value).startswith(f"{path}:3: ") and field in str(err.value)


def test_alibaba_pods_header_any_order_and_skip_count(tmp_path):
    path = tmp_path / "openb_pod_list_x.csv"
    path.write_text("name,cpu_milli\np0,1000\n")
    with pytest.raises(TraceError, match=r":1: header: missing memory_mib,num_gpu"):
        load_alibaba_pods(path)
    columns = POD_HEADER.strip().split(",")
    order = columns[::-1] + ["extra"]
    good = dict(zip(columns, GOOD_POD.split(",")))
    bad = {**good, "name": "p1", "num_gpu": "x"}
    path.write_text(",".join(order) + "\n" + "\n".join(
        ",".join(r.get(c, "?") for c in order) for r in (good, bad)) + "\n")
    with pytest.warns(TraceWarning, match="skipped 1 malformed rows"):
        trace = load_alibaba_pods(path, skip_bad_rows=True)
    assert [(j.job_id, j.duration_s) for j in trace] == [("p0", 90.0)]
    assert trace.n_bad_rows_skipped == 1


def test_alibaba_nodes_become_a_cluster_config():
    nodes = load_alibaba_nodes(NODES)
    assert len(nodes) == 8 and nodes[3].gpu_model == "none" and nodes[3].gpus == 0
    assert nodes[0].cpus == 96.0 and nodes[0].memory_gb == pytest.approx(786432 * 2**20 / 1e9)
    cfg = alibaba_cluster_config(NODES, name="openb", source="test", nodes_per_rack=2,
                                 nic_MBps=3125, uplink_MBps=6250, gpu_memory_gb={"P100": 16})
    cluster = build_cluster(cfg)
    # grouped by GPU model in order of first appearance, cut into racks of 2 in file order
    models = [[cluster.graph.nodes[f"{n}/g0"]["model"] if cluster.gpus[i] else "none"
               for i, n in enumerate(cluster.node_names) if cluster.node_rack[i] == r]
              for r in range(cluster.n_racks)]
    assert models == [["V100M32"] * 2, ["V100M32"] * 2, ["P100"] * 2, ["none"], ["T4"]]
    assert cluster.n_gpus == 8 * 4 + 2 * 2 + 4 and cluster.n_nodes == 8
    assert cluster.memory[3] == pytest.approx(524288 * 2**20 / 1e9)  # node 0006, own node type
    assert list(cluster.gpu_memory) == [32, 32, 32, 32, 16, 16, 0, 16]
    assert set(cluster.uplink) == {6250e6} and set(cluster.nic) == {3125e6}


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("n9,64000,262144,2,", "model: missing for a node with 2 GPUs"),
        ("n9,0,262144,2,P100", "cpu_milli: must be > 0"),
        ("n9,64000,262144,-1,P100", "gpu: must be"),
        ("n0,64000,262144,2,P100", "sn: 'n0' already on line 2"),
    ],
)
def test_alibaba_bad_node_names_file_line_and_field(tmp_path, row, field):
    path = tmp_path / "openb_node_list_x.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,0,\n" + row + "\n")
    with pytest.raises(TraceError) as err:
        load_alibaba_nodes(path)
    assert str(err.value).startswith(f"{path}:3: ") and field in str(err.value)


def test_cluster_yaml_with_node_list(tmp_path):
    path = tmp_path / "openb.yaml"
    path.write_text(
        "name: openb\nsource: hand-written node list\n"
        f"node_list: {{path: {NODES}, nodes_per_rack: 4, nic_MBps: 3125, uplink_MBps: 6250}}\n")
    cluster = build_cluster(path)
    assert cluster.config.name == "openb" and cluster.n_racks == 4 and cluster.n_gpus == 40
    path.write_text(f"name: x\nsource: y\nnode_list: {{path: {NODES}, nodes_per_rack: 0, "
                    "nic_MBps: 1, uplink_MBps: 1, racks: 3}\n")
    with pytest.raises(ConfigError) as err:
        build_cluster(path)
    assert f"{path}: node_list.nodes_per_rack" in str(err.value) and "(value: 0)" in str(err.value)
    assert f"{path}: node_list.racks: Extra inputs are not permitted" in str(err.value)
    path.write_text(f"name: x\nsource: y\nnode_list: {{path: {tmp_path / 'none.csv'}, "
                    "nodes_per_rack: 2, nic_MBps: 1, uplink_MBps: 1}\n")
    with pytest.raises(TraceError, match="none.csv: cannot read Alibaba node list"):
        build_cluster(path)


def test_job_log_and_csv_agree_on_real_rows(philly, tmp_path):
    """Real Philly rows written as job-log entries (one attempt, GPUs spread over 8-GPU machines)
    replay exactly as the CSV loader reads them."""
    from datetime import timedelta

    t0 = datetime(2017, 9, 4, 10, 30, 41)  # submit_s 0 of the whole file
    rows = [j for j in philly if j.vc == "11cb48" and (j.num_gpus > 8 or j.line % 40 == 0)][:300]
    assert max(j.num_gpus for j in rows) > 8  # some span machines
    entries = []
    for j in rows:
        submit = t0 + timedelta(seconds=j.submit_s)
        start = submit + timedelta(seconds=30)
        end = start + timedelta(seconds=j.duration_s)
        detail = [{"ip": f"m{k}", "gpus": [f"gpu{g}" for g in range(min(8, j.num_gpus - 8 * k))]}
                  for k in range(-(-j.num_gpus // 8))]
        entries.append({
            "status": "Pass", "vc": j.vc, "jobid": j.job_id, "user": "u",
            "submitted_time": f"{submit:%Y-%m-%d %H:%M:%S}",
            "attempts": [{"start_time": f"{start:%Y-%m-%d %H:%M:%S}",
                          "end_time": f"{end:%Y-%m-%d %H:%M:%S}",
                          "detail": detail}],
        })
    from_json = load_philly_json(_json(tmp_path, entries))
    assert [(j.job_id, j.submit_s, j.duration_s, j.num_gpus) for j in from_json] == [
        (j.job_id, j.submit_s - rows[0].submit_s, j.duration_s, j.num_gpus) for j in rows]


@pytest.mark.parametrize("fmt", ["philly_csv", "alibaba_csv", "philly_json"])
def test_bad_utf8_names_the_line_and_the_byte_offset_in_the_file(tmp_path, fmt):
    """The bad byte sits past the decoder's first chunk (8 KiB), where its own position would be
    counted from the chunk, not the file."""
    from dlclusterenv.traces import load_trace

    if fmt == "philly_csv":
        head = "timestamp,duration,num_gpus,gpu_time,cluster\n"
        good = "".join(f"2017-10-01 00:00:{i % 60:02d},{i + 1}.0,1,{i + 1}.0,vc1\n"
                       for i in range(600))
    elif fmt == "alibaba_csv":
        head = POD_HEADER
        good = "".join(f"p{i},1000,1024,1,1000,,LS,Running,{i},{i + 100},{i}\n" for i in range(600))
    else:
        head, good = "[\n", "".join(f'"padding {i}",\n' for i in range(600))
    data = (head + good).encode() + b"bad \xff byte\n"
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    offset = data.index(b"\xff")
    line = data[:offset].count(b"\n") + 1
    assert offset > 8192
    with pytest.raises(TraceError, match=rf"{path}:{line}: not UTF-8: byte 0xff at byte offset "
                       rf"{offset:,} of the file \(byte 5 of line {line}\)"):
        load_trace(path, fmt)


def test_shared_trace_paths_follow_dlcluster_shared(tmp_path, monkeypatch):
    """A config's ../shared/ path means the shared data directory, which $DLCLUSTER_SHARED moves (as
    it moves the profiles): with the data elsewhere and nothing beside the checkout, a trace scenario
    still loads."""
    import shutil

    from dlclusterenv import make_sim
    from dlclusterenv.traces import data_path
    from dlclusterenv.workload import load_scenario

    (tmp_path / "traces").mkdir()
    shutil.copy(Path(__file__).parent / "data" / "philly_cluster_job_log.json", tmp_path / "traces" / "t.json")
    monkeypatch.setenv("DLCLUSTER_SHARED", str(tmp_path))
    assert data_path("../shared/traces/t.json") == tmp_path / "traces" / "t.json"
    assert data_path("configs/x.yaml") == Path(__file__).resolve().parent.parent / "configs" / "x.yaml"
    sc, _ = load_scenario({"name": "replay", "cluster": "tiny",
                           "workload": {"kind": "trace", "models": {"ResNet-50": 1},
                                        "trace": {"path": "../shared/traces/t.json", "format": "philly_json"}}})
    assert make_sim(sc, 0).specs
    monkeypatch.setenv("DLCLUSTER_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(Exception, match="nowhere"):
        make_sim(sc, 0)


# ----------------------------------------------------------------------------- badin16
def test_a_negative_gpu_count_is_blamed_on_num_gpus(tmp_path):
    """A row of -2 GPUs with a consistent -20 GPU-seconds was reported as "gpu_time: must be finite
    and >= 0": the derived column, checked before the GPU count."""
    path = _csv(tmp_path, "2017-10-01 00:00:00,10.0,1,10.0,vcA", "2017-10-01 00:00:05,10.0,-2,-20.0,vcA")
    with pytest.raises(TraceError, match=rf"^{re.escape(str(path))}:3: num_gpus: must be >= 1, got -2$"):
        load_philly_csv(path)


def test_a_byte_order_mark_is_not_part_of_the_header(tmp_path):
    """A trace saved by a spreadsheet starts with a UTF-8 byte-order mark: the Philly and Alibaba
    CSVs were refused with a header that looked right ("got timestamp,...", the mark invisible)
    and the JSON job log as "not valid JSON"; each now reads as the file without the mark."""
    bom = "\ufeff"
    csv_path = _csv(tmp_path, "2017-10-01 00:00:00,10.0,1,10.0,vcA")
    plain = load_philly_csv(csv_path)
    csv_path.write_text(bom + csv_path.read_text())
    assert load_philly_csv(csv_path).jobs == plain.jobs
    pods = tmp_path / "openb_pod_list_x.csv"
    pods.write_text(bom + POD_HEADER + GOOD_POD + "\n")
    assert [j.job_id for j in load_alibaba_pods(pods)] == ["p0"]
    log = _json(tmp_path, [_job()])
    plain_log = load_philly_json(log)
    log.write_text(bom + log.read_text())
    assert load_philly_json(log).jobs == plain_log.jobs

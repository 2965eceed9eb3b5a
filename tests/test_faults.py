"""Faults from outside (issue 13): `dlcluster evaluate` killed by its PID leaves no process and no
partial output, a second evaluation into the same --out is refused while one runs, an evaluation
of a scenario without jobs writes complete files, and a training run killed before its first
checkpoint resumes from step 0."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ZERO_JOBS

from dlclusterenv.cli import main
from dlclusterenv.evaluate import EvaluateError, claim, evaluate

ROOT = Path(__file__).resolve().parent.parent


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            state, _, group = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            found.append(int(d))
    return found


def _files(out: Path) -> dict[str, bytes]:
    """The evaluation's outputs in `out` (CSVs and plots), by name; per_run/ is the resume cache,
    which a new evaluation without --resume clears by design (see `_saved_runs_whole`)."""
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def _saved_runs_whole(out: Path) -> bool:
    """Every file left in out/per_run is one whole saved run (JSON that parses), none half written."""
    runs = out / "per_run"
    return not runs.exists() or all(json.loads(p.read_text())["policy"] for p in runs.iterdir())


def _earlier_then_long_evaluate(tmp_path: Path, *extra: str) -> tuple[Path, dict[str, bytes], subprocess.Popen]:
    """A finished evaluation in tmp_path/out, then a second one into it in a new session, busy for
    many seconds (500 jobs on two workers; `extra` options, e.g. the Ray backend)."""
    out = tmp_path / "out"
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo", "--seeds", "1",
                 "--workers", "1", "--out", str(out)]) == 0
    previous = _files(out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlclusterenv.cli", "evaluate", "--scenario", "default_500", "--policies",
         "fifo,tiresias", "--seeds", "1", "--workers", "2", *extra, "--out", str(out)],
        env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return out, previous, proc


def _await_workers(proc: subprocess.Popen) -> None:
    """Until the command and its two pool workers run (at most 120 s)."""
    deadline = time.monotonic() + 120
    while len(_group(proc.pid)) < 3:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)


def _wait_gone(proc: subprocess.Popen) -> int:
    """The killed command's exit code (30 s: on a loaded 2-core machine 10 s was once too short),
    after giving its process group 5 s to go."""
    code = proc.wait(timeout=30)
    deadline = time.monotonic() + 5
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return code


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_evaluate_leaves_no_process_no_partial_files_and_refuses_a_second_run(tmp_path, sig, capsys):
    """Bugs 3 and 4: the pool workers of a killed evaluate ran on as orphans, and two evaluations
    into one --out left CSVs of one and plots of the other."""
    out, previous, proc = _earlier_then_long_evaluate(tmp_path)
    try:
        _await_workers(proc)
        capsys.readouterr()
        assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo", "--seeds", "1",
                     "--workers", "1", "--out", str(out)]) == 2
        assert f"--out {out}: another evaluation or benchmark is writing there" in capsys.readouterr().err
        os.kill(proc.pid, sig)
        code = _wait_gone(proc)
        assert not _group(proc.pid), "processes of the killed evaluate are still running"
        assert code == (143 if sig == signal.SIGTERM else -signal.SIGKILL)  # SIGTERM: an exit that unwinds
    finally:
        if _group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    assert _files(out) == previous  # the earlier evaluation's files, whole and alone
    assert _saved_runs_whole(out)


def _session(sid: int) -> list[tuple[int, str]]:
    """Live (not zombie) processes of a session, with their names, from /proc: Ray's workers have
    process groups of their own, but stay in the session of the command that started Ray."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            head, rest = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)
            state, _, _, session = rest.split()[:4]
        except (OSError, ValueError):
            continue
        if int(session) == sid and state != "Z":
            found.append((int(d), head.partition("(")[2]))
    return found


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_sigterm_to_a_ray_evaluate_leaves_no_process_and_no_partial_files(tmp_path):
    """The fault test with `--backend ray`: the command starts a local Ray (GCS, raylet, workers
    in process groups of their own); SIGTERM to its PID must take all of it down within 5 s and
    leave --out as it was."""
    out, previous, proc = _earlier_then_long_evaluate(tmp_path, "--backend", "ray")
    try:
        deadline = time.monotonic() + 180
        while not any(name == "ray::run_one" for _, name in _session(proc.pid)):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "Ray did not start a run"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=30)
        deadline = time.monotonic() + 5
        while _session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _session(proc.pid), f"still running: {_session(proc.pid)}"
        assert code == 143, proc.stderr.read().decode()[-2000:]  # an exit that unwinds
    finally:
        for pid, _ in _session(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.stderr.close()
    assert _files(out) == previous


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_benchmark_stops_its_workers_and_leaves_whole_csvs(tmp_path, sig):
    """`dlcluster benchmark` runs through evaluate's pool: SIGTERM or SIGKILL to its PID leaves no
    worker (the workers of its own multiprocessing pool outlived a SIGKILLed parent) and the
    earlier run's CSVs whole."""
    out = tmp_path / "out"
    assert main(["benchmark", "tiny", "--out", str(out), "--workers", "1"]) == 0
    csvs = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    assert set(csvs) == {"runs.csv", "leaderboard.csv", "check.csv"}
    logs = {p: p.read_bytes() for p in (out / "logs").rglob("*.jsonl")}
    suite = yaml.safe_load((ROOT / "configs" / "benchmarks" / "tiny.yaml").read_text())
    suite["scenarios"][0].update(scenario="default_500", loads=[1])  # busy for many seconds
    (tmp_path / "long.yaml").write_text(yaml.safe_dump(suite))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlclusterenv.cli", "benchmark", str(tmp_path / "long.yaml"), "--workers", "2",
         "--out", str(out)],
        env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _await_workers(proc)
        os.kill(proc.pid, sig)
        code = _wait_gone(proc)
        assert not _group(proc.pid), "processes of the killed benchmark are still running"
        assert code == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
    finally:
        if _group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == csvs
    assert {p: p.read_bytes() for p in (out / "logs").rglob("*.jsonl")} == logs  # new ones are staged
    for log in (out / "logs").rglob("*"):  # decision logs are written whole or not at all
        assert not log.is_file() or json.loads(log.read_text().splitlines()[-1])["metrics"]


def test_claim_removes_a_sigkilled_runs_partial_folder_and_refuses_a_second_holder(tmp_path):
    out = tmp_path / "out"
    (out / ".partial-x").mkdir(parents=True)
    (out / ".partial-x" / "runs.csv").write_text("half")
    with claim(out):
        assert not (out / ".partial-x").exists()
    with claim(out), pytest.raises(EvaluateError, match="another evaluation or benchmark is writing there"):
        with claim(out):
            pass
    (tmp_path / "file").write_text("")
    with pytest.raises(EvaluateError, match="exists and is not a directory"):
        with claim(tmp_path / "file"):
            pass


def test_a_scenario_without_jobs_evaluates_to_complete_files(tmp_path):
    """Bug 2: write_csv failed on the empty jobs.csv after runs.csv was written."""
    board = evaluate(ZERO_JOBS, ["fifo", "tiresias"], 2, tmp_path / "out", workers=1, progress=False)
    assert [r["unfinished"] for r in board] == [0, 0]
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["jct.png", "jobs.csv", "locality.png", "pending.png", "per_run", "queueing.png", "runs.csv",
                     "timing.csv", "traffic.png", "utilisation.png"]
    with open(tmp_path / "out" / "jobs.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][:4] == ["policy", "seed", "job_id", "model"] and len(rows) == 1
    with open(tmp_path / "out" / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert [(r["policy"], r["jobs_finished"]) for r in runs] == [("fifo", "0")] * 2 + [("tiresias", "0")] * 2



def test_a_training_run_killed_before_its_first_checkpoint_resumes_from_step_0(tmp_path, monkeypatch):
    """Bug 5: --resume rejected the run ("no checkpoint") and a rerun did too ("already holds a
    run"). Resumed, it must end as the uninterrupted run does."""
    import torch as th

    import agents.train as train_mod

    cfg = {"env": {"id": "DLClusterPlace-v0", "kwargs": {"scenario": "tiny", "max_steps": 100}},
           "algo": "ppo", "policy": "MultiInputPolicy", "seed": 0, "total_timesteps": 128,
           "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
           "checkpoint_every": 64}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(cfg))
    fresh = train_mod.train(train_mod.load_config(config), tmp_path / "fresh", progress_bar=False)

    def killed(self, *args, **kwargs):  # the kill lands during the first rollout
        raise KeyboardInterrupt

    run = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(type(fresh), "learn", killed)
        with pytest.raises(KeyboardInterrupt):
            main(["train", "--config", str(config), "--out", str(run)])
    assert (run / "config.yaml").exists() and not train_mod.checkpoints(run)
    assert main(["train", "--resume", str(run)]) == 0
    assert [t for t, _ in train_mod.checkpoints(run)] == [64, 128] and (run / "model.zip").exists()
    resumed = type(fresh).load(run / "model.zip", device="cpu")
    a, b = fresh.policy.state_dict(), resumed.policy.state_dict()
    assert all(th.equal(a[k], b[k]) for k in a)

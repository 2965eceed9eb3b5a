"""Your own scheduler in `dlcluster evaluate` (issue 18 item 4): `module:Class`, `path/file.py:Class`
and entry points of the group `dlclusterenv.schedulers`, through the process pool; bad specs are
clear errors."""

from __future__ import annotations

import csv
import importlib.metadata
import sys
from pathlib import Path

import pytest

from dlclusterenv import make_sim, schedulers
from dlclusterenv.api import Decision, Scheduler
from dlclusterenv.cli import main
from dlclusterenv.evaluate import PolicyError, resolve_policies, sweep
from dlclusterenv.placers import get_placer, start_pending

MODULE = Path(__file__).stem  # pytest puts tests/ on sys.path, so this file imports by that name


class PackGreedy(Scheduler):
    """Start every pending job that fits, packed; skip the ones that do not (no head-of-line block)."""

    name = "pack-greedy"

    def decide(self, view) -> Decision:
        return start_pending(view, get_placer("pack"), Decision(), blocking=False)


class NotAScheduler:
    pass


def _reference(seed: int):
    return make_sim("tiny", seed).run(PackGreedy()).summary()


def test_module_class_runs_through_the_process_pool():
    spec = f"{MODULE}:PackGreedy"
    assert resolve_policies(f"fifo,{spec}") == ["fifo", spec]
    res = sweep("tiny", ["fifo", spec], 2, workers=2, progress=False)
    mine = [r for r in res if r.policy == spec]
    assert [r.summary for r in mine] == [_reference(0), _reference(1)]
    assert mine[0].summary != res[0].summary  # it is not fifo under another name


def test_file_path_class_in_evaluate(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(
        "from dlclusterenv.api import Decision, Scheduler\n"
        "from dlclusterenv.placers import get_placer, start_pending\n\n"
        "class Mine(Scheduler):\n"
        "    def decide(self, view):\n"
        "        return start_pending(view, get_placer('pack'), Decision(), blocking=False)\n"
    )
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo,mine.py:Mine", "--seeds", "2",
                 "--out", "ev", "--workers", "2"]) == 0
    assert "mine.py:Mine" in capsys.readouterr().out
    with open(tmp_path / "ev" / "runs.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["policy"] == "mine.py:Mine"]
    assert [float(r["avg_jct_s"]) for r in rows] == [_reference(0)["avg_jct_s"], _reference(1)["avg_jct_s"]]


def test_module_in_the_working_directory_without_it_on_sys_path(tmp_path, monkeypatch, capsys):
    """The `dlcluster` script, unlike `python -m`, does not put the working directory on sys.path;
    a `module:Class` there still runs (README: "importable from the working directory")."""
    (tmp_path / "mine_in_cwd.py").write_text(
        "from dlclusterenv.api import Decision, Scheduler\n"
        "from dlclusterenv.placers import get_placer, start_pending\n\n"
        "class Mine(Scheduler):\n"
        "    def decide(self, view):\n"
        "        return start_pending(view, get_placer('pack'), Decision(), blocking=False)\n"
    )
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mine_in_cwd", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--scenario", "tiny", "--policies", "mine_in_cwd:Mine", "--seeds", "1",
                 "--out", "ev", "--workers", "1"]) == 0
    sys.modules.pop("mine_in_cwd", None)
    with open(tmp_path / "ev" / "runs.csv") as f:
        assert [float(r["avg_jct_s"]) for r in csv.DictReader(f)] == [_reference(0)["avg_jct_s"]]


def test_entry_point_name(monkeypatch):
    ep = importlib.metadata.EntryPoint("greedy", f"{MODULE}:PackGreedy", schedulers.GROUP)
    real = importlib.metadata.entry_points

    def entry_points(**kw):
        return importlib.metadata.EntryPoints([ep]) if kw.get("group") == schedulers.GROUP else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert "greedy" in schedulers.names()
    res = sweep("tiny", ["greedy"], 1, workers=2, progress=False)  # a forked worker looks it up again
    assert res[0].summary == _reference(0)


@pytest.mark.parametrize("spec, message", [
    (f"{MODULE}:Nope", "has no attribute 'Nope'"),
    (f"{MODULE}:NotAScheduler", "is not a subclass of dlclusterenv.api.Scheduler"),
    ("no_such_module_xyz:Cls", "cannot import 'no_such_module_xyz': ModuleNotFoundError"),
    ("missing.py:Cls", "policy file 'missing.py' not found"),
    (":Cls", "must be module:Class or path/file.py:Class"),
    ("fifoo", "unknown policy 'fifoo'; did you mean 'fifo'\\?"),
])
def test_bad_spec_is_a_clear_error(spec, message):
    with pytest.raises(PolicyError, match=message):
        resolve_policies(spec)


def test_bad_spec_exits_2_before_any_run(tmp_path, capsys):
    assert main(["evaluate", "--scenario", "tiny", "--policies", "fifo,missing.py:Cls",
                 "--out", str(tmp_path / "ev")]) == 2
    assert "policy file 'missing.py' not found" in capsys.readouterr().err
    assert not (tmp_path / "ev").exists()


def test_file_class_on_the_ray_backend(tmp_path):
    ray = pytest.importorskip("ray")
    mine = tmp_path / "mine_ray.py"
    mine.write_text(
        "from dlclusterenv.api import Decision, Scheduler\n"
        "from dlclusterenv.placers import get_placer, start_pending\n\n"
        "class Mine(Scheduler):\n"
        "    def decide(self, view):\n"
        "        return start_pending(view, get_placer('pack'), Decision(), blocking=False)\n"
    )
    spec = f"{mine}:Mine"  # absolute: a Ray worker's working directory is its own
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        res = sweep("tiny", [spec], 2, backend="ray", progress=False)
    finally:
        ray.shutdown()
    assert [r.summary for r in res] == [_reference(0), _reference(1)]

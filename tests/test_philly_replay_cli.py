"""benchmarks/philly_replay.py's options (branch optim5): the Optimus fit cap reaches Optimus only,
and a CPU budget stops a run and says how far it got."""

from __future__ import annotations

import sys
from pathlib import Path

import baselines

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import philly_replay  # noqa: E402


def _run(monkeypatch, capsys, *args: str) -> tuple[str, list]:
    made = []
    real = baselines.make

    def make(name, **kw):
        made.append((name, kw))
        return real(name, **kw)

    monkeypatch.setattr(baselines, "make", make)
    monkeypatch.setattr(sys, "argv", ["philly_replay.py", "--scenario", "tiny", *args])
    philly_replay.main()
    return capsys.readouterr().out, made


def test_fit_cap_goes_to_optimus_only(monkeypatch, capsys):
    out, made = _run(monkeypatch, capsys, "--policies", "fifo,optimus",
                     "--optimus-loss-fit-max-points", "100")
    assert made == [("fifo", {}), ("optimus", {"loss_fit_max_points": 100})]
    assert out.count("unfinished    0") == 2 and "stopped" not in out
    _, made = _run(monkeypatch, capsys, "--policies", "optimus")
    assert made == [("optimus", {})]


def test_cpu_budget_stops_the_run(monkeypatch, capsys):
    out, _ = _run(monkeypatch, capsys, "--policies", "fifo", "--cpu-budget", "0")
    assert "fifo" in out and "stopped after" in out and "of 8 jobs finished" in out
    out, _ = _run(monkeypatch, capsys, "--policies", "fifo", "--cpu-budget", "1000")
    assert "stopped" not in out and "unfinished    0" in out


def test_no_wake_reaches_flowcon_and_tiresias_only(monkeypatch, capsys):
    _, made = _run(monkeypatch, capsys, "--policies", "fifo,tiresias,flowcon", "--no-wake")
    assert made == [("fifo", {}), ("tiresias", {"wake": False}), ("flowcon", {"wake": False})]
    _, made = _run(monkeypatch, capsys, "--policies", "tiresias")
    assert made == [("tiresias", {})]

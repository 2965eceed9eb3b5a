"""benchmarks/engine_profile.py (branch eng7): its timers count every call of the engine's pieces,
--reach counts one change per computation of the rates, and the engine is left unpatched."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from dlclusterenv import sim as sim_mod
from dlclusterenv import speed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import engine_profile  # noqa: E402


def _run(monkeypatch, capsys, *args: str) -> str:
    monkeypatch.setattr(sys, "argv", ["engine_profile.py", "--scenario", "tiny", *args])
    engine_profile.main()
    return capsys.readouterr().out


def test_timers_reach_and_restore(monkeypatch, capsys):
    plain = (speed.compute_rates, sim_mod.compute_rates, speed.job_plan, sim_mod._Epoch,
             sim_mod.Simulator.rates, sim_mod.Simulator.advance, speed.PlanStack.follow)
    out = _run(monkeypatch, capsys, "--policies", "fifo,tiresias")
    rows = dict(re.findall(r"^  (\S+)\s+(\d+) calls", out, re.M))
    decisions = [int(x) for x in re.findall(r"(\d+) decision points", out)]
    assert len(decisions) == 2 and all(decisions)
    # every decision point is one decide and one advance (the last policy's rows are printed last)
    assert int(rows["Simulator.decide"]) == int(rows["Simulator.advance"]) == decisions[1]
    assert int(rows["speed.compute_rates"]) >= int(rows["sim._Epoch"]) > 0
    reach = _run(monkeypatch, capsys, "--policies", "tiresias", "--reach")
    changes = int(re.search(r"(\d+) changes of the rates", reach).group(1))
    assert changes == int(rows["sim._Epoch"])  # each change of the rates, one computation
    assert float(re.search(r"started or stopped ([\d.]+)", reach).group(1)) > 0
    assert (speed.compute_rates, sim_mod.compute_rates, speed.job_plan, sim_mod._Epoch, sim_mod.Simulator.rates,
            sim_mod.Simulator.advance, speed.PlanStack.follow) == plain

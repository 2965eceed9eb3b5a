"""Where a Philly replay's engine time goes, per piece, and how far a change of the rates reaches.

    python benchmarks/engine_profile.py --policies fifo,tiresias --start 2017-10-01 --end 2017-10-08
    python benchmarks/engine_profile.py --policies fifo --end 2017-10-04 --reach

Replays the `philly` scenario (or --scenario; the window where it has a trace) over every virtual
cluster (or --vc) between --start and --end with each policy and prints the process CPU time of the run and, per engine piece (speed.compute_rates,
PlanStack.follow, job_plan, sim._Epoch, Simulator._integrate, _finish_due, _arrive_due, advance,
apply, decide), its calls, CPU seconds and microseconds per call, under process-time timers
(each call's timer costs about 1 us; nested pieces are counted in their callers too, e.g.
compute_rates in advance or decide, job_plan in compute_rates). The scenario's build (trace
reading, the jobs' speeds alone) is not timed.

--reach (no timers): at each change of the rates, how many running jobs started or stopped
running, how many of the others changed speed (bit for bit), and how many NIC directions'
loads changed: what recomputing only the jobs a change reaches would have to recompute (issue
14 item 3; README Benchmarks, branch eng7).
"""

from __future__ import annotations

import argparse
import collections
import time

import baselines
import dlclusterenv
from dlclusterenv import sim as sim_mod
from dlclusterenv import speed
from dlclusterenv.workload import load_scenario

PIECES = (
    (speed, "compute_rates"), (speed.PlanStack, "follow"), (speed, "job_plan"), (sim_mod, "_Epoch"),
    (sim_mod.Simulator, "_integrate"), (sim_mod.Simulator, "_finish_due"), (sim_mod.Simulator, "_arrive_due"),
    (sim_mod.Simulator, "advance"), (sim_mod.Simulator, "apply"), (sim_mod.Simulator, "decide"),
)


def _timed(owner, name: str, cpu: dict, calls: collections.Counter) -> None:
    """Wrap owner.name (and sim's import of a speed function) in a process-time timer."""
    f = getattr(owner, name)
    key = f"{owner.__name__.rpartition('.')[2]}.{name}"

    def timed(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            cpu[key] += time.process_time() - t
            calls[key] += 1

    setattr(owner, name, timed)
    if owner is speed and hasattr(sim_mod, name):
        setattr(sim_mod, name, timed)


def _reach(sim) -> dict[str, float]:
    """Per change of the rates: jobs that started or stopped running, other jobs whose speed
    changed, NIC directions whose load changed (means over the run)."""
    n2 = 2 * sim.cluster.n_nodes
    prev = {"speed": {}, "nic": None}
    tally = collections.Counter()
    rates = sim_mod.Simulator.rates

    def counted(self):
        fresh = self._rates is None
        r = rates(self)
        if fresh:
            speed_now, nic = r.speed, r.link_Bps[:n2]
            old = prev["speed"]
            tally["changes"] += 1
            tally["started or stopped"] += len(speed_now.keys() ^ old.keys())
            tally["others' speed changed"] += sum(old[j] != v for j, v in speed_now.items() if j in old)
            if prev["nic"] is not None:
                tally["NIC loads changed"] += int((nic != prev["nic"]).sum())
            tally["running"] += len(speed_now)
            prev["speed"], prev["nic"] = speed_now, nic.copy()
        return r

    sim_mod.Simulator.rates = counted
    return tally


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="philly", help="a scenario; the window applies where it has a trace")
    ap.add_argument("--policies", default="fifo,tiresias")
    ap.add_argument("--vc", default="all", help="a virtual cluster, or 'all'")
    ap.add_argument("--start", default="2017-10-01")
    ap.add_argument("--end", default="2017-10-08", help="end date (exclusive)")
    ap.add_argument("--reach", action="store_true", help="count how far each change of the rates reaches")
    a = ap.parse_args()
    sc, _ = load_scenario(a.scenario)
    scenario = sc.model_dump()
    window = scenario["workload"]["trace"]
    if window is not None:
        window.update(vc=None if a.vc == "all" else a.vc, start=a.start, end=a.end)
    for name in a.policies.split(","):
        sim = dlclusterenv.make_sim(scenario, 0)
        cpu: dict[str, float] = collections.defaultdict(float)
        calls: collections.Counter = collections.Counter()
        saved = [(owner, n, getattr(owner, n)) for owner, n in PIECES] + [
            (sim_mod, n, getattr(sim_mod, n)) for _, n in PIECES if hasattr(sim_mod, n)
        ] + [(sim_mod.Simulator, "rates", sim_mod.Simulator.rates)]
        try:
            if a.reach:
                tally = _reach(sim)
            else:
                for owner, n in PIECES:
                    _timed(owner, n, cpu, calls)
            t = time.process_time()
            m = sim.run(baselines.make(name))
            run = time.process_time() - t
        finally:  # the next policy runs on the plain engine
            for owner, n, f in saved:
                setattr(owner, n, f)
        jobs = len(sim.specs)
        print(f"{name}: {jobs} jobs, {run:.2f} CPU-s ({jobs / run:.0f} jobs per CPU-s), "
              f"{len(sim.totals.decision_s)} decision points, avg JCT {m.avg_jct_s:.1f} s")
        if a.reach:
            n = max(tally["changes"], 1)
            print(f"  {tally['changes']} changes of the rates; per change: " + ", ".join(
                f"{k} {v / n:.2f}" for k, v in tally.items() if k != "changes"))
        for key in sorted(cpu, key=cpu.get, reverse=True):
            print(f"  {key:28s} {calls[key]:8d} calls {cpu[key]:7.2f} CPU-s {1e6 * cpu[key] / calls[key]:8.1f} us")


if __name__ == "__main__":
    main()

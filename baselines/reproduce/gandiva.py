"""Gandiva (seed 002): the packing table (Table 1, "Packing multiple jobs on P40") and overload.

Packing: for each Table 1 model, two copies arrive at once on one P40 (the Gandiva server of
configs/clusters/gandiva.yaml cut to one GPU). Gandiva over-subscribes the second onto the GPU
(time-slicing), profiles the pair for an interval, packs it for an interval, and keeps the packing
or undoes it. The gain is the pair's measured packed throughput over its time-sliced throughput
(JobView.last_speed, mini-batches/s), as Table 1's "Packing Gain".

Overload: `configs/scenarios/gandiva.yaml`, Gandiva against FIFO. FIFO runs with the `pack` placer
(a job's PS beside its worker, as Gandiva places it); with the default `spread` placer FIFO would put
a single-GPU job's PS on another server and lose to network time, not to scheduling.
"""

from __future__ import annotations

import numpy as np

import baselines
from dlclusterenv import make_sim
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import load_cluster, load_zoo
from dlclusterenv.jobs import JobSpec
from dlclusterenv.sim import Simulator

from . import Claim, pct

# Table 1 of seed 002: model -> (zoo name, packing gain %)
TABLE1 = {
    "VAE": ("VAE-P40", 412),
    "SuperResolution": ("SuperResolution", 260),
    "RHN": ("RHN", 46),
    "SCRNN": ("SCRNN", 39),
    "MI-LSTM": ("MI-LSTM", 17),
    "LSTM": ("LSTM-Gandiva", -16),
    "ResNet-50": ("ResNet-50", -13),
    "ResNext-50": ("ResNext-50", -11),
}
INTERVAL_S = 60.0  # Gandiva's introspection interval (scenario tick)


def one_p40():
    """The Gandiva server with a single P40."""
    cfg = load_cluster("gandiva")
    node = cfg.node_types["p40_server"].model_copy(update={"gpus": 1})
    rack = cfg.racks[0].model_copy(update={"nodes": [cfg.racks[0].nodes[0].model_copy(update={"count": 1})]})
    return build_cluster(cfg.model_copy(update={"node_types": {"p40_server": node}, "racks": [rack]}))


def packing_pair(model: str, seed: int = 0) -> dict:
    """Two copies of `model` on one P40 under Gandiva, for three intervals.

    Returns the time-sliced and packed aggregate mini-batches/s, the gain, and the GPU mode Gandiva
    left after judging the packing."""
    specs = [JobSpec(f"j{i}", model, 0.0, 1, 1) for i in range(2)]
    sim = Simulator(one_p40(), specs, load_zoo(), seed=seed, tick_s=INTERVAL_S)
    sched = baselines.make("gandiva")
    sched.reset(seed)
    modes, speeds = [], []
    while sim.now < 3 * INTERVAL_S - 1e-9 and not sim.done:
        view = sim.view()
        speeds.append(sum(j.last_speed for j in view.jobs))
        modes.append(bool(view.gpu_packed[0]))
        sim.decide(sched)
        sim.advance()
    view = sim.view()
    speeds.append(sum(j.last_speed for j in view.jobs))
    modes.append(bool(view.gpu_packed[0]))
    # decision points at 0, 60, 120, 180 s: time-sliced over [0, 60], packed over [60, 120]
    ts, packed = speeds[1], speeds[2]
    return {"time_slicing": ts, "packed": packed, "gain": packed / ts - 1.0, "modes": modes, "kept": modes[-1], "tried": modes[2]}


def run(seeds: int = 3) -> list[Claim]:
    claims = []
    print(f"{'model':<16} {'paper gain':>10} {'time-slicing mb/s':>18} {'packed mb/s':>12} {'gain':>8}  Gandiva")
    for label, (model, paper) in TABLE1.items():
        rows = [packing_pair(model, s) for s in range(seeds)]
        gain = float(np.mean([r["gain"] for r in rows]))
        kept = sum(r["kept"] for r in rows)
        tried = all(r["tried"] for r in rows)
        verdict = f"kept {kept}/{seeds}" if tried else "not tried"
        print(
            f"{label:<16} {paper:>+9d}% {np.mean([r['time_slicing'] for r in rows]):>18.1f} "
            f"{np.mean([r['packed'] for r in rows]):>12.1f} {100 * gain:>+7.1f}%  {verdict}"
        )
        claims.append(
            Claim(
                f"packing gain {label} (pair on one P40), Gandiva's verdict",
                f"{paper:+d}%",
                f"{100 * gain:+.1f}% {verdict}",
                bool(np.sign(gain) == np.sign(paper) and tried),
            )
        )
    res = {"fifo": [], "gandiva": []}
    for s in range(seeds):
        res["fifo"].append(make_sim("gandiva", s).run(baselines.make("fifo", placer="pack")))
        res["gandiva"].append(make_sim("gandiva", s).run(baselines.make("gandiva")))
    for name, ms in res.items():
        print(
            f"{name:<8} avg JCT {np.mean([m.avg_jct_s for m in ms]):8.0f} s  makespan "
            f"{np.mean([m.makespan_s for m in ms]):8.0f} s  GPU util {np.mean([m.gpu_util for m in ms]):.2f}"
        )
    jct = {k: float(np.mean([m.avg_jct_s for m in v])) for k, v in res.items()}
    util = {k: float(np.mean([m.gpu_util for m in v])) for k, v in res.items()}
    claims.append(
        Claim("overload: Gandiva avg JCT vs FIFO", "lower", pct(jct["gandiva"], jct["fifo"]), bool(jct["gandiva"] < jct["fifo"]))
    )
    claims.append(
        Claim(
            "overload: cluster GPU utilisation vs FIFO (Fig. 15)",
            "higher",
            pct(util["gandiva"], util["fifo"]),
            bool(util["gandiva"] > util["fifo"]),
        )
    )
    return claims

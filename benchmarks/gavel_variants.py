"""Gavel consolidated / spread on V100 (issue 11): every consolidated-side mechanism tried.

    python benchmarks/gavel_variants.py     # about 2 minutes

`dlcluster fidelity` predicts V100's consolidated runs at 0.98-1.00 of linear where Gavel measured
0.3-1.6 (README "Speed model fidelity"). Each variant below changes only the consolidated run (sf
GPUs of one server; a spread run has one GPU per server, nothing to share) and is scored as the
fidelity command scores the engine: per GPU type, the connection cap fitted on the other job
families (`fidelity._fit_gavel`), median and p90 |predicted / measured ratio - 1|, Spearman pooled
over scale factors. No variant is fitted on the ratios it is scored on.

Links inside the server (spec sheets, nothing fitted; V100 only, K80 and P100 are PCIe already):
- `nvlink-1-link`: p3.16xlarge's hybrid cube-mesh (DGX-1 topology) gives a ring through any GPUs
  that hold a linked cycle one NVLink 2.0 link per hop, 25 GB/s per direction (V100 datasheet:
  6 links, 300 GB/s both directions), instead of the 150 GB/s of all six;
- `pcie-only`: no NVLink at all, PCIe 3.0 x16 shared (15.75 GB/s): the most any in-server link
  could cost, so it bounds every topology (a 4-GPU set without a linked cycle included).

Contention (each worker's compute x (1 + kappa x w x (GPUs of the job on the server - 1)); kappa
by least squares on log consolidated step time, one value per fit):
- `host`: w = 1, a per-server host / PCIe / input-pipeline share per co-resident GPU;
- `server-share`: w = s_j p_j, the job type's own co-location slowdown on this GPU type (Gavel's
  measured pairs, `profiles.fit_colocation`: r_ab = 1 / (1 + s_a p_b), so 1 / r_jj - 1 = s_j p_j):
  sharing a server costs kappa of sharing a GPU, the engine's k-way rule (slowdowns add over
  partners) with the partners on other GPUs of the server. The pairs are another observable than
  the scaling runs scored here.
kappa is fitted on: `families` the other job families of the same GPU type; `types` every family of
the other two GPU types; `both` the other families of the other GPU types.

Diagnostics (not models: each uses the measurement it predicts): the ratio with the consolidated
or the spread step time replaced by the measured one, what a perfect model of one side reaches.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from dlclusterenv import fidelity as F
from dlclusterenv.profiles import fit_colocation, load_gavel, shared_dir

NVLINK_LINK_MBps = 25_000.0  # NVLink 2.0, one link, per direction (NVIDIA Tesla V100 datasheet)
GPUS = ("k80", "p100", "v100")


def _steps(e, c, slow=1.0, link=None):
    """The engine's (consolidated, spread) step time; consolidated compute x `slow`, its in-server
    link `link` (MB/s, shared by the job's GPUs) instead of the spec sheet's where given."""
    comp, p, nic = 1.0 / e["alone"], F.GAVEL_PARAMS[e["family"]], F.GAVEL_NIC_MBps[e["gpu"]]
    (lc, kc), (ls, ks) = F._gavel_layouts(e)
    t_cons = F.step_time(lc, comp * slow, p, replace(c, intra_MBps=link or kc), gpus=8, nic_MBps=nic)
    t_spread = F.step_time(ls, comp, p, replace(c, intra_MBps=ks), gpus=8, nic_MBps=nic)
    return t_cons, t_spread


def _fit_kappa(train, weight, c) -> float:
    """kappa on log consolidated step time (sf / throughput) of `train`; one server, so the
    network constants do not enter."""
    meas = np.log([e["sf"] / e["consolidated"] for e in train])

    def resid(z):
        return np.log([_steps(e, c, 1 + z[0] * weight(e) * (e["sf"] - 1))[0] for e in train]) - meas

    return float(least_squares(resid, [0.05], bounds=([0.0], [10.0])).x[0])


def main() -> None:
    path = shared_dir() / "profiles" / "gavel_throughputs.json"
    entries = F.load_gavel_scaling(path)
    full = F.fit_pollux()
    fits = {g: fit_colocation(pairs) for g, pairs in load_gavel(path).items()}

    def self_pair(e):
        f = fits[e["gpu"]]
        return f.sensitivity[e["job"]] * f.pressure[e["job"]]

    fams = sorted({e["family"] for e in entries})
    conn = {(g, fam): F._fit_gavel([e for e in entries if e["gpu"] == g and e["family"] != fam], full)
            for g in GPUS for fam in fams}

    def held_out(g, fam):
        return [e for e in entries if e["gpu"] == g and e["family"] == fam]

    def training(g, fam, scope):
        return [e for e in entries
                if (e["gpu"] == g) == (scope == "families")
                and (e["gpu"] != g or e["family"] != fam)
                and (scope != "both" or e["family"] != fam)]

    variants = {"engine (spec-sheet links)": lambda e, c: _steps(e, c)}
    variants["nvlink-1-link"] = lambda e, c: _steps(
        e, c, link=e["sf"] * NVLINK_LINK_MBps if e["gpu"] == "v100" else None)
    variants["pcie-only"] = lambda e, c: _steps(e, c, link=F.GAVEL_PCIE_MBps)
    kappas: dict[str, list[float]] = {}
    for wname, weight in (("host", lambda e: 1.0), ("server-share", self_pair)):
        for scope in ("families", "types", "both"):
            name = f"{wname}, kappa from {scope}"
            cache: dict = {}

            def kappa(g, fam, weight=weight, scope=scope, cache=cache):
                key = g if scope == "types" else (g, fam)
                if key not in cache:
                    cache[key] = _fit_kappa(training(g, fam, scope), weight, full)
                return cache[key]

            variants[name] = (lambda e, c, kappa=kappa, weight=weight:
                              _steps(e, c, 1 + kappa(e["gpu"], e["family"]) * weight(e) * (e["sf"] - 1)))
            kappas[name] = cache
    diagnostics = {
        "diagnostic: consolidated measured": lambda e, c: (e["sf"] / e["consolidated"], _steps(e, c)[1]),
        "diagnostic: spread measured": lambda e, c: (_steps(e, c)[0], e["sf"] / e["spread"]),
    }

    head = "  ".join(f"{g + ' median / p90 / spearman':>30}" for g in GPUS)
    print(f"{'variant':<36} {head}  kappa range")
    for name, steps in {**variants, **diagnostics}.items():
        cells = []
        for g in GPUS:
            pred, meas = [], []
            for fam in fams:
                for e in held_out(g, fam):
                    t_cons, t_spread = steps(e, replace(full, conn_MBps=conn[g, fam].conn_MBps))
                    pred.append(t_spread / t_cons)
                    meas.append(e["consolidated"] / e["spread"])
            s = F._scores(np.array(pred), np.array(meas), np.zeros(len(meas)))
            cells.append(f"{s['median_abs_rel_err']:>13.1%} / {s['p90_abs_rel_err']:>6.1%} / "
                         f"{s['spearman_median']:>5.2f}")
        ks = list(kappas.get(name, {}).values())
        kr = f"{min(ks):.3f}-{max(ks):.3f}" if ks else ""
        print(f"{name:<36} " + "  ".join(cells) + f"  {kr}", flush=True)


if __name__ == "__main__":
    main()

"""Fidelity: the engine's step times against measured hardware, on data it was not fitted to.

Declared calibration data: Pollux's three placements files (`pollux_{imagenet,cifar10,bert}_
placements.csv`, every layout of 1-4 nodes x 1-4 T4 GPUs). The network constants (host path,
connection cap, per-message latency) and the overlap fractions are fitted on them by least squares
on log step time, leave-one-model-out: the model scored is never in its own fit. The scalability
files (6-16 nodes) are never fitted: they are scored with the constants of the other two models.
Gavel's consolidated / spread throughputs are scored leave-one-job-family-out: per GPU type, the
connection cap is fitted on the other families; the links inside a server come from spec sheets
(PCIe 3.0, V100's NVLink), the latency and overlap fractions from the Pollux fit (never fitted on
Gavel).

Gavel's co-located pairs (issue 17) are scored in sample per GPU type, leaving one job family out
and leaving one GPU type out (`profiles.colocation_report`), beside Gandiva Table 1's packing gain
(never fitted) and the per-type speed ratios of held-out job types (`profiles.family_rule_check`).

What is scored is what the placement adds: each file's single-GPU step time at a local batch is
the compute input (Pollux), or 1 / the single-GPU throughput (Gavel); every prediction is the
engine's own (`speed.alone_speed` on a cluster built from the testbed), not a formula kept here.

The statistical-efficiency tables (configs/efficiency.yaml, issue 11) are scored per model on the
adaptdl run they were not derived from (`efficiency.fidelity_report`; derived figures only, since
those files are not in ../shared).

Run `dlcluster fidelity` (everything), `dlcluster fidelity pollux FILE --params N ...` or
`dlcluster fidelity gavel-pairs FILE` (the co-location scores of one Gavel-format file).
"""

from __future__ import annotations

import ast
import csv
import json
import math
from functools import lru_cache
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import spearmanr

from .cluster import build_cluster
from .config import ClusterConfig, ModelSpec
from .jobs import Job, JobSpec
from .profiles import shared_dir
from .speed import PackingModel, alone_speed

_PACKING = PackingModel(eps=0.0, gamma=1.0)  # one job per GPU: unused

# Pollux testbed (../shared/profiles/README.md, benchmark/main.tf of the adaptdl artifact):
# g4dn.12xlarge, 4 x T4 on PCIe, 48 vCPUs, 192 GiB, 50 Gb/s network; PyTorch DDP (NCCL all-reduce).
TESTBEDS = {
    "T4": {"gpus": 4, "nic_MBps": 6250.0, "cpus": 48, "memory_gb": 192},
}
# Models of the declared Pollux files, parameter counts from the README of ../shared/profiles.
POLLUX_MODELS = {"imagenet": 25_557_032, "cifar10": 11_173_962, "bert": 109_500_000}

# Gavel job families (gavel workloads/pytorch/; README "Speed model fidelity" names the sources): parameter
# counts of the models Gavel ran, data-parallel with DDP (NCCL). Transformer: 44,138,496 plus the
# Multi30k embeddings, whose vocabulary sizes were not verified: about 48 M (estimated).
GAVEL_PARAMS = {
    "ResNet-18": 11_173_962,
    "ResNet-50": 25_557_032,
    "Transformer": 48_000_000,
    "LM": 13_987_678,
}
# Gavel's testbed network is not in the profiles' README: 10 Gb/s (K80, P100) and 25 Gb/s (V100)
# NICs are assumed (AWS p2.8xlarge / p3.16xlarge class); the fitted connection cap sits below both.
GAVEL_NIC_MBps = {"k80": 1250.0, "p100": 1250.0, "v100": 3125.0}
# Links inside a Gavel server, from spec sheets, never fitted. PCIe 3.0 x16: 985 MB/s per lane x 16
# = 15.75 GB/s per direction (PCI-SIG); every GPU's traffic to the NIC is staged over it. V100 SXM2
# (p3.16xlarge, assumed as above): NVLink 2.0, 300 GB/s per GPU both directions = 150 GB/s per
# direction (NVIDIA Tesla V100 datasheet), GPU to GPU. K80 and P100 servers are taken as PCIe
# boards (no NVLink; assumed: the profiles' README does not name the servers).
GAVEL_PCIE_MBps = 15_750.0
GAVEL_NVLINK_MBps = {"v100": 150_000.0}


class FidelityError(ValueError):
    """A measurement file that cannot be read; the message names file, line and field."""


@dataclass(frozen=True)
class Constants:
    """What is fitted: the testbed's network, and how much communication the compute hides."""

    intra_MBps: float
    conn_MBps: float
    latency_s: float
    overlap: float
    overlap_max: float


@dataclass(frozen=True)
class Row:
    layout: tuple[int, ...]  # GPUs used on each node
    local_bsz: int
    step_s: float
    line: int


# ----------------------------------------------------------------------------- loading
def _num(value: str, path: Path, line: int, field: str, kind=float, positive=True):
    try:
        x = kind(value)
    except (TypeError, ValueError):
        raise FidelityError(f"{path}: line {line}: {field}: not a number: {value!r}") from None
    if not math.isfinite(x) or (positive and x <= 0):
        raise FidelityError(f"{path}: line {line}: {field}: must be a positive number, got {value!r}")
    return x


def load_pollux(path: str | Path) -> list[Row]:
    """A Pollux measurement file, `placements.csv` or `scalability.csv` format (adaptdl artifact).

    Scalability rows give only nodes and replicas; their layout spreads the replicas as evenly as
    the nodes allow (the first `replicas % nodes` nodes get one more), as the artifact's runs did.
    """
    path = Path(path)
    try:
        f = open(path, newline="")
    except OSError as e:
        raise FidelityError(f"{path}: cannot read: {e}") from None
    with f:
        reader = csv.DictReader(f)
        cols = set(reader.fieldnames or ())
        placements = {"placement", "local_bsz", "step_time"} <= cols
        scalability = {"num_nodes", "num_replicas", "local_bsz", "step_time"} <= cols
        if not (placements or scalability):
            raise FidelityError(
                f"{path}: line 1: header {sorted(cols)} has neither placements columns "
                "(placement, local_bsz, step_time) nor scalability columns "
                "(num_nodes, num_replicas, local_bsz, step_time)"
            )
        rows = []
        for i, r in enumerate(reader, start=2):
            if placements:
                p = (r.get("placement") or "").strip()
                if not p.isdigit() or "0" in p:
                    raise FidelityError(
                        f"{path}: line {i}: placement: expected one digit 1-9 per node, got {p!r}"
                    )
                layout = tuple(int(x) for x in p)
            else:
                k = _num(r["num_nodes"], path, i, "num_nodes", int)
                n = _num(r["num_replicas"], path, i, "num_replicas", int)
                if n < k:
                    raise FidelityError(f"{path}: line {i}: num_replicas: {n} < num_nodes {k}")
                layout = tuple(n // k + (1 if j < n % k else 0) for j in range(k))
            bsz = _num(r["local_bsz"], path, i, "local_bsz", int)
            step = _num(r["step_time"], path, i, "step_time")
            rows.append(Row(layout, bsz, step, i))
    if not rows:
        raise FidelityError(f"{path}: no measurements")
    return rows


def single_gpu_steps(rows: list[Row], path: str | Path) -> dict[int, float]:
    """Mean measured one-GPU step time per local batch: the compute input."""
    acc: dict[int, list[float]] = {}
    for r in rows:
        if r.layout == (1,):
            acc.setdefault(r.local_bsz, []).append(r.step_s)
    if not acc:
        raise FidelityError(
            f"{path}: no one-GPU rows (placement '1'): pass --step1 with a file that has them"
        )
    return {b: float(np.mean(v)) for b, v in acc.items()}


def _mean_rows(rows: list[Row], compute: dict[int, float]) -> list[Row]:
    """Repeated measurements of one (layout, batch) averaged; batches without compute dropped."""
    acc: dict[tuple, list[float]] = {}
    for r in rows:
        if r.local_bsz in compute:
            acc.setdefault((r.layout, r.local_bsz), []).append(r.step_s)
    return [Row(lay, b, float(np.mean(v)), 0) for (lay, b), v in sorted(acc.items())]


# ----------------------------------------------------------------------------- engine
@lru_cache(maxsize=256)
def _cluster(n_nodes: int, gpus: int, nic_MBps: float, c: Constants, cpus=64, memory_gb=512):
    cfg = ClusterConfig.model_validate({
        "name": "fidelity", "source": "fidelity testbed",
        "node_types": {"n": {"cpus": cpus, "memory_gb": memory_gb, "gpus": gpus,
                             "nic_MBps": nic_MBps, "intra_MBps": c.intra_MBps}},
        "racks": [{"uplink_MBps": 1e12, "nodes": [{"type": "n", "count": n_nodes}]}],
        "network": {"conn_MBps": c.conn_MBps, "latency_s": c.latency_s},
        "overheads": {"rpc_s": 0.0},
    })
    return build_cluster(cfg)


@lru_cache(maxsize=4096)
def _model(params: float, compute_s: float, c: Constants, comm: str) -> ModelSpec:
    return ModelSpec.model_validate({
        "source": "fidelity", "param_bytes": 4.0 * params, "step_compute_s": compute_s,
        "ps_update_s": 0.0, "comm": comm, "steps_per_epoch": 1,
        "ps": {"cpu": 0, "mem_gb": 1}, "worker": {"cpu": 0, "mem_gb": 1, "gpu": 1},  # memory unused here
        "overlap": c.overlap, "overlap_max": c.overlap_max,
        "loss": {"b0": 1, "b1": 1, "b2": 0}, "convergence": {"rel_delta": 0.1, "max_epochs": 1},
    })


def step_time(layout, compute_s: float, params: float, c: Constants, *, gpus: int,
              nic_MBps: float, comm: str = "allreduce") -> float:
    """The engine's step time for one job alone on `layout` (GPUs per node). A PS job gets one
    PS on each node it uses (a documented choice: the files do not place PS)."""
    cluster = _cluster(len(layout), max(gpus, max(layout)), nic_MBps, c)
    m = _model(params, compute_s, c, comm)
    w_nodes = [i for i, g in enumerate(layout) for _ in range(g)]
    ps_nodes = list(range(len(layout))) if comm == "ps" else []
    job = Job(JobSpec("J", "m", 0.0, len(ps_nodes), len(w_nodes)), m, np.random.default_rng(0), 1)
    o = cluster.config.overheads
    return len(w_nodes) / alone_speed(cluster, job, ps_nodes, w_nodes, o, _PACKING)


def comm_time(layout, params: float, c: Constants, **kw) -> float:
    """What the placement adds to a step when nothing overlaps (engine, compute ~0)."""
    bare = Constants(c.intra_MBps, c.conn_MBps, c.latency_s, 0.0, 0.0)
    return step_time(layout, 1e-12, params, bare, **kw) - 1e-12


def _predict(rows, compute, params, c: Constants, gpus, nic, comm, cache=None) -> np.ndarray:
    """Step times of `rows`. The fit's inner loop asks the engine once per layout for the bare
    communication X and applies the engine's overlap rule c + X - min(overlap c, overlap_max X);
    `test_fidelity` checks that this equals `step_time` (the engine) on every row."""
    xs = {}
    out = np.empty(len(rows))
    for i, r in enumerate(rows):
        if r.layout not in xs:
            xs[r.layout] = comm_time(r.layout, params, c, gpus=gpus, nic_MBps=nic, comm=comm)
        x, cb = xs[r.layout], compute[r.local_bsz]
        out[i] = cb + x - min(c.overlap * cb, c.overlap_max * x)
    return out


# ----------------------------------------------------------------------------- fitting
_LO = np.array([100.0, 10.0, 0.0, 0.0, 0.0])
_HI = np.array([1e5, 1e5, 0.01, 1.0, 1.0])
_X0 = np.array([8000.0, 500.0, 1e-4, 0.5, 0.5])


def _to_c(x) -> Constants:
    return Constants(float(x[0]), float(x[1]), float(x[2]), float(x[3]), float(x[4]))


def fit(datasets, *, fixed: dict | None = None) -> Constants:
    """Least squares on log step time over `datasets` [(rows, compute, params, gpus, nic, comm)].

    `fixed` pins some constants by name (Gavel keeps Pollux's overlap fractions)."""
    names = list(Constants.__dataclass_fields__)
    fixed = fixed or {}
    free = [i for i, n in enumerate(names) if n not in fixed]
    scale = _X0[free]

    def full(z):
        x = _X0.copy()
        x[free] = z * scale
        for i, n in enumerate(names):
            if n in fixed:
                x[i] = fixed[n]
        return _to_c(x)

    def resid(z):
        c = full(z)
        return np.concatenate([
            np.log(_predict(rows, comp, p, c, g, nic, comm) / np.array([r.step_s for r in rows]))
            for rows, comp, p, g, nic, comm in datasets
        ])

    z = least_squares(resid, np.ones(len(free)), bounds=(_LO[free] / scale, _HI[free] / scale),
                      x_scale="jac").x
    return full(z)


# ----------------------------------------------------------------------------- scoring
def _scores(pred: np.ndarray, meas: np.ndarray, groups: np.ndarray) -> dict:
    err = np.abs(pred / meas - 1)
    rho = [spearmanr(pred[groups == g], meas[groups == g])[0]
           for g in np.unique(groups) if (groups == g).sum() >= 3]
    rho = [r for r in rho if np.isfinite(r)]
    return {
        "spearman_median": float(np.median(rho)) if rho else float("nan"),
        "median_abs_rel_err": float(np.median(err)),
        "p90_abs_rel_err": float(np.percentile(err, 90)),
        "n": int(len(meas)),
    }


def _rank_agreement(table: dict) -> dict:
    """Median Spearman between adjacent keys of `table` {key: {item: value}} over their common
    items (at least 3), and the ceiling it implies for a model (sqrt, below)."""
    keys = sorted(table)
    rho = []
    for a, b in zip(keys, keys[1:]):
        common = sorted(set(table[a]) & set(table[b]))
        if len(common) >= 3:
            r = spearmanr([table[a][k] for k in common], [table[b][k] for k in common])[0]
            if np.isfinite(r):
                rho.append(float(r))
    agree = float(np.median(rho)) if rho else float("nan")
    return {"adjacent_spearman": agree, "ceiling": math.sqrt(agree) if agree > 0 else float("nan"),
            "pairs": len(rho)}


def self_consistency(rows: list[Row]) -> dict:
    """How well the data agree with themselves: the multi-GPU layouts' ranking at one local batch
    against the next larger batch (median over adjacent pairs). The files hold one measurement per
    (layout, batch), so split-half is not possible; adjacent batches are the closest repeat.

    `ceiling` = sqrt(adjacent_spearman): if each batch's ranking is one true ranking plus
    independent noise of equal size, a model that had the true ranking would agree with one
    measured batch at sqrt of the agreement between two (classical test theory's reliability
    index; a choice, written here). Real differences between batches (overlap grows with the
    batch) lower the agreement too, so both figures are lower bounds of what is achievable."""
    table: dict = {}
    for r in rows:
        if r.layout != (1,):
            table.setdefault(r.local_bsz, {})[r.layout] = r.step_s
    return _rank_agreement(table)


def score_pollux(rows, compute, params, c: Constants, *, gpus=4, nic=6250.0, comm="allreduce"):
    """Spearman per local batch (median), and |pred/meas - 1| over every layout and batch; the
    one-GPU rows are the compute input, so they are left out of the score."""
    rows = [r for r in _mean_rows(rows, compute) if r.layout != (1,)]
    pred = np.array([step_time(r.layout, compute[r.local_bsz], params, c, gpus=gpus,
                               nic_MBps=nic, comm=comm) for r in rows])
    meas = np.array([r.step_s for r in rows])
    out = _scores(pred, meas, np.array([r.local_bsz for r in rows]))
    out["self_consistency"] = self_consistency(rows)
    out["per_batch"] = {
        int(b): _scores(pred[sel], meas[sel], np.zeros(int(sel.sum())))
        for b in sorted({r.local_bsz for r in rows})
        for sel in [np.array([r.local_bsz == b for r in rows])]
    }
    return out


def _pollux_set(name: str, profiles: Path):
    rows = load_pollux(profiles / f"pollux_{name}_placements.csv")
    compute = single_gpu_steps(rows, profiles / f"pollux_{name}_placements.csv")
    return _mean_rows(rows, compute), compute, POLLUX_MODELS[name], 4, 6250.0, "allreduce"


def fit_pollux(exclude: tuple[str, ...] = (), profiles: Path | None = None) -> Constants:
    profiles = profiles or shared_dir() / "profiles"
    return fit([_pollux_set(n, profiles) for n in POLLUX_MODELS if n not in exclude])


# ----------------------------------------------------------------------------- Gavel
def load_gavel_scaling(path: str | Path) -> list[dict]:
    """(GPU type, job type, family, scale factor, alone, consolidated, spread) from Gavel's file,
    for the job families with a parameter count (`GAVEL_PARAMS`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise FidelityError(f"{path}: cannot read Gavel throughputs: {e}") from None
    out = []
    for gpu in ("k80", "p100", "v100"):
        cons, spread = data.get(gpu, {}), data.get(f"{gpu}_unconsolidated", {})
        for key, entry in cons.items():
            try:
                job, sf = ast.literal_eval(key)
            except (ValueError, SyntaxError):
                raise FidelityError(f"{path}: {gpu}.{key}: not a '(job_type, scale_factor)' key") from None
            family = job.split(" (")[0]
            one = cons.get(str((job, 1)), {}).get("null")
            sp = spread.get(key, {}).get("null")
            if sf < 2 or family not in GAVEL_PARAMS or not one or not sp or not entry.get("null"):
                continue
            out.append({"gpu": gpu, "job": job, "family": family, "sf": int(sf), "alone": float(one),
                        "consolidated": float(entry["null"]), "spread": float(sp)})
    if not out:
        raise FidelityError(f"{path}: no multi-GPU job type with both placements")
    return out


def _gavel_layouts(e: dict) -> list[tuple[tuple[int, ...], float]]:
    """(layout, in-server link MB/s) of the consolidated and the spread run. The engine's node host
    path is one link its GPUs share (PCIe); NVLink gives each GPU its own, so for a job alone on sf
    NVLinked GPUs the host path that costs the same is sf x the per-GPU link. Spread runs have one
    GPU per server, whose all-reduce traffic goes to the NIC over PCIe."""
    nvlink = GAVEL_NVLINK_MBps.get(e["gpu"])
    cons = e["sf"] * nvlink if nvlink else GAVEL_PCIE_MBps
    return [((e["sf"],), cons), ((1,) * e["sf"], GAVEL_PCIE_MBps)]


def _gavel_steps(e: dict, c: Constants) -> list[float]:
    """The engine's step time, consolidated then spread, with the server's spec-sheet link."""
    comp, p, nic = 1.0 / e["alone"], GAVEL_PARAMS[e["family"]], GAVEL_NIC_MBps[e["gpu"]]
    return [step_time(lay, comp, p, replace(c, intra_MBps=link), gpus=8, nic_MBps=nic)
            for lay, link in _gavel_layouts(e)]


def _gavel_ratio(e: dict, c: Constants) -> float:
    """Consolidated / spread throughput: sf GPUs on one server vs one GPU on each of sf servers."""
    t_cons, t_spread = _gavel_steps(e, c)
    return t_spread / t_cons


def score_gavel(path: str | Path, overlap: Constants) -> dict:
    """Per GPU type, leave one job family out: the connection cap fitted on the other families'
    consolidated and spread step times; in-server links from spec sheets, latency and overlap
    fractions from Pollux."""
    entries = load_gavel_scaling(path)
    out = {}
    for gpu in ("k80", "p100", "v100"):
        mine = [e for e in entries if e["gpu"] == gpu]
        pred, meas, sfs = [], [], []
        table: dict = {}
        for e in mine:
            table.setdefault(e["sf"], {})[e["job"]] = e["consolidated"] / e["spread"]
        for fam in sorted({e["family"] for e in mine}):
            train = [e for e in mine if e["family"] != fam]
            c = _fit_gavel(train, overlap)
            for e in mine:
                if e["family"] == fam:
                    pred.append(_gavel_ratio(e, c))
                    meas.append(e["consolidated"] / e["spread"])
                    sfs.append(e["sf"])
        pred, meas, sfs = np.array(pred), np.array(meas), np.array(sfs)
        out[gpu] = _scores(pred, meas, np.zeros(len(meas)))  # Spearman pooled over scale factors
        out[gpu]["spearman_per_sf"] = {  # over job types at one scale factor
            int(k): _scores(pred[sfs == k], meas[sfs == k], np.zeros(int((sfs == k).sum())))["spearman_median"]
            for k in np.unique(sfs)
        }
        # the data's own agreement: job types' ratio ranking at one scale factor vs the next
        out[gpu]["self_consistency"] = _rank_agreement(table)
        out[gpu]["measured_median_ratio"] = float(np.median(meas))
        out[gpu]["predicted_median_ratio"] = float(np.median(pred))
    return out


def _fit_gavel(entries: list[dict], overlap: Constants) -> Constants:
    """The connection cap, by least squares on log step time over the measured per-GPU step times,
    consolidated and spread (throughputs are summed over workers, so a step of the sf-GPU job
    takes sf / throughput); everything else fixed (links from spec sheets, the rest from Pollux)."""
    meas = np.log([e["sf"] / thr for e in entries for thr in (e["consolidated"], e["spread"])])

    def resid(z):
        c = replace(overlap, conn_MBps=float(z[0]) * 100.0)
        return np.log([t for e in entries for t in _gavel_steps(e, c)]) - meas

    z = least_squares(resid, [5.0], bounds=([0.1], [1000.0]), x_scale="jac").x
    return replace(overlap, conn_MBps=float(z[0]) * 100.0)


# ----------------------------------------------------------------------------- report
def report(profiles: Path | None = None) -> dict:
    """Every measurement in ../shared/profiles, scored on data its constants were not fitted on."""
    profiles = profiles or shared_dir() / "profiles"
    out: dict = {"pollux": {}, "pollux_scalability": {}, "constants": {}}
    from .efficiency import fidelity_report

    out["efficiency"] = fidelity_report()
    for name, params in POLLUX_MODELS.items():
        c = fit_pollux(exclude=(name,), profiles=profiles)
        out["constants"][f"without_{name}"] = asdict(c)
        rows, compute, *_ = _pollux_set(name, profiles)
        out["pollux"][name] = score_pollux(rows, compute, params, c)
        scal = profiles / f"pollux_{name}_scalability.csv"
        if scal.exists():
            out["pollux_scalability"][name] = score_pollux(load_pollux(scal), compute, params, c)
    full = fit_pollux(profiles=profiles)
    out["constants"]["all"] = asdict(full)
    gavel = profiles / "gavel_throughputs.json"
    if gavel.exists():
        out["gavel"] = score_gavel(gavel, full)
        from .profiles import colocation_report, family_rule_check, gandiva_packing_check, load_gavel
        from .sim import DEFAULT_PACKING

        out["gavel_pairs"] = colocation_report(load_gavel(gavel))
        out["gandiva_packing"] = gandiva_packing_check(DEFAULT_PACKING.colocation)
        out["gpu_types"] = family_rule_check(profiles.parent)
    return out


def check_file(path: str | Path, params: float, gpu_type: str, comm: str,
               step1: str | Path | None = None) -> dict:
    """Score one Pollux-format file with constants fitted on the declared files other than it."""
    if gpu_type not in TESTBEDS:
        raise FidelityError(f"--gpu-type: unknown {gpu_type!r}; testbeds: {sorted(TESTBEDS)}")
    if not 0 < params < math.inf:  # nan passed `params <= 0`, then ended in a pydantic traceback
        raise FidelityError(f"--params: must be a finite number > 0, got {params}")
    path = Path(path)
    rows = load_pollux(path)
    ref = Path(step1) if step1 else path
    compute = single_gpu_steps(load_pollux(ref) if step1 else rows, ref)
    profiles = shared_dir() / "profiles"
    same = tuple(n for n in POLLUX_MODELS
                 if (profiles / f"pollux_{n}_placements.csv").resolve() == path.resolve()
                 or (profiles / f"pollux_{n}_scalability.csv").resolve() == path.resolve())
    c = fit_pollux(exclude=same, profiles=profiles)
    tb = TESTBEDS[gpu_type]
    out = score_pollux(rows, compute, params, c, gpus=tb["gpus"], nic=tb["nic_MBps"],
                       comm=comm)
    out["constants"] = asdict(c)
    out["fitted_on"] = [n for n in POLLUX_MODELS if n not in same]
    return out


def _line(name: str, s: dict) -> str:
    sc = s.get("self_consistency")
    data = f" {sc['adjacent_spearman']:>5.2f} {sc['ceiling']:>7.2f}" if sc else " " * 14
    return (f"{name:<28} {s['spearman_median']:>8.2f}{data} {s['median_abs_rel_err']:>9.1%} "
            f"{s['p90_abs_rel_err']:>9.1%} {s['n']:>6}")


def _print_pairs(g: dict) -> None:
    print("Gavel co-located pairs, ratio_a = 1 / (1 + s_a p_b) per GPU type (profiles.fit_colocation)")
    for gpu, v in g["in_sample"].items():
        print(f"  in sample {gpu:<5} R^2 {v['r2']:.3f}  RMSE {v['rmse']:.3f}  n {v['n']}")
    lf = g["leave_family_out"]
    print(f"  leave one family out: RMSE {lf['rmse']:.3f} (constant {lf['constant_rmse']:.3f}), n {lf['n']}")
    for gpu, v in g["leave_gpu_out"].items():
        print(f"  leave {gpu} out: RMSE {v['rmse']:.3f} (constant {v['constant_rmse']:.3f}), n {v['n']}")


def _print_colocation(out: dict) -> None:
    _print_pairs(out["gavel_pairs"])
    print("Gandiva Table 1 packing gain on P40, two copies (k-way rule, never fitted): measured / predicted")
    for fam, v in out["gandiva_packing"].items():
        pred = ", ".join(f"{j.split('(')[-1].rstrip(')')}: {x:.2f}" for j, x in v["predicted"].items())
        print(f"  {fam}: {v['measured']:.2f} / {pred}")
    t = out["gpu_types"]
    print(f"Speed ratio between GPU types, held-out job type from its family's nearest batch: median error "
          f"{t['median']:.1%}, max {t['max']:.1%}, n {t['n']}")


def _print_efficiency(e: dict) -> None:
    print("Statistical efficiency (configs/efficiency.yaml, efficiency: pgns): samples a run at a larger batch "
          "needs over the fit run's, predicted from the phi table of the fit file only, scored on the other "
          "file of the model (petuum/adaptdl@de25dcc simulator/traces); none = weak scaling alone (ratio 1)")
    print(f"  {'model':<12} {'batches':>10} {'whole: measured':>15} {'predicted':>9} {'err':>7} {'none err':>8}"
          f" {'target: measured':>16} {'predicted':>9} {'err':>7} {'none err':>8}")
    for name, r in e["models"].items():
        w, t = r["whole"], r["target"]
        print(f"  {name:<12} {r['fit_batch']:>4}->{r['batch']:<5} {w['measured']:>15.3f} {w['predicted']:>9.3f} "
              f"{w['rel_err']:>7.1%} {w['none_rel_err']:>8.1%} {t['measured']:>16.3f} {t['predicted']:>9.3f} "
              f"{t['rel_err']:>7.1%} {t['none_rel_err']:>8.1%}")
    for key, s in e["summary"].items():
        print(f"  {key}: median |err| {s['median_abs_rel_err']:.1%} (none {s['none_median_abs_rel_err']:.1%}), "
              f"max {s['max_abs_rel_err']:.1%} (none {s['none_max_abs_rel_err']:.1%})")


def cli(kind, file, params, gpu_type, comm, step1, json_out) -> None:
    """`dlcluster fidelity`: print the scores (and write them as JSON)."""
    head = (f"{'measurement':<28} {'spearman':>8} {'data':>5} {'ceiling':>7} {'median':>9} {'p90':>9} "
            f"{'n':>6}")
    if kind != "gavel-pairs":
        print("spearman: model vs measured; data: the measurements' own agreement between adjacent local "
              "batches (Gavel: scale factors); ceiling: sqrt(data), what a model with the true ranking "
              "would reach")
    if kind is None:
        out = report()
        print("Pollux placements, leave-one-model-out (compute: each file's one-GPU step time)")
        print(head)
        for name, s in out["pollux"].items():
            print(_line(name, s))
        print("Pollux scalability (6-16 nodes, never fitted; constants of the other two models)")
        for name, s in out["pollux_scalability"].items():
            print(_line(name, s))
        if "gavel" in out:
            print("Gavel consolidated / spread throughput ratio, leave-one-family-out per GPU type")
            print(head + f" {'measured':>9} {'predicted':>9}  (median ratio)  spearman per scale factor")
            for gpu, s in out["gavel"].items():
                per = ", ".join(f"{k} GPUs {v:.2f}" for k, v in s["spearman_per_sf"].items())
                print(_line(gpu, s) + f" {s['measured_median_ratio']:>9.2f} {s['predicted_median_ratio']:>9.2f}  {per}")
        if "gavel_pairs" in out:
            _print_colocation(out)
        _print_efficiency(out["efficiency"])
        c = out["constants"]["all"]
        print("constants fitted on all three placements files: " +
              ", ".join(f"{k}={v:.4g}" for k, v in c.items()))
    elif kind == "gavel-pairs":
        if file is None:
            raise FidelityError("fidelity gavel-pairs: give FILE (Gavel's throughputs.json format)")
        from .profiles import colocation_report, load_gavel

        try:
            out = colocation_report(load_gavel(file))
        except ValueError as e:
            raise FidelityError(str(e)) from None
        _print_pairs(out)
    else:
        if file is None or params is None:
            raise FidelityError("fidelity pollux: give FILE and --params N")
        out = check_file(file, params, gpu_type, comm, step1)
        print(f"{file}: fitted on {', '.join(out['fitted_on'])}")
        print(head)
        for b, s in out["per_batch"].items():
            print(_line(f"local batch {b}", s))
        print(_line("overall", out))
    if json_out:
        Path(json_out).write_text(json.dumps(out, indent=2, default=float))

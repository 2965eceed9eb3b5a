"""Measured job profiles and the calibration of the GPU-packing model.

Gandiva packs two jobs on one GPU; the simulator models job A's speed (relative to alone) as
``(1 - eps) * min(1, 1 / (u_a + u_b)) ** gamma`` (:func:`packing_speed`). Gavel measured real
co-located throughputs but no utilisations, so :func:`fit_packing` fits per-job-type utilisations
together with eps and gamma, giving the config numbers a measured source instead of a guess.

The engine's measured co-location (issue 17) is :func:`fit_colocation` (per GPU type, asymmetric:
a job's sensitivity and its partner's pressure) with Gavel's pairs themselves
(:func:`colocation_table`), and per-type single-GPU speeds come from :func:`gpu_step_table`; both
write derived numbers into configs (configs/colocation/gavel.yaml, configs/zoos/gavel.yaml).

Run ``python -m dlclusterenv.profiles`` to print the symmetric fits; ``dlcluster fidelity`` scores
the asymmetric one.
"""

from __future__ import annotations

import ast
import csv
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from .checks import is_int, is_real
from .config import shared_dir

GAVEL_GPU_TYPES = ("k80", "p100", "v100")
_U_MIN = 1e-3  # utilisations must stay > 0; the fit's lower bound
_SCREEN_NFEV = 20  # iterations per start before the best starts are run to convergence


# ----------------------------------------------------------------------------- Gavel
@dataclass(frozen=True)
class GavelPair:
    """Two single-GPU jobs measured alone and sharing one GPU (steps/s)."""

    gpu_type: str
    job_a: str
    job_b: str
    alone_a: float
    alone_b: float
    packed_a: float
    packed_b: float

    @property
    def ratio_a(self) -> float:
        return self.packed_a / self.alone_a

    @property
    def ratio_b(self) -> float:
        return self.packed_b / self.alone_b


def _parse_job_key(key: str, where: str) -> tuple[str, int]:
    try:
        job, sf = ast.literal_eval(key)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise ValueError(f"{where}: key {key!r} is not a '(job_type, scale_factor)' tuple") from exc
    if not isinstance(job, str) or not is_int(sf):
        raise ValueError(f"{where}: key {key!r} is not a '(job_type, scale_factor)' tuple")
    return job, sf


def _number(value: object, where: str) -> float:
    if not is_real(value):
        raise ValueError(f"{where}: expected a finite number, got {value!r}")
    if value < 0:
        raise ValueError(f"{where}: throughput must be >= 0, got {value!r}")
    return float(value)


def load_gavel(path: str | Path) -> dict[str, list[GavelPair]]:
    """Single-GPU co-location pairs per GPU type from Gavel's native throughput file.

    Keeps scale factor 1 on both sides and the consolidated GPU types only (``*_unconsolidated``
    spreads workers over servers, which says nothing about sharing one GPU). Gavel stores each
    pair twice, (A, B) and (B, A); one record per unordered pair is kept and the two copies must
    agree. Pairs with a 0.0 throughput did not fit in GPU memory and are skipped.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read Gavel throughputs: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level must be an object keyed by GPU type")

    out: dict[str, list[GavelPair]] = {}
    for gpu, jobs in data.items():
        if gpu.endswith("_unconsolidated"):
            continue
        if not isinstance(jobs, dict):
            raise ValueError(f"{path}: key {gpu!r} must map job keys to measurements")
        entries: dict[str, tuple[str, dict]] = {}  # job -> (its key, its measurements)
        alone: dict[str, float] = {}
        for key, entry in jobs.items():
            where = f"{path}: {gpu}.{key}"
            job, sf = _parse_job_key(key, f"{path}: {gpu}")
            if sf != 1:
                continue
            if not isinstance(entry, dict) or "null" not in entry:
                raise ValueError(f"{where}: missing the 'null' (alone) throughput")
            alone[job] = _number(entry["null"], f"{where}.null")
            if alone[job] == 0:
                raise ValueError(f"{where}.null: alone throughput must be > 0")
            entries[job] = key, entry

        seen: dict[tuple[str, str], tuple[float, float, str]] = {}
        for job, (key, entry) in entries.items():
            for other_key, packed in entry.items():
                if other_key == "null":
                    continue
                where = f"{path}: {gpu}.{key}.{other_key}"
                other, sf = _parse_job_key(other_key, where)
                if sf != 1:
                    continue
                if not isinstance(packed, list) or len(packed) != 2:
                    raise ValueError(f"{where}: expected [this, other] throughputs, got {packed!r}")
                this_v, other_v = (_number(v, where) for v in packed)
                if other not in alone:
                    raise ValueError(f"{where}: no alone throughput for {other!r} on {gpu}")
                pair = tuple(sorted((job, other)))
                vals = (this_v, other_v) if pair == (job, other) else (other_v, this_v)
                if pair in seen:
                    if not np.allclose(seen[pair][:2], vals, rtol=1e-9):
                        raise ValueError(f"{where}: disagrees with its mirror {seen[pair][2]}")
                    continue
                seen[pair] = (*vals, where)
        out[gpu] = [
            GavelPair(gpu, a, b, alone[a], alone[b], pa, pb)
            for (a, b), (pa, pb, _) in sorted(seen.items())
            if pa > 0 and pb > 0
        ]
    return out


# ----------------------------------------------------------------------------- speed per GPU type
_POLLUX_T4 = {"ResNet-50": "imagenet", "ResNet-18": "cifar10"}  # Gavel family -> Pollux model (T4)


def _family_batch(job: str) -> tuple[str, int | None]:
    """'ResNet-18 (batch size 32)' -> ('ResNet-18', 32); 'A3C' -> ('A3C', None)."""
    if "(batch size " in job:
        fam, rest = job.split(" (batch size ")
        return fam, int(rest.rstrip(")"))
    return job, None


def gavel_alone(path: str | Path) -> dict[str, dict[str, float]]:
    """Single-GPU steps/s alone per job type per GPU type (scale factor 1, consolidated types)."""
    data = json.loads(Path(path).read_text())
    out: dict[str, dict[str, float]] = {}
    for gpu in GAVEL_GPU_TYPES:
        for key, entry in data[gpu].items():
            job, sf = _parse_job_key(key, f"{path}: {gpu}")
            if sf == 1:
                out.setdefault(job, {})[gpu] = _number(entry["null"], f"{path}: {gpu}.{key}.null")
    return out


def gpu_step_table(shared: str | Path) -> dict[str, dict[str, float]]:
    """Seconds per single-GPU step per job type per GPU type, the numbers the gavel zoo carries.

    k80, p100, v100: 1 / Gavel's steps/s alone. t4: Pollux's one-GPU step time (placement "1") of the
    same network (ResNet-50 = imagenet, ResNet-18 = cifar10), linear in local batch between its
    measured batches; a batch outside them takes the family rule: its V100 step times the T4/V100
    ratio of the nearest batch of the same family that has a T4 figure. Families Pollux did not
    measure get no t4 entry (the engine then refuses them on a T4).
    """
    shared = Path(shared)
    alone = gavel_alone(shared / "profiles" / "gavel_throughputs.json")
    table = {job: {g: 1.0 / v for g, v in per.items()} for job, per in alone.items()}
    for fam, pollux in _POLLUX_T4.items():
        rows = [r for r in load_pollux_placements(shared / "profiles" / f"pollux_{pollux}_placements.csv")
                if r.placement == "1"]
        bsz = np.array([r.local_bsz for r in rows], float)
        step = np.array([r.step_time for r in rows])
        order = np.argsort(bsz)
        bsz, step = bsz[order], step[order]
        jobs = sorted((b, j) for j in table for f, b in [_family_batch(j)] if f == fam)
        inside = {b: j for b, j in jobs if bsz[0] <= b <= bsz[-1]}
        for b, j in inside.items():
            table[j]["t4"] = float(np.interp(b, bsz, step))
        for b, j in jobs:
            if b not in inside:
                near = min(inside, key=lambda x: abs(x - b))
                ratio = table[inside[near]]["t4"] / table[inside[near]]["v100"]
                table[j]["t4"] = table[j]["v100"] * ratio
    return table


def family_rule_check(shared: str | Path) -> dict[str, float]:
    """How well the family rule predicts a held-out job type's speed ratio between GPU types.

    Each Gavel job type with a batch size is held out in turn; its k80/v100 and p100/v100 step
    ratios are predicted by the nearest batch size of its family and compared with the measured
    ones. Returns the median and the largest relative error over all (job type, ratio) cases.
    """
    table = gpu_step_table(shared)
    errors = []
    for job, steps in table.items():
        fam, b = _family_batch(job)
        peers = [(abs(_family_batch(o)[1] - b), o) for o in table
                 if o != job and b is not None and _family_batch(o)[0] == fam]
        if not peers:
            continue
        near = table[min(peers)[1]]
        for g in ("k80", "p100"):
            pred, true = near[g] / near["v100"], steps[g] / steps["v100"]
            errors.append(abs(pred - true) / true)
    return {"median": float(np.median(errors)), "max": float(np.max(errors)), "n": len(errors)}


# ----------------------------------------------------------------------------- packing model
def packing_speed(u_a: float, u_b: float, eps: float, gamma: float) -> float:
    """Speed of job A, relative to running alone, when it shares one GPU with job B.

    ``eps`` is the fixed cost of sharing (context switches, memory contention); once the two
    utilisations add up past 1 the GPU is oversubscribed and speed falls as ``(u_a+u_b)**-gamma``.
    """
    if not (0 < u_a <= 1 and 0 < u_b <= 1):
        raise ValueError(f"utilisations must be in (0, 1], got u_a={u_a}, u_b={u_b}")
    if not (0 <= eps < 1 and gamma >= 0):
        raise ValueError(f"need 0 <= eps < 1 and gamma >= 0, got eps={eps}, gamma={gamma}")
    return (1.0 - eps) * min(1.0, 1.0 / (u_a + u_b)) ** gamma


@dataclass(frozen=True)
class PackingFit:
    """Least-squares fit of :func:`packing_speed` to measured packed/alone ratios."""

    eps: float
    gamma: float
    utilisation: dict[str, float]
    rmse: float
    n_pairs: int


def _observations(records: list[GavelPair]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Index arrays (this job, other job) and observed speed ratios, one per job per pair.

    A job packed with itself is one measurement, so it contributes one observation, not two.
    """
    jobs = sorted({r.job_a for r in records} | {r.job_b for r in records})
    index = {j: i for i, j in enumerate(jobs)}
    obs = []
    for r in records:
        obs.append((index[r.job_a], index[r.job_b], r.ratio_a))
        if r.job_a != r.job_b:
            obs.append((index[r.job_b], index[r.job_a], r.ratio_b))
    this, other, ratio = zip(*obs)
    return jobs, np.array(this), np.array(other), np.array(ratio)


def fit_packing(records: list[GavelPair], *, gamma: float | None = None) -> PackingFit:
    """Fit eps, gamma and one utilisation per job type to the records' observed ratios.

    Records from several GPU types (the pooled fit) share one utilisation per job type.

    Pass ``gamma`` to hold it fixed: on Gavel's data the cost is nearly flat in gamma, so a fixed,
    interpretable value (1: the pair keeps the GPU ``1 - eps`` busy) loses almost nothing.
    The cost has a kink at ``u_a + u_b = 1`` and several local minima (one runs off to
    gamma -> inf with every utilisation -> 0.5), so a grid of starts is screened with a few
    iterations each and the best few are then run to convergence.
    """
    if not records:
        raise ValueError("fit_packing: no records to fit")
    if gamma is not None and not gamma >= 0:
        raise ValueError(f"fit_packing: gamma must be >= 0, got {gamma}")
    jobs, this, other, ratio = _observations(records)
    n = len(jobs)
    k = 2 if gamma is None else 1  # global parameters being fitted: eps[, gamma]
    rows = np.arange(len(ratio))

    def unpack(x: np.ndarray) -> tuple[float, float, np.ndarray]:
        return x[0], (x[1] if gamma is None else gamma), x[k:]

    def predict(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        eps, g, u = unpack(x)
        s = u[this] + u[other]
        over = s > 1.0
        return (1.0 - eps) * np.where(over, np.maximum(s, 1.0) ** -g, 1.0), s, over

    def residuals(x: np.ndarray) -> np.ndarray:
        return predict(x)[0] - ratio

    def jacobian(x: np.ndarray) -> np.ndarray:
        eps, g, _ = unpack(x)
        speed, s, over = predict(x)
        jac = np.zeros((len(ratio), k + n))
        jac[:, 0] = -speed / (1.0 - eps)
        if gamma is None:
            jac[:, 1] = np.where(over, -speed * np.log(np.maximum(s, 1.0)), 0.0)
        du = np.where(over, -g * speed / s, 0.0)
        jac[rows, k + this] += du  # one entry per row, so plain indexing adds correctly
        jac[rows, k + other] += du
        return jac

    lower = np.r_[0.0, np.zeros(k - 1), np.full(n, _U_MIN)]
    upper = np.r_[1.0 - 1e-9, np.full(k - 1, np.inf), np.ones(n)]

    def solve(x0: np.ndarray, max_nfev: int | None = None):
        # lsmr, not the default SVD: the SVD's threaded BLAS stalls badly on a busy machine.
        return least_squares(residuals, x0, jac=jacobian, bounds=(lower, upper),
                             tr_solver="lsmr", max_nfev=max_nfev)

    gamma_starts = (0.5, 1.0, 2.0, 4.0) if gamma is None else (gamma,)
    screened = []
    for eps0, u0, gamma0 in itertools.product((0.0, 0.2, 0.4), (0.6, 0.8, 1.0), gamma_starts):
        x0 = np.r_[eps0, np.full(k - 1, gamma0), np.full(n, u0)]
        screened.append(solve(x0, max_nfev=_SCREEN_NFEV))
    screened.sort(key=lambda res: res.cost)
    best = min((solve(r.x) for r in screened[:3]), key=lambda res: res.cost)
    eps, g, u = unpack(best.x)
    return PackingFit(
        eps=float(eps),
        gamma=float(g),
        utilisation={j: float(v) for j, v in zip(jobs, u)},
        rmse=float(np.sqrt(np.mean(best.fun**2))),
        n_pairs=len(records),
    )


# ----------------------------------------------------------------------------- asymmetric co-location
@dataclass(frozen=True)
class ColocationFit:
    """Per-job sensitivity and pressure on one GPU type: job a sharing a GPU with jobs B runs at
    ``1 / (1 + s_a * sum(p_b for b in B))`` of its alone speed (:func:`colocation_speed`).

    Why this form: the symmetric utilisation model gives both jobs of a pair one factor, which alone
    caps its error on Gavel's pairs (mean |ratio_a - ratio_b| 0.1-0.2); a job's own sensitivity and its
    partner's pressure are the fewest per-job numbers that make a pair asymmetric. Pressures are
    normalised to geometric mean 1, so s and p of different GPU types are on one scale.
    """

    gpu_type: str
    sensitivity: dict[str, float]
    pressure: dict[str, float]
    rmse: float
    r2: float


def colocation_speed(s_a: float, pressures) -> float:
    """k-way rule: a's speed relative to alone among partners of these pressures (one GPU)."""
    return 1.0 / (1.0 + s_a * float(np.sum(pressures)))


def _pair_obs(records: list[GavelPair]) -> list[tuple[str, str, float]]:
    out = []
    for r in records:
        out.append((r.job_a, r.job_b, r.ratio_a))
        if r.job_a != r.job_b:
            out.append((r.job_b, r.job_a, r.ratio_b))
    return out


def fit_colocation(records: list[GavelPair]) -> ColocationFit:
    """Least squares of :func:`colocation_speed` (one partner) on one GPU type's measured pairs."""
    if not records:
        raise ValueError("fit_colocation: no records to fit")
    obs = _pair_obs(records)
    jobs = sorted({o[0] for o in obs} | {o[1] for o in obs})
    idx = {j: i for i, j in enumerate(jobs)}
    n = len(jobs)
    a = np.array([idx[o[0]] for o in obs])
    b = np.array([idx[o[1]] for o in obs])
    y = np.array([o[2] for o in obs])
    res = least_squares(lambda z: 1.0 / (1.0 + z[a] * z[n + b]) - y, np.full(2 * n, 0.7),
                        bounds=(0.0, np.inf), tr_solver="lsmr")
    sens, pres = res.x[:n], res.x[n:]
    scale = _geomean(pres)
    sens, pres = sens * scale, pres / scale
    return ColocationFit(
        gpu_type=records[0].gpu_type,
        sensitivity=dict(zip(jobs, sens.tolist())),
        pressure=dict(zip(jobs, pres.tolist())),
        rmse=float(np.sqrt(np.mean(res.fun**2))),
        r2=float(1.0 - np.sum(res.fun**2) / np.sum((y - y.mean()) ** 2)),
    )


def _typical(values: dict[str, float]) -> float:
    """A job the fit has not seen gets the training jobs' geometric median."""
    return float(np.exp(np.median(np.log(np.maximum(list(values.values()), 1e-9)))))


@dataclass(frozen=True)
class ColocationFeatures:
    """A job's co-location sensitivity and pressure from what is observable without pairing it:
    ln s = w_s . z + c_s[T], ln p = w_p . z + c_p[T], z = (x - mean) / sd standardised features of the
    job on GPU type T (x = [ln steps/s alone on T] by default). Pooled over Gavel's GPU types with a
    per-type intercept; a type not in the fit takes the mean intercept. Tried for issue 17 as the
    fallback for unmeasured jobs and types, not adopted (README "GPU types and sharing";
    benchmarks/colocation_variants.py)."""

    mean: tuple[float, ...]
    sd: tuple[float, ...]
    lam: dict[str, float]  # "sensitivity" / "pressure" -> the ridge lambda the fit chose
    weight: dict[str, tuple[float, ...]]  # "sensitivity" / "pressure" -> one weight per feature
    intercept: dict[str, dict[str, float]]  # "sensitivity" / "pressure" -> GPU type -> c

    def sp(self, gpu: str, x) -> tuple[float, float]:
        """(sensitivity, pressure) of a job with features x on a GPU of type `gpu`."""
        z = (np.asarray(x, float) - np.asarray(self.mean)) / np.asarray(self.sd)
        out = []
        for key in ("sensitivity", "pressure"):
            c = self.intercept[key]
            c0 = c[gpu] if gpu in c else float(np.mean(list(c.values())))
            out.append(float(np.exp(z @ np.asarray(self.weight[key]) + c0)))
        return out[0], out[1]


def log_steps(job: str, gpu: str, alone: dict[str, dict[str, float]]) -> list[float]:
    """A co-location feature observable without pairing: ln of the job's steps/s alone on that GPU
    type (an engine would know it for any job on any type: 1 / speed.gpu_compute_s)."""
    return [math.log(alone[job][gpu])]


COLOCATION_LAMBDAS = (0.1, 1.0, 10.0, 100.0)  # ridge grid, fixed before scoring; the CV picks one


def _ridge(x: np.ndarray, onehot: np.ndarray, t: np.ndarray, lam: float) -> np.ndarray:
    """Weights of t ~ x @ w + onehot @ c, penalising w only."""
    a = np.hstack([x, onehot])
    reg = np.zeros(a.shape[1])
    reg[: x.shape[1]] = lam
    return np.linalg.lstsq(a.T @ a + np.diag(reg), a.T @ t, rcond=None)[0]


def fit_colocation_features(fits: dict[str, ColocationFit], alone: dict[str, dict[str, float]],
                            feature=log_steps) -> ColocationFeatures:
    """Regress each job's ln s and ln p of the per-type fits on `feature(job, gpu, alone)`, pooled
    over the types with a per-type intercept (ColocationFeatures). Ridge lambda from
    COLOCATION_LAMBDAS by leave-one-family-out over the fitted jobs (never on a scored hold-out)."""
    types = sorted(fits)
    rows = [(g, j) for g in types for j in sorted(fits[g].sensitivity)]
    x = np.array([feature(j, g, alone) for g, j in rows], float)
    mean, sd = x.mean(0), x.std(0) + 1e-12
    z = (x - mean) / sd
    onehot = np.array([[g == t for t in types] for g, _ in rows], float)
    fam = np.array([_family_batch(j)[0] for _, j in rows])
    weight, intercept, lams = {}, {}, {}
    for key in ("sensitivity", "pressure"):
        t = np.log(np.maximum([getattr(fits[g], key)[j] for g, j in rows], 1e-9))

        def cv(lam: float) -> float:
            err = []
            for f in np.unique(fam):
                keep = fam != f
                w = _ridge(z[keep], onehot[keep], t[keep], lam)
                err.append(np.hstack([z[~keep], onehot[~keep]]) @ w - t[~keep])
            return _rms(np.concatenate(err))

        lam = min(COLOCATION_LAMBDAS, key=cv)
        w = _ridge(z, onehot, t, lam)
        weight[key] = tuple(w[: z.shape[1]].tolist())
        intercept[key] = dict(zip(types, w[z.shape[1]:].tolist()))
        lams[key] = lam
    return ColocationFeatures(tuple(mean.tolist()), tuple(sd.tolist()), lams, weight, intercept)


def colocation_report(by_gpu: dict[str, list[GavelPair]]) -> dict:
    """In-sample fit per GPU type; leave one model family out (its jobs get the typical s and p of
    the rest, the engine's rule for a model Gavel did not measure); leave one GPU type out (the
    engine's rule for a GPU type Gavel did not measure: a pair's geometric mean over the other
    types, or the geometric mean of the jobs' s and p where the pair was not measured there). RMSE against a constant (the training pairs' mean) beside each."""
    types = [g for g in GAVEL_GPU_TYPES if by_gpu.get(g)]
    fits = {g: fit_colocation(by_gpu[g]) for g in types}
    out: dict = {"in_sample": {g: {"r2": f.r2, "rmse": f.rmse, "n": len(_pair_obs(by_gpu[g]))}
                               for g, f in fits.items()}}
    err, const = [], []
    for g in types:
        fams = sorted({_family_batch(j)[0] for r in by_gpu[g] for j in (r.job_a, r.job_b)})
        for fam in fams:
            held = lambda j: _family_batch(j)[0] == fam  # noqa: E731
            train = [r for r in by_gpu[g] if not (held(r.job_a) or held(r.job_b))]
            test = [o for o in _pair_obs(by_gpu[g]) if held(o[0]) or held(o[1])]
            if not train or not test:
                continue
            f = fit_colocation(train)
            s0, p0 = _typical(f.sensitivity), _typical(f.pressure)
            mean = np.mean([o[2] for o in _pair_obs(train)])
            for ja, jb, y in test:
                pred = colocation_speed(f.sensitivity.get(ja, s0), [f.pressure.get(jb, p0)])
                err.append(pred - y)
                const.append(mean - y)
    out["leave_family_out"] = {"rmse": _rms(err), "constant_rmse": _rms(const), "n": len(err)}
    out["leave_gpu_out"] = {}
    for g in types:
        rest = [fits[h] for h in types if h != g]
        gm = lambda key, j: _geomean([getattr(f, key)[j] for f in rest if j in getattr(f, key)])  # noqa: E731
        seen: dict[tuple[str, str], list[float]] = {}
        for h in types:
            if h != g:
                for ja, jb, y in _pair_obs(by_gpu[h]):
                    seen.setdefault((ja, jb), []).append(y)
        mean = np.mean([o[2] for h in types if h != g for o in _pair_obs(by_gpu[h])])
        e, c = [], []
        for ja, jb, y in _pair_obs(by_gpu[g]):
            if (ja, jb) in seen:  # the engine's rule 2: the pair's geometric mean on other types
                pred = _geomean(seen[ja, jb])
            else:
                pred = colocation_speed(gm("sensitivity", ja), [gm("pressure", jb)])
            e.append(pred - y)
            c.append(mean - y)
        out["leave_gpu_out"][g] = {"rmse": _rms(e), "constant_rmse": _rms(c), "n": len(e)}
    return out


def colocation_table(by_gpu: dict[str, list[GavelPair]]) -> dict:
    """What configs/colocation/gavel.yaml carries: per GPU type, each job's fitted [sensitivity,
    pressure] and each measured pair's [job_a, job_b, ratio_a, ratio_b]."""
    out = {}
    for g in GAVEL_GPU_TYPES:
        f = fit_colocation(by_gpu[g])
        out[g] = {"fit": {j: [f.sensitivity[j], f.pressure[j]] for j in sorted(f.sensitivity)},
                  "pairs": [[r.job_a, r.job_b, r.ratio_a, r.ratio_b] for r in by_gpu[g]]}
    return out


# Gandiva Table 1 (seed 002, "Packing multiple jobs on P40"): Packing Max / Time Slicing, mb/s, for
# the two jobs with a Gavel family (the checkable pair); never used in any fit.
GANDIVA_PACKING = {"ResNet-50": (9.0, 10.3), "LM": (53.0, 63.8)}


def gandiva_packing_check(colocation) -> dict:
    """Predict Gandiva Table 1's packing gain on a P40 (a type Gavel did not measure, so the
    geometric-mean rule applies) with the k-way rule: two copies of the job packed, aggregate
    throughput over time-slicing's (one job's alone speed; the 0.1 s per 60 s switch is ignored).
    Gandiva names no batch size, so every Gavel batch size of the family is shown."""
    out = {}
    for fam, (packed, sliced) in GANDIVA_PACKING.items():
        jobs = sorted({j for f in colocation.fit.values() for j in f if _family_batch(j)[0] == fam},
                      key=lambda j: _family_batch(j)[1] or 0)
        pred = {j: float(colocation.factors("p40", [j, j]).sum()) for j in jobs}
        out[fam] = {"measured": packed / sliced, "predicted": pred}
    return out


def _rms(x) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def _geomean(x) -> float:
    """Geometric mean, each value floored at 1e-9 (a fitted 0 would make it 0 whatever the rest)."""
    return float(np.exp(np.mean(np.log(np.maximum(x, 1e-9)))))


# ----------------------------------------------------------------------------- Pollux
@dataclass(frozen=True)
class PolluxPlacement:
    """ResNet-50 (ImageNet) seconds per step for one placement and per-GPU batch size."""

    placement: str  # one digit per node: GPUs used there ("1122")
    local_bsz: int
    step_time: float
    sync_time: float


def load_pollux_placements(path: str | Path) -> list[PolluxPlacement]:
    """Rows of Pollux's ``placements.csv``; a bad row raises ValueError naming line and field."""
    path = Path(path)
    columns = ["placement", "local_bsz", "step_time", "sync_time"]
    out = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != columns:
            raise ValueError(f"{path}:1: header must be {','.join(columns)}, got {header}")
        for row in reader:
            if not row:
                continue
            where = f"{path}:{reader.line_num}"
            if len(row) != len(columns):
                raise ValueError(f"{where}: expected {len(columns)} fields, got {len(row)}")
            placement, bsz, step, sync = row
            if not placement.isdigit() or "0" in placement:
                raise ValueError(f"{where}: placement: {placement!r} must be digits 1-9")
            try:
                local_bsz = int(bsz)
            except ValueError:
                raise ValueError(f"{where}: local_bsz: not an integer: {bsz!r}") from None
            if local_bsz < 1:
                raise ValueError(f"{where}: local_bsz: must be >= 1, got {local_bsz}")
            step_time, sync_time = (_csv_seconds(v, f"{where}: {n}") for v, n in
                                    ((step, "step_time"), (sync, "sync_time")))
            if sync_time > step_time:
                raise ValueError(f"{where}: sync_time: {sync_time} exceeds step_time {step_time}")
            out.append(PolluxPlacement(placement, local_bsz, step_time, sync_time))
    return out


def _csv_seconds(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: not a number: {text!r}") from None
    if not 0 <= value < math.inf:
        raise ValueError(f"{where}: must be finite and >= 0, got {text!r}")
    return value


# ----------------------------------------------------------------------------- report
def _report() -> None:
    """Print the packing fits (free and gamma = 1), pooled and per GPU type, and Gandiva's check."""
    path = shared_dir() / "profiles" / "gavel_throughputs.json"
    by_gpu = load_gavel(path)
    groups = {"pooled": [r for g in GAVEL_GPU_TYPES for r in by_gpu[g]]}
    groups.update({g: by_gpu[g] for g in GAVEL_GPU_TYPES})
    print(f"source: {path} (scale factor 1, consolidated GPU types, pairs that fit in memory)")
    fits = {}
    for label, fixed in (("gamma fitted", None), ("gamma held at 1", 1.0)):
        print(f"\n{label}:\n{'fit':<8} {'eps':>6} {'gamma':>6} {'rmse':>6} {'n_pairs':>8}")
        for name, records in groups.items():
            fit = fits[name, fixed] = fit_packing(records, gamma=fixed)
            print(f"{name:<8} {fit.eps:6.3f} {fit.gamma:6.3f} {fit.rmse:6.4f} {fit.n_pairs:8d}")
    profile = ", ".join(
        f"{g:g}: {fit_packing(groups['pooled'], gamma=g).rmse:.4f}" for g in (0.5, 2.0, 4.0)
    )
    print(f"pooled rmse with gamma held at {profile} (flat: gamma is barely identified)")
    for name, records in groups.items():
        gap = np.mean([abs(r.ratio_a - r.ratio_b) for r in records if r.job_a != r.job_b])
        print(f"{name}: mean |ratio_a - ratio_b| = {gap:.3f} (the model gives both jobs one speed)")

    print("\npooled utilisations, gamma held at 1 (only their ratios are pinned by the data):")
    for job, u in sorted(fits["pooled", 1.0].utilisation.items(), key=lambda kv: kv[1]):
        print(f"  {u:6.3f}  {job}")
    print("\nGandiva Table 1 direction, two identical jobs, pooled fits (time-slicing ~1.0):")
    for fixed in (None, 1.0):
        fit = fits["pooled", fixed]
        low, high = (2 * packing_speed(u, u, fit.eps, fit.gamma) for u in (0.087, 0.94))
        holds = low > 1.0 and high < 0.98
        print(f"  gamma={fit.gamma:.3f}: u=0.087 -> {low:.3f} (want > 1.0), "
              f"u=0.94 -> {high:.3f} (want < 0.98): {'holds' if holds else 'FAILS'}")


if __name__ == "__main__":
    _report()

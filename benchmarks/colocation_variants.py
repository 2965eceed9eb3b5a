"""Co-location models for pairs Gavel did not measure (issue 17): every variant tried, scored as
`dlcluster fidelity` scores the adopted one.

    python benchmarks/colocation_variants.py      # about 1 minute

Scores (RMSE of a job's speed ratio, ../shared/profiles/gavel_throughputs.json): leave one model
family out (per GPU type, that type's per-job fit on the other families; a held-out job's s and p
from the variant) and leave one GPU type out (the other types only). Features are what a job has
without a pair measurement: ln steps/s alone on the type (`lt`), ln(V100 / K80 steps/s) (`lvk`),
ln samples/s (`lsam`, steps/s x batch size), ln batch size (`lbs`), the job's speed on the type
over its mean over types (`lrel`). Variants:
- today (before issue 17's second pass): typical s, p (geometric median) for an unseen job; the
  pair's geometric mean over the other types (else the jobs' mean s, p) for an unseen type;
- direct: 1 / (1 + exp(w . [x_a, x_b] + c_T)) fitted on the pairs themselves, no per-job numbers;
- two-stage (profiles.fit_colocation_features): ln s and ln p of the per-job fits
  regressed on x, per type or pooled with a per-type intercept, ridge lambda by leave-one-family-out
  inside the training part;
- for an unseen type, also the two-stage model averaged with today's pair mean, equal weights.
A second table (`unmeasured_type_table`, third pass) scores rules for a GPU type Gavel did not measure
on both checks at once: leave one GPU type out and Gandiva Table 1's P40 packing gain (never fitted).
The compute-capability rules there were written down after coloc2's variant failed the P40 check,
so they are not independent of it. None is adopted by the engine (README "GPU types and sharing").
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares

from dlclusterenv.profiles import (GAVEL_GPU_TYPES as TYPES, _family_batch, _pair_obs, _rms, colocation_speed,
                                   fit_colocation, fit_colocation_features, gavel_alone, load_gavel, shared_dir)

PATH = shared_dir() / "profiles" / "gavel_throughputs.json"
BY_GPU = load_gavel(PATH)
ALONE = gavel_alone(PATH)
FAMS = sorted({_family_batch(j)[0] for j in ALONE})
FITS = {g: fit_colocation(BY_GPU[g]) for g in TYPES}
gm = lambda v: float(np.exp(np.mean(np.log(np.maximum(v, 1e-9)))))  # noqa: E731


def feature(names):
    def f(job, gpu, alone=ALONE):
        a, (_, bs) = alone[job], _family_batch(job)
        x = {"lt": math.log(a[gpu]), "lvk": math.log(a["v100"] / a["k80"]),
             "lsam": math.log(a[gpu] * (bs or 1)), "lbs": math.log(bs or 1),
             "lrel": math.log(a[gpu]) - np.mean([math.log(a[h]) for h in TYPES])}
        return [x[n] for n in names]
    return f


def two_stage(names, pooled=True):
    """(fits by type) -> predictor(gpu, a, b) using each type's fit where it has the job."""
    feat = feature(names)

    def make(fits):
        if pooled:
            models = {g: fit_colocation_features(fits, ALONE, feat) for g in fits}
        else:
            models = {g: fit_colocation_features({g: fits[g]}, ALONE, feat) for g in fits}
        every = fit_colocation_features(fits, ALONE, feat)

        def sp(gpu, job):
            f = fits.get(gpu)
            if f is not None and job in f.sensitivity:
                return f.sensitivity[job], f.pressure[job]
            return models.get(gpu, every).sp(gpu, feat(job, gpu))
        return lambda gpu, a, b: colocation_speed(sp(gpu, a)[0], [sp(gpu, b)[1]])
    return make


def today(fits):
    def pred(gpu, a, b):
        f = fits.get(gpu)
        if f is not None:
            s0, p0 = (float(np.exp(np.median(np.log(list(d.values()))))) for d in (f.sensitivity, f.pressure))
            return colocation_speed(f.sensitivity.get(a, s0), [f.pressure.get(b, p0)])
        seen = [r for h in fits for ja, jb, r in _pair_obs(BY_GPU[h]) if (ja, jb) == (a, b)]
        if seen:
            return gm(seen)
        return colocation_speed(gm([fits[h].sensitivity[a] for h in fits if a in fits[h].sensitivity]),
                                [gm([fits[h].pressure[b] for h in fits if b in fits[h].pressure])])
    return pred


def direct(names):
    feat = feature(names)

    def make(fits, obs):
        x = np.array([feat(a, g) + feat(b, g) for g, a, b, _ in obs])
        mu, sd = x.mean(0), x.std(0) + 1e-12
        z = (x - mu) / sd
        onehot = np.array([[g == t for t in TYPES] for g, *_ in obs], float)
        y = np.array([o[3] for o in obs])
        k = z.shape[1]
        w = least_squares(lambda w: 1 / (1 + np.exp(z @ w[:k] + onehot @ w[k:])) - y, np.zeros(k + 3)).x
        seen = [t for t in TYPES if onehot[:, TYPES.index(t)].any()]
        c = {t: w[k + TYPES.index(t)] for t in seen}

        def pred(gpu, a, b):
            zz = (np.array(feat(a, gpu) + feat(b, gpu)) - mu) / sd
            return 1 / (1 + math.exp(zz @ w[:k] + c.get(gpu, np.mean(list(c.values())))))
        return pred
    return make


def score(make, is_direct=False, average_today=False):
    err = []
    for fam in FAMS:
        held = lambda j: _family_batch(j)[0] == fam  # noqa: E731
        train = {g: [r for r in BY_GPU[g] if not (held(r.job_a) or held(r.job_b))] for g in TYPES}
        fits = {g: fit_colocation(train[g]) for g in TYPES}
        for g in TYPES:
            obs = [(g, *o) for o in _pair_obs(train[g])]
            pred = make({g: fits[g]}, obs) if is_direct else make(fits)
            err += [pred(g, a, b) - y for a, b, y in _pair_obs(BY_GPU[g]) if held(a) or held(b)]
    gpu = {}
    for g in TYPES:
        rest = {h: FITS[h] for h in TYPES if h != g}
        pred = make(rest, [(h, *o) for h in rest for o in _pair_obs(BY_GPU[h])]) if is_direct else make(rest)
        if average_today:
            feat_pred, base = pred, today(rest)
            pred = lambda gg, a, b: 0.5 * (base(gg, a, b) + feat_pred(gg, a, b))  # noqa: E731
        gpu[g] = _rms([pred(g, a, b) - y for a, b, y in _pair_obs(BY_GPU[g])])
    return _rms(err), gpu


def constant() -> tuple[float, dict]:
    """The training pairs' mean, as `dlcluster fidelity` prints beside each score."""
    err = []
    for fam in FAMS:
        held = lambda j: _family_batch(j)[0] == fam  # noqa: E731
        for g in TYPES:
            mean = np.mean([y for a, b, y in _pair_obs(BY_GPU[g]) if not (held(a) or held(b))])
            err += [mean - y for a, b, y in _pair_obs(BY_GPU[g]) if held(a) or held(b)]
    gpu = {g: _rms([np.mean([y for h in TYPES if h != g for *_, y in _pair_obs(BY_GPU[h])]) - y
                    for *_, y in _pair_obs(BY_GPU[g])]) for g in TYPES}
    return _rms(err), gpu


# CUDA compute capability (NVIDIA's "CUDA GPUs" list): K80 3.7 (Kepler), P100 6.0 and P40 6.1 (Pascal),
# V100 7.0 (Volta), T4 7.5 (Turing). The hardware fact behind the "nearest architecture" rules below.
COMPUTE_CAPABILITY = {"k80": 3.7, "p100": 6.0, "p40": 6.1, "v100": 7.0, "t4": 7.5}
# Gandiva Table 1's two checkable models as the engine runs them on a P40 (configs/models.yaml):
# Gavel job type, steps/s alone there (1 / step_compute_s), copies the P40's 24 GB holds.
GANDIVA_P40 = {"ResNet-50": ("ResNet-50 (batch size 32)", 1 / 0.205, 4), "LSTM": ("LM (batch size 20)", 1 / 0.0142, 12)}


def nearest_type(gpu: str, measured) -> str:
    """The measured GPU type whose compute capability is closest to `gpu`'s (P40 -> P100, T4 -> V100;
    held out: K80 -> P100, P100 -> V100, V100 -> P100)."""
    return min(measured, key=lambda t: abs(COMPUTE_CAPABILITY[t] - COMPUTE_CAPABILITY[gpu]))


def unmeasured_type_rules():
    """Rules for a GPU type Gavel did not measure (issue 17, third pass), each -> make(fits) giving
    pred(gpu, a, b, steps_a, steps_b) (steps: each job's steps/s alone on `gpu`):
    - today: the pair's geometric mean over the measured types (the engine's rule);
    - coloc2: the mean of today's and the two-stage lt feature model whose type intercept is the
      mean of the measured types' (the variant wired in on branch coloc2 and not adopted);
    - coloc2, Pascal/nearest intercept: the same with the intercept of the measured type of nearest
      compute capability (P40 -> P100);
    - nearest type: the nearest-compute-capability type's measurement of the pair (its fit where the
      pair was not measured there)."""
    feat = feature(["lt"])

    def make(kind, fits):
        base = today(fits)
        model = fit_colocation_features(fits, ALONE, feat)
        pairs = {(h, a, b): y for h in fits for a, b, y in _pair_obs(BY_GPU[h])}

        def pred(gpu, a, b, steps_a, steps_b):
            near = nearest_type(gpu, fits)
            if kind == "today":
                return base(gpu, a, b)
            if kind == "nearest type":
                f = fits[near]
                return pairs.get((near, a, b), colocation_speed(f.sensitivity[a], [f.pressure[b]]))
            typ = near if kind.endswith("nearest intercept") else "unmeasured"  # unknown type: mean intercept
            s, p = model.sp(typ, [math.log(steps_a)])[0], model.sp(typ, [math.log(steps_b)])[1]
            return 0.5 * (base(gpu, a, b) + colocation_speed(s, [p]))
        return pred
    return {k: (lambda fits, k=k: make(k, fits))
            for k in ("today", "coloc2 (mean intercept)", "coloc2, nearest intercept", "nearest type")}


def p40_gain(pred, job, steps, k):
    """Aggregate throughput of k copies of `job` on one P40 over one copy alone (k-way rule)."""
    r = pred("p40", job, job, steps, steps)
    return k / (1 + (k - 1) * (1 / r - 1))


def unmeasured_type_table() -> None:
    print("| rule for an unmeasured GPU type | leave K80 out | leave P100 out | leave V100 out "
          "| P40 pair gain ResNet-50 / LSTM (paper 0.87 / 0.83) | P40 k-way best ResNet-50 / LSTM |")
    print("|---|---|---|---|---|---|")
    for name, make in unmeasured_type_rules().items():
        loto = []
        for g in TYPES:
            pred = make({h: FITS[h] for h in TYPES if h != g})
            loto.append(_rms([pred(g, a, b, ALONE[a][g], ALONE[b][g]) - y for a, b, y in _pair_obs(BY_GPU[g])]))
        pred = make(FITS)
        pair = [p40_gain(pred, j, st, 2) for j, st, _ in GANDIVA_P40.values()]
        best = [max(p40_gain(pred, j, st, k) for k in range(2, kmax + 1)) for j, st, kmax in GANDIVA_P40.values()]
        print(f"| {name} | " + " | ".join(f"{x:.3f}" for x in loto) + f" | {pair[0]:.3f} / {pair[1]:.3f} | "
              f"{best[0]:.3f} / {best[1]:.3f} |")


def main() -> None:
    rows = [("constant (training pairs' mean)", constant()), ("today (before)", score(today))]
    for names in (["lt"], ["lt", "lvk"]):
        rows.append((f"direct, {'+'.join(names)}", score(direct(names), is_direct=True)))
    rows.append(("two-stage per type, lt+lvk", score(two_stage(["lt", "lvk"], pooled=False))))
    for names in (["lt"], ["lt", "lvk"], ["lt", "lsam", "lvk"], ["lt", "lbs"], ["lt", "lrel"]):
        rows.append((f"two-stage pooled, {'+'.join(names)}", score(two_stage(names))))
    rows.append(("two-stage pooled lt; unseen type: mean with today's",
                 score(two_stage(["lt"]), average_today=True)))
    print("| variant | leave family out | leave K80 out | leave P100 out | leave V100 out |")
    print("|---|---|---|---|---|")
    for name, (lfo, lgo) in rows:
        print(f"| {name} | {lfo:.3f} | " + " | ".join(f"{lgo[g]:.3f}" for g in TYPES) + " |")
    print()
    unmeasured_type_table()


if __name__ == "__main__":
    main()

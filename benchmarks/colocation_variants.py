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
None is adopted by the engine (README "GPU types and sharing" says why).
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


if __name__ == "__main__":
    main()

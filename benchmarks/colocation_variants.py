"""Co-location models for pairs Gavel did not measure (issue 17): every variant tried, scored as
`dlcluster fidelity` scores the adopted one.

    python benchmarks/colocation_variants.py          # about 1 minute
    python benchmarks/colocation_variants.py --slow   # also pair kNN (minutes more)

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
Third pass (coloc3), for unseen jobs only (an unseen type keeps today's rule unless said): speed-up
features `lvp` ln(V100 / P100), `lup` (onto the type from the next slower one), `lpk`, the speed
profile `lk`, `lp`, `lv`; per-type ridge and kNN on it; pair kNN; the latent interaction model;
the hierarchical end-to-end fit.
A second table (`unmeasured_type_table`, third pass) scores rules for a GPU type Gavel did not measure
on both checks at once: leave one GPU type out and Gandiva Table 1's P40 packing gain (never fitted).
The compute-capability rules there were written down after coloc2's variant failed the P40 check,
so they are not independent of it. None is adopted by the engine (README "GPU types and sharing").
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy.optimize import least_squares

from dlclusterenv.profiles import (COLOCATION_LAMBDAS, GAVEL_GPU_TYPES as TYPES, _family_batch, _pair_obs, _ridge,
                                   _rms, colocation_speed, fit_colocation, fit_colocation_features, gavel_alone,
                                   load_gavel, shared_dir)

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
             "lrel": math.log(a[gpu]) - np.mean([math.log(a[h]) for h in TYPES]),
             "lvp": math.log(a["v100"] / a["p100"]),
             # speed-up onto this type from the next slower measured one (K80: the P100/K80 one)
             "lup": math.log(a["p100"] / a["k80"] if gpu in ("k80", "p100") else a[gpu] / a["p100"]),
             "lpk": math.log(a["p100"] / a["k80"]),
             "lk": math.log(a["k80"]), "lp": math.log(a["p100"]), "lv": math.log(a["v100"])}
        return [x[n] for n in names]
    return f


# ----------------------------------------------------------------------------- third pass (coloc3)
LAMBDAS = COLOCATION_LAMBDAS  # the ridge grid two-stage uses, fixed before scoring
NEIGHBOURS = (1, 2, 3, 5, 8)  # kNN grid, fixed before scoring


def per_type(job_model, names):
    """A held-out job's (ln s, ln p) on a measured type from `job_model` fitted on that type's fitted
    jobs (features `names`, standardised); the rest as today (an unseen type: today's rule)."""
    feat = feature(names)

    def make(fits):
        base, models = today(fits), {}
        for g, f in fits.items():
            jobs = sorted(f.sensitivity)
            x = np.array([feat(j, g) for j in jobs])
            mu, sd = x.mean(0), x.std(0) + 1e-12
            t = np.log(np.maximum([[f.sensitivity[j], f.pressure[j]] for j in jobs], 1e-9))
            models[g] = (mu, sd, job_model((x - mu) / sd, t, np.array([_family_batch(j)[0] for j in jobs])))

        def sp(gpu, job):
            f = fits[gpu]
            if job in f.sensitivity:
                return f.sensitivity[job], f.pressure[job]
            mu, sd, m = models[gpu]
            return tuple(np.exp(m((np.array(feat(job, gpu)) - mu) / sd)))
        return lambda gpu, a, b: (base(gpu, a, b) if gpu not in fits
                                  else colocation_speed(sp(gpu, a)[0], [sp(gpu, b)[1]]))
    return make


def _inner_pick(z, t, fam, fit_predict, grid):
    """Grid value with the least leave-one-family-out error of fit_predict(z_train, t_train, h)(z_test)."""
    def err(h):
        return _rms(np.concatenate([fit_predict(z[fam != f], t[fam != f], h)(z[fam == f]) - t[fam == f]
                                    for f in np.unique(fam)]))
    return min(grid, key=err)


def ridge_model(z, t, fam):
    """ln s, ln p linear in z (ridge with an intercept, lambda by leave-one-family-out inside)."""
    def fit_predict(zz, tt, lam):
        one = np.ones((len(zz), 1))
        w = np.column_stack([_ridge(zz, one, tt[:, c], lam) for c in range(tt.shape[1])])
        return lambda q: np.hstack([q, np.ones((len(q), 1))]) @ w
    lam = _inner_pick(z, t, fam, fit_predict, LAMBDAS)
    m = fit_predict(z, t, lam)
    return lambda q: m(np.atleast_2d(q))[0]


def knn_model(z, t, fam):
    """ln s, ln p the mean of the k nearest fitted jobs' (Euclidean in z; k by leave-one-family-out)."""
    def fit_predict(zz, tt, k):
        return lambda q: np.array([tt[np.argsort(((zz - r) ** 2).sum(1), kind="stable")[:k]].mean(0) for r in q])
    k = _inner_pick(z, t, fam, fit_predict, NEIGHBOURS)
    m = fit_predict(z, t, k)
    return lambda q: m(np.atleast_2d(q))[0]


def _training_pairs(fits, g):
    jobs = fits[g].sensitivity
    return [(a, b, y) for a, b, y in _pair_obs(BY_GPU[g]) if a in jobs and b in jobs]


def pair_knn(names):
    """Memory-based, no s x p structure: a held-out job is replaced by its k nearest fitted jobs on
    the type (features `names`), and a pair's ratio is the mean over the stand-in pairs (measured
    where Gavel has them, else the fit); k by leave-one-family-out inside the training part."""
    feat = feature(names)

    def model(f, g):
        jobs = sorted(f.sensitivity)
        meas = {(a, b): y for a, b, y in _pair_obs(BY_GPU[g]) if a in f.sensitivity and b in f.sensitivity}
        x = np.array([feat(j, g) for j in jobs])
        mu, sd = x.mean(0), x.std(0) + 1e-12

        def near(j, k):
            if j in f.sensitivity:
                return [j]
            d = ((((np.array(feat(j, g)) - mu) / sd) - (x - mu) / sd) ** 2).sum(1)
            return [jobs[i] for i in np.argsort(d, kind="stable")[:k]]
        ratio = lambda a, b: meas.get((a, b), colocation_speed(f.sensitivity[a], [f.pressure[b]]))  # noqa: E731
        return lambda a, b, k: float(np.mean([ratio(x_, y_) for x_ in near(a, k) for y_ in near(b, k)]))

    def make(fits):
        base, chosen, models = today(fits), {}, {}
        for g, f in fits.items():
            err = {k: [] for k in NEIGHBOURS}
            for fam in sorted({_family_batch(j)[0] for j in f.sensitivity}):
                held = lambda j: _family_batch(j)[0] == fam  # noqa: E731
                inner = model(fit_colocation([r for r in BY_GPU[g] if r.job_a in f.sensitivity and
                                              r.job_b in f.sensitivity and not (held(r.job_a) or held(r.job_b))]), g)
                for a, b, y in _training_pairs(fits, g):
                    if held(a) or held(b):
                        for k in NEIGHBOURS:
                            err[k].append(inner(a, b, k) - y)
            chosen[g] = min(NEIGHBOURS, key=lambda k: _rms(err[k]))
            models[g] = model(f, g)
        return lambda gpu, a, b: base(gpu, a, b) if gpu not in fits else models[gpu](a, b, chosen[gpu])
    return make


def mf_interaction(names, mf_lambda=0.01):
    """Asymmetric pair model with a latent interaction: logit-odds ln(1 / r_ab - 1) = ln s_a + ln p_b +
    u_a v_b, fitted per type on the training pairs (ridge mf_lambda on u, v; fixed, not tuned); a
    held-out job's (ln s, ln p, u, v) by ridge on its features (lambda by leave-one-family-out)."""
    feat = feature(names)

    def fit_latent(obs, jobs):
        n, idx = len(jobs), {j: i for i, j in enumerate(jobs)}
        a, b = (np.array([idx[o[c]] for o in obs]) for c in (0, 1))
        y = np.array([o[2] for o in obs])

        def res(v):
            return np.r_[1 / (1 + np.exp(v[a] + v[n + b] + v[2 * n + a] * v[3 * n + b])) - y,
                         math.sqrt(mf_lambda) * v[2 * n:]]
        v0 = np.r_[np.zeros(2 * n), 0.1 * np.random.default_rng(0).standard_normal(2 * n)]
        return least_squares(res, v0, tr_solver="lsmr").x.reshape(4, n).T  # row per job: ln s, ln p, u, v

    def make(fits):
        base, models = today(fits), {}
        for g, f in fits.items():
            jobs = sorted(f.sensitivity)
            lat = dict(zip(jobs, fit_latent(_training_pairs(fits, g), jobs)))
            x = np.array([feat(j, g) for j in jobs])
            mu, sd = x.mean(0), x.std(0) + 1e-12
            m = ridge_model((x - mu) / sd, np.array([lat[j] for j in jobs]),
                            np.array([_family_batch(j)[0] for j in jobs]))
            models[g] = lambda j, lat=lat, m=m, mu=mu, sd=sd, g=g: (
                lat[j] if j in lat else m((np.array(feat(j, g)) - mu) / sd))

        def pred(gpu, a, b):
            if gpu not in fits:
                return base(gpu, a, b)
            la, lb = models[gpu](a), models[gpu](b)
            return float(1 / (1 + math.exp(la[0] + lb[1] + la[2] * lb[3])))
        return pred
    return make


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


HIER_LAMBDAS = (0.3, 3.0, 30.0)  # penalty grid on a job's own deviation, fixed before scoring


def hierarchical(names):
    """End-to-end on the pairs, per type: ln s_j = w_s . z_j + c_s + e_j, ln p_j = w_p . z_j + c_p + f_j,
    least squares of the ratios plus lam (|e|^2 + |f|^2) (+ 0.01 |w|^2); a held-out job takes
    e = f = 0, the fitted jobs their own e, f. lam by leave-one-family-out inside the training part."""
    feat = feature(names)

    def fit(obs, jobs, z, lam):
        n, k, idx = len(jobs), z.shape[1], {j: i for i, j in enumerate(jobs)}
        a, b = (np.array([idx[o[c]] for o in obs]) for c in (0, 1))
        y, m = np.array([o[2] for o in obs]), len(obs)
        pen = np.r_[np.full(2 * k, 0.1), 0.0, 0.0, np.full(2 * n, math.sqrt(lam))]

        def logs(v):
            return z @ v[:k] + v[2 * k] + v[2 * k + 2:2 * k + 2 + n], z @ v[k:2 * k] + v[2 * k + 1] + v[2 * k + 2 + n:]

        def res(v):
            ls, lp = logs(v)
            return np.r_[1 / (1 + np.exp(ls[a] + lp[b])) - y, pen * v]

        def jac(v):
            ls, lp = logs(v)
            r = 1 / (1 + np.exp(ls[a] + lp[b]))
            d = -r * (1 - r)
            j = np.zeros((m, len(v)))
            j[:, :k], j[:, k:2 * k] = d[:, None] * z[a], d[:, None] * z[b]
            j[:, 2 * k], j[:, 2 * k + 1] = d, d
            np.add.at(j, (np.arange(m), 2 * k + 2 + a), d)
            np.add.at(j, (np.arange(m), 2 * k + 2 + n + b), d)
            return np.vstack([j, np.diag(pen)])
        v = least_squares(res, np.zeros(2 * k + 2 + 2 * n), jac=jac, tr_solver="lsmr").x  # SVD stalls on a busy box
        own = dict(zip(jobs, zip(*logs(v))))
        return lambda j, q: own[j] if j in own else (q @ v[:k] + v[2 * k], q @ v[k:2 * k] + v[2 * k + 1])

    def make(fits):
        base, models = today(fits), {}
        for g, f in fits.items():
            jobs = sorted(f.sensitivity)
            obs = _training_pairs(fits, g)
            x = np.array([feat(j, g) for j in jobs])
            mu, sd = x.mean(0), x.std(0) + 1e-12
            z = (x - mu) / sd
            fam = {j: _family_batch(j)[0] for j in jobs}

            def cv(lam):
                err = []
                for held in sorted(set(fam.values())):
                    keep = [i for i, j in enumerate(jobs) if fam[j] != held]
                    kept = {jobs[i] for i in keep}
                    h = fit([o for o in obs if o[0] in kept and o[1] in kept], [jobs[i] for i in keep], z[keep], lam)
                    lsp = lambda j: h(j, z[jobs.index(j)])  # noqa: E731
                    err += [1 / (1 + math.exp(lsp(a)[0] + lsp(b)[1])) - y for a, b, y in obs
                            if fam[a] == held or fam[b] == held]
                return _rms(err)
            h = fit(obs, jobs, z, min(HIER_LAMBDAS, key=cv))
            models[g] = lambda j, h=h, mu=mu, sd=sd, g=g: h(j, (np.array(feat(j, g)) - mu) / sd)

        def pred(gpu, a, b):
            if gpu not in fits:
                return base(gpu, a, b)
            return float(1 / (1 + math.exp(models[gpu](a)[0] + models[gpu](b)[1])))
        return pred
    return make


def main(slow: bool = False) -> None:
    print("| variant | leave family out | leave K80 out | leave P100 out | leave V100 out |")
    print("|---|---|---|---|---|")

    def row(name, scores):
        lfo, lgo = scores
        print(f"| {name} | {lfo:.3f} | " + " | ".join(f"{lgo[g]:.3f}" for g in TYPES) + " |", flush=True)
    row("constant (training pairs' mean)", constant())
    row("today (before)", score(today))
    for names in (["lt"], ["lt", "lvk"]):
        row(f"direct, {'+'.join(names)}", score(direct(names), is_direct=True))
    row("two-stage per type, lt+lvk", score(two_stage(["lt", "lvk"], pooled=False)))
    for names in (["lt"], ["lt", "lvk"], ["lt", "lsam", "lvk"], ["lt", "lbs"], ["lt", "lrel"]):
        row(f"two-stage pooled, {'+'.join(names)}", score(two_stage(names)))
    row("two-stage pooled lt; unseen type: mean with today's", score(two_stage(["lt"]), average_today=True))
    # third pass (item 2 of the coloc3 brief): new feature sets and model forms
    for names in (["lt", "lvp"], ["lt", "lvk", "lvp"], ["lt", "lup"], ["lt", "lvk", "lup"], ["lup"],
                  ["lt", "lpk", "lvp"]):
        for pooled in (True, False):
            row(f"two-stage {'pooled' if pooled else 'per type'}, {'+'.join(names)}",
                score(two_stage(names, pooled=pooled)))
    for names in (["lk", "lp", "lv"], ["lk", "lp", "lv", "lbs"]):
        row(f"ridge per type, {'+'.join(names)}", score(per_type(ridge_model, names)))
        row(f"kNN per type, {'+'.join(names)}", score(per_type(knn_model, names)))
    row("latent interaction per type, lt+lvk", score(mf_interaction(["lt", "lvk"])))
    for names in (["lt", "lvk"], ["lt"], ["lt", "lup"], ["lk", "lp", "lv"]):
        row(f"hierarchical per type, {'+'.join(names)}", score(hierarchical(names)))
    if slow:
        row("pair kNN per type, lk+lp+lv", score(pair_knn(["lk", "lp", "lv"])))
    print()
    unmeasured_type_table()


if __name__ == "__main__":
    main(slow="--slow" in sys.argv[1:])

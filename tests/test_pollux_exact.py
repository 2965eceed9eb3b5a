"""Pollux's cheaper fit, repair and fit memo (baselines/pollux.py, branch poll11) decide exactly as the
plain computation they replaced: each is compared, byte for byte, with that code, kept here as the oracle,
and whole runs are pinned to the decisions of main e38c431 (before the change)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares
from scipy.optimize._numdiff import approx_derivative

from baselines.pollux import BOUNDS, SYNC_PRIOR, Pollux, _Residual, _Search, fit_throughput, fitness, step_time
from dlclusterenv.workload import load_scenario

from helpers import decision_digest


def plain_fit(samples):
    """fit_throughput as it was: step_time in the residual, scipy's jac='2-point'."""
    w = np.array([k[0] for k in samples], dtype=float)
    multi = np.array([k[1] for k in samples])
    t = w / np.array(list(samples.values()))
    scale = float(t.min())

    def resid(x):
        th = np.concatenate([x[:5] * scale, x[5:]])
        return np.concatenate([np.log(step_time(th, w, multi) / t), SYNC_PRIOR * x[1:5]])

    x0 = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    lo, hi = [1e-6, 0, 0, 0, 0, 1.0], [np.inf, np.inf, np.inf, np.inf, np.inf, 10.0]
    x = least_squares(resid, x0, bounds=(lo, hi)).x
    return np.concatenate([x[:5] * scale, x[5:]])


def plain_repair(search, s):
    """_Search.repair as it was, in numpy."""
    s = np.minimum(s, search.max_cell)
    perm = search.rng.permuted(np.broadcast_to(np.arange(s.shape[2]), s.shape), axis=2)
    sp = np.take_along_axis(s, perm, axis=2)
    sp = np.diff(np.minimum(np.cumsum(sp, axis=2), search.caps[None, :, None]), axis=2, prepend=0)
    s = np.empty_like(sp)
    np.put_along_axis(s, perm, sp, axis=2)
    s = s[:, search.order]
    multi = (s > 0).sum(axis=2) > 1
    clash = np.cumsum((s > 0) & multi[:, :, None], axis=1) > 1
    s[clash] = 0
    need = search.need[search.order][None, :, None, :]
    use = np.cumsum(s[..., None] * need, axis=1)
    use = np.diff(np.minimum(use, search.room[None, None]), axis=1, prepend=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(need > 0, np.floor(use / need + 1e-9), np.inf)
    s = np.minimum(n.min(axis=3), s).astype(np.int64)
    out = np.empty_like(s)
    out[:, search.order] = s
    return out


def _samples(rng, layouts):
    out = {}
    for _ in range(layouts):
        w = int(rng.integers(1, 17))
        out[(w, w > 1 and bool(rng.random() < 0.5))] = w * rng.uniform(0.2, 3) / (1 + rng.uniform(0, 0.5) * (w - 1))
    return out


def test_fit_equals_the_plain_fit_bit_for_bit():
    rng = np.random.default_rng(0)
    cases = [_samples(rng, int(rng.integers(1, 5))) for _ in range(120)]
    theta = np.array([0.2, 0.05, 0.01, 0.1, 0.02, 1.5])  # a model whose fit reaches interior values
    cases.append({k: k[0] / float(step_time(theta, k[0], k[1])) for k in [(1, False), (4, False), (16, True)]})
    cases.append({(1, False): 5.0})
    for s in cases:
        assert fit_throughput(s).tobytes() == plain_fit(s).tobytes(), s


def test_jacobian_is_scipys_forward_difference_bit_for_bit():
    """Also where a step would leave the bounds (x on a bound, g at 10) and in scipy's layout."""
    rng = np.random.default_rng(1)
    lb, ub = BOUNDS
    for k in range(60):
        s = _samples(rng, int(rng.integers(1, 5)))
        w = np.array([q[0] for q in s], dtype=float)
        t = w / np.array(list(s.values()))
        res = _Residual(w, np.array([q[1] for q in s]), t, float(t.min()))
        x = np.concatenate([rng.uniform(0, 3, 5), rng.uniform(1, 10, 1)])
        if k % 3 == 0:  # some on their lower bound, g on either bound
            on = rng.random(6) < 0.5
            x[on] = lb[on]
            x[5] = 10.0 if k % 2 else 1.0
        want = approx_derivative(res, x, method="2-point", f0=res(x), bounds=BOUNDS)
        got = res.jac(x)
        assert got.tobytes() == want.tobytes() and got.strides == want.strides


def test_repair_equals_the_numpy_repair_and_draws_alike():
    rng = np.random.default_rng(2)
    for k in range(150):
        jobs, nodes = int(rng.integers(1, 30)), int(rng.integers(1, 17))
        need = rng.choice([0, 0.5, 1, 2, 3.7], size=(jobs, 4)) * rng.random((jobs, 1)) * 3
        room = rng.choice([0, 1, 4, 8, 10.3], size=(nodes, 4)) * 1.0
        args = (rng.integers(0, 4, (jobs, nodes)), rng.integers(1, 17, jobs), need, room, rng.permutation(jobs))
        a, b = _Search(np.random.default_rng(k), *args), _Search(np.random.default_rng(k), *args)
        s = rng.integers(0, 9, (int(rng.integers(1, 60)), jobs, nodes))
        got, want = a.repair(s), plain_repair(b, s)
        assert got.dtype == want.dtype and (got == want).all()
        # and laid out alike: numpy's sums in `fitness` follow the layout (a C-ordered result
        # changed the fitness' last bits, and a Philly run's decisions)
        assert all(x == y for x, y, d in zip(got.strides, want.strides, got.shape) if d > 1)
        goodput = rng.random((jobs, int(want.sum(axis=2).max()) + 1, 2))
        args = (args[0], goodput, rng.random(jobs) + 0.1, rng.random(jobs), -1.0)
        assert fitness(got, *args).tobytes() == fitness(want, *args).tobytes()
        assert a.rng.random() == b.rng.random()  # the same draws were taken


def test_a_memoised_fit_is_the_fit_of_the_same_means(monkeypatch):
    """Two jobs with equal means fit once; a job whose means differ by one sample fits again."""
    import baselines.pollux as P

    calls = []
    monkeypatch.setattr(P, "fit_throughput", lambda s: calls.append(dict(s)) or fit_throughput(s))
    pol = Pollux()
    job = lambda i: type("J", (), {"job_id": i, "efficiency": lambda self, k: 1.0})()  # noqa: E731
    pol._samples = {"a": {(2, False): [3.0, 3.0]}, "b": {(2, False): [3.0]}, "c": {(2, False): [3.0, 3.5]}}
    tables = [pol.goodput_table(job(i), 4) for i in "abc"]
    assert calls == [{(2, False): 3.0}, {(2, False): 3.25}]
    for i, table in zip("abc", tables):  # each equals the table of a Pollux without the memo
        fresh = Pollux()
        fresh._samples = {i: pol._samples[i]}
        assert fresh.goodput_table(job(i), 4).tobytes() == table.tobytes()


def _default(eff: str, jobs: int) -> dict:
    sc, _ = load_scenario("default")
    small = sc.workload.model_copy(update={"num_jobs": jobs, "window_s": 60 * jobs})
    return sc.model_copy(update={"efficiency": eff, "workload": small}).model_dump()


# benchmarks/decision_log.py digests of main e38c431 (before the fit, repair and memo changes)
MAIN_LOGS = {("pgns", 0): "e6711ce1aa85380d", ("pgns", 1): "8fcfb91acbcc8454", ("none", 0): "f302e88b7872ec87"}


@pytest.mark.parametrize("eff, seed", sorted(MAIN_LOGS))
def test_whole_runs_decide_as_main(eff, seed):
    assert decision_digest(_default(eff, 12), "pollux", seed) == MAIN_LOGS[(eff, seed)]

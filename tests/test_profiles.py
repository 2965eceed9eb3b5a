"""Gavel packing calibration and the Pollux placement loader."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from dlclusterenv.profiles import (
    GAVEL_GPU_TYPES,
    GavelPair,
    fit_packing,
    load_gavel,
    load_pollux_placements,
    packing_speed,
    shared_dir,
)
from helpers import shared_file


@pytest.fixture(scope="module")
def gavel() -> dict[str, list[GavelPair]]:
    return load_gavel(shared_file("profiles", "gavel_throughputs.json"))


def test_shared_dir_env_override_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("DLCLUSTER_SHARED", str(tmp_path))
    assert shared_dir() == tmp_path
    monkeypatch.delenv("DLCLUSTER_SHARED")
    repo = Path(__file__).resolve().parent.parent
    assert shared_dir() == repo.parent / "shared"


# ----------------------------------------------------------------------------- Gavel loader
def test_load_gavel_real_file(gavel):
    assert set(gavel) == set(GAVEL_GPU_TYPES)
    # 26 job types -> 351 unordered pairs per GPU, minus those that did not fit in memory.
    assert {g: len(r) for g, r in gavel.items()} == {"k80": 306, "p100": 340, "v100": 330}
    for records in gavel.values():
        pairs = [(r.job_a, r.job_b) for r in records]
        assert len(set(pairs)) == len(pairs)
        assert all(a <= b for a, b in pairs)
        assert all(0 < r.ratio_a <= 1 and 0 < r.ratio_b <= 1 for r in records)
    k80 = {(r.job_a, r.job_b): r for r in gavel["k80"]}
    r = k80["ResNet-18 (batch size 16)", "ResNet-18 (batch size 32)"]
    assert r.alone_a == pytest.approx(4.795294551566172)
    assert (r.packed_a, r.packed_b) == pytest.approx((2.539979567443098, 3.1201925448827033))
    assert ("ResNet-50 (batch size 128)", "ResNet-18 (batch size 16)") not in k80  # 0.0: no fit


def _write_json(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "gavel.json"
    path.write_text(json.dumps(data))
    return path


def test_load_gavel_keeps_sf1_consolidated_pairs_and_skips_zeros(tmp_path):
    a, b, c = "('A', 1)", "('B', 1)", "('C', 1)"
    data = {
        "k80": {
            a: {"null": 2.0, b: [1.0, 0.5], c: [0.0, 0.0], "('B', 2)": [1.5, 0.2]},
            b: {"null": 1.0, a: [0.5, 1.0]},
            c: {"null": 4.0, a: [0.0, 0.0]},
            "('A', 2)": {"null": 3.0},
        },
        "k80_unconsolidated": {"not even a tuple": 1},
    }
    out = load_gavel(_write_json(tmp_path, data))
    assert out == {"k80": [GavelPair("k80", "A", "B", 2.0, 1.0, 1.0, 0.5)]}


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"k80": {"('A', 1": {"null": 1.0}}}, "('A', 1"),
        ({"k80": {"('A', 1)": {"null": "fast"}}}, "('A', 1).null"),
        ({"k80": {"('A', 1)": {"('B', 1)": [1.0, 1.0]}}}, "'null'"),
        ({"k80": {"('A', 1)": {"null": 1.0, "('B', 1)": [1.0, 1.0]}}}, "no alone throughput"),
        ({"k80": {"('A', 1)": {"null": 1.0, "('A', 1)": [1.0]}}}, "[this, other]"),
        (
            {"k80": {"('A', 1)": {"null": 1.0, "('B', 1)": [0.5, 0.4]},
                     "('B', 1)": {"null": 1.0, "('A', 1)": [0.4, 0.6]}}},
            "mirror",
        ),
    ],
)
def test_load_gavel_bad_file_names_file_and_key(tmp_path, data, needle):
    path = _write_json(tmp_path, data)
    with pytest.raises(ValueError) as err:
        load_gavel(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_load_gavel_not_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{")
    with pytest.raises(ValueError, match="broken.json"):
        load_gavel(path)


# ----------------------------------------------------------------------------- packing model
def test_packing_speed_formula_and_errors():
    assert packing_speed(0.2, 0.3, 0.1, 2.0) == pytest.approx(0.9)  # GPU not oversubscribed
    assert packing_speed(1.0, 1.0, 0.0, 1.0) == pytest.approx(0.5)
    assert packing_speed(0.8, 0.7, 0.2, 2.0) == pytest.approx(0.8 / 1.5**2)
    for bad in [(0.0, 0.5, 0.1, 1.0), (0.5, 1.2, 0.1, 1.0), (0.5, 0.5, 1.0, 1.0),
                (0.5, 0.5, 0.1, -1.0), (0.5, 0.5, 0.1, float("nan"))]:
        with pytest.raises(ValueError):
            packing_speed(*bad)


def _synthetic(utils: dict[str, float], eps: float, gamma: float, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    records = []
    for a, b in itertools.combinations_with_replacement(sorted(utils), 2):
        speed = packing_speed(utils[a], utils[b], eps, gamma)
        alone_a, alone_b = rng.uniform(1, 100, size=2)
        ra = speed + rng.normal(0, noise)
        rb = ra if a == b else speed + rng.normal(0, noise)
        records.append(GavelPair("sim", a, b, alone_a, alone_b, ra * alone_a, rb * alone_b))
    return records


def test_fit_recovers_synthetic_parameters():
    utils = {f"job{i}": u for i, u in enumerate([0.15, 0.25, 0.35, 0.5, 0.6, 0.75, 0.9, 1.0])}
    fit = fit_packing(_synthetic(utils, eps=0.1, gamma=1.5, noise=0.005, seed=1))
    assert fit.eps == pytest.approx(0.1, abs=0.02)
    assert fit.gamma == pytest.approx(1.5, abs=0.2)
    for job, u in utils.items():
        assert fit.utilisation[job] == pytest.approx(u, abs=0.05), job
    assert fit.rmse < 0.01
    assert fit.n_pairs == 36


def test_fit_with_gamma_held():
    utils = {f"job{i}": u for i, u in enumerate([0.2, 0.4, 0.6, 0.8, 1.0])}
    fit = fit_packing(_synthetic(utils, eps=0.05, gamma=1.0, noise=0.0, seed=2), gamma=1.0)
    assert fit.gamma == 1.0
    assert fit.eps == pytest.approx(0.05, abs=1e-3)
    assert fit.rmse < 1e-3
    with pytest.raises(ValueError, match="gamma"):
        fit_packing(_synthetic(utils, 0.05, 1.0, 0.0, 2), gamma=-1.0)
    with pytest.raises(ValueError, match="no records"):
        fit_packing([])


def test_pooled_fit_is_in_gandiva_direction(gavel):
    """Gandiva Table 1: packing two low-utilisation jobs beats time-slicing, two busy ones lose."""
    fit = fit_packing([r for g in GAVEL_GPU_TYPES for r in gavel[g]])
    assert fit.n_pairs == 976
    assert 0 <= fit.eps < 1 and fit.gamma >= 0 and fit.rmse < 0.2
    assert 2 * packing_speed(0.087, 0.087, fit.eps, fit.gamma) > 1.0
    assert 2 * packing_speed(0.94, 0.94, fit.eps, fit.gamma) < 0.98


# ----------------------------------------------------------------------------- Pollux
def test_load_pollux_placements_real_file():
    records = load_pollux_placements(shared_file("profiles", "pollux_imagenet_placements.csv"))
    assert len(records) == 864
    assert len({r.placement for r in records}) == 108
    assert all(isinstance(r.placement, str) for r in records)
    assert any(r.placement == "1122" for r in records)
    assert all(0 <= r.sync_time <= r.step_time for r in records)


@pytest.mark.parametrize(
    ("row", "field"),
    [("1x2,20,0.1,0.01", "placement"), ("12,big,0.1,0.01", "local_bsz"),
     ("12,20,slow,0.01", "step_time"), ("12,20,0.1,0.2", "sync_time"), ("12,20,0.1", "fields")],
)
def test_load_pollux_placements_bad_row(tmp_path, row, field):
    path = tmp_path / "placements.csv"
    path.write_text(f"placement,local_bsz,step_time,sync_time\n1,20,0.1,0.01\n{row}\n")
    with pytest.raises(ValueError) as err:
        load_pollux_placements(path)
    assert f"{path}:3" in str(err.value) and field in str(err.value)

"""Statistical efficiency (goodput): what a processed sample is worth at a job's global batch.

Weak scaling alone makes one big consolidated shape always best (closing note, issue 15). Real
large-batch training needs more samples to reach the same model: Pollux (Qiao et al., OSDI'21,
Sec. 3.1, Eq. 6-7; after McCandlish et al. 2018) gives the efficiency of global batch M as

    E(M) = (phi + M0) / (phi + M),

phi the gradient noise scale, which grows as training goes on (configs/efficiency.yaml, measured by
Pollux). A job's work is counted in local batches of one worker (M0 = the model's local batch), as
without this module; a job of w workers at a sync step processes w local batches (the speed, in
local batches/s, is unchanged) and its work advances by w x E(w x M0) of them. phi is piecewise
constant in the fraction of the job's work done, so every rate is constant between engine events;
the engine makes each bucket boundary an event (sim.Simulator.advance).

Choices: async jobs (sync: false) have E = 1 (every update uses one worker's batch; staleness has no
measurement here); `exchange_every` does not change M. The scenario field `efficiency` picks the
piece: `none` (default, the engine as before) or `pgns`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from .config import CONFIG_DIR, ConfigError, ModelSpec, _Strict, load_cached, read_yaml, validate

EFFICIENCY_FILE = CONFIG_DIR / "efficiency.yaml"


class Scored(_Strict):
    """What `dlcluster fidelity` scores a measured table against (configs/efficiency.yaml header)."""

    file: str
    fit_batch: int = Field(gt=0)
    batch: int = Field(gt=0)
    whole_ratio: float = Field(gt=0, description="samples at `batch` / samples at `fit_batch`, whole schedule")
    target: float
    target_fraction: float = Field(gt=0, le=1, description="fraction of the fit run's work at the target")
    target_ratio: float = Field(gt=0, description="samples at `batch` / at `fit_batch` to the target")


class Measured(_Strict):
    source: str = Field(min_length=1)
    m0: int = Field(gt=0, description="the batch the progress and grad_var are counted at")
    phi: list[tuple[float, float]] = Field(min_length=1, description="[start fraction of the work, phi]")
    scored: Scored | None = None

    @model_validator(mode="after")
    def _table(self) -> "Measured":
        starts = [s for s, _ in self.phi]
        if starts[0] != 0.0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= 1.0:
            raise ValueError(f"phi: start fractions must begin at 0 and rise below 1, got {starts}")
        if any(p <= 0 for _, p in self.phi):
            raise ValueError(f"phi: noise scales must be > 0, got {[p for _, p in self.phi]}")
        return self


class ModelMap(_Strict):
    measured: str
    local_batch: int = Field(gt=0)
    why: str = Field(min_length=1, description="why this measured model stands for the zoo model")


class EfficiencyConfig(_Strict):
    source: str = Field(min_length=1)
    measured: dict[str, Measured] = Field(min_length=1)
    models: dict[str, ModelMap]

    @model_validator(mode="after")
    def _known(self) -> "EfficiencyConfig":
        for name, m in self.models.items():
            if m.measured not in self.measured:
                raise ValueError(f"models.{name}.measured: unknown {m.measured!r} (known: {sorted(self.measured)})")
        return self


def gain(phi: float, local_batch: int, workers: int) -> float:
    """Pollux Eq. 7, E(M) = (phi + M0) / (phi + M), with M0 = the local batch and M = workers x the
    local batch: the one place the formula is written (PhiTable.efficiency for the engine,
    api.JobView.efficiency for schedulers)."""
    return (phi + local_batch) / (phi + workers * local_batch)


@dataclass(frozen=True)
class PhiTable:
    """One job's noise scale over its work: bucket i covers fractions [starts[i], starts[i+1])."""

    starts: tuple[float, ...]
    phi: tuple[float, ...]
    local_batch: int

    @classmethod
    def of(cls, meas: Measured, local_batch: int) -> "PhiTable":
        """The measured table `meas` for a job whose local batch is `local_batch`."""
        return cls(tuple(s for s, _ in meas.phi), tuple(p for _, p in meas.phi), local_batch)

    def efficiency(self, bucket: int, workers: int) -> float:
        """E(M) of Pollux Eq. 7 (`gain`) in the bucket's phi."""
        return gain(self.phi[bucket], self.local_batch, workers)

    def mean_inverse(self, workers: int, upto: float = 1.0) -> float:
        """Mean of 1 / E over the fractions [0, upto] of the work: local batches processed per local
        batch of work (1 at one worker)."""
        total = 0.0
        ends = self.starts[1:] + (1.0,)
        for k, (lo, hi) in enumerate(zip(self.starts, ends)):
            if lo >= upto:
                break
            total += (min(hi, upto) - lo) / self.efficiency(k, workers)
        return total / upto


class Efficiency:
    """The pluggable piece: each job's PhiTable, or None for E = 1 throughout."""

    name = "none"

    def table(self, model_name: str, model: ModelSpec) -> PhiTable | None:
        return None


class PGNS(Efficiency):
    """Pollux's efficiency with the measured phi tables of configs/efficiency.yaml."""

    name = "pgns"

    def __init__(self, config: EfficiencyConfig):
        self.config = config

    def table(self, model_name: str, model: ModelSpec) -> PhiTable | None:
        if not model.sync:
            return None
        m = self.config.models.get(model_name)
        if m is None:
            raise ConfigError(
                f"{EFFICIENCY_FILE}: models: no entry for zoo model {model_name!r}, which `efficiency: pgns` "
                f"needs (map it to one of the measured models {sorted(self.config.measured)}, or use "
                f"`efficiency: none`)")
        return PhiTable.of(self.config.measured[m.measured], m.local_batch)


def load_config(path=EFFICIENCY_FILE) -> EfficiencyConfig:
    """The validated config, parsed once per file version (config.load_cached): every episode of an
    env uses it."""
    return load_cached(path, _parse_config)


def _parse_config(path: Path) -> EfficiencyConfig:
    return validate(EfficiencyConfig, read_yaml(path), path)


def make(kind: Literal["none", "pgns"] | str) -> Efficiency:
    """The scenario field `efficiency` -> its piece."""
    if kind == "none":
        return Efficiency()
    if kind == "pgns":
        return PGNS(load_config())
    raise ConfigError(f"efficiency: unknown {kind!r} (known: 'none', 'pgns')")


def predicted_ratio(meas: Measured, batch: int, fit_batch: int, upto: float = 1.0) -> float:
    """Samples a run at `batch` needs over a run at `fit_batch` for the same work [0, upto], by the
    table alone: the engine's prediction that `dlcluster fidelity` scores."""
    table = PhiTable.of(meas, meas.m0)
    # samples per unit of work at batch B = M0 / E(B), E with M = B: workers = B / M0
    return table.mean_inverse(batch / meas.m0, upto) / table.mean_inverse(fit_batch / meas.m0, upto)


def fidelity_report(config: EfficiencyConfig | None = None) -> dict:
    """Each measured table scored on the file it was not derived from (`dlcluster fidelity`):
    predicted vs measured samples ratio of the scored run over the fit run, for the whole schedule
    and to the target metric, beside the ratio 1 that weak scaling alone predicts (`none`)."""
    config = config or load_config()
    rows = {}
    for name, m in config.measured.items():
        sc = m.scored
        if sc is None:
            continue
        row = {"fit": m.source, "scored": sc.file, "fit_batch": sc.fit_batch, "batch": sc.batch}
        for key, measured, upto in (("whole", sc.whole_ratio, 1.0), ("target", sc.target_ratio, sc.target_fraction)):
            pred = predicted_ratio(m, sc.batch, sc.fit_batch, upto)
            row[key] = {"measured": measured, "predicted": pred, "rel_err": pred / measured - 1,
                        "none_rel_err": 1 / measured - 1}
        rows[name] = row
    summary = {}
    for key in ("whole", "target"):
        errs = sorted(abs(r[key]["rel_err"]) for r in rows.values())
        none = sorted(abs(r[key]["none_rel_err"]) for r in rows.values())
        summary[key] = {"median_abs_rel_err": float(np.median(errs)),
                        "none_median_abs_rel_err": float(np.median(none)),
                        "max_abs_rel_err": errs[-1], "none_max_abs_rel_err": none[-1]}
    return {"models": rows, "summary": summary}


__all__ = ["Efficiency", "EfficiencyConfig", "PGNS", "PhiTable", "load_config", "fidelity_report", "gain", "make",
           "predicted_ratio"]

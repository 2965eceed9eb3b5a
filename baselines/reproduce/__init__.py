"""Reproduce each seed's experiment: `dlcluster reproduce NAME [--json PATH]`.

Each module here (dltap, d2s, optimus, gandiva, flowcon, drf) has `run(seeds: int) -> list[Claim]`,
running its scenario from configs/scenarios/ and putting the paper's figure beside the simulated one.

A claim's status (`Claim.status`) has three states:
- "ok": the right direction and the paper's magnitude: at least half of it, and at most twice it
  where the paper gives a number (`Claim.paper_value`; `upper=False` for "up to" / "at least"
  figures, which bound one side only). A claim whose paper gives no number ("lower", "rising") is
  checked on its direction alone, and says so (`Claim.magnitude_ok` is None).
- "direction only": the right direction, the magnitude outside [half, twice] the paper's.
- "WRONG": the wrong direction.
The magnitude is compared on the effect: a percentage as it is, a ratio "2.39x" as 2.39 - 1. Where
a claim gives no `paper_value`, both figures are read off `paper` and `simulated` when each is one
signed number with the same unit (%, x or none), so rows written before the rule get it too.

`kind="testbed"` marks a check of the paper's testbed rather than of a claim: one observable other
than the claims (D²S's traffic volume per experiment, FlowCon's alpha sensitivity, DLTAP's
cross- vs inner-node throughput of Fig. 3 (a), Optimus' speed-estimation error, DRF's total
allocation read from the cluster), so a scenario cannot quietly drift from the paper's set-up.
It is judged by the same rule, and reads "off" where the magnitude is outside [half, twice] the
paper's; one without a paper figure (DLTAP's "cross < inner", Optimus' "small") by its direction.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import asdict, dataclass

NAMES = ("dltap", "d2s", "optimus", "gandiva", "flowcon", "drf")

_ONE_NUMBER = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*(%|x)?\s*")


def _number(text: str) -> tuple[float, str] | None:
    """(value, unit) if `text` is exactly one signed number with an optional % or x unit."""
    m = _ONE_NUMBER.fullmatch(text)
    return (float(m.group(1)), m.group(2) or "") if m else None


def _effect(value: float, unit: str) -> float:
    return value - 1.0 if unit == "x" else value


@dataclass(frozen=True)
class Claim:
    claim: str  # what the paper says, in words
    paper: str  # the paper's figure, e.g. "-12.11%"
    simulated: str  # ours, same unit
    direction_ok: bool  # same sign / ordering as the paper
    # the magnitudes, same unit: a number, or for the paper a (low, high) range such as -1..-5%
    paper_value: float | tuple[float, float] | None = None
    sim_value: float | None = None
    upper: bool = True  # False: the paper's figure bounds one side only ("up to 42%")
    kind: str = "claim"  # "claim", or "testbed": an observable of the paper's testbed (see above)

    def _values(self) -> tuple[tuple[float, float] | None, float | None]:
        """The paper's magnitude range (effect, in the paper's unit) and ours; None if unknown."""
        if self.paper_value is not None and self.sim_value is not None:
            pv = self.paper_value
            lo, hi = (pv, pv) if isinstance(pv, (int, float)) else pv
            return (float(lo), float(hi)), float(self.sim_value)
        if self.paper_value is None and self.sim_value is None:
            p, s = _number(self.paper), _number(self.simulated)
            if p and s and p[1] == s[1]:
                e = _effect(*p)
                return (e, e), _effect(*s)
        return None, None

    @property
    def magnitude_ok(self) -> bool | None:
        """At least half the paper's magnitude, at most twice it (if `upper`); None if the paper
        gives no number to compare with."""
        rng, sim = self._values()
        if rng is None or sim is None or not math.isfinite(sim):
            return None
        small, large = sorted((abs(rng[0]), abs(rng[1])))
        return bool(abs(sim) >= 0.5 * small and (not self.upper or abs(sim) <= 2.0 * large))

    @property
    def status(self) -> str:
        if not self.direction_ok:
            return "WRONG"
        if self.magnitude_ok is False:
            return "off" if self.kind == "testbed" else "direction only"
        return "ok"

    def row(self) -> dict:
        return {**asdict(self), "magnitude_ok": self.magnitude_ok, "status": self.status}


def run(name: str, seeds: int = 3) -> list[Claim]:
    if name not in NAMES:
        raise KeyError(f"unknown experiment {name!r}; valid: {', '.join(NAMES)}")
    return importlib.import_module(f"baselines.reproduce.{name}").run(seeds)


def pct(new: float, old: float) -> str:
    """Relative change of `new` against `old` as a signed percentage."""
    return f"{100.0 * (new - old) / old:+.1f}%"

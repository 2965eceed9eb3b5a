"""Reproduce each seed's experiment: `dlcluster reproduce NAME [--json PATH]`.

Each module here (dltap, d2s, optimus, gandiva, flowcon, drf) has `run(seeds: int) -> list[Claim]`,
running its scenario from configs/scenarios/ and putting the paper's figure beside the simulated one.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass

NAMES = ("dltap", "d2s", "optimus", "gandiva", "flowcon", "drf")


@dataclass(frozen=True)
class Claim:
    claim: str  # what the paper says, in words
    paper: str  # the paper's figure, e.g. "-12.11%"
    simulated: str  # ours, same unit
    direction_ok: bool  # same sign / ordering as the paper

    def row(self) -> dict:
        return asdict(self)


def run(name: str, seeds: int = 3) -> list[Claim]:
    if name not in NAMES:
        raise KeyError(f"unknown experiment {name!r}; valid: {', '.join(NAMES)}")
    return importlib.import_module(f"baselines.reproduce.{name}").run(seeds)


def pct(new: float, old: float) -> str:
    """Relative change of `new` against `old` as a signed percentage."""
    return f"{100.0 * (new - old) / old:+.1f}%"

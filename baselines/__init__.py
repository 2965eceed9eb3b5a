"""Baseline schedulers, each one file beside its paper, available by name: `baselines.make("fifo")`."""

from __future__ import annotations

from dlclusterenv.api import Scheduler

from .drf import DRF
from .fifo import FIFO
from .random_policy import RandomPlacement

REGISTRY: dict[str, type[Scheduler]] = {
    "drf": DRF,
    "fifo": FIFO,
    "random": RandomPlacement,
}


def make(name: str, **kwargs) -> Scheduler:
    """A fresh scheduler by registry name; an unknown name lists the valid ones."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; valid: {', '.join(sorted(REGISTRY))}") from None
    return cls(**kwargs)


def names() -> list[str]:
    return sorted(REGISTRY)

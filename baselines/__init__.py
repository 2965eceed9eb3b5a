"""Baseline schedulers, each one file beside its paper, available by name: `baselines.make("fifo")`."""

from __future__ import annotations

from dlclusterenv.api import Scheduler

from .d2s import D2S
from .dltap import DLTAP
from .drf import DRF
from .fair import FAIR
from .fifo import FIFO
from .flowcon import FlowCon
from .gavel import Gavel
from .gandiva import Gandiva
from .k8s_default import K8sDefault
from .na import NA
from .optimus import Optimus, OptimusOracle
from .otea import OTEA
from .pollux import Pollux, PolluxOracle
from .random_policy import RandomPlacement
from .srtf import SRTFOracle
from .tetris import Tetris
from .tiresias import Tiresias, TiresiasGittins

REGISTRY: dict[str, type[Scheduler]] = {
    "d2s": D2S,
    "dltap": DLTAP,
    "drf": DRF,
    "fair": FAIR,
    "fifo": FIFO,
    "flowcon": FlowCon,
    "gandiva": Gandiva,
    "gavel": Gavel,
    "k8s-default": K8sDefault,
    "na": NA,
    "optimus": Optimus,
    "optimus-oracle": OptimusOracle,
    "otea": OTEA,
    "pollux": Pollux,
    "pollux-oracle": PolluxOracle,
    "random": RandomPlacement,
    "srtf-oracle": SRTFOracle,
    "tetris": Tetris,
    "tiresias": Tiresias,
    "tiresias-gittins": TiresiasGittins,
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

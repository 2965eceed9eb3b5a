"""Gymnasium envs; `import dlclusterenv` registers every id in ENV_IDS."""

from .allocation import AllocationEnv, JointEnv
from .core import ClusterEnv
from .grow import GrowEnv
from .placement import PlacementEnv
from .share import ShareEnv
from .vector import (
    AllocationVectorEnv,
    ClusterVectorEnv,
    GrowVectorEnv,
    JointVectorEnv,
    PlacementVectorEnv,
    ShareVectorEnv,
)

__all__ = [
    "AllocationEnv", "AllocationVectorEnv", "ClusterEnv", "ClusterVectorEnv", "GrowEnv", "GrowVectorEnv",
    "JointEnv", "JointVectorEnv", "PlacementEnv", "PlacementVectorEnv", "ShareEnv", "ShareVectorEnv",
]

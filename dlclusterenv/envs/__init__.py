"""Gymnasium envs; `import dlclusterenv` registers every id in ENV_IDS."""

from .allocation import AllocationEnv, JointEnv
from .core import ClusterEnv
from .placement import PlacementEnv
from .share import ShareEnv

__all__ = ["AllocationEnv", "ClusterEnv", "JointEnv", "PlacementEnv", "ShareEnv"]

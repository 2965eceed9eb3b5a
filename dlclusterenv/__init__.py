"""dlclusterenv: a GPU-cluster simulator for PS/worker training jobs, with a Scheduler API for
heuristics and Gymnasium envs for learned schedulers, both over one engine."""

from gymnasium.envs.registration import register, registry

from .api import ClusterView, Decision, DecisionError, JobView, Scheduler
from .cluster import Cluster, build_cluster
from .config import ConfigError
from .sim import Simulator
from .workload import build

__version__ = "0.1.0"

# id -> (entry point, default kwargs). DLCluster-v0 is the joint env: it can express every
# allocation and placement decision the heuristics make. No max_episode_steps: the envs cap
# episodes with their own max_steps option (ClusterEnv docstring, "Episode End", says why).
_ENVS = {
    "DLCluster-v0": ("dlclusterenv.envs:JointEnv", {}),
    "DLClusterPlace-v0": ("dlclusterenv.envs:PlacementEnv", {}),
    "DLClusterAlloc-v0": ("dlclusterenv.envs:AllocationEnv", {}),
    "DLClusterJoint-v0": ("dlclusterenv.envs:JointEnv", {}),
    # the joint env plus GPU slots, GPU sharing modes and CPU limits (Gandiva, FlowCon)
    "DLClusterShare-v0": ("dlclusterenv.envs:ShareEnv", {}),
}
ENV_IDS = tuple(_ENVS)

for _id, (_entry, _kw) in _ENVS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, kwargs=_kw)


def make_sim(scenario="default", seed: int = 0) -> Simulator:
    """A Simulator for a scenario (preset name, YAML path or dict) and a seed."""
    sc, cluster, zoo, jobs = build(scenario, seed)
    return Simulator(
        cluster, jobs, zoo, seed=seed, tick_s=sc.engine.tick_s, horizon_s=sc.engine.horizon_s
    )


__all__ = [
    "ENV_IDS",
    "Cluster",
    "ClusterView",
    "ConfigError",
    "Decision",
    "DecisionError",
    "JobView",
    "Scheduler",
    "Simulator",
    "build",
    "build_cluster",
    "make_sim",
]

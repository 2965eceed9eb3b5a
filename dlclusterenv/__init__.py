"""dlclusterenv: a GPU-cluster simulator for PS/worker training jobs, with a Scheduler API for
heuristics and Gymnasium envs for learned schedulers, both over one engine."""

from gymnasium.envs.registration import register, registry

from . import efficiency
from .api import ClusterView, Decision, DecisionError, JobView, Scheduler
from .cluster import Cluster, build_cluster
from .config import ConfigError
from .sim import Simulator
from .workload import build

__version__ = "0.1.0"

# id -> (entry point, vector entry point, default kwargs). DLCluster-v0 is the joint env: it can
# express every allocation and placement decision the heuristics make. The vector entry points are
# the native batched envs (envs/vector.py): gym.make_vec(id, N, vectorization_mode="vector_entry_point").
# No max_episode_steps: the envs cap episodes with their own max_steps option (ClusterEnv
# docstring, "Episode End", says why).
_ENVS = {
    "DLCluster-v0": ("dlclusterenv.envs:JointEnv", "dlclusterenv.envs:JointVectorEnv", {}),
    "DLClusterPlace-v0": ("dlclusterenv.envs:PlacementEnv", "dlclusterenv.envs:PlacementVectorEnv", {}),
    "DLClusterAlloc-v0": ("dlclusterenv.envs:AllocationEnv", "dlclusterenv.envs:AllocationVectorEnv", {}),
    "DLClusterJoint-v0": ("dlclusterenv.envs:JointEnv", "dlclusterenv.envs:JointVectorEnv", {}),
    # the joint env plus GPU slots, GPU sharing modes and CPU limits (Gandiva, FlowCon)
    "DLClusterShare-v0": ("dlclusterenv.envs:ShareEnv", "dlclusterenv.envs:ShareVectorEnv", {}),
    # a growth limit per job over Pollux, which allocates (issue 15)
    "DLClusterGrow-v0": ("dlclusterenv.envs:GrowEnv", "dlclusterenv.envs:GrowVectorEnv", {}),
}
ENV_IDS = tuple(_ENVS)

for _id, (_entry, _vector_entry, _kw) in _ENVS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry, vector_entry_point=_vector_entry, kwargs=_kw)


def make_sim(scenario="default", seed: int = 0) -> Simulator:
    """A Simulator for a scenario (preset name, YAML path or dict) and a seed."""
    sc, cluster, zoo, jobs = build(scenario, seed)
    return Simulator(
        cluster, jobs, zoo, seed=seed, tick_s=sc.engine.tick_s, horizon_s=sc.engine.horizon_s,
        efficiency=efficiency.make(sc.efficiency),
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

"""Inline configs for mechanism tests: clusters and model zoos built in code, not read from presets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlclusterenv.cluster import Cluster, build_cluster
from dlclusterenv.config import ClusterConfig, ModelSpec, ModelZoo
from dlclusterenv.jobs import JobSpec
from dlclusterenv.profiles import shared_dir
from dlclusterenv.sim import Simulator

# The shared, read-only data (../shared or $DLCLUSTER_SHARED): a clean clone without it skips the
# tests that read it.
PHILLY_CSV = shared_dir() / "traces" / "philly_jobs.csv"
needs_philly = pytest.mark.skipif(not PHILLY_CSV.exists(), reason=f"needs {PHILLY_CSV}")


def shared_file(*parts: str) -> Path:
    """A file of the shared data, or skip the calling test when it is absent."""
    path = shared_dir().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data file absent: {path}")
    return path


def make_cluster(
    *,
    racks: int = 1,
    nodes_per_rack: int = 3,
    cpus: float = 32,
    memory_gb: float = 256,
    gpus: int = 0,
    gpu_memory_gb: float = 0.0,
    nic_MBps: float = 1250.0,
    intra_MBps: float = 0.0,
    uplink_MBps: float = 100_000.0,
    overheads: dict[str, float] | None = None,
    name: str = "inline",
) -> Cluster:
    """`racks` identical racks of `nodes_per_rack` identical nodes, named r{rack}-n{i}. The RPC
    cost is 0 unless `overheads` sets it, so closed-form step times stay simple."""
    data: dict[str, Any] = {
        "name": name,
        "source": "inline test configuration",
        "node_types": {
            "node": {
                "cpus": cpus,
                "memory_gb": memory_gb,
                "gpus": gpus,
                "gpu_memory_gb": gpu_memory_gb,
                "nic_MBps": nic_MBps,
                "intra_MBps": intra_MBps,
            }
        },
        "racks": [
            {
                "count": racks,
                "uplink_MBps": uplink_MBps,
                "nodes": [{"type": "node", "count": nodes_per_rack}],
            }
        ],
    }
    data["overheads"] = {"rpc_s": 0.0, **(overheads or {})}
    return build_cluster(ClusterConfig.model_validate(data))


def model_dict(**overrides: Any) -> dict[str, Any]:
    """A CPU-only, synchronous model whose only costs are the ones a test turns on.

    No fixed overhead, no PS update time, no CPU reserved by the PS, a long-converging loss curve
    (so nothing finishes during a test). Nested dicts (ps, worker, loss, convergence) are merged.
    """
    base: dict[str, Any] = {
        "source": "inline test model",
        "param_bytes": 12e6,
        "step_compute_s": 0.3,
        "step_overhead_s": 0.0,
        "ps_update_s": 0.0,
        "compute_on": "cpu",
        "steps_per_epoch": 100_000,
        "sync": True,
        "ps": {"cpu": 0.0, "mem_gb": 1.0},
        "worker": {"cpu": 1.0, "mem_gb": 1.0},
        "loss": {"b0": 0.5, "b1": 1.0, "b2": 0.1, "noise": 0.0},
        "convergence": {"rel_delta": 0.001, "max_epochs": 100},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def make_zoo(**models: dict[str, Any]) -> ModelZoo:
    """ModelZoo(models={name: ModelSpec}) from model_dict()-style dicts."""
    return ModelZoo(models={k: ModelSpec.model_validate(v) for k, v in models.items()})


def make_sim(cluster: Cluster, zoo: ModelZoo, jobs: list[tuple], **kw: Any) -> Simulator:
    """jobs: (job_id, model, num_ps, num_workers[, shard_nodes]) tuples, all arriving at t=0."""
    specs = []
    for j in jobs:
        jid, model, p, w = j[:4]
        shards = tuple(j[4]) if len(j) > 4 else ()
        specs.append(JobSpec(jid, model, 0.0, p, w, shard_nodes=shards))
    return Simulator(cluster, specs, zoo, seed=0, **kw)


def decision_digest(scenario: str, scheduler: Any, seed: int) -> str:
    """First 16 hex digits of the SHA-256 of benchmarks/decision_log.py's log (every decision and
    every job's finish time, exact floats): what identity tests pin against a recorded commit."""
    import sys

    bench = str(Path(__file__).resolve().parent.parent / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    from decision_log import decision_log, digest

    return digest(decision_log(scenario, scheduler, seed))[:16]


def as_recorded(policy: str):
    """baselines.make(policy), Tiresias without its wake-ups (wake=False): the decisions the
    identity digests were recorded on (its wake-ups, 2026-11-28, add decision points; see
    test_baseline_tiresias.py)."""
    import baselines

    return baselines.make(policy, **({"wake": False} if policy.startswith("tiresias") else {}))

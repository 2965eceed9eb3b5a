"""Validated configuration: clusters, the model zoo, scenarios.

Every YAML file is checked by pydantic on load; an unknown key, a wrong type or an impossible value
raises :class:`ConfigError` naming the file, the key path and the value (see DESIGN.md, "bad input").
Units everywhere: seconds, bytes for model and data sizes, MB/s (1e6 bytes/s) for bandwidth, GB for
memory, cores for CPU.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def shared_dir() -> Path:
    """Where the shared, read-only data lives: ``$DLCLUSTER_SHARED`` or ``<repo>/../shared``."""
    env = os.environ.get("DLCLUSTER_SHARED")
    if env:
        return Path(env)
    return CONFIG_DIR.parent.parent / "shared"


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names file, key path and value."""


class _Strict(BaseModel):
    """Every config file's model: unknown keys are errors, and so are inf and nan (a `.inf` window
    or a `.nan` weight would otherwise reach numpy; a field that means "no bound" says so)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# ----------------------------------------------------------------------------- cluster
class NodeType(_Strict):
    cpus: float = Field(gt=0, description="CPU cores")
    memory_gb: float = Field(gt=0)
    gpus: int = Field(ge=0)
    gpu_memory_gb: float = Field(default=0.0, ge=0)
    gpu_model: str = "none"
    nic_MBps: float = Field(gt=0, description="NIC bandwidth per direction, MB/s")
    intra_MBps: float = Field(
        default=0.0,
        ge=0,
        description="host path inside the node (PCIe root / NVLink) that every GPU transfer crosses,"
        " shared by the node's GPUs, MB/s; 0 = not modelled (free)",
    )


class Network(_Strict):
    """What the wire gives a job beyond the NIC's line rate (speed.py, comm.py); fitted by
    `dlcluster fidelity` on measured step times where the config says so."""

    conn_MBps: float = Field(
        default=0.0,
        ge=0,
        description="most one node-pair connection of a job carries, MB/s (TCP flows are capped"
        " below the NIC's line rate); 0 = uncapped",
    )
    latency_s: float = Field(
        default=0.0, ge=0, description="per-message latency of one all-reduce step across nodes (alpha)"
    )


class NodeGroup(_Strict):
    type: str
    count: int = Field(ge=1)


class RackGroup(_Strict):
    count: int = Field(default=1, ge=1, description="racks of this shape")
    uplink_MBps: float = Field(gt=0, description="rack uplink bandwidth per direction, MB/s")
    nodes: list[NodeGroup] = Field(min_length=1)


class Overheads(_Strict):
    """Costs of the GPU-sharing and elasticity mechanisms (defaults cited in configs)."""

    checkpoint_s: float = Field(default=10.0, ge=0, description="fixed part of checkpoint+restore")
    checkpoint_MBps: float = Field(default=200.0, gt=0, description="checkpoint write/read speed")
    suspend_resume_s: float = Field(default=0.1, ge=0, description="per time-slice switch")
    time_slice_s: float = Field(default=60.0, gt=0, description="round-robin quantum")
    time_slice: Literal["gpu", "server"] = Field(
        default="server",
        description="what the round robin shares: 'gpu', each time-sliced GPU among its own workers"
        " (1/n each); 'server', a node's time-sliced workers rotate over the node's time-sliced GPUs"
        " that hold workers (G/T each: G those GPUs, T the workers on them; packed GPUs unchanged)."
        " Default 'server': Gandiva (seed 002, Fig. 9), the only source of time-slicing here, rotates"
        " six 1-GPU jobs over a server's 4 GPUs so each gets 4/6",
    )
    rpc_s: float = Field(
        default=0.0005,
        ge=0,
        description="fixed cost of one worker-PS request/response (datacenter RPCs take 100s of us:"
        " Barroso et al., 'Attack of the killer microseconds', CACM 2017)",
    )
    cpu_switch_s: float = Field(
        default=0.0,
        ge=0,
        description="work lost per CPU context switch, direct + cache refill, when tasks compete for"
        " a node's cores (0 = ideal processor sharing). Li, Ding & Shen, 'Quantifying the cost of"
        " context switch', ExpCS 2007: 3.8 us direct, over 1,000 us once the data exceeds the cache",
    )
    cpu_sched_latency_s: float = Field(
        default=0.024, gt=0, description="CFS period shared by the runnable tasks of a core"
        " (Linux sched_latency: 6 ms x (1 + log2(min(cpus, 8))))",
    )
    cpu_min_granularity_s: float = Field(
        default=0.003, gt=0, description="shortest CFS slice (Linux sched_min_granularity:"
        " 0.75 ms x (1 + log2(min(cpus, 8))))",
    )


class ClusterConfig(_Strict):
    name: str
    source: str = Field(min_length=1, description="where the numbers come from")
    node_types: dict[str, NodeType] = Field(min_length=1)
    racks: list[RackGroup] = Field(min_length=1)
    overheads: Overheads = Overheads()
    network: Network = Network()

    @model_validator(mode="after")
    def _types_exist(self) -> "ClusterConfig":
        for i, rack in enumerate(self.racks):
            for j, group in enumerate(rack.nodes):
                if group.type not in self.node_types:
                    raise ValueError(
                        f"racks.{i}.nodes.{j}.type: unknown node type {group.type!r} "
                        f"(known: {sorted(self.node_types)})"
                    )
        return self


class NodeListSpec(_Strict):
    """A trace's machine list standing in for written-out racks (see
    traces.alibaba_cluster_config for the grouping rule); the network is not in the trace."""

    path: str = Field(description="absolute, or relative to the repository root")
    format: Literal["alibaba_csv"] = "alibaba_csv"
    nodes_per_rack: int = Field(ge=1)
    nic_MBps: float = Field(gt=0, description="NIC bandwidth per direction, MB/s")
    intra_MBps: float = Field(default=0.0, ge=0, description="host path inside a node, MB/s (NodeType)")
    uplink_MBps: float = Field(gt=0, description="rack uplink bandwidth per direction, MB/s")
    gpu_memory_gb: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="GPU model -> GB, for models the loader does not know"
    )
    skip_bad_rows: bool = False


class NodeListCluster(_Strict):
    """A cluster YAML with ``node_list:`` in place of ``node_types`` and ``racks``."""

    name: str
    source: str = Field(min_length=1, description="where the numbers come from")
    node_list: NodeListSpec
    overheads: Overheads = Overheads()
    network: Network = Network()


# ----------------------------------------------------------------------------- model zoo
class Demand(_Strict):
    cpu: float = Field(ge=0, description="cores reserved")
    mem_gb: float = Field(ge=0)
    gpu: int = Field(default=0, ge=0, le=1, description="a task uses at most one GPU")
    bw_MBps: float = Field(default=0.0, ge=0, description="per-task bandwidth cap; 0 = uncapped")


class LossCurve(_Strict):
    """Optimus' convergence model l(k) = 1/(b0*k + b1) + b2, k in epochs, plus Gaussian noise."""

    b0: float = Field(gt=0)
    b1: float = Field(gt=0)
    b2: float = Field(ge=0)
    noise: float = Field(default=0.0, ge=0, description="std of observation noise, relative")


class Convergence(_Strict):
    """Converged at the first epoch whose true loss improves by less than `rel_delta`."""

    rel_delta: float = Field(gt=0, lt=1)
    max_epochs: int = Field(ge=1, description="epoch budget")


class ModelSpec(_Strict):
    source: str = Field(min_length=1)
    param_bytes: float = Field(gt=0)
    step_compute_s: float = Field(
        gt=0,
        description="one worker's step on its local batch, alone on its device (weak scaling:"
        " a job of w workers processes w local batches per step)",
    )
    gpu_step_s: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="step_compute_s on each GPU type (lower case, cluster.GPU_ALIASES applied), from"
        " measurements; empty: step_compute_s on every GPU; non-empty: a GPU type not listed is an"
        " error (speed.gpu_compute_s)",
    )
    gavel_job: str | None = Field(
        default=None,
        description="the Gavel job type this model is, for measured co-location"
        " (configs/colocation/gavel.yaml); None: Gandiva-scale gpu_util packing",
    )
    step_overhead_s: float = Field(default=0.0, ge=0, description="fixed per-step cost (t1)")
    ps_update_s: float = Field(
        default=0.0, ge=0, description="PS time to apply one worker's full gradient"
    )
    compute_on: Literal["gpu", "cpu"] = "gpu"
    comm: Literal["ps", "allreduce"] = Field(
        default="ps", description="parameter servers (the seeds) or all-reduce among workers (traces)"
    )
    allreduce: Literal["ring", "hierarchical"] = Field(
        default="ring", description="all-reduce algorithm: one ring over all GPUs, or in-node then across"
    )
    overlap: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="fraction of the compute (the backward pass) that communication can hide behind",
    )
    overlap_max: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="largest fraction of the communication that can be hidden (the last gradient"
        " bucket is synchronised after backward)",
    )
    cpu_max: float | None = Field(
        default=None, gt=0, description="cores a worker can use (work-conserving); default = demand"
    )
    input_bytes_per_step: float = Field(default=0.0, ge=0, description="input bytes of one local batch")
    dataset_bytes: float = Field(default=0.0, ge=0, description="input data set size (shards)")
    steps_per_epoch: int = Field(ge=1, description="local batches per epoch (samples / local batch)")
    sync: bool = True
    ps: Demand
    worker: Demand
    gpu_util: float = Field(default=0.9, gt=0, le=1, description="GPU utilisation alone")
    gpu_mem_gb: float = Field(default=0.0, ge=0)
    loss: LossCurve
    convergence: Convergence
    default_ps: int = Field(default=1, ge=1)
    default_workers: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _gpu_consistent(self) -> "ModelSpec":
        if self.compute_on == "gpu" and self.worker.gpu != 1:
            raise ValueError("compute_on is 'gpu' but worker.gpu is not 1")
        if self.compute_on == "cpu" and self.worker.gpu != 0:
            raise ValueError("compute_on is 'cpu' but worker.gpu is not 0")
        if self.gpu_step_s and self.compute_on != "gpu":
            raise ValueError("gpu_step_s is set but compute_on is not 'gpu'")
        if any(k != k.lower() for k in self.gpu_step_s):
            raise ValueError(f"gpu_step_s: GPU types must be lower case, got {sorted(self.gpu_step_s)}")
        if self.comm == "allreduce" and not self.sync:
            raise ValueError("comm is 'allreduce' but sync is false (all-reduce is synchronous)")
        # time-slicing shares a GPU without a limit, so only CPU and memory bound how many tasks of
        # a role an allocation may ask for (cluster.never_fits); with neither, allocate=(1, 10**9)
        # was accepted and built 10**9 tasks
        for role in ("worker", "ps") if self.comm == "ps" else ("worker",):
            d = getattr(self, role)
            if d.cpu <= 0 and d.mem_gb <= 0:
                raise ValueError(f"{role} reserves no CPU and no memory (cpu 0, mem_gb 0): give it "
                                 "one of them, which bounds how many such tasks fit on a node")
        return self


class ModelZoo(_Strict):
    models: dict[str, ModelSpec] = Field(min_length=1)


# ----------------------------------------------------------------------------- loading
def _format_error(path: Path | str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "<root>"
        value = e.get("input")
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        lines.append(f"{path}: {loc}: {e['msg']} (value: {shown})")
    return "\n".join(lines)


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, except that a key given twice in one mapping is an error: YAML would keep
    the last one silently, so an edit to the first would change nothing."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeLoader reports the unhashable key itself
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def read_yaml(path: Path | str) -> Any:
    path = Path(path)
    try:
        with open(path) as f:
            return yaml.load(f, Loader=_UniqueKeyLoader)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a YAML file") from None
    except OSError as e:  # unreadable (permissions, a device): the reason, not a traceback
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason}); save it as UTF-8") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None


def validate(cls: type[BaseModel], data: Any, path: Path | str) -> Any:
    """Validate `data` as `cls`, turning pydantic's error into one that names file and key path."""
    if data is None:  # an empty file: pydantic's "<root>: Input should be a valid dictionary" said less
        need = [k for k, f in cls.model_fields.items() if f.is_required()]
        raise ConfigError(f"{path}: empty; expected a mapping with the keys {', '.join(need)}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_error(path, e)) from None


def resolve(name_or_path: str | Path, kind: str) -> Path:
    """A preset name (`default`) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        return p
    preset = CONFIG_DIR / kind / f"{name_or_path}.yaml"
    if not preset.exists():
        names = sorted(q.stem for q in (CONFIG_DIR / kind).glob("*.yaml"))
        raise ConfigError(f"unknown {kind[:-1]} {name_or_path!r}; presets: {names}")
    return preset


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size) of a file, None if it cannot be read: what a cache of it is keyed by."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def load_cached(path: Path | str, parse: Callable[[Path], Any]) -> Any:
    """`parse(path)`, done once per file version: keyed by the resolved path, mtime and size, so an
    edited file is read again while a reset or a `make_sim` per seed no longer re-parses YAML
    (that was most of a short episode). Results are frozen models, shared by every caller; a
    failure is not cached (it is raised again, with the same message, on the next call)."""
    path = Path(path)
    stamp = file_stamp(path)
    if stamp is None:
        return parse(path)  # the parser reports the missing file
    key = (path.resolve(), stamp, parse)
    if key not in _PARSED:
        if len(_PARSED) >= 64:
            del _PARSED[next(iter(_PARSED))]  # oldest first
        _PARSED[key] = parse(path)  # messages name the path as the caller gave it
    return _PARSED[key]


_PARSED: dict[tuple[Path, tuple[int, int], Callable], Any] = {}


def file_digest(path: Path | str) -> str:
    """The SHA-256 (hex) of a file's content, read once per file version: cached by the resolved
    path, mtime and size, as `load_cached`, so keying a resumed run on a multi-GB trace costs one
    read per process and file version, while a file re-created with the same bytes (new mtime)
    still gives the same digest. OSError if the file cannot be read."""
    path = Path(path).resolve()
    stamp = file_stamp(path)
    key = (path, stamp)
    if stamp is None or key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:  # raises the OSError naming the file when it is unreadable
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        if len(_DIGESTS) >= 256:
            del _DIGESTS[next(iter(_DIGESTS))]  # oldest first
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


_DIGESTS: dict[tuple[Path, tuple[int, int] | None], str] = {}


def load_cluster(name_or_path: str | Path | ClusterConfig) -> ClusterConfig:
    if isinstance(name_or_path, ClusterConfig):
        return name_or_path
    return load_cached(resolve(name_or_path, "clusters"), _parse_cluster)


def _parse_cluster(path: Path) -> ClusterConfig:
    data = read_yaml(path)
    if isinstance(data, dict) and "node_list" in data:
        from .traces import cluster_from_node_list

        return cluster_from_node_list(validate(NodeListCluster, data, path))
    return validate(ClusterConfig, data, path)


def load_zoo(path: str | Path | None = None) -> ModelZoo:
    return load_cached(Path(path) if path else CONFIG_DIR / "models.yaml", _parse_zoo)


def _parse_zoo(path: Path) -> ModelZoo:
    return validate(ModelZoo, read_yaml(path), path)

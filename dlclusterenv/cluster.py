"""The cluster: racks -> nodes -> GPUs, as a networkx topology plus flat numpy arrays.

The graph is what a reader or a graph policy looks at (core switch - rack switches - nodes - GPUs,
edges carrying bandwidth); the arrays are what the engine computes with. Node i of the arrays is
`cluster.node_names[i]`; GPU g lives on node `gpu_node[g]` as its `gpu_slot[g]`-th GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .config import ClusterConfig, Demand, ModelSpec, load_cluster

MB = 1e6
GB = 1e9

# GPU model names that are one compute type for speed (ModelSpec.gpu_step_s): the Alibaba 2023
# node list's V100M16 / V100M32 are V100s with 16 / 32 GB of memory, so both run at the measured V100
# speed (assumed: the memory size does not change a job's step time once the job fits).
GPU_ALIASES = {"v100m16": "v100", "v100m32": "v100"}


def gpu_type(model: str) -> str:
    """The compute type a node's `gpu_model` names: lower case, aliases resolved."""
    m = model.strip().lower()
    return GPU_ALIASES.get(m, m)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Cluster:
    config: ClusterConfig
    node_names: tuple[str, ...]
    node_type: tuple[str, ...]
    node_rack: np.ndarray  # int, rack index per node
    cpus: np.ndarray  # cores
    memory: np.ndarray  # GB
    gpus: np.ndarray  # count per node
    gpu_memory: np.ndarray  # GB per GPU, per node
    nic: np.ndarray  # bytes/s per direction
    uplink: np.ndarray  # bytes/s per direction, per rack
    intra: np.ndarray  # bytes/s of each node's host path (inf: not modelled)
    gpu_node: np.ndarray  # node index per global GPU
    gpu_slot: np.ndarray  # local index per global GPU
    gpu_base: np.ndarray  # first global GPU index per node
    node_gpu_type: tuple[str, ...]  # compute type of each node's GPUs (see gpu_type())
    graph: nx.Graph = field(repr=False)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_racks(self) -> int:
        return len(self.uplink)

    @property
    def n_gpus(self) -> int:
        return len(self.gpu_node)

    def gpu_key(self, gpu: int) -> str:
        """A GPU's name, "node/gSLOT", as decisions (`Decision.gpu_mode`) and the graph name it."""
        return f"{self.node_names[self.gpu_node[gpu]]}/g{self.gpu_slot[gpu]}"

    def node_index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"unknown node {name!r}") from None

    @property
    def _index(self) -> dict[str, int]:
        # cached on first use; the dataclass is frozen so use object.__setattr__
        idx = self.__dict__.get("_idx")
        if idx is None:
            idx = {n: i for i, n in enumerate(self.node_names)}
            object.__setattr__(self, "_idx", idx)
        return idx

    def core_memory_sums(self) -> tuple[np.float64, np.float64]:
        """np.sum of the cores and of the memory, found once (the arrays are frozen): every job
        that starts reads them for its dominant share (Job.placed_dominant_share)."""
        sums = self.__dict__.get("_sums")
        if sums is None:
            sums = (self.cpus.sum(), self.memory.sum())
            object.__setattr__(self, "_sums", sums)
        return sums

    def totals(self) -> dict[str, float]:
        return {
            "cpu": float(self.cpus.sum()),
            "mem": float(self.memory.sum()),
            "gpu": float(self.gpus.sum()),
            "bw": float(self.nic.sum()),
        }


def build_cluster(spec: str | ClusterConfig) -> Cluster:
    """Expand a cluster config (preset name, YAML path or parsed config) into a Cluster."""
    cfg = load_cluster(spec)
    names, types, rack_of, uplinks = [], [], [], []
    for group in cfg.racks:
        for _ in range(group.count):
            r = len(uplinks)
            uplinks.append(group.uplink_MBps * MB)
            i = 0
            for ng in group.nodes:
                for _ in range(ng.count):
                    names.append(f"r{r}-n{i}")
                    types.append(ng.type)
                    rack_of.append(r)
                    i += 1
    nt = [cfg.node_types[t] for t in types]
    gpus = np.array([t.gpus for t in nt], dtype=np.int64)
    gpu_base = np.concatenate([[0], np.cumsum(gpus)[:-1]]).astype(np.int64)
    gpu_node = np.repeat(np.arange(len(names)), gpus)
    gpu_slot = np.arange(int(gpus.sum())) - gpu_base[gpu_node]

    g = nx.Graph(name=cfg.name)
    g.add_node("core", kind="switch")
    for r, bw in enumerate(uplinks):
        g.add_node(f"rack{r}", kind="rack")
        g.add_edge("core", f"rack{r}", bandwidth=bw)
    for i, (name, t) in enumerate(zip(names, nt)):
        g.add_node(name, kind="node", index=i, cpus=t.cpus, memory_gb=t.memory_gb, type=types[i])
        g.add_edge(f"rack{rack_of[i]}", name, bandwidth=t.nic_MBps * MB)
        for s in range(t.gpus):
            gname = f"{name}/g{s}"
            g.add_node(gname, kind="gpu", model=t.gpu_model, memory_gb=t.gpu_memory_gb)
            g.add_edge(name, gname)

    return Cluster(
        config=cfg,
        node_names=tuple(names),
        node_type=tuple(types),
        node_rack=_frozen(np.array(rack_of, dtype=np.int64)),
        cpus=_frozen(np.array([t.cpus for t in nt], dtype=float)),
        memory=_frozen(np.array([t.memory_gb for t in nt], dtype=float)),
        gpus=_frozen(gpus),
        gpu_memory=_frozen(np.array([t.gpu_memory_gb for t in nt], dtype=float)),
        nic=_frozen(np.array([t.nic_MBps * MB for t in nt], dtype=float)),
        uplink=_frozen(np.array(uplinks, dtype=float)),
        intra=_frozen(np.array([t.intra_MBps * MB if t.intra_MBps > 0 else np.inf for t in nt])),
        gpu_node=_frozen(gpu_node),
        gpu_slot=_frozen(gpu_slot),
        gpu_base=_frozen(gpu_base),
        node_gpu_type=tuple(gpu_type(t.gpu_model) for t in nt),
        graph=g,
    )


# ----------------------------------------------------------------------------- capacity
# Whether a job could ever run here: the workload refuses such a job (a config error) and the
# engine such an allocation (a DecisionError), so the rule lives with the cluster, below both.
def _free(cluster: Cluster, shared_gpus: bool = False) -> np.ndarray:
    """(CPU, memory, bandwidth, GPUs) x nodes of the empty cluster; with `shared_gpus` a node with
    a GPU holds any number of GPU workers (time-slicing shares a GPU without a limit)."""
    gpus = cluster.gpus.astype(float)
    if shared_gpus:
        gpus = np.where(gpus > 0, np.inf, 0.0)
    return np.stack([cluster.cpus, cluster.memory, cluster.nic, gpus])


def _need(d: Demand) -> np.ndarray:
    return np.array([d.cpu, d.mem_gb, d.bw_MBps * 1e6, d.gpu], dtype=float)


def _room(free: np.ndarray, d: Demand) -> np.ndarray:
    """How many tasks of demand `d` each node of `free` (an empty cluster's _free) holds."""
    need = _need(d)[:, None]
    per = np.where(need > 0, (free + 1e-9) / np.where(need > 0, need, 1.0), np.inf)
    return np.floor(per.min(axis=0))


def task_never_fits(cluster: Cluster, m: ModelSpec) -> str | None:
    """Why no node can hold a PS or a worker of `m` (CPU, memory, bandwidth and GPU together on
    one node: a GPU worker needs the CPU of a GPU node, not of the largest node), or None."""
    free = _free(cluster)
    for role, d in (("worker", m.worker), ("ps", m.ps)):
        if not (_room(free, d) >= 1).any():
            return (f"a {role} needs {d.cpu:g} CPU / {d.mem_gb:g} GB{' / a GPU' if d.gpu else ''}"
                    f"{f' / {d.bw_MBps:g} MB/s' if d.bw_MBps else ''} on one node, more than any "
                    f"node of cluster {cluster.config.name!r} has")
    return None


def never_fits(cluster: Cluster, m: ModelSpec, p: int, w: int, shared_gpus: bool = False) -> str | None:
    """Why a job of model `m` with p PS and w workers can never run on `cluster`, or None.

    A job runs only with every task placed at once, so it is checked on the empty cluster: the
    cluster's totals, one task on one node (task_never_fits), and each role alone in the nodes'
    room for it. These conditions are necessary, not sufficient (an exact check is bin packing),
    so a job refused here truly never runs. A workload's job asks for at most one worker per GPU
    (its request is a GPU count); `shared_gpus` (the engine's allocations) lets GPU workers share
    GPUs, as time-slicing does, so only CPU, memory and bandwidth bound their number (every task a
    ModelSpec makes reserves CPU or memory, config.ModelSpec checks, so the bound is finite)."""
    free = _free(cluster, shared_gpus)
    total = p * _need(m.ps) + w * _need(m.worker)
    have = free.sum(axis=1)
    for k, what, unit in ((3, "GPUs", 1), (0, "CPU cores", 1), (1, "GB of memory", 1),
                          (2, "MB/s of NIC bandwidth", 1e6)):
        if total[k] > have[k] + 1e-6:
            return (f"needs {total[k] / unit:g} {what}, the cluster {cluster.config.name!r} has "
                    f"{have[k] / unit:g}")
    reason = task_never_fits(cluster, m)
    if reason:
        return reason
    for role, d, n in (("worker", m.worker, w), ("ps", m.ps, p)):
        room = int(min(_room(free, d).sum(), n))
        if room < n:
            return (f"{n} {role}s do not fit: the nodes of cluster {cluster.config.name!r} hold "
                    f"{room} at most")
    return None


def room_per_node(cluster: Cluster, d: Demand) -> np.ndarray:
    """How many tasks of demand `d` each node of the empty cluster holds."""
    return _room(_free(cluster), d)

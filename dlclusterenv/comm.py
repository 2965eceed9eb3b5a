"""Communication patterns: what one synchronous step of a job puts on which link.

A pattern turns a job's placement into bytes and flows per link direction for one step (one local
batch on every worker) over one shared link vector (see `link_index`): NIC out and in per node,
uplink out and in per rack, and each node's host path (PCIe root / NVLink) that GPU transfers
cross. `speed.compute_rates` shares every link among the flows of all jobs, whatever their
pattern, so PS and all-reduce jobs contend on the same NICs and uplinks.

- `ParameterServer` (the seeds: Optimus §3, DLTAP §3): each worker exchanges param_bytes / p with
  each of the job's p PS, both ways.
- `RingAllReduce` (PyTorch DDP / NCCL, every trace): each GPU sends 2 (n-1)/n x param_bytes per
  step; the ring visits nodes in index order, so each node's cross-node share leaves by its ring
  neighbours.
- `HierarchicalAllReduce` (Horovod / 2D rings): reduce-scatter inside the node, a ring across
  nodes on 1/g of the gradient per GPU, all-gather inside the node.

Exchange every k steps (`JobSpec.exchange_every`; local SGD, or a MapReduce phase that reduces
once per phase): the workers compute k local batches between exchanges, so the exchange's bytes,
flows' bytes, connection time and messages are charged at 1/k per step (amortised; the engine
integrates rates over many steps). Input reads stay per step: every batch is read. k = 1 is the
plain synchronous step.

Connections: each node pair a job talks over is one connection capped at `network.conn_MBps`
(single TCP flows get a fraction of the NIC's line rate). A ring node splits its cross-node bytes
over its distinct neighbours: one when the ring spans two nodes, two otherwise. With two nodes the
whole exchange rides one pair's connections, which is why Pollux measured two-node layouts slower
than four-node ones with the same GPUs per node (fitted, `dlcluster fidelity`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Cluster
from .config import ModelSpec


def link_capacity(cluster: Cluster) -> np.ndarray:
    """Capacities of [NIC out (N), NIC in (N), uplink out (R), uplink in (R), host path (N)]."""
    return np.concatenate([cluster.nic, cluster.nic, cluster.uplink, cluster.uplink, cluster.intra])


def n_links(cluster: Cluster) -> int:
    return 3 * cluster.n_nodes + 2 * cluster.n_racks


def intra_base(cluster: Cluster) -> int:
    """Index of node 0's host path in the link vector; links before it are the network."""
    return 2 * cluster.n_nodes + 2 * cluster.n_racks


@dataclass
class Comm:
    """One step's traffic of one job (bytes per link direction and the flows that share it)."""

    links: np.ndarray  # link indices
    nbytes: np.ndarray  # bytes per step on each entry
    flows: np.ndarray  # flow count on each entry
    task_time: float  # slowest capped task or connection: its bytes over its cap, per step
    messages: float  # sequential network messages per step, amortised (each costs network.latency_s)
    cross_node: float  # bytes per step crossing NICs
    cross_rack: float


class _Traffic:
    """Accumulates (link, bytes, flows) entries; pairs go over both NICs and, across racks, both
    uplinks."""

    def __init__(self, cluster: Cluster):
        self.c = cluster
        self.links: list[np.ndarray] = []
        self.nbytes: list[np.ndarray] = []
        self.flows: list[np.ndarray] = []
        self.cross_node = 0.0
        self.cross_rack = 0.0

    def add(self, links: np.ndarray, nbytes: np.ndarray, flows: np.ndarray) -> None:
        self.links.append(np.asarray(links, dtype=np.int64))
        self.nbytes.append(np.asarray(nbytes, dtype=float))
        self.flows.append(np.asarray(flows, dtype=float))

    def pairs(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, flows: np.ndarray) -> None:
        """Directed transfers src -> dst (different nodes)."""
        n, r, rack = self.c.n_nodes, self.c.n_racks, self.c.node_rack
        self.add(src, nbytes, flows)
        self.add(n + dst, nbytes, flows)
        xr = rack[src] != rack[dst]
        self.add(2 * n + rack[src][xr], nbytes[xr], flows[xr])
        self.add(2 * n + r + rack[dst][xr], nbytes[xr], flows[xr])
        self.cross_node += float(nbytes.sum())
        self.cross_rack += float(nbytes[xr].sum())

    def pair(self, src: int, dst: int, nbytes: float) -> None:
        """One transfer src -> dst of one flow: `pairs` with a single entry."""
        n, r, rack = self.c.n_nodes, self.c.n_racks, self.c.node_rack
        rs, rd = int(rack[src]), int(rack[dst])
        links = [src, n + dst, 2 * n + rs, 2 * n + r + rd] if rs != rd else [src, n + dst]
        k = len(links)
        self.add(np.array(links, dtype=np.int64), np.full(k, nbytes), np.ones(k))
        self.cross_node += nbytes
        self.cross_rack += nbytes if rs != rd else 0.0

    def host(self, nodes: np.ndarray, nbytes: np.ndarray, flows: np.ndarray) -> None:
        self.add(intra_base(self.c) + nodes, nbytes, flows)

    def build(self, task_time: float, messages: float) -> Comm:
        if not self.links:
            e = np.zeros(0)
            return Comm(e.astype(np.int64), e, e, task_time, messages, 0.0, 0.0)
        if len(self.links) == 1:  # one part (a one-worker job's input read): itself
            return Comm(self.links[0], self.nbytes[0], self.flows[0], task_time, messages,
                        self.cross_node, self.cross_rack)
        return Comm(
            np.concatenate(self.links), np.concatenate(self.nbytes), np.concatenate(self.flows),
            task_time, messages, self.cross_node, self.cross_rack,
        )


def _input_reads(tr: _Traffic, m: ModelSpec, shard_nodes: tuple[int, ...], w_nodes: np.ndarray):
    """Remote input reads, shard node -> worker node (D²S Eq. 1): one local batch per worker."""
    w = len(w_nodes)
    if m.input_bytes_per_step <= 0 or not shard_nodes:
        return 0.0, np.zeros(w, dtype=bool)
    read = m.input_bytes_per_step
    if w == 1:  # one worker (most trace jobs): the same entries, without the array steps
        src, dst = int(shard_nodes[0]), int(w_nodes[0])
        if src != dst:
            tr.pair(src, dst, 1.0 * read)
        return read, np.array([src != dst])
    shards = np.asarray(shard_nodes)[np.arange(w) % len(shard_nodes)]
    remote = shards != w_nodes
    one = np.ones(int(remote.sum()))
    tr.pairs(shards[remote], w_nodes[remote], one * read, one)
    return read, remote


def _conn_time(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, n: int, conn_Bps: float) -> float:
    """Busiest node-pair connection's bytes over its cap (0 when uncapped)."""
    if conn_Bps <= 0 or not len(src):
        return 0.0
    per_pair = np.bincount(src * n + dst, weights=nbytes)
    return float(per_pair.max()) / conn_Bps


class ParameterServer:
    """Workers push gradients to and pull parameters from p PS (Optimus §3, DLTAP §3)."""

    @staticmethod
    def plan(cluster: Cluster, m: ModelSpec, shard_nodes, ps_nodes, w_nodes, every: int = 1) -> Comm:
        n = cluster.n_nodes
        tr = _Traffic(cluster)
        p, w = len(ps_nodes), len(w_nodes)
        b = m.param_bytes / p / every  # per step, amortised over the k steps between exchanges
        keys = (w_nodes[:, None] * n + ps_nodes[None, :]).ravel()
        keys = keys[(w_nodes[:, None] != ps_nodes[None, :]).ravel()]
        uk, cnt = np.unique(keys, return_counts=True)
        u, v, cnt = uk // n, uk % n, cnt.astype(float)
        src, dst = np.concatenate([u, v]), np.concatenate([v, u])  # push, then pull
        nb = np.concatenate([cnt * b, cnt * b])
        tr.pairs(src, dst, nb, np.concatenate([cnt, cnt]))
        read, remote_read = _input_reads(tr, m, shard_nodes, w_nodes)
        if m.compute_on == "gpu":  # each GPU's push and pull of the whole model cross its host path
            nodes, per = np.unique(w_nodes, return_counts=True)
            tr.host(nodes, per * m.param_bytes / every, per.astype(float))
        conn = cluster.config.network.conn_MBps * 1e6
        task_time = _conn_time(src, dst, nb, n, conn)
        # per-task bandwidth caps (container traffic limits, Optimus Fig. 10)
        if m.worker.bw_MBps > 0:
            remote_ps = (w_nodes[:, None] != ps_nodes[None, :]).sum(axis=1)
            per_worker = remote_ps * b + remote_read * read
            task_time = max(task_time, float(per_worker.max()) / (m.worker.bw_MBps * 1e6))
        if m.ps.bw_MBps > 0:
            remote_w = (ps_nodes[:, None] != w_nodes[None, :]).sum(axis=1)
            task_time = max(task_time, float(remote_w.max()) * b / (m.ps.bw_MBps * 1e6))
        return tr.build(task_time, 0)


def _ring_neighbours(tr: _Traffic, nodes: np.ndarray, per_node: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each of the ring's nodes sends `per_node` bytes split over its distinct neighbours."""
    k = len(nodes)
    if k < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    nxt, prv = np.roll(nodes, -1), np.roll(nodes, 1)
    if k == 2:
        src, dst, nb = nodes, nxt, per_node
    else:
        src = np.concatenate([nodes, nodes])
        dst = np.concatenate([nxt, prv])
        nb = np.concatenate([per_node, per_node]) / 2
    tr.pairs(src, dst, nb, np.ones(len(src)))
    return src, dst, nb


class _AllReduce:
    """Workers only: each node's GPUs move bytes through its host path, and its cross-node bytes
    leave over its ring neighbours. A subclass's `volumes(g, param_bytes)` says how much, from the
    GPUs per node g: (host-path bytes per node, bytes each node sends across, network messages)."""

    @classmethod
    def plan(cls, cluster: Cluster, m: ModelSpec, shard_nodes, ps_nodes, w_nodes, every: int = 1) -> Comm:
        tr = _Traffic(cluster)
        _input_reads(tr, m, shard_nodes, w_nodes)
        if len(w_nodes) < 2:  # one GPU: nothing to reduce
            return tr.build(0.0, 0)
        nodes, g = np.unique(w_nodes, return_counts=True)
        host, across, messages = cls.volumes(g, m.param_bytes / every)
        messages = messages / every
        if m.compute_on == "gpu":
            tr.host(nodes, host, g.astype(float))
        src, dst, nb = _ring_neighbours(tr, nodes, np.full(len(nodes), across))
        conn = cluster.config.network.conn_MBps * 1e6
        return tr.build(_conn_time(src, dst, nb, cluster.n_nodes, conn), messages if len(nodes) > 1 else 0)


class RingAllReduce(_AllReduce):
    """One ring over all n GPUs, nodes in index order (NCCL rings; Patarasuk & Yuan 2009): every
    GPU sends and receives 2 (n-1)/n x param_bytes through its node's host path, each node's
    cross-node share leaves over its ring neighbours, and the step takes 2 (n-1) messages."""

    @staticmethod
    def volumes(g, param_bytes):
        n = int(g.sum())
        vol = 2.0 * (n - 1) / n * param_bytes
        return g * vol, vol, 2 * (n - 1)


class HierarchicalAllReduce(_AllReduce):
    """Reduce-scatter inside each node, a ring across nodes on each GPU's 1/g shard, all-gather
    inside the node (Horovod's hierarchical all-reduce): a node sends 2 (k-1)/k x param_bytes
    across, and its GPUs move 2 (g-1)/g x param_bytes each in the node."""

    @staticmethod
    def volumes(g, param_bytes):
        k = len(g)
        across = 2.0 * (k - 1) / k * param_bytes
        return g * 2.0 * (g - 1) / g * param_bytes + across, across, 2 * (k - 1)


PATTERNS = {"ps": ParameterServer, "ring": RingAllReduce, "hierarchical": HierarchicalAllReduce}


def pattern(m: ModelSpec, comm: str | None = None):
    """The pattern of a model, or of a job whose spec overrides its model's `comm`."""
    c = comm or m.comm
    return PATTERNS["ps" if c == "ps" else m.allreduce]

"""FIFO's placement is Hadoop's (baselines/fifo.py, issue 12 item 5): the node asking for work
takes tasks while they fit, then a random node with a free slot; a 1-worker job's PS stays beside
its worker, unlike `spread`; the heartbeat order follows the episode seed."""

from __future__ import annotations

from helpers import make_cluster, make_sim, make_zoo, model_dict

from baselines.fifo import FIFO

GPU = model_dict(compute_on="gpu", worker={"cpu": 1.0, "mem_gb": 1.0, "gpu": 1}, ps={"cpu": 1.0, "mem_gb": 1.0})


def _first(placer: str, seed: int, jobs) -> dict[str, int]:
    cluster = make_cluster(nodes_per_rack=6, cpus=16, memory_gb=64, gpus=2, gpu_memory_gb=12)
    sim = make_sim(cluster, make_zoo(M=GPU), jobs)
    f = FIFO(placer=placer)
    f.reset(seed)
    return f.decide(sim.view()).place


def test_small_job_stays_on_one_node():
    for seed in range(5):
        p = _first("heartbeat", seed, [("a", "M", 1, 1)])
        assert p["a/ps0"] == p["a/w0"]
    p = _first("spread", 0, [("a", "M", 1, 1)])
    assert p["a/ps0"] != p["a/w0"]  # load balancing sends the PS to an empty node


def test_fills_the_heartbeating_node_then_a_random_one():
    jobs = [("a", "M", 1, 3), ("b", "M", 1, 1)]
    seen = set()
    for seed in range(6):
        p = _first("heartbeat", seed, jobs)
        ws = [p[f"a/w{i}"] for i in range(3)]
        assert ws[0] == ws[1] != ws[2]  # 2 GPUs per node: the third worker moves on
        assert p["a/ps0"] == ws[2] and p["b/w0"] == ws[2]  # the node that asked keeps taking tasks
        seen.add(ws[0])
    assert len(seen) > 1  # which node asks first is random (episode seed)
    assert _first("heartbeat", 3, jobs) == _first("heartbeat", 3, jobs)

"""OTEA, D²S's comparator (seed 001 §4.1): per application, each task on the free node of least
transfer time (D²S Eq. 1-2), applications in arrival order, never waiting for a busy node."""

from __future__ import annotations

from helpers import make_cluster, make_sim, make_zoo
from test_baseline_d2s import (
    competing_for_one_local_slot,
    decide,
    gpu_model,
    wait_or_remote,
)

from dlclusterenv.api import Decision


def test_takes_a_remote_free_node_instead_of_waiting():
    """Where D²S waits 900 s for the busy data-local node (test_baseline_d2s), OTEA starts the job
    now on the only free node, across the racks, with its PS beside the worker."""
    view, zoo = wait_or_remote(1e6)
    assert decide("otea", view) == {"J/w0": 1, "J/ps0": 1}


def test_first_come_takes_the_local_slot():
    """Greedy per application: A, first in line, takes the data-local n0 although B would save 4x
    more transfer there (D²S's flow gives n0 to B)."""
    view, zoo = competing_for_one_local_slot()
    assert decide("otea", view) == {"A/w0": 0, "A/ps0": 0, "B/w0": 1, "B/ps0": 1}


def test_locality_order_and_ps_with_workers():
    """2 racks x 2 nodes, 1 GPU each, job R running on r0-n0. J's split is on r0-n0 (busy): its
    worker goes rack-local to r0-n1 (10 GB over 100 MB/s = 100 s) rather than off-switch (over
    10 MB/s, 1,000 s); K's split is on the free r1-n0: data-local. Each PS joins its worker (Eq. 2)."""
    cluster = make_cluster(racks=2, nodes_per_rack=2, cpus=16, memory_gb=64, gpus=1, gpu_memory_gb=12,
                           nic_MBps=100, uplink_MBps=10)
    zoo = make_zoo(m=gpu_model(1e6))
    sim = make_sim(cluster, zoo, [("R", "m", 1, 1), ("J", "m", 1, 1, (0,)), ("K", "m", 1, 1, (2,))])
    sim.apply(Decision(place={"R/ps0": 0, "R/w0": 0}))
    assert decide("otea", sim.view()) == {"J/w0": 1, "J/ps0": 1, "K/w0": 2, "K/ps0": 2}

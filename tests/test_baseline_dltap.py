"""DLTAP (seed 000 §3, Eq. 1-3, Algorithm 1): workers by the Kubernetes default score, each PS
towards the node holding most of its job's workers. From the same cluster state where the default
scheduler produces Fig. 1 (a), DLTAP produces Fig. 1 (b)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_cluster
from test_baseline_k8s_default import cross_node_pairs, fig1_sim, fig1_state

import baselines
import dlclusterenv
from baselines.dltap import dltap_ps_scores
from dlclusterenv.api import Decision


def test_eq2_eq3_scores():
    """Workers wk1, wk3 on s1 and wk2 on s3 (Fig. 1); Eq. 3 gives s1 2/3, s2 0, s3 1/3. With
    weightOfDLTAP = 10, Eq. 2 adds 6.67 / 0 / 3.33 to the default PS scores: after the workers
    took their share the default scores are [11, 14, 10], so [17.67, 14, 13.33]: s1 wins."""
    cap = fig1_state()
    c = make_cluster(nodes_per_rack=3, cpus=2, memory_gb=2)
    job = fig1_sim().view().job("J")
    for n in (0, 2, 0):
        cap.take(n, job.worker_demand)
    s = dltap_ps_scores(c, cap, job, [0, 2, 0], 10.0)
    np.testing.assert_allclose(s, [11 + 20 / 3, 14, 10 + 10 / 3])
    # with weight 1 the term cannot overcome the default scores' gap: s2 wins, as in Kubernetes
    assert int(np.argmax(dltap_ps_scores(c, cap, job, [0, 2, 0], 1.0))) == 1


def test_fig1b_ps_with_most_workers():
    """Seed 000 Fig. 1 (b): ps1 joins wk1 and wk3 on s1, the node with most of the job's workers;
    s1 is then full for a second PS in balance terms (its default score drops to 1, 1 + 6.67 <
    14), so ps2 goes to s2. 4 cross-node and 2 inner-node transmissions instead of 6 and 0."""
    k8s = baselines.make("k8s-default")
    k8s.reset(0)
    dltap = baselines.make("dltap")
    dltap.reset(0)
    a = k8s.decide(fig1_sim().view()).place
    b = dltap.decide(fig1_sim().view()).place
    workers = {"J/w0": 0, "J/w1": 2, "J/w2": 0}
    assert {t: n for t, n in b.items() if "/w" in t} == workers  # Eq. 1, as Kubernetes
    assert b == {**workers, "J/ps0": 0, "J/ps1": 1}
    assert cross_node_pairs(a) == 6 and cross_node_pairs(b) == 4
    # the simulator agrees: Fig. 1 (b) moves 4/6 of (a)'s cross-node bytes per step
    rates = {}
    for name, place in (("a", a), ("b", b)):
        sim = fig1_sim()
        sim.apply(Decision(place=place))
        r = sim.rates()
        rates[name] = r.cross_node_Bps["J"] / r.speed["J"]
    assert rates["b"] / rates["a"] == pytest.approx(4 / 6, rel=1e-9)


def test_weight_zero_is_kubernetes_default():
    """weightOfDLTAP = 0 reduces Eq. 2 to Eq. 1: the same placements as the default scheduler."""
    a = dlclusterenv.make_sim("tiny", 1).run(baselines.make("k8s-default")).summary()
    b = dlclusterenv.make_sim("tiny", 1).run(baselines.make("dltap", weight_of_dltap=0)).summary()
    assert a == b


def test_negative_weight_refused():
    with pytest.raises(ValueError, match="weight_of_dltap"):
        baselines.make("dltap", weight_of_dltap=-1)


def test_fig1_fixed_placements_throughput_and_time():
    """Issue 12 item 7, seed 000 §3 / Fig. 3 (b): one FCN-4 job alone in Fig. 1's placements.
    (a) has 6 cross-node worker-PS pairs, (b) 4; per-node outgoing throughput sums to the engine's
    cross-node rate, and with exchange-only traffic the cluster throughput ratio is exactly
    (4/6) x T(a) / T(b)."""
    from baselines.reproduce.dltap import fig1

    r = fig1("FCN-4")
    a, b = r["non-ideal"], r["ideal"]
    assert b["time_s"] < a["time_s"]
    assert b["cluster_MBps"] < a["cluster_MBps"]
    assert b["cluster_MBps"] / a["cluster_MBps"] == pytest.approx(
        (4 / 6) * a["time_s"] / b["time_s"], rel=1e-6
    )
    assert a["node_MBps"][1] > a["node_MBps"][0]  # s2 holds both PS in (a): it sends most

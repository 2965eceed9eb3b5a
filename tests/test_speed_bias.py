"""A job's 2% speed-measurement bias per (p, w) comes from a generator of its own (branch bias7):
a pure function of (seed, job, p, w), so it does not move with the epochs that ended before a
resize, and the loss generator draws losses only, so losses do not move with resizes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dlclusterenv.api import Decision
from dlclusterenv.jobs import pcg64_state
from dlclusterenv.sim import Simulator

from helpers import make_cluster, make_sim, make_zoo, model_dict

ZOO = make_zoo(m=model_dict(param_bytes=1e3, step_compute_s=1.0, steps_per_epoch=30, loss={"noise": 0.05},
                            convergence={"rel_delta": 0.001, "max_epochs": 1000}))


def _run(resize_after: int | None, seed: int = 0):
    """Job J at (1, 1), 1 step/s, 30 steps an epoch, ticks of 20 s; grown to (1, 2) after
    `resize_after` ticks (None: never), then run to 30 ticks in all. The losses are read at every
    tick, as a scheduler reading the view would."""
    cluster = make_cluster(nodes_per_rack=2, cpus=16)
    sim = make_sim(cluster, ZOO, [("J", "m", 1, 1)], tick_s=20.0)
    if seed:
        sim = Simulator(cluster, sim.specs, ZOO, seed=seed, tick_s=20.0)
    sim.apply(Decision(place={"J/ps0": 0, "J/w0": 0}))
    job = sim.jobs["J"]
    for tick in range(30):
        if tick == resize_after:
            ended_before = job.epochs_done
            sim.apply(Decision(allocate={"J": (1, 2)}, place={"J/w1": 0}))
        sim.advance()
        sim.view().jobs[0].observed_loss
    return job, (ended_before if resize_after is not None else None)


def test_the_bias_of_a_shape_does_not_depend_on_the_epochs_ended_before_it():
    early, ended_early = _run(resize_after=1)
    late, ended_late = _run(resize_after=5)
    assert (ended_early, ended_late) == (0, 3)
    assert set(early._bias) == set(late._bias) == {(1, 1), (1, 2)}
    assert early._bias == late._bias  # (1, 2) first ran after 0 and after 3 epochs ended
    assert early._bias[(1, 1)] != early._bias[(1, 2)]  # a draw per shape, not one per job
    other_seed, _ = _run(resize_after=5, seed=1)
    assert other_seed._bias[(1, 2)] != late._bias[(1, 2)]


def test_losses_do_not_depend_on_resizes():
    runs = [_run(resize_after=at)[0] for at in (None, 1, 5, 12)]
    histories = [dict(job.obs_loss) for job in runs]
    assert all(len(h) >= 10 for h in histories)
    for h in histories[1:]:
        common = sorted(set(h) & set(histories[0]))
        assert len(common) >= 10
        assert [h[k] for k in common] == [histories[0][k] for k in common]


_INTS = st.integers(0, 2**70)  # several 32-bit words, and 0 (one word)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_INTS, st.lists(st.one_of(_INTS, st.tuples(_INTS, _INTS)), max_size=5)),
       st.lists(st.integers(0, 2**40), max_size=6).map(tuple))
def test_pcg64_state_as_numpy_makes_it(entropy, spawn_key):
    """jobs.pcg64_state (the speed bias' stream, made without a SeedSequence and a bit generator)
    is numpy's PCG64(SeedSequence(entropy, spawn_key=...)) state, and so draws the same normal:
    entropy of one or several words, short (padded where a key follows) or longer than the pool,
    nested; keys empty or long. Fails with a wrong multiplier, a missing pad or words in the other
    order (checked)."""
    want = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=spawn_key))
    got = np.random.Generator(np.random.PCG64(0))
    got.bit_generator.state = pcg64_state(entropy, spawn_key)
    assert got.bit_generator.state == want.bit_generator.state
    assert got.standard_normal() == want.standard_normal()


def test_pcg64_state_leaves_other_seeds_to_numpy():
    """What is not made of non-negative ints gets None (Job.draw_bias then asks numpy, which
    accepts or rejects it as it does)."""
    assert pcg64_state(-1, ()) is None
    assert pcg64_state((1, -2), ()) is None
    assert pcg64_state(1.5, ()) is None
    assert pcg64_state(None, ()) is None
    assert pcg64_state((1, 2), ("a",)) is None

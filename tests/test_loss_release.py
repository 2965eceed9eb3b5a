"""An ended job's loss history is released (issue 14: the whole Philly trace held a Python tuple per
epoch of every job) and replayed, equal, when read after the end."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

import baselines
import dlclusterenv
from dlclusterenv.api import Scheduler
from dlclusterenv.benchmark import instances, load_suite
from dlclusterenv.jobs import DONE, Job, JobSpec

from helpers import needs_philly


# Tiresias keeps each job's (p, w); Optimus resizes jobs (each new shape's speed bias comes from a
# generator of its own, so the loss generator's draws are the losses alone either way)
@pytest.mark.parametrize("scenario,policy,resized", [("default", "tiresias", False), ("optimus", "optimus", True)])
def test_an_ended_job_releases_its_history_and_replays_it_equal(monkeypatch, scenario, policy, resized):
    held: dict[str, tuple] = {}
    release = Job.release_losses

    def capture(job: Job) -> None:
        held[job.job_id] = tuple(job.obs_loss)  # what the job held when it ended
        release(job)

    monkeypatch.setattr(Job, "release_losses", capture)
    sim = dlclusterenv.make_sim(scenario, 0)
    sim.run(baselines.make(policy))
    ended = [j for j in sim.jobs.values() if j.status == DONE]
    assert ended and set(held) == {j.job_id for j in ended}
    for job in ended:
        assert job._loss == () and job._loss_tuple == () and job._loss_due == () and job.rng is None
        replay = job.obs_loss
        assert tuple(replay) == held[job.job_id] == job.loss_history()
        assert [k for k, _ in replay] == list(range(1, len(replay) + 1))  # epochs 1..n, in order
        assert len(replay) <= job.epochs_done
        assert job.obs_loss is not replay  # rebuilt at each read, never kept
    assert resized == any(len(j.obs_speed) > 1 for j in ended)  # a job measured at two shapes
    assert sum(map(len, held.values())) > 100


def test_an_ended_job_keeps_no_tracked_container_for_its_losses_or_seed():
    """Every full collection walks all the objects that the ended jobs still hold (about 6% of a
    whole-Philly run, branch tires11). Once a job has ended, its released loss list and epoch
    queue are the empty tuple, which the collector does not track. Its seed is a tuple of ints,
    which the collector's first pass stops tracking."""
    sim = dlclusterenv.make_sim("default", 0)
    sim.run(baselines.make("tiresias"))
    gc.collect()
    ended = [j for j in sim.jobs.values() if j.status == DONE]
    assert ended
    for job in ended:
        assert not gc.is_tracked(job._loss) and not gc.is_tracked(job._loss_due), job.job_id
        assert job.seed is not None and not gc.is_tracked(job.seed), job.job_id


def _first_job():
    """`default` seed 0 under FIFO up to its first job's arrival: (simulator, that job)."""
    sim = dlclusterenv.make_sim("default", 0)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    while not sim.jobs:
        sim.decide(fifo)
        sim.advance()
    return sim, next(iter(sim.jobs.values()))


def test_a_job_stopped_before_any_epoch_replays_an_empty_history():
    sim, job = _first_job()
    assert job.epochs_done == 0
    sim.stop(job.job_id)
    assert job.status == DONE and job.obs_loss == [] and job.loss_history() == ()


def test_a_finished_synthetic_job_reports_exactly_its_epochs_loss_points():
    """A job's last epoch ends at its total work, which the engine sets exactly at the end (the
    integration stops a float residue short); that epoch counts (steps_done's setter). On main
    9c985a2, 15 of `default`'s 60 jobs under FIFO ended one loss point short."""
    sim = dlclusterenv.make_sim("default", 0)
    sim.run(baselines.make("fifo"))
    ended = [j for j in sim.jobs.values() if j.status == DONE]
    assert len(ended) == 60
    for job in ended:
        assert job.steps_done == job.total_steps == job.total_epochs * job.steps_per_epoch
        assert [k for k, _ in job.obs_loss] == list(range(1, job.total_epochs + 1)), job.job_id


def test_an_epoch_snapped_back_below_its_boundary_is_queued_once():
    """The engine's integration can overshoot an efficiency bucket's edge by a float residue, which
    ends the epoch at that edge; the snap back to the edge (steps_done's setter) leaves the work a
    residue below the boundary, and the next interval starts its mark there. On main 6bedb58 that
    epoch was queued a second time (epochs ..., n, n, n + 1 as a scheduler read them)."""
    sim, job = _first_job()
    led, r, spe, n = job.ledger, job.row, job.steps_per_epoch, job.total_epochs - 2
    assert n >= 2
    boundary = n * spe
    below, above = math.nextafter(boundary, 0.0), math.nextafter(boundary, math.inf)
    assert int(below // spe) == n - 1 and int(above // spe) == n
    led.mark[r], led.steps[r] = 0.0, above  # an interval overshoots the edge: epochs 1..n end
    job.steps_done = below  # the snap back to the edge
    led.mark[r], led.steps[r] = job.steps_done, (n + 1.5) * spe  # the next interval, from the edge
    assert [k for k, _ in job.obs_loss] == list(range(1, n + 2))


@needs_philly
def test_no_epoch_repeats_on_a_philly_window_with_efficiency():
    """v3's philly-6c71a0-nov@0.5x, first test window (pgns): jobs whose epoch count is a multiple
    of 5 have their bucket edges on epoch boundaries. On main 6bedb58, 4 jobs showed a repeated
    epoch to FIFO's views and FlowCon, whose loss slope divides by the epochs between its last two
    points, raised ZeroDivisionError (`dlcluster benchmark v3` stopped on it)."""
    suite, path = load_suite("v3")
    inst = next(i for i in instances(suite, path, say=lambda m: None) if i.key == "philly-6c71a0-nov@0.5x")
    _, sc, seed = inst.runs("test")[0]

    class Check(Scheduler):
        name = "check"

        def __init__(self, policy: str):
            self.inner, self.repeated = baselines.make(policy), set()

        def reset(self, seed=None) -> None:
            self.inner.reset(seed)

        def decide(self, view):
            for j in view.jobs:
                ks = [k for k, _ in j.observed_loss]
                if ks != list(range(1, len(ks) + 1)):
                    self.repeated.add(j.job_id)
            return self.inner.decide(view)

    for policy in ("fifo", "flowcon"):
        check = Check(policy)
        m = dlclusterenv.make_sim(sc, seed).run(check)
        assert check.repeated == set() and m.summary()["jobs_unfinished"] == 0, policy


def test_a_lazily_seeded_job_draws_as_its_generator_would():
    """The engine's jobs make their loss generator at their first loss draw (Job.seed, branch
    tires11: ~14 us per arriving job, and most Philly jobs never draw): before it none is made,
    and the losses, their replay after the end and the speed biases are those of
    np.random.default_rng([seed, arrival index]) made at arrival (as main did: the n-th normal
    draw is epoch n's noise; a bias is the (p, w) child of that generator's seed sequence)."""
    sim = dlclusterenv.make_sim("default", 3)
    fifo = baselines.make("fifo")
    fifo.reset(3)
    for _ in range(40):
        sim.decide(fifo)
        sim.advance()
    jobs = list(sim.jobs.values())
    running = [j for j in jobs if j.status == "running"]
    assert running and all(j.rng is None and j._bias for j in running)  # a bias, no loss drawn
    assert all(j.rng is None for j in jobs if j.status == "pending")
    drawn = 0
    for job in jobs:
        seq = np.random.SeedSequence([3, job.row])
        for key, bias in job._bias.items():
            z = np.random.default_rng(np.random.SeedSequence([3, job.row], spawn_key=key)).standard_normal()
            assert bias == 1.0 + 0.02 * float(z)
        n = len(job.obs_loss)
        want = job._loss_points(range(1, n + 1), np.random.default_rng(seq).standard_normal(n).tolist())
        assert job.obs_loss == want
        drawn += n
    assert drawn > 0
    sim.run(fifo)  # (run() resets: the whole episode, then every job's replay)
    for job in sim.jobs.values():
        n = len(job.obs_loss)
        assert job.status == DONE and job.rng is None and n == job.total_epochs
        want = job._loss_points(range(1, n + 1), np.random.default_rng([3, job.row]).standard_normal(n).tolist())
        assert job.obs_loss == want


def test_a_job_without_generator_or_seed_is_refused():
    spec = JobSpec("j", "m", 0.0, 1, 1)
    model = dlclusterenv.make_sim("default", 0).zoo.models
    with pytest.raises(ValueError, match="rng or seed"):
        Job(spec, next(iter(model.values())), None, 1)

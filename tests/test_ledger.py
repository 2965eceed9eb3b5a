"""The engine keeps jobs' running totals in a Ledger of arrays (jobs.Ledger); a Job reads its row."""

from __future__ import annotations

import dataclasses

import numpy as np

import baselines
from dlclusterenv import make_sim
from dlclusterenv.jobs import Job


def _run_until(sim, sched, t: float) -> None:
    while not sim.done and sim.now < t:
        sim.decide(sched)
        sim.advance()


def _tiny_fifo_at(t: float):
    """The tiny scenario under FIFO, run until simulated time t."""
    sim = make_sim("tiny", 0)
    fifo = baselines.make("fifo")
    sim.reset()
    fifo.reset(0)
    _run_until(sim, fifo, t)
    return sim, fifo


def test_jobs_read_and_write_their_ledger_row():
    sim, fifo = _tiny_fifo_at(600.0)
    led = sim._ledger
    running = sim.running_jobs()
    assert running and all(j.ledger is led for j in sim.jobs.values())
    for j in running:
        assert j.steps_done == led.steps[j.row] > 0 and j.run_s == led.run_s[j.row] > 0
        assert isinstance(j.steps_done, float)
    j = running[0]
    j.attained_gpu_s = 12.5
    assert led.gpu_s[j.row] == 12.5
    alone = Job(j.spec, j.model, np.random.default_rng(0), j.total_epochs)  # a job of its own
    assert alone.ledger is not led and alone.steps_done == 0.0 and alone.obs_speed == {}


def test_a_measurement_a_reader_changed_is_where_the_engine_goes_on():
    sim, fifo = _tiny_fifo_at(600.0)
    job = next(j for j in sim.running_jobs() if j.obs_speed)
    key = (job.num_ps, job.num_workers)
    job.obs_speed[key] = 7.0
    job._speed_time[key] = 1e12  # weighted so that more running barely moves the mean
    _run_until(sim, fifo, sim.now + 60.0)
    assert abs(job.obs_speed[key] - 7.0) < 1e-3


def test_the_ledger_grows_when_more_jobs_arrive_than_at_reset():
    sim = make_sim("tiny", 0)
    extra = [dataclasses.replace(s, job_id=f"x{s.job_id}", arrival_s=s.arrival_s + 1.0) for s in sim.specs]
    sim.specs = sorted(sim.specs + extra, key=lambda s: (s.arrival_s, s.job_id))  # after reset
    fifo = baselines.make("fifo")
    fifo.reset(0)
    _run_until(sim, fifo, float("inf"))
    assert len(sim.jobs) == len(sim.specs) and all(j.status == "done" for j in sim.jobs.values())
    assert len(sim._ledger.steps) >= len(sim.specs)

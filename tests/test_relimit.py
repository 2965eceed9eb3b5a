"""A limit-only change keeps the job's plan but its limits (Job.relimit): at every decision point of
FlowCon runs (which set soft limits at each run of its Algorithm 1), every planned job's kept plan
equals the plan speed.job_plan makes from scratch, array for array. Whole-run pins of the same runs:
test_engine_identity.py (flowcon_5)."""

from __future__ import annotations

import numpy as np
import pytest

import baselines
import dlclusterenv
from dlclusterenv import jobs as jobs_mod
from dlclusterenv import sim as sim_mod
from dlclusterenv.speed import job_plan

FIELDS = ("task_node", "is_worker", "want", "limit", "w_gpu", "w_compute", "links", "nbytes", "flows")


@pytest.mark.parametrize("scenario", ["flowcon_5", "flowcon_10"])
def test_a_kept_plan_is_the_plan_made_afresh(monkeypatch, scenario):
    kept = {"relimits": 0, "checked": 0}
    real_relimit, real_apply = jobs_mod.Job.relimit, sim_mod.Simulator.apply

    def relimit(job):
        kept["relimits"] += job.plan is not None
        real_relimit(job)

    def apply(sim, d):
        out = real_apply(sim, d)
        for job in sim.running_jobs():
            plan = job.plan
            if plan is None:
                continue
            job.plan = None
            fresh = job_plan(sim.cluster, job)
            job.plan = plan  # (the engine's own object back: its stack follows plans by identity)
            assert plan.task_ids == fresh.task_ids and plan.consts == fresh.consts
            for f in FIELDS:
                a, b = getattr(plan, f), getattr(fresh, f)
                assert a.dtype == b.dtype and np.array_equal(a, b), (job.job_id, f)
            kept["checked"] += 1
        return out

    monkeypatch.setattr(jobs_mod.Job, "relimit", relimit)
    monkeypatch.setattr(sim_mod.Simulator, "apply", apply)
    dlclusterenv.make_sim(scenario, 0).run(baselines.make("flowcon"))
    assert kept["relimits"] > 20 and kept["checked"] > 100, kept

"""The engine's per-event shortcuts (branch sim4) leave every trajectory bit-identical.

compute_rates skips sections that cannot change a speed, the Ledger is one array gathered once
per event, the running list is kept as jobs start and stop, and a plan's links are merged in
Python. Expected hashes were recorded on main at be98cdb, before these changes, with the same
scheme as tests/test_engine_identity.py (engine totals and timeline; every job's finish, work,
integrals and observations)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import baselines
import dlclusterenv
from dlclusterenv.comm import pattern
from dlclusterenv.jobs import RUNNING
from dlclusterenv.speed import job_plan
from dlclusterenv.workload import load_scenario
from helpers import as_recorded, needs_philly


# all virtual clusters, 2017-10-01..02 (271 jobs): all-reduce jobs, mostly one GPU each, so
# every compute_rates call takes the shortcuts; Tiresias also preempts and resumes (paused jobs).
# (totals, every job's finish, work and integrals, every job's observations: measured speeds and
# losses). The totals were recorded on main at 1626296 (fifo and tiresias as at be98cdb) and hold
# on phil6 and bias7. At bias7 the measured speeds moved from the second digest to the third: each
# (job, p, w)'s speed bias comes from a generator of its own, not the job's loss generator, so
# speeds and losses both moved (the losses by one draw); the second digest, computed with this
# scheme on main 9c985a2, holds on bias7 (none of these policies reads speeds or losses). The
# third moved again with bias7's last-epoch fix: a job reports its last epoch's loss point also
# when its total work is reached only by the engine's exact snap at its end.
PHILLY_DAY = {
    "drf": ("761d127b7a28", "0cf6c6c36df8", "c83aec92cd05"),
    "fifo": ("339884027a64", "bcd97d194dbd", "0d82a9acf56a"),
    "tiresias": ("7e390eece5ca", "24ca5cf7034e", "66bbc6ec5b5b"),
}


def _hash(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def _run(sc, policy: str):
    """Hashes of (the engine's totals and timeline, every job's finish, work and integrals, every
    job's observations: measured speeds and losses)."""
    sim = dlclusterenv.make_sim(sc, 0)
    sim.run(as_recorded(policy))
    t = sim.totals
    totals = (t.job_seconds, t.cross_node_bytes, t.cross_rack_bytes, t.gpu_busy_s, t.cpu_used_s,
              t.net_bytes, t.jain_s, t.jain_time, t.timeline)
    jobs = sorted((j.job_id, repr(j.finish_s), repr(j.steps_done), j.bytes_cross_node,
                   j.bytes_cross_rack, j.run_s, j.attained_gpu_s, j.dom_share_time)
                  for j in sim.jobs.values())
    seen = sorted((j.job_id, tuple(sorted(j.obs_speed.items())), j.last_speed, tuple(j.obs_loss))
                  for j in sim.jobs.values())
    return _hash(totals), _hash(jobs), _hash(seen)


@needs_philly
@pytest.mark.parametrize("policy", sorted(PHILLY_DAY))
def test_philly_all_vc_day_matches_main(policy):
    sc = load_scenario("philly")[0].model_dump()
    window = sc["workload"]["trace"]
    window.update(vc=None, start="2017-10-01", end="2017-10-02")
    assert _run(sc, policy) == PHILLY_DAY[policy]


@pytest.mark.parametrize("scenario,policy", [("default", "tiresias"), ("default", "optimus"),
                                             ("gandiva", "gandiva")])
def test_running_list_and_pause_bound_are_kept(scenario, policy):
    """The kept running list equals the running jobs among those holding nodes at every decision
    (starts, ends, preemptions, resizes, migrations), and no running job sleeps past _pause_end."""
    sim = dlclusterenv.make_sim(scenario, 0)
    sched = as_recorded(policy)
    sched.reset(0)
    changes = 0
    while not sim.done:
        before = sim.running_jobs()
        sim.decide(sched)
        sim.advance()
        running = sim.running_jobs()
        changes += running is not before
        assert running == [j for j in sim._holding if j.status == RUNNING]
        assert all(j.paused_until <= sim._pause_end for j in running)
    assert changes > 10


def _check_plan_as_np_unique(sim, job):
    """Assert job_plan's merged (link, bytes, flows) are np.unique's links and bincount's sums of
    the job's communication plan, dtypes and bits alike; return that plan."""
    plan = job_plan(sim.cluster, job)
    m = job.model
    ps = np.array([t.node for t in job.ps_tasks()], dtype=np.int64)
    ws = np.array([t.node for t in job.worker_tasks()], dtype=np.int64)
    comm = pattern(m, job.spec.comm).plan(sim.cluster, m, job.spec.shard_nodes, ps, ws, job.spec.exchange_every)
    links, inv = np.unique(comm.links, return_inverse=True)
    for got, want in ((plan.links, links),
                      (plan.nbytes, np.bincount(inv, weights=comm.nbytes, minlength=len(links))),
                      (plan.flows, np.bincount(inv, weights=comm.flows, minlength=len(links)))):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    return comm


@pytest.mark.parametrize("scenario,policy", [("default", "fifo"), ("d2s_mixed", "d2s"),
                                             ("hetero_mixed", "gavel"), ("gandiva", "gandiva")])
def test_plan_links_merge_as_np_unique(scenario, policy):
    """job_plan merges a plan's (link, bytes, flows) entries in Python; np.unique and bincount
    give the same links, sums and dtypes."""
    sim = dlclusterenv.make_sim(scenario, 0)
    sched = as_recorded(policy)
    sched.reset(0)
    seen = 0
    while not sim.done and seen < 200:
        sim.decide(sched)
        sim.advance()
        for job in sim.running_jobs():
            _check_plan_as_np_unique(sim, job)
            seen += 1
    assert seen >= 50


def test_plan_merge_is_the_same_in_python_and_in_numpy(monkeypatch):
    """job_plan merges a job's few link entries in Python and many with np.unique: forced one way
    and then the other, every plan of a run on `default` with 8 PS and 8 workers per job, spread (plans of both
    sizes) has the same links, sums and dtypes."""
    import dlclusterenv.speed as speed
    from baselines.fixed import FixedShape

    few = speed._FEW_ENTRIES
    sim = dlclusterenv.make_sim("default", 0)
    sched = FixedShape(8, 8, "spread")
    sched.reset(0)
    sizes = []
    while not sim.done and len(sizes) < 300:
        sim.decide(sched)
        sim.advance()
        for job in sim.running_jobs():
            plans = []
            for forced in (10**9, -1):  # all in Python; all through np.unique
                monkeypatch.setattr(speed, "_FEW_ENTRIES", forced)
                kept, job.plan = job.plan, None
                plans.append(job_plan(sim.cluster, job))
                job.plan = kept
            a, b = plans
            for x, y in ((a.links, b.links), (a.nbytes, b.nbytes), (a.flows, b.flows)):
                assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
            sizes.append(len(_check_plan_as_np_unique(sim, job).links))
    assert min(sizes) <= few < max(sizes)


def test_rates_dicts_match_the_arrays():
    """Rates' per-job dicts, built when read, hold the arrays' values in the jobs' order."""
    sim = dlclusterenv.make_sim("default", 0)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    while len(sim.running_jobs()) < 3:
        sim.decide(fifo)
        sim.advance()
    r = sim.rates()
    ids = [j.job_id for j in sim.running_jobs() if j.paused_until <= sim.now + 1e-9]
    assert list(r.row) == ids and list(r.row.values()) == list(range(len(ids)))
    assert r.speed == dict(zip(ids, r.speed_arr.tolist()))
    assert r.cross_node_Bps == dict(zip(ids, r.cross_node_arr.tolist()))


def test_views_share_the_loss_history_until_an_epoch_is_added():
    """A running job's views hold its observed losses as one tuple, equal to obs_loss, made
    again only when the history grows."""
    sim = dlclusterenv.make_sim("default", 0)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    grew = shared = 0
    last: dict[str, tuple] = {}
    while not sim.done:
        sim.decide(fifo)
        for job in sim.running_jobs():
            a, b = sim.job_view(job).observed_loss, sim.job_view(job).observed_loss
            assert a is b and a == tuple(job.obs_loss)
            prev = last.get(job.job_id)
            if prev is not None:
                assert a[: len(prev)] == prev
                grew += len(a) > len(prev)
                shared += a is prev
            last[job.job_id] = a
        sim.advance()
    assert grew > 10 and shared > 10


# async jobs, which no shipped scenario runs beside contended nodes or alone on GPUs: FlowCon's
# VAE and MNIST (cpu_max 8, so nodes are contended) and ResNet-50 made async, as PS or all-reduce
# jobs of 2-4 workers; recorded on be98cdb (before the sections were skipped) with this file's _run.
# At bias7 (speed biases from generators of their own: speeds and losses moved) the observations
# became a third digest; Gandiva and Tiresias keep the first two as computed on main 9c985a2 with
# this scheme, and FlowCon, which reads losses, decides differently (all three re-recorded). The
# third digests moved again with bias7's last-epoch fix (a job's last loss point counts). FlowCon's
# two were re-recorded at s20 (its own fixes: one-point losses, its timer; engine unchanged).
ASYNC = {
    # PS factor, contended
    ("flowcon_15", "ps", "flowcon"): ("e33d122e0540", "162b6f23d58e", "d0c02a595743"),
    # no PS, contended
    ("flowcon_15", "allreduce", "flowcon"): ("f3eac6a34440", "334770e66728", "8c7abfc3243d"),
    # GPU workers alone, CPU ones beside
    ("default", "ps", "gandiva"): ("13ec538b3841", "64d209aa35d1", "36fc79cf5ca6"),
    # preempted, resumed
    ("default", "allreduce", "tiresias"): ("0531ed4fcb58", "7b373c176ca4", "34512f41d3fa"),
}


@pytest.mark.parametrize("case", sorted(ASYNC), ids=":".join)
def test_async_jobs_on_contended_nodes_and_alone_match_be98cdb(case, tmp_path):
    """compute_rates' per-worker loops of async jobs, with and without a PS, on contended nodes and
    on GPUs of their own, give the trajectories of the full computation."""
    import yaml

    from dlclusterenv.config import CONFIG_DIR

    zoo = yaml.safe_load((CONFIG_DIR / "models.yaml").read_text())
    for name in ("VAE", "MNIST", "ResNet-50"):
        zoo["models"][name]["sync"] = False
    (tmp_path / "zoo.yaml").write_text(yaml.safe_dump(zoo))
    scenario, comm, policy = case
    sc = load_scenario(scenario)[0].model_dump()
    sc["models_file"] = str(tmp_path / "zoo.yaml")
    w = sc["workload"]
    if scenario == "flowcon_15":
        w["num_workers"] = (2, 3)
    else:
        w["models"] = {"ResNet-50": 2.0, "VGG-16": 1.0, "VAE": 1.0}
        w["num_workers"] = (2, 4)
    w["comm"] = comm
    assert _run(sc, policy) == ASYNC[case]


@needs_philly
def test_plans_with_one_entry_per_link_as_np_unique_on_philly():
    """A plan whose entries are already one per link, in order (a one-worker job's input read:
    most trace jobs), is taken as it is (branch eng9); its links, sums and dtypes are np.unique's
    and bincount's, checked on every running job of the all-VC day's first decision points."""
    sc = load_scenario("philly")[0].model_dump()
    sc["workload"]["trace"].update(vc=None, start="2017-10-01", end="2017-10-02")
    sim = dlclusterenv.make_sim(sc, 0)
    fifo = baselines.make("fifo")
    fifo.reset(0)
    taken = checked = 0
    for _ in range(60):
        sim.decide(fifo)
        sim.advance()
        for job in sim.running_jobs():
            entries = _check_plan_as_np_unique(sim, job).links.tolist()
            taken += bool(entries) and entries == sorted(set(entries))
            checked += 1
    assert taken >= 100 and checked >= taken


def test_core_memory_sums_are_the_arrays_sums():
    """Cluster.core_memory_sums (read for every dominant share) are np.sum's, bit for bit, and
    kept."""
    c = dlclusterenv.make_sim("default", 0).cluster
    cores, memory = c.core_memory_sums()
    assert type(cores) is type(c.cpus.sum()) and cores.tobytes() == c.cpus.sum().tobytes()
    assert memory.tobytes() == c.memory.sum().tobytes()
    assert c.core_memory_sums()[0] is cores

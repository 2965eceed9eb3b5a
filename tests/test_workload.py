"""Workloads: every arrival process, trace replay honesty, and config errors that name the key."""

from __future__ import annotations

import numpy as np
import pytest

from dlclusterenv import ConfigError, make_sim
from dlclusterenv.cluster import build_cluster
from dlclusterenv.config import load_zoo
from dlclusterenv.jobs import convergence_epoch
from dlclusterenv.profiles import shared_dir
from dlclusterenv.workload import generate_jobs, load_scenario

ZOO = load_zoo()
TINY = build_cluster("tiny")
MIX = {"ResNet-50": 1, "ResNeXt-110": 1}


def jobs(workload: dict, seed: int = 0, cluster=TINY):
    sc, _ = load_scenario({"name": "t", "cluster": "tiny", "workload": workload})
    return generate_jobs(sc, cluster, ZOO, seed, "t")


def test_uniform_arrivals_in_window_and_seeded():
    a = jobs({"kind": "uniform", "num_jobs": 50, "window_s": 1000, "models": MIX})
    b = jobs({"kind": "uniform", "num_jobs": 50, "window_s": 1000, "models": MIX})
    c = jobs({"kind": "uniform", "num_jobs": 50, "window_s": 1000, "models": MIX}, seed=1)
    at = [s.arrival_s for s in a]
    assert all(0 <= t <= 1000 for t in at) and at == sorted(at)
    assert a == b and a != c


def test_poisson_mean_interarrival():
    a = jobs({"kind": "poisson", "num_jobs": 2000, "rate_per_s": 0.5, "models": MIX})
    gaps = np.diff([0.0] + [s.arrival_s for s in a])
    assert abs(gaps.mean() - 2.0) < 0.15


def test_fixed_schedule_kept():
    a = jobs({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 5, "num_workers": 2}]})
    assert (a[0].model, a[0].arrival_s, a[0].num_workers, a[0].num_ps) == ("ResNet-50", 5, 2, 1)


@pytest.mark.parametrize(
    "workload, needle",
    [
        ({"kind": "uniform", "num_jobs": 3, "window_s": 10, "models": {"NoSuchNet": 1}}, "NoSuchNet"),
        ({"kind": "uniform", "num_jobs": 3, "window_s": 10, "models": MIX, "bogus": 1}, "bogus"),
        ({"kind": "uniform", "num_jobs": "many", "window_s": 10, "models": MIX}, "num_jobs"),
        ({"kind": "fixed", "jobs": [{"model": "ResNet-50", "arrival_s": 0, "num_workers": 99}]}, "99 GPUs"),
    ],
)
def test_bad_workload_names_the_problem(workload, needle):
    with pytest.raises(ConfigError, match=needle):
        jobs(workload)


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="presets: .*default"):
        make_sim("no-such-scenario")


@pytest.mark.skipif(not (shared_dir() / "traces/philly_jobs.csv").exists(), reason="needs ../shared")
def test_philly_replay_is_labelled_synthetic_and_follows_durations():
    sc, _ = load_scenario("philly")
    sc = sc.model_copy(
        update={"workload": sc.workload.model_copy(
            update={"trace": sc.workload.trace.model_copy(update={"first_n": 300})})}
    )
    cluster = build_cluster(sc.cluster)
    specs = generate_jobs(sc, cluster, ZOO, 0, "philly")
    assert len(specs) == 300
    assert all("model" in s.synthetic for s in specs)
    from dlclusterenv.traces import load_philly_csv

    trace = load_philly_csv(shared_dir() / "traces/philly_jobs.csv", vc="11cb48",
                            start="2017-10-09", end="2017-10-16", first_n=300)
    assert [s.num_workers for s in specs] == [j.num_gpus for j in trace.jobs]
    # longer trace jobs get at least as many epochs as shorter ones of the same model and size
    by_key: dict = {}
    for s, j in zip(specs, trace.jobs):
        by_key.setdefault((s.model, s.num_workers), []).append(
            (j.duration_s, convergence_epoch(ZOO.models[s.model], s.epoch_scale)))
    for pairs in by_key.values():
        pairs.sort()
        epochs = [e for _, e in pairs]
        assert epochs == sorted(epochs)

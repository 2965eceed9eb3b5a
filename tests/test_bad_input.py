"""Bad input is a clear error that names what is wrong and changes nothing (issue 13): non-integer
actions, wrong env options, scenarios that could never run; and a finished episode (also a
scenario without jobs) can still be stepped with its one valid action."""

from __future__ import annotations

import math
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from conftest import ENV_IDS, ZERO_JOBS, end_action, make_env
from test_properties import state_of

import baselines
from dlclusterenv import ConfigError, make_sim
from dlclusterenv.config import CONFIG_DIR, load_cluster, load_zoo


# --------------------------------------------------------------------------- finished episodes
def test_a_zero_job_scenario_is_a_finished_episode_that_steps_without_error(env_id):
    """Bug 1: DLClusterPlace popped from an empty task queue when its only valid action (defer)
    was taken on a finished episode (test_envs.test_episode_end_reports_metrics steps one that
    ended after its jobs)."""
    env = gym.make(env_id, scenario=ZERO_JOBS)
    _, info = env.reset(seed=0)
    mask = info["action_mask"]
    assert np.flatnonzero(mask).tolist() == [end_action(env)]
    for _ in range(2):
        _, reward, term, trunc, info = env.step(end_action(env))
        assert (reward, term, trunc, info["invalid_action"]) == (0.0, True, False, False)
        assert info["metrics"]["jobs_finished"] == 0


# --------------------------------------------------------------------------- actions
NOT_INTEGERS = [1.5, -0.5, np.float32(0.7), np.float64(1.0), "1", None, math.nan, True, np.bool_(True),
                [0], [0, 1], np.array([0, 1]), np.array(1.0), np.zeros((2, 1), np.int64), 1 + 0j]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_a_non_integer_action_is_a_value_error_that_changes_nothing(env_id):
    """Bug 6: 1.5, -0.5, np.float32(0.7) and "1" were truncated and executed as valid actions;
    None, nan, lists and arrays raised raw int() errors."""
    env = make_env(env_id)
    u = env.unwrapped
    env.reset(seed=0)
    before, steps = state_of(u.sim), u.steps
    for a in NOT_INTEGERS:
        with pytest.raises(ValueError, match=rf"(?s)^{env_id}: action .* is not an integer"):
            env.step(a)
        assert state_of(u.sim) == before and u.steps == steps, repr(a)


@pytest.mark.parametrize("as_type", [int, np.int64, np.uint8, np.array, lambda k: np.array([k])])
def test_integer_actions_of_any_integer_type_act_alike(as_type):
    """Python and numpy integers and one-element integer arrays are the same action."""
    runs = []
    for convert in (int, as_type):
        env = make_env("DLClusterPlace-v0")
        env.reset(seed=3)
        rng = np.random.default_rng(0)
        trace = []
        for _ in range(30):
            a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
            _, r, term, _, info = env.step(convert(a))
            trace.append((a, r, info["invalid_action"], info["time"]))
            if term:
                break
        runs.append(trace)
    assert runs[0] == runs[1]


# --------------------------------------------------------------------------- env options
@pytest.mark.parametrize(
    "env_id, option, value",
    [
        ("DLClusterPlace-v0", "scenario", 5),
        ("DLClusterPlace-v0", "time_scale_s", 0),  # ZeroDivisionError at reset
        ("DLClusterPlace-v0", "time_scale_s", -3600.0),  # observations outside the space
        ("DLClusterPlace-v0", "time_scale_s", math.inf),
        ("DLClusterJoint-v0", "max_jobs", 0),
        ("DLClusterJoint-v0", "max_jobs", -1),
        ("DLClusterJoint-v0", "max_jobs", "16"),
        ("DLClusterJoint-v0", "max_jobs", 16.0),
        ("DLClusterAlloc-v0", "max_nodes", 0),
        ("DLClusterAlloc-v0", "max_steps", 0),
        ("DLClusterPlace-v0", "invalid_penalty", "x"),
        ("DLClusterPlace-v0", "invalid_penalty", math.nan),
        ("DLClusterPlace-v0", "invalid_penalty", -1.0),
        ("DLClusterPlace-v0", "reward", {}),  # every reward 0
        ("DLClusterPlace-v0", "reward", {"jct": 0.0}),
        ("DLClusterPlace-v0", "reward", {"jct": math.nan}),
        ("DLClusterPlace-v0", "reward", {"jct": "1"}),
        ("DLClusterPlace-v0", "reward", 3),
        ("DLClusterPlace-v0", "work_conserving", "no"),  # was bool("no") = True
        ("DLClusterAlloc-v0", "work_conserving", 1),
        ("DLClusterAlloc-v0", "max_adds_per_round", 1.7),  # was int(1.7) = 1
        ("DLClusterAlloc-v0", "placer", "nearest"),
        ("DLClusterAlloc-v0", "grow_running", "false"),
        ("DLClusterShare-v0", "max_tasks", 8.0),
        ("DLClusterShare-v0", "max_gpus", "2"),
    ],
)
def test_a_bad_env_option_fails_at_make_naming_option_and_value(env_id, option, value):
    """Bug 8: gym.make kwargs were not validated."""
    with pytest.raises(ConfigError, match=rf"{option}.*\(value: {re.escape(repr(value))}\)"):
        gym.make(env_id, **{"scenario": "tiny", option: value})


def test_numpy_scalars_are_options_of_their_value():
    env = gym.make("DLClusterAlloc-v0", scenario="tiny", max_jobs=np.int64(8),
                   time_scale_s=np.float32(60.0), work_conserving=np.bool_(True))
    u = env.unwrapped
    assert (u.max_jobs, u.time_scale_s, u.work_conserving) == (8, 60.0, True)
    assert type(u.max_jobs) is int


def test_a_bad_option_in_a_config_file_names_the_file(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("max_jobs: 16\nwork_conserving: 'yes'\n")
    with pytest.raises(ConfigError, match=rf"^{path}: work_conserving: .*\(value: 'yes'\)"):
        gym.make("DLClusterAlloc-v0", config=str(path))


def test_a_shape_no_job_can_run_at_is_refused():
    """Bug 7: shapes=[[1, 60]] on the 8-GPU tiny cluster left every job pending until the horizon."""
    with pytest.raises(ConfigError, match=r"shapes\[1\]: \(1, 60\): no job of scenario 'tiny' can ever"
                                          r" run at it .*needs 60 GPUs"):
        gym.make("DLClusterAlloc-v0", scenario="tiny", shapes=[[1, 2], [1, 60]])


# --------------------------------------------------------------------------- scenarios
def _scenario(tmp_path, text: str) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return str(path)


UNIFORM = "name: t\ncluster: tiny\nworkload:\n  kind: uniform\n"


@pytest.mark.parametrize(
    "workload, needle",
    [
        # CPU-only workers: the GPU count was the only whole-job check
        ("  num_jobs: 2\n  models: {MNIST: 1}\n  num_workers: [200, 200]",
         "workload.num_workers: [200, 200]: job j0 (MNIST, 1 PS, 200 workers) needs 100.1 CPU cores, "
         "the cluster 'tiny' has 64"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  num_ps: [30, 30]",
         "job j0 (ResNet-50, 30 PS, 1 workers) needs 92 CPU cores, the cluster 'tiny' has 64"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  num_workers: [0, 0]",
         "workload.num_workers.0: Input should be greater than or equal to 1 (value: 0)"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  epoch_scale: [-1, 0]",
         "workload.epoch_scale.0: Input should be greater than 0 (value: -1)"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  shards_per_job: 1000000",
         "workload.shards_per_job: 1000000: no job of this workload can run more than 8 workers"),
        ("  num_jobs: true\n  models: {ResNet-50: 1}",
         "workload.num_jobs: Input should be a valid integer (value: True)"),
        ("  num_jobs: 2\n  models: {ResNet-50: .nan}", "workload.models.ResNet-50: Input should be a "
         "finite number (value: nan)"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  window_s: .inf",
         "workload.window_s: Input should be a finite number (value: inf)"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  num_jobs: 3", "found duplicate key 'num_jobs'"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  exchange_every: 0",
         "workload.exchange_every: Input should be greater than or equal to 1 (value: 0)"),
        ("  num_jobs: 2\n  models: {ResNet-50: 1}\n  data_fraction: 1.5",
         "workload.data_fraction: Input should be less than or equal to 1 (value: 1.5)"),
    ],
)
def test_a_scenario_that_could_never_run_is_refused_naming_the_key(tmp_path, workload, needle):
    """Bug 7: these ran every job unfinished with exit 0, or failed with raw numpy errors."""
    path = _scenario(tmp_path, UNIFORM + workload + "\n")
    with pytest.raises(ConfigError) as err:
        make_sim(path)
    assert str(err.value).startswith(f"{path}: ") and needle in str(err.value), str(err.value)


def test_a_task_that_fits_no_single_node_is_refused(tmp_path):
    """A GPU worker needs the CPU of a GPU node: a 64-core CPU-only node does not make a 2-core
    worker fit beside a 1-core GPU node (each resource was checked against a different node)."""
    cluster = {
        "name": "split", "source": "test",
        "node_types": {
            "gpu": {"cpus": 1, "memory_gb": 64, "gpus": 4, "nic_MBps": 1250},
            "cpu": {"cpus": 64, "memory_gb": 64, "gpus": 0, "nic_MBps": 1250},
        },
        "racks": [{"uplink_MBps": 1250, "nodes": [{"type": "gpu", "count": 1}, {"type": "cpu", "count": 1}]}],
    }
    (tmp_path / "split.yaml").write_text(yaml.safe_dump(cluster))
    path = _scenario(tmp_path, f"name: t\ncluster: {tmp_path / 'split.yaml'}\nworkload:\n  kind: fixed\n"
                               "  jobs: [{model: ResNet-50, arrival_s: 0}]\n")
    with pytest.raises(ConfigError, match=r"workload.jobs.0.model: 'ResNet-50': job j0: a worker needs 2 CPU "
                                          r"/ 8 GB / a GPU on one node, more than any node of cluster 'split'"):
        make_sim(path)


# --------------------------------------------------------------------------- inf and nan
def _edited(tmp_path, source, edit) -> str:
    """A copy of a config file with one value changed by `edit` (on the parsed YAML)."""
    data = yaml.safe_load(Path(source).read_text())
    edit(data)
    path = tmp_path / Path(source).name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _set(*keys, value):
    def edit(data):
        for k in keys[:-1]:
            data = data[k]
        data[keys[-1]] = value
    return edit


@pytest.mark.parametrize(
    "keys, value, needle",
    [
        (("node_types", "gpu2", "cpus"), math.inf, "node_types.gpu2.cpus"),
        (("node_types", "gpu2", "nic_MBps"), math.nan, "node_types.gpu2.nic_MBps"),
        (("racks", 0, "uplink_MBps"), math.inf, "racks.0.uplink_MBps"),
    ],
)
def test_inf_or_nan_in_a_cluster_file_is_refused_naming_the_key(tmp_path, keys, value, needle):
    path = _edited(tmp_path, CONFIG_DIR / "clusters" / "tiny.yaml", _set(*keys, value=value))
    with pytest.raises(ConfigError, match=rf"^{re.escape(path)}: {re.escape(needle)}: Input should "
                                          rf"be a finite number \(value: {value}\)"):
        load_cluster(path)


@pytest.mark.parametrize(
    "keys, value",
    [
        (("param_bytes",), math.nan),
        (("step_compute_s",), math.inf),
        (("worker", "cpu"), math.nan),
        (("loss", "b0"), math.inf),
        (("loss", "noise"), math.nan),
        (("convergence", "rel_delta"), math.nan),
    ],
)
def test_inf_or_nan_in_a_model_file_is_refused_naming_the_key(tmp_path, keys, value):
    path = _edited(tmp_path, CONFIG_DIR / "models.yaml",
                   _set("models", "ResNet-50", *keys, value=value))
    key = ".".join(("models", "ResNet-50") + keys)
    with pytest.raises(ConfigError, match=rf"^{re.escape(path)}: {re.escape(key)}: Input should be a"
                                          rf" finite number \(value: {value}\)"):
        load_zoo(path)


def _zero_demand(role: str, comm: str, mem_gb: float):
    def edit(data):
        m = data["models"]["ResNet-50"]
        m["comm"], m[role] = comm, {**m[role], "cpu": 0, "mem_gb": mem_gb}
    return edit


@pytest.mark.parametrize("role, comm", [("worker", "ps"), ("ps", "ps"), ("worker", "allreduce")])
def test_a_task_that_reserves_neither_cpu_nor_memory_is_refused_naming_the_role(tmp_path, role, comm):
    """GPU workers time-slice a GPU without a limit, so CPU and memory are what bound a role's task
    count: with neither, cluster.never_fits let allocate=(1, 10**9) through and the engine built
    10**9 tasks. One of the two is enough."""
    path = _edited(tmp_path, CONFIG_DIR / "models.yaml", _zero_demand(role, comm, 0))
    with pytest.raises(ConfigError, match=rf"^{re.escape(path)}: models\.ResNet-50: Value error, {role} "
                                          r"reserves no CPU and no memory \(cpu 0, mem_gb 0\)"):
        load_zoo(path)
    path = _edited(tmp_path, CONFIG_DIR / "models.yaml", _zero_demand(role, comm, 0.5))
    assert getattr(load_zoo(path).models["ResNet-50"], role).cpu == 0


def test_an_allreduce_model_may_leave_its_unused_ps_empty(tmp_path):
    """An all-reduce job has no PS (Gavel's zoo writes ps {cpu: 0, mem_gb: 0})."""
    path = _edited(tmp_path, CONFIG_DIR / "models.yaml", _zero_demand("ps", "allreduce", 0))
    assert load_zoo(path).models["ResNet-50"].ps.mem_gb == 0


@pytest.mark.parametrize(
    "text, needle",
    [
        ("engine: {tick_s: .inf}\n" + UNIFORM + "  num_jobs: 2\n  models: {ResNet-50: 1}",
         "engine.tick_s: Input should be a finite number (value: inf)"),
        ("engine: {horizon_s: .nan}\n" + UNIFORM + "  num_jobs: 2\n  models: {ResNet-50: 1}",
         "engine.horizon_s: Input should be greater than 0 (value: nan)"),
        ("name: t\ncluster: tiny\nworkload:\n  kind: poisson\n  num_jobs: 2\n  models: {ResNet-50: 1}\n"
         "  rate_per_s: .nan", "workload.rate_per_s: Input should be a finite number (value: nan)"),
        (UNIFORM + "  num_jobs: 2\n  models: {ResNet-50: 1}\n  epoch_scale: [1, .inf]",
         "workload.epoch_scale.1: Input should be a finite number (value: inf)"),
        ("name: t\ncluster: tiny\nworkload:\n  kind: fixed\n  jobs: [{model: ResNet-50, arrival_s: .inf}]",
         "workload.jobs.0.arrival_s: Input should be a finite number (value: inf)"),
        ("name: t\ncluster: tiny\nworkload:\n  kind: fixed\n"
         "  jobs: [{model: ResNet-50, arrival_s: 0, weight: .nan}]",
         "workload.jobs.0.weight: Input should be a finite number (value: nan)"),
    ],
)
def test_inf_or_nan_in_a_scenario_is_refused_naming_the_key(tmp_path, text, needle):
    path = _scenario(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as err:
        make_sim(path)
    assert str(err.value).startswith(f"{path}: ") and needle in str(err.value), str(err.value)


def test_an_infinite_horizon_still_means_no_horizon(tmp_path):
    """horizon_s is the one float where inf has a meaning (run until every job finishes)."""
    path = _scenario(tmp_path, "engine: {horizon_s: .inf}\n" + UNIFORM
                     + "  num_jobs: 2\n  models: {ResNet-50: 1}\n")
    assert make_sim(path).run(baselines.make("fifo")).jobs_finished == 2


@pytest.mark.parametrize(
    "env_id, option, value",
    [
        ("DLClusterPlace-v0", "time_scale_s", math.nan),
        ("DLClusterAlloc-v0", "invalid_penalty", math.inf),
        ("DLClusterJoint-v0", "reward", {"traffic": math.inf}),
        ("DLClusterShare-v0", "scenario", {"name": "t", "cluster": "tiny", "workload": {
            "kind": "uniform", "num_jobs": 2, "models": {"ResNet-50": 1}, "window_s": math.nan}}),
    ],
)
def test_inf_or_nan_at_gym_make_is_refused_naming_the_option(env_id, option, value):
    needle = "window_s" if option == "scenario" else option
    shown = "nan" if option == "scenario" else re.escape(repr(value))
    with pytest.raises(ConfigError, match=rf"{needle}.*\(value: {shown}\)"):
        gym.make(env_id, **{"scenario": "tiny", option: value})


def test_fit_verdicts_kept_between_resets_still_refuse(tmp_path):
    """generate_jobs' fit_memo (an env keeps it across resets): the jobs drawn are the same, and
    a never-fitting job is refused again on the next call, naming that call's job."""
    from dlclusterenv.cluster import build_cluster
    from dlclusterenv.workload import build, generate_jobs, load_scenario

    sc, cluster, zoo, jobs = build("default", 4)
    memo: tuple[dict, dict] = ({}, {})
    assert generate_jobs(sc, cluster, zoo, 4, "default", memo) == jobs and memo[0] and memo[1]
    assert generate_jobs(sc, cluster, zoo, 4, "default", memo) == jobs
    path = _scenario(tmp_path, UNIFORM + "  num_jobs: 2\n  models: {ResNet-50: 1}\n  num_ps: [30, 30]\n")
    bad, _ = load_scenario(path)
    memo = ({}, {})
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"job j0 \(ResNet-50, 30 PS, 1 workers\) needs 92 CPU"):
            generate_jobs(bad, build_cluster(bad.cluster), zoo, 0, str(path), memo)


# --------------------------------------------------------------------------- files (badin16)
@pytest.mark.parametrize("load", [load_cluster, load_zoo, lambda p: make_sim(p), lambda p: make_sim(
    {**yaml.safe_load((CONFIG_DIR / "scenarios" / "tiny.yaml").read_text()), "models_file": str(p)})])
def test_a_folder_or_non_utf8_file_given_as_yaml_is_a_config_error_naming_it(load, tmp_path):
    """A folder named x.yaml raised a raw IsADirectoryError, a Latin-1 file a UnicodeDecodeError."""
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(folder))}: is a directory, not a YAML file$"):
        load(folder)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(latin))}: not UTF-8 text"):
        load(latin)


@pytest.mark.parametrize("params", [math.nan, math.inf, 0.0])
def test_fidelity_params_must_be_a_finite_positive_number(params):
    """--params nan passed the `params <= 0` check and ended in pydantic's traceback."""
    from dlclusterenv.fidelity import FidelityError, check_file

    with pytest.raises(FidelityError, match=r"^--params: must be a finite number > 0, got"):
        check_file("never-read.csv", params, "T4", "allreduce")


@pytest.mark.parametrize("load, keys", [(load_cluster, "name, source, node_types, racks"), (load_zoo, "models"),
                                        (make_sim, "name, workload")])
def test_an_empty_yaml_file_says_so_and_lists_the_keys_it_needs(load, keys, tmp_path):
    """An empty (or comments-only) file was "<root>: Input should be a valid dictionary or instance
    of Scenario (value: None)"."""
    path = tmp_path / "x.yaml"
    path.write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: empty; expected a mapping with the keys {keys}$"):
        load(path)

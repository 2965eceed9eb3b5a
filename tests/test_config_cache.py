"""Parsed configs are cached per file version (path, mtime, size): a reset or a `make_sim` per
seed does not re-read YAML, and an edited file is read again."""

import os
import shutil

import pytest

from dlclusterenv import config, make_sim
from dlclusterenv.config import CONFIG_DIR, ConfigError, load_cluster, load_zoo
from dlclusterenv.workload import load_scenario


def _count_reads(monkeypatch) -> list:
    reads = []
    real = config.read_yaml

    def counting(path):
        reads.append(str(path))
        return real(path)

    monkeypatch.setattr(config, "read_yaml", counting)
    monkeypatch.setattr("dlclusterenv.workload.read_yaml", counting)
    return reads


def test_make_sim_reads_each_yaml_once(monkeypatch):
    monkeypatch.setattr(config, "_PARSED", {})
    reads = _count_reads(monkeypatch)
    make_sim("default", 0)
    first = len(reads)
    assert first == 3  # scenario, cluster, model zoo
    for seed in (1, 2, 3):
        make_sim("default", seed)
    assert len(reads) == first


def test_edited_file_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "_PARSED", {})
    reads = _count_reads(monkeypatch)
    path = tmp_path / "c.yaml"
    shutil.copy(CONFIG_DIR / "clusters" / "default.yaml", path)
    a = load_cluster(path)
    assert load_cluster(path) is a and len(reads) == 1
    text = path.read_text().replace(f"name: {a.name}", "name: edited", 1)
    assert text != path.read_text()
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # coarse clocks: force a new mtime
    b = load_cluster(path)
    assert len(reads) == 2 and b.name == "edited"


def test_same_file_any_spelling_shares_one_parse(monkeypatch):
    monkeypatch.setattr(config, "_PARSED", {})
    reads = _count_reads(monkeypatch)
    rel = os.path.relpath(CONFIG_DIR / "models.yaml")
    assert load_zoo(rel) is load_zoo(CONFIG_DIR / "models.yaml") is load_zoo()
    assert len(reads) == 1


def test_failures_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "_PARSED", {})
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nworkload: {kind: nope}\n")
    for _ in range(2):  # the same clear error each time, naming the file as given
        with pytest.raises(ConfigError, match=r"s\.yaml: workload"):
            load_scenario(path)
    missing = tmp_path / "gone.yaml"
    with pytest.raises(ConfigError, match="file not found"):
        load_scenario(missing)


def test_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "_PARSED", {})
    src = (CONFIG_DIR / "models.yaml").read_text()
    for i in range(70):
        p = tmp_path / f"m{i}.yaml"
        p.write_text(src)
        load_zoo(p)
    assert len(config._PARSED) == 64

"""benchmarks/suite_merge.py: a suite scored over runs made in parts equals the whole run's score."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from dlclusterenv.benchmark import run_suite

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("suite_merge", ROOT / "benchmarks/suite_merge.py")
suite_merge = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite_merge)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The tiny suite run whole, and its runs.csv split by instance into two folders."""
    root = tmp_path_factory.mktemp("merge")
    res = run_suite("tiny", root / "whole", progress=False, say=lambda m: None)
    with open(root / "whole" / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for name, inst in (("a", "tiny@1x"), ("b", "tiny@2x")):
        (root / name).mkdir()
        with open(root / name / "runs.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(r for r in rows if r["instance"] == inst)
    return root, res, rows


def test_parts_score_as_the_whole_run(parts):
    root, whole, _ = parts
    said = []
    _, res = suite_merge.merge("tiny", [root / "a", root / "b"], say=said.append)
    assert res["check"] == whole["check"] and res["geomean"] == whole["geomean"]
    assert res["board"] == whole["board"]
    assert all("0 stale" in m and "0 not in suite" in m for m in said)


def test_missing_and_duplicate_runs_are_errors(parts):
    root, _, _ = parts
    with pytest.raises(SystemExit, match="are in no OUT"):
        suite_merge.merge("tiny", [root / "a"], say=lambda m: None)
    with pytest.raises(SystemExit, match="is in both"):
        suite_merge.merge("tiny", [root / "a", root / "whole"], say=lambda m: None)
    with pytest.raises(SystemExit, match="no runs.csv"):
        suite_merge.merge("tiny", [root / "a", root / "nowhere"], say=lambda m: None)


def test_stale_fingerprints_and_foreign_rows_are_counted(parts, tmp_path):
    root, _, rows = parts
    mine = [dict(r) for r in rows if r["instance"] == "tiny@2x"]
    mine[0]["fingerprint"] = "0" * 16  # as if run on another trace stamp
    mine.append({**mine[1], "instance": "other@1x"})
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(mine)
    said = []
    suite_merge.merge("tiny", [root / "a", tmp_path], say=said.append)
    assert f"{len(mine) - 1} runs used ({len(mine) - 2} match today's fingerprint, 1 stale), 1 not in suite" \
        in said[-1]


def test_cli_prints_the_report_and_writes_the_csvs(parts, tmp_path, capsys):
    root, whole, _ = parts
    suite_merge.main(["tiny", str(root / "a"), str(root / "b"), "--write", str(tmp_path)])
    out = capsys.readouterr().out
    assert "validity (test split)" in out and "normalised score" in out
    assert (tmp_path / "check.csv").read_text() == (root / "whole" / "check.csv").read_text()
    assert (tmp_path / "leaderboard.csv").read_text() == (root / "whole" / "leaderboard.csv").read_text()


def test_policies_keeps_and_scores_the_named_policies_rows(tmp_path, capsys):
    """`--policies` plans the policies a benchmark ran with `--policies` (here your own scheduler
    file): without it their rows are ignored (counted), with it they are kept and scored exactly
    as the benchmark scored them; names are validated as `dlcluster benchmark` does."""
    mine = tmp_path / "mine.py"
    mine.write_text("from baselines.fifo import FIFO\n\n\nclass Mine(FIFO):\n    name = 'mine'\n")
    spec = f"{mine}:Mine"
    out = tmp_path / "out"
    whole = run_suite("tiny", out, extra=[spec], progress=False, say=lambda m: None)
    n = sum(1 for line in (out / "runs.csv").read_text().splitlines() if line.startswith(f"tiny@") and spec in line)
    said = []
    _, res = suite_merge.merge("tiny", [out], say=said.append)
    assert n > 0 and spec not in {b["policy"] for b in res["board"]} and said[-1].endswith(f", {n} not in suite tiny")
    _, res = suite_merge.merge("tiny", [out], say=said.append, extra=[spec])
    assert res["board"] == whole["board"] and res["geomean"] == whole["geomean"] and "0 stale" in said[-1]
    suite_merge.main(["tiny", str(out), "--policies", spec])
    assert spec in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"--policies: 'fifo' is a baseline"):
        suite_merge.main(["tiny", str(out), "--policies", f"{spec},fifo"])
    with pytest.raises(SystemExit, match=r"--policies: .*nope.py"):
        suite_merge.main(["tiny", str(out), "--policies", f"{tmp_path / 'nope.py'}:X"])

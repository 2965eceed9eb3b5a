"""benchmarks/suite_cost.py: the run-seconds of a suite run, per policy and instance."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cost(csv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/suite_cost.py"), str(csv), *args],
                          capture_output=True, text=True)


def test_totals_shares_and_the_suite_without_a_policy(tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text("instance,split,window,policy,seed,avg_jct_s,wall_s\n"
                   "a@1x,test,,slow,0,1,90\n"
                   "a@1x,test,,fast,0,1,6\n"
                   "b@1x,test,,fast,0,1,4\n")
    out = cost(csv).stdout
    assert "3 runs, 100 run-seconds, at least 50 s wall on 2 workers (longest run 90 s)" in out
    assert "slow" in out and "90.0%" in out and "suite without it: >= 6 s wall" in out  # its longest run
    assert "suite without it: >= 90 s wall" in out  # without `fast` the slow run alone is 90 s
    one = cost(csv, "--workers", "1").stdout
    assert "at least 100 s wall on 1 workers" in one and "suite without it: >= 10 s wall" in one


def test_a_file_that_is_not_a_runs_csv_is_named(tmp_path):
    csv = tmp_path / "other.csv"
    csv.write_text("instance,policy\na,b\n")
    res = cost(csv)
    assert res.returncode != 0 and "other.csv" in res.stderr and "wall_s" in res.stderr
    assert "--workers" in cost(csv, "--workers", "0").stderr


def test_replace_swaps_the_rows_of_a_rerun_policy(tmp_path):
    """--replace: the rerun rows take the place of the same (instance, split, window, policy, seed),
    windowless rows included; a row that matches no run is an error naming the file."""
    csv, new, bad = tmp_path / "runs.csv", tmp_path / "new.csv", tmp_path / "bad.csv"
    csv.write_text("instance,split,window,policy,seed,avg_jct_s,wall_s\n"
                   "a@1x,test,,slow,0,1,90\n"
                   "a@1x,test,1,slow,0,1,50\n"
                   "a@1x,test,,fast,0,1,6\n")
    new.write_text("instance,split,window,policy,seed,avg_jct_s,wall_s\n"
                   "a@1x,test,,slow,0,1,9\n"
                   "a@1x,test,1,slow,0,1,5\n")
    out = cost(csv, "--replace", str(new)).stdout
    assert "2 runs replaced (140 -> 14 run-seconds)" in out
    assert "3 runs, 20 run-seconds, at least 10 s wall on 2 workers (longest run 9 s)" in out
    bad.write_text("instance,split,window,policy,seed,avg_jct_s,wall_s\na@1x,test,2,slow,0,1,9\n")
    res = cost(csv, "--replace", str(bad))
    assert res.returncode != 0 and "bad.csv" in res.stderr and "match no run" in res.stderr

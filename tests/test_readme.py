"""Every python code block of README.md runs as written (each in a fresh interpreter, in a
temporary directory, so files it writes land there), and none keeps a `{...}` placeholder.
`python -m pytest tests/test_readme.py --durations=0` measures the times the README states."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = [(README[: m.start()].count("\n") + 1, m.group(1))
          for m in re.finditer(r"^```python\n(.*?)^```", README, re.S | re.M)]


def test_the_readme_has_its_snippets():
    assert len(BLOCKS) >= 5  # a broken pattern would otherwise test nothing


def test_no_placeholders():
    for line, code in BLOCKS:
        assert not re.search(r"\{\.\.\.\}|\[\.\.\.\]|\(\.\.\.\)", code), f"README.md:{line}"


def test_code_fences_close():
    """A fence with text after it does not close its block (CommonMark): the README below it would
    render as code up to the next fence."""
    inside = False
    for n, line in enumerate(README.splitlines(), 1):
        if line.startswith("```"):
            assert not inside or line.rstrip() == "```", f"README.md:{n}: text after a closing fence"
            inside = not inside
    assert not inside, "README.md ends inside a code block"


def test_section_links_name_a_heading():
    """The contents line links every `## ` section, and each `](#anchor)` link names a heading
    (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens)."""
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#{2,4} (.+)$", README, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", README)
    assert links and set(links) <= anchors, sorted(set(links) - anchors)
    sections = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^## (.+)$", README, re.M)}
    assert sections <= set(links), sorted(sections - set(links))


def test_table_rows_have_their_headers_cells():
    """A row with another cell count than its table's header is a row put in the wrong table
    (Benchmarks rows once landed under the overload table, the last table of the file)."""
    def cells(line):
        return re.sub(r"`[^`]*`", "", line).replace("\\|", "").strip().strip("|").count("|") + 1

    header = None
    for n, line in enumerate(README.splitlines(), 1):
        if not line.startswith("|"):
            header = None
        elif header is None:
            header = cells(line)
        else:
            assert cells(line) == header, f"README.md:{n}: {cells(line)} cells, its table's header {header}"


@pytest.mark.parametrize("line,code", BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_snippet_runs(line, code, tmp_path):
    if "import ray" in code:
        pytest.importorskip("ray.rllib")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"README.md:{line} failed:\n{r.stderr[-4000:]}"

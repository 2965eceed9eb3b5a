"""Every `python benchmarks/X.py ...`, `python -m benchmarks.X ...` and `dlcluster SUB ...` command
that README.md writes out in full parses against its script's own argument parser: a renamed or
dropped flag makes the README's command fail here, not in a reader's shell. Only the parsing runs
(`ArgumentParser.parse_args` is stopped once it has parsed). Left out: commands with placeholders
(OUT, `[...]`, `$t`, `...`), spans whose last word is an option (prose naming it, as in
"`dlcluster benchmark --validate` replayed ..."), and scripts without an argument parser."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMAND = re.compile(r"(?:python (?:benchmarks/\w+\.py|-m benchmarks\.\w+)|dlcluster [a-z]+)(?: [^`]*)?$")
PLACEHOLDER = re.compile(r"[\[<>|${]|\.\.\.|\\$|(?:^| )[A-Z][A-Z_]*(?: |$)| --?[\w-]+$")


def readme_commands() -> list[tuple[int, str]]:
    """(line, command) for each full command in an inline code span or a shell code block."""
    found, fence = {}, False
    for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        texts = [line] if fence else re.findall(r"`([^`]+)`", line.replace("``", ""))
        for text in texts:
            for part in re.split(r"\s*(?:&&|;)\s*", text.split(" #")[0]):
                m = COMMAND.search(part.strip())
                if m and not PLACEHOLDER.search(m.group(0)) and not m.group(0).endswith(" "):
                    found.setdefault(m.group(0), n)
    return sorted((n, c) for c, n in found.items())


def _script(argv: list[str]) -> Path | None:
    """The file a benchmark command runs (None for dlcluster)."""
    if argv[0] == "dlcluster":
        return None
    return ROOT / (argv[2].replace(".", "/") + ".py" if argv[1] == "-m" else argv[1])


COMMANDS = [(n, c) for n, c in readme_commands()
            if (s := _script(shlex.split(c))) is None or re.search(r"parse_args|benchmark_run\(", s.read_text())]


class _Parsed(Exception):
    """Raised by the patched parse_args once the command line has parsed."""


def test_the_readme_has_commands_of_each_kind():
    kinds = {shlex.split(c)[1] if c.startswith("python") else "dlcluster" for _, c in COMMANDS}
    assert {"-m", "dlcluster"} <= kinds and any(k.startswith("benchmarks/") for k in kinds)
    assert len(COMMANDS) >= 60  # a broken pattern would otherwise test nothing


@pytest.mark.parametrize("line,command", COMMANDS, ids=[f"README.md:{n}" for n, _ in COMMANDS])
def test_the_command_parses(line, command, monkeypatch):
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parse(self, args, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.syspath_prepend(str(ROOT))
    argv = shlex.split(command)
    err = io.StringIO()
    with pytest.raises(_Parsed), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            if argv[0] == "dlcluster":
                from dlclusterenv import cli
                cli.main(argv[1:])
            elif argv[1] == "-m":
                monkeypatch.setattr(sys, "argv", [argv[2], *argv[3:]])
                runpy.run_module(argv[2], run_name="__main__", alter_sys=False)
            else:
                monkeypatch.setattr(sys, "argv", argv[1:])
                runpy.run_path(str(ROOT / argv[1]), run_name="__main__")
        except SystemExit as e:
            pytest.fail(f"README.md:{line}: `{command}` does not parse: {err.getvalue().strip()} (exit {e.code})")

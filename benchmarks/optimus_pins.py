"""Every pin of Optimus' decisions kept by the tests, re-recorded by one command.

    python benchmarks/optimus_pins.py            # each pin: recorded value, value now
    python benchmarks/optimus_pins.py --write    # write the values now into the test files

The pins: tests/test_baseline_optimus.py MAIN_LOGS (decision_log digests, default scenario) and
tests/test_engine_identity.py CASES / TOTALS entries of optimus and optimus-oracle (every job's JCT,
the engine's totals and observations). A change that is meant to change Optimus' decisions (a
model fix) re-records them with --write and says why in the test header; one meant to decide alike
(a speed-up) must leave every line "same". Exit status 1 when a pin differs and --write is not
given. About a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_baseline_optimus as tbo  # noqa: E402
import test_engine_identity as tei  # noqa: E402
from helpers import decision_digest  # noqa: E402

POLICIES = ("optimus", "optimus-oracle")


def _key(k: tuple) -> str:
    return "(" + ", ".join(json.dumps(x) for x in k) + ")"


def _val(v) -> str:
    return json.dumps(v) if isinstance(v, str) else "(" + ", ".join(json.dumps(x) for x in v) + ")"


def pins() -> list[tuple[Path, tuple, object, object]]:
    """(test file, key, recorded value, value now) of every Optimus pin."""
    out = []
    for (name, seed), old in sorted(tbo.MAIN_LOGS.items()):
        out.append((Path(tbo.__file__), (name, seed), old, decision_digest("default", name, seed)))
    for case, old in sorted(tei.CASES.items()):
        if case[1] in POLICIES:
            out.append((Path(tei.__file__), case, old, tei.fingerprint(*case)))
    for case, old in sorted(tei.TOTALS.items()):
        if case[1] in POLICIES:
            out.append((Path(tei.__file__), case, old, tei.totals_fingerprint(*case)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the values now into the test files")
    a = ap.parse_args()
    differ = 0
    for path, key, old, new in pins():
        same = old == new
        differ += not same
        print(f"{path.name} {_key(key)}: {_val(old)} -> {_val(new)} {'same' if same else 'CHANGED'}")
        if a.write and not same:
            text = path.read_text()
            before, after = f"{_key(key)}: {_val(old)}", f"{_key(key)}: {_val(new)}"
            if text.count(before) != 1:
                raise SystemExit(f"{path}: pin {before!r} found {text.count(before)} times, expected once")
            path.write_text(text.replace(before, after))
    return 1 if differ and not a.write else 0


if __name__ == "__main__":
    sys.exit(main())

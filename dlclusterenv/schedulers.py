"""Policy specs: the strings `--policies` accepts, and the Scheduler each one names.

A policy travels as its spec string, so a process pool or Ray ships the name, never the object,
and each worker builds its own scheduler with `make(spec)`. Kinds, tried in this order:

- a baseline name (`baselines.REGISTRY`), e.g. `fifo`;
- a learned policy `ppo:PATH` or `maskableppo:PATH` (a `dlcluster train` model.zip), run by
  `agents.learned`, not here;
- a name an installed package registers in the entry-point group `dlclusterenv.schedulers`, e.g.
  in its pyproject.toml `[project.entry-points."dlclusterenv.schedulers"] mine = "pkg.mod:Mine"`;
  a built-in name wins over an entry point of the same name;
- `module.path:Class`, an importable module (on sys.path, e.g. installed or in the working dir);
- `path/to/file.py:Class`, a Python file loaded by path (relative to the working directory; on a
  remote Ray cluster the path must exist on every node).

The class must subclass `dlclusterenv.api.Scheduler` and take no constructor arguments.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from .api import Scheduler

GROUP = "dlclusterenv.schedulers"
LEARNED = ("ppo", "maskableppo")  # agents.learned.PREFIXES, kept here so no torch import is needed


class PolicyError(ValueError):
    """A bad policy spec; the message names it and lists what is valid."""


def did_you_mean(word: str, valid) -> str:
    """The hint "did you mean 'x'? " naming the closest of `valid`; empty when none is close."""
    close = difflib.get_close_matches(word, list(valid), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Schedulers registered by installed packages, by name."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}


def names() -> list[str]:
    """Every policy name usable without a path: the baselines, then registered entry points."""
    import baselines

    return baselines.names() + sorted(set(entry_points()) - set(baselines.REGISTRY))


def kind(spec: str) -> str:
    """'baseline', 'learned', 'entry_point', 'file' or 'module' (syntax only; nothing imported)."""
    import baselines

    if spec in baselines.REGISTRY:
        return "baseline"
    if ":" not in spec:
        return "entry_point"
    if spec.partition(":")[0] in LEARNED:
        return "learned"
    return "file" if spec.rpartition(":")[0].endswith(".py") else "module"


def _load_file(path: str):
    """The module in a .py file, under a name made from its resolved path, so loading it twice
    (the check in the parent, the run in a forked worker) gives the same module."""
    p = Path(path).resolve()
    name = f"_dlcluster_user_{p.stem}_{hashlib.sha1(str(p).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    if not p.is_file():
        raise PolicyError(f"policy file {path!r} not found (working directory {Path.cwd()})")
    spec = importlib.util.spec_from_file_location(name, p)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses and pickle look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_module(name: str):
    """`module.path` from sys.path, the working directory last: `python -m dlclusterenv.cli` has it
    on sys.path but the `dlcluster` script (sys.path[0]: the script's folder) has not, and a module
    there must work either way; last, so an installed module of the same name still wins."""
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    return importlib.import_module(name)


def scheduler_class(spec: str) -> type[Scheduler]:
    """The Scheduler subclass a non-learned spec names; PolicyError if there is none."""
    import baselines

    k = kind(spec)
    if k == "baseline":
        return baselines.REGISTRY[spec]
    if k == "learned":
        raise PolicyError(f"{spec!r} is a learned policy; agents.learned runs it")
    if k == "entry_point":
        eps = entry_points()
        if spec not in eps:
            raise PolicyError(f"unknown policy {spec!r}; {did_you_mean(spec, names())}valid: "
                              f"{', '.join(names())} (or KIND:PATH "
                              "for a learned policy, module:Class or path/file.py:Class for your own)")
        try:
            cls = eps[spec].load()
        except Exception as e:
            raise PolicyError(f"policy {spec!r}: entry point {eps[spec].value!r} in group {GROUP!r} "
                              f"fails to load: {type(e).__name__}: {e}") from None
    else:
        where, _, attr = spec.rpartition(":")
        if not where or not attr:
            raise PolicyError(f"policy {spec!r} must be module:Class or path/file.py:Class")
        try:
            module = _load_file(where) if k == "file" else _import_module(where)
        except PolicyError:
            raise
        except Exception as e:
            raise PolicyError(f"policy {spec!r}: cannot import {where!r}: {type(e).__name__}: {e}") from None
        if not hasattr(module, attr):
            raise PolicyError(f"policy {spec!r}: {where!r} has no attribute {attr!r}")
        cls = getattr(module, attr)
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise PolicyError(f"policy {spec!r}: {cls!r} is not a subclass of dlclusterenv.api.Scheduler")
    return cls


def make(spec: str) -> Scheduler:
    """A fresh scheduler for a non-learned spec (in a worker: from the spec string alone)."""
    return scheduler_class(spec)()

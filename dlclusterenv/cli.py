"""`dlcluster`: run and compare schedulers on a scenario.

    dlcluster evaluate --scenario default --policies all --seeds 3 --out runs/default
    dlcluster run --scenario dltap --policy fifo --seed 0
    dlcluster list policies|scenarios|envs
    dlcluster fidelity [pollux FILE --params N --gpu-type T4 --comm allreduce | gavel-pairs FILE] [--json OUT]
    dlcluster train --config configs/agents/smoke.yaml --out runs/smoke [--resume runs/smoke]
    dlcluster benchmark [SUITE] [--check] [--validate LOG] [--policies SPEC,...] [--resume]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from . import ENV_IDS, evaluate, schedulers
from .config import CONFIG_DIR, ConfigError


EPILOG = """exit status: 0 done; 2 usage or configuration error (a bad argument, name, path or
config file), reported before any run starts; 1 a run failed (its traceback is printed); 130
`benchmark` interrupted (Ctrl-C), with one line saying what --out holds."""


class UsageError(ValueError):
    """A bad command-line argument; exit status 2."""


def _out_dir(flag: str, path: str) -> Path:
    """An output directory argument: an existing file there is a usage error, found before any run."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        hint = f"; did you mean --config {path}?" if flag == "train --out" and out.suffix in (".yaml", ".yml") else ""
        raise UsageError(f"{flag} {path}: exists and is a file, not a directory{hint}")
    # the folder it would be made in: a file on the way (or no write permission) ended the command
    # in mkdir's traceback (NotADirectoryError, PermissionError)
    above = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not above.is_dir():
        raise UsageError(f"{flag} {path}: {above} is a file, not a directory")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {above} is not writable")
    return out


def _out_file(flag: str, path: str) -> Path:
    """An output file argument, checked before the work it would hold is done: a directory there,
    or a folder that does not exist or cannot be written, ended the run in a traceback at the
    write, its results lost."""
    out = Path(path)
    parent = out.parent
    if out.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable")
    return out


def _listing(what: str) -> list[str]:
    """`dlcluster list WHAT`."""
    if what == "envs":
        return list(ENV_IDS)
    if what == "scenarios":
        return sorted(p.stem for p in (CONFIG_DIR / "scenarios").glob("*.yaml"))
    return schedulers.names()


def _scenario(a: argparse.Namespace):
    """The scenario with --skip-bad-rows applied; a trace replay's summary (rows selected, skipped,
    dropped by reason, time span, offered load) and its warnings are printed once, here, before
    any run starts."""
    from .workload import prepare, replay_summary

    scenario, trace = prepare(a.scenario, skip_bad_rows=a.skip_bad_rows)
    if trace is not None:
        summary = replay_summary(scenario, trace)
        for line in summary.lines():
            print(line, file=sys.stderr)
        for line in summary.warnings():
            print(f"warning: {line}", file=sys.stderr)
    return scenario


def _exit_on_sigterm(signum, frame) -> None:
    """SIGTERM (kill PID) unwinds like Ctrl-C instead of ending the process on the spot, so the
    finally blocks run: evaluate's pool workers are stopped and its partial output removed."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return _main(argv)
    except BrokenPipeError:
        # `dlcluster list ... | head`: the reader left; end quietly as the Python docs advise
        # (point stdout at devnull so the interpreter's final flush does not raise again).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, except where there is none (None, an off flag)."""

    def _get_help_string(self, action):
        return action.help if action.default is None or action.default is False else super()._get_help_string(action)


def _parser() -> argparse.ArgumentParser:
    from baselines.reproduce import NAMES

    ap = argparse.ArgumentParser(prog="dlcluster", description=__doc__.split("\n")[0], epilog=EPILOG,
                                 formatter_class=_Help)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def cmd(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, epilog=EPILOG, formatter_class=_Help)

    policies = ("a baseline (" + ", ".join(schedulers.names()) + "), ppo:PATH or maskableppo:PATH (a "
                "dlcluster train model.zip), module:Class, path/file.py:Class, or a name registered in "
                f"the entry-point group {schedulers.GROUP}")
    scenarios = f"a preset ({', '.join(_listing('scenarios'))}) or a scenario YAML path"
    ev = cmd("evaluate", "compare policies over seeds; leaderboard, CSVs, plots")
    ev.add_argument("--scenario", default="default", help=scenarios)
    ev.add_argument("--policies", default="all", help=f"all (every baseline) or a comma list; each is {policies}")
    ev.add_argument("--seeds", type=int, default=3, help="seeds per policy")
    ev.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed+seeds-1 (score learned policies on seeds "
                         "they did not train on)")
    ev.add_argument("--out", default="runs/latest", help="directory for the CSVs and plots")
    ev.add_argument("--columns", default="default",
                    help="leaderboard metrics to print: default (" + ",".join(evaluate.DEFAULT_COLUMNS) +
                         "; fits 132 columns), all, or a comma list of " + ",".join(evaluate.COLUMNS) +
                         " (rank, policy and unfinished always; the CSVs hold every metric)")
    ev.add_argument("--workers", type=int, default=0,
                    help="local processes, or CPUs of a Ray cluster started here (0: all cores)")
    ev.add_argument("--backend", choices=evaluate.BACKENDS, default="local",
                    help="local: a process pool; ray: Ray tasks (results identical)")
    ev.add_argument("--ray-address", default=None,
                    help="Ray cluster to join (default: start a local one with ray.init())")
    ev.add_argument("--resume", action="store_true",
                    help="keep the runs already saved in --out/per_run and run only the rest; a saved run of "
                    "another scenario, trace file version or model file/config.yaml content is an error")
    rn = cmd("run", "one seed of one or more policies; prints their metrics side by side")
    for p in (ev, rn):
        p.add_argument("--skip-bad-rows", action="store_true",
                       help="leave malformed trace rows out (and print how many) instead of failing")
    rn.add_argument("--scenario", default="default", help=scenarios)
    rn.add_argument("--policy", default="fifo", help=f"a comma list; each is {policies}")
    rn.add_argument("--seed", type=int, default=0, help="the seed (workload, arrivals, noise)")
    rp = cmd("reproduce", "a seed paper's experiment: its claims beside ours")
    rp.add_argument("name", help=f"one of {', '.join(NAMES)}")
    rp.add_argument("--seeds", type=int, default=3, help="seeds per experiment")
    rp.add_argument("--json", help="write [{claim, paper, simulated, direction_ok, ..., status}] here")
    ls = cmd("list", "list the valid policy names, scenario presets or Gym env ids")
    ls.add_argument("what", choices=["policies", "scenarios", "envs"])
    cmd("envs", "list the registered Gym env ids (same as: list envs)")
    fd = cmd("fidelity", "score the speed model against measured step times")
    fd.add_argument("kind", nargs="?", choices=["pollux", "gavel-pairs"],
                    help="omit to score all of ../shared/profiles")
    fd.add_argument("file", nargs="?", help="pollux: a placements.csv or scalability.csv in Pollux's format; "
                    "gavel-pairs: a throughputs.json in Gavel's")
    fd.add_argument("--params", type=float, help="the model's parameter count")
    fd.add_argument("--gpu-type", default="T4", help="testbed of the measurements (T4: Pollux's)")
    fd.add_argument("--comm", choices=["allreduce", "ps"], default="allreduce",
                    help="how the measured jobs exchange gradients")
    fd.add_argument("--step1", help="file whose one-GPU rows give the compute (default: FILE)")
    fd.add_argument("--json", help="write the scores here")
    tr = cmd("train", "train PPO / MaskablePPO from configs/agents/*.yaml")
    agents = ", ".join(sorted(p.stem for p in (CONFIG_DIR / "agents").glob("*.yaml")))
    tr.add_argument("--config", help=f"training YAML, e.g. configs/agents/NAME.yaml with NAME one of {agents}")
    tr.add_argument("--out", help="run directory: config.yaml, tb/, checkpoints/, model.zip")
    tr.add_argument("--resume", help="continue the run in this directory from its last checkpoint")
    bm = cmd("benchmark", "a frozen suite: reference rows, normalised scores, validity")
    bm.add_argument("suite", nargs="?", default="v2", help="configs/benchmarks/NAME.yaml or a path")
    bm.add_argument("--check", action="store_true", help="print the validity report only")
    bm.add_argument("--validate", metavar="LOG", help="replay a decision log (or a folder of them; hidden folders such as a benchmark's .staging are skipped)")
    bm.add_argument("--policies", help="learned policies KIND:PATH or your own schedulers (module:Class, "
                    "path/file.py:Class, an entry point), scored on the test split")
    bm.add_argument("--out", help="default runs/benchmark/SUITE")
    bm.add_argument("--workers", type=int, default=1, help="processes (0: one per core)")
    bm.add_argument("--resume", action="store_true",
                    help="reuse the finished runs in --out whose key and fingerprint (scenario, trace file "
                    "content, the policy's and the engine's source, a learned policy's model file and config.yaml "
                    "content) match: rows of runs.csv "
                    "with their decision log, and runs a killed benchmark left in --out/.staging; run the rest")
    return ap


def _main(argv: list[str] | None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.cmd in ("envs", "list"):
            print("\n".join(_listing(getattr(a, "what", "envs"))))
        elif a.cmd == "reproduce":
            from baselines import reproduce

            if a.name not in reproduce.NAMES:
                raise UsageError(f"unknown experiment {a.name!r}; {schedulers.did_you_mean(a.name, reproduce.NAMES)}"
                                 f"valid: {', '.join(reproduce.NAMES)}")
            if a.seeds < 1:  # was a traceback in four experiments, one seed in the other two
                raise UsageError(f"--seeds must be at least 1, got {a.seeds}")
            if a.json:
                _out_file("--json", a.json)
            claims = reproduce.run(a.name, a.seeds)
            w = max(len(c.claim) for c in claims)
            print(f"{'claim':<{w}}  {'paper':>14}  {'simulated':>14}  status")
            for c in claims:
                tag = " (testbed)" if c.kind == "testbed" else ""
                print(f"{c.claim:<{w}}  {c.paper:>14}  {c.simulated:>14}  {c.status}{tag}")
            if a.json:
                import json

                path = Path(a.json)
                fd, tmp = tempfile.mkstemp(dir=path.parent)
                try:
                    with os.fdopen(fd, "w") as f:
                        json.dump([c.row() for c in claims], f, indent=2)
                    os.replace(tmp, path)
                finally:
                    if os.path.exists(tmp):  # the replace failed: no stray temp file left beside it
                        os.unlink(tmp)
        elif a.cmd == "fidelity":
            from .fidelity import FidelityError, cli

            pollux_only = [f for f, given in (("--params", a.params is not None), ("--step1", a.step1),
                                              ("--gpu-type", a.gpu_type != "T4"), ("--comm", a.comm != "allreduce"))
                           if given]
            if pollux_only and a.kind != "pollux":  # they were ignored: the files scored with their own
                what = f"`fidelity {a.kind}`" if a.kind else "`fidelity` alone (the shared profiles)"
                raise UsageError(f"{', '.join(pollux_only)}: only for `fidelity pollux FILE`, not {what}")
            if a.json:
                _out_file("--json", a.json)
            try:
                cli(a.kind, a.file, a.params, a.gpu_type, a.comm, a.step1, a.json)
            except FidelityError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
        elif a.cmd == "benchmark":
            from .benchmark import cli

            if a.out:
                _out_dir("benchmark --out", a.out)
            return cli(a.suite, a.out, a.check, a.validate, a.workers, a.policies, a.resume)
        elif a.cmd == "train":
            from agents.train import train_cli

            if a.out:
                _out_dir("train --out", a.out)
            train_cli(a.config, a.out, a.resume)
        elif a.cmd == "run":
            if a.seed < 0:  # numpy refuses a negative seed, in a traceback after the scenario loaded
                raise UsageError(f"--seed must be 0 or more, got {a.seed}")
            policies = evaluate.resolve_policies(a.policy, "--policy")
            scenario = _scenario(a)
            rows = {}
            for p in policies:
                r = evaluate.run_one(scenario, p, a.seed)
                rows[p] = {**r.summary, "decision_latency_ms": r.latency_ms}
            w = max(12, *(len(p) for p in policies))
            print(f"{'':>20}  " + "  ".join(f"{p:>{w}}" for p in policies))
            for k in rows[policies[0]]:
                print(f"{k:>20}: " + "  ".join(f"{rows[p][k]:>{w},.4g}" for p in policies))
        else:
            out = _out_dir("evaluate --out", a.out)
            columns = evaluate.resolve_columns(a.columns)
            policies = evaluate.resolve_policies(a.policies)
            board = evaluate.evaluate(_scenario(a), policies, a.seeds, out, workers=a.workers,
                                      backend=a.backend, ray_address=a.ray_address,
                                      first_seed=a.first_seed, resume=a.resume)
            evaluate.print_leaderboard(
                board, f"scenario {a.scenario}, {a.seeds} seeds from {a.first_seed}; mean ± 95% interval; ranked by avg JCT "
                "(policies leaving jobs unfinished last, never marked best)", columns=columns)
            print(f"wrote {out}/runs.csv, jobs.csv, timing.csv (wall clock) and the plots "
                  "jct.png, queueing.png, utilisation.png, pending.png, traffic.png, locality.png")
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except (evaluate.EvaluateError, evaluate.PolicyError, UsageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

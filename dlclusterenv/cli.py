"""`dlcluster`: run and compare schedulers on a scenario.

    dlcluster evaluate --scenario default --policies all --seeds 3 --out runs/default
    dlcluster run --scenario dltap --policy fifo --seed 0
    dlcluster envs
    dlcluster fidelity [pollux FILE --params N --gpu-type T4 --comm allreduce] [--json OUT]
    dlcluster train --config configs/agents/smoke.yaml --out runs/smoke [--resume runs/smoke]
    dlcluster benchmark [SUITE] [--check] [--validate LOG] [--policies KIND:PATH,...]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

from . import ENV_IDS, evaluate
from .config import ConfigError


def _policies(spec: str) -> list[str]:
    """Baseline names and KIND:PATH learned-policy specs; a bad one exits listing the valid names."""
    try:
        return evaluate.resolve_policies(spec)
    except evaluate.PolicyError as e:
        raise SystemExit(str(e)) from None


def _scenario(a: argparse.Namespace):
    """The scenario with --skip-bad-rows applied; a trace replay's counts (rows selected, skipped,
    dropped) are printed once, here, before any run starts."""
    from .workload import prepare

    scenario, trace = prepare(a.scenario, skip_bad_rows=a.skip_bad_rows)
    if trace is not None:
        print(trace.report(), file=sys.stderr)
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
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="dlcluster", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ev = sub.add_parser("evaluate", help="compare policies over seeds; leaderboard, CSVs, plots")
    ev.add_argument("--scenario", default="default")
    ev.add_argument("--policies", default="all")
    ev.add_argument("--seeds", type=int, default=3)
    ev.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed+seeds-1 (score learned policies on seeds "
                         "they did not train on)")
    ev.add_argument("--out", default="runs/latest")
    ev.add_argument("--workers", type=int, default=0,
                    help="local processes, or CPUs of a Ray cluster started here (0: all cores)")
    ev.add_argument("--backend", choices=evaluate.BACKENDS, default="local",
                    help="local: a process pool; ray: Ray tasks (results identical)")
    ev.add_argument("--ray-address", default=None,
                    help="Ray cluster to join (default: start a local one with ray.init())")
    rn = sub.add_parser("run", help="one policy, one seed; prints the metrics")
    for p in (ev, rn):
        p.add_argument("--skip-bad-rows", action="store_true",
                       help="leave malformed trace rows out (and print how many) instead of failing")
    rn.add_argument("--scenario", default="default")
    rn.add_argument("--policy", default="fifo")
    rn.add_argument("--seed", type=int, default=0)
    rp = sub.add_parser("reproduce", help="a seed paper's experiment: its claims beside ours")
    rp.add_argument("name", help="dltap, d2s, optimus, gandiva, flowcon or drf")
    rp.add_argument("--seeds", type=int, default=3)
    rp.add_argument("--json", help="write [{claim, paper, simulated, direction_ok, ..., status}] here")
    sub.add_parser("envs", help="list the registered Gym env ids")
    fd = sub.add_parser("fidelity", help="score the speed model against measured step times")
    fd.add_argument("kind", nargs="?", choices=["pollux"], help="omit to score all of ../shared/profiles")
    fd.add_argument("file", nargs="?", help="a placements.csv or scalability.csv in Pollux's format")
    fd.add_argument("--params", type=float, help="the model's parameter count")
    fd.add_argument("--gpu-type", default="T4", help="testbed of the measurements (T4: Pollux's)")
    fd.add_argument("--comm", choices=["allreduce", "ps"], default="allreduce")
    fd.add_argument("--step1", help="file whose one-GPU rows give the compute (default: FILE)")
    fd.add_argument("--json", help="write the scores here")
    tr = sub.add_parser("train", help="train PPO / MaskablePPO from configs/agents/*.yaml")
    tr.add_argument("--config", help="training YAML (configs/agents/NAME.yaml)")
    tr.add_argument("--out", help="run directory: config.yaml, tb/, checkpoints/, model.zip")
    tr.add_argument("--resume", help="continue the run in this directory from its last checkpoint")
    bm = sub.add_parser("benchmark", help="a frozen suite: reference rows, normalised scores, validity")
    bm.add_argument("suite", nargs="?", default="v1", help="configs/benchmarks/NAME.yaml or a path")
    bm.add_argument("--check", action="store_true", help="print the validity report only")
    bm.add_argument("--validate", metavar="LOG", help="replay a decision log (or a folder of them)")
    bm.add_argument("--policies", help="learned policies KIND:PATH, scored on the test split")
    bm.add_argument("--out", help="default runs/benchmark/SUITE")
    bm.add_argument("--workers", type=int, default=1, help="processes")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "envs":
            print("\n".join(ENV_IDS))
        elif a.cmd == "reproduce":
            from baselines import reproduce

            claims = reproduce.run(a.name, a.seeds)
            w = max(len(c.claim) for c in claims)
            print(f"{'claim':<{w}}  {'paper':>14}  {'simulated':>14}  status")
            for c in claims:
                tag = " (testbed)" if c.kind == "testbed" else ""
                print(f"{c.claim:<{w}}  {c.paper:>14}  {c.simulated:>14}  {c.status}{tag}")
            if a.json:
                import json

                path = Path(a.json)
                fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".")
                with os.fdopen(fd, "w") as f:
                    json.dump([c.row() for c in claims], f, indent=2)
                os.replace(tmp, path)
        elif a.cmd == "fidelity":
            from .fidelity import FidelityError, cli

            try:
                cli(a.kind, a.file, a.params, a.gpu_type, a.comm, a.step1, a.json)
            except FidelityError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
        elif a.cmd == "benchmark":
            from .benchmark import cli

            return cli(a.suite, a.out, a.check, a.validate, a.workers, a.policies)
        elif a.cmd == "train":
            from agents.train import train_cli

            train_cli(a.config, a.out, a.resume)
        elif a.cmd == "run":
            r = evaluate.run_one(_scenario(a), _policies(a.policy)[0], a.seed)
            for k, v in {**r.summary, "decision_latency_ms": r.latency_ms}.items():
                print(f"{k:>20}: {v:,.4g}")
        else:
            out = Path(a.out)
            board = evaluate.evaluate(_scenario(a), _policies(a.policies), a.seeds, out, workers=a.workers,
                                      backend=a.backend, ray_address=a.ray_address,
                                      first_seed=a.first_seed)
            evaluate.print_leaderboard(
                board, f"scenario {a.scenario}, {a.seeds} seeds from {a.first_seed}; mean ± 95% interval; ranked by avg JCT "
                "(policies leaving jobs unfinished last)")
            print(f"wrote {out}/runs.csv, jobs.csv, timing.csv (wall clock) and the plots "
                  "jct.png, utilisation.png, traffic.png, locality.png")
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except evaluate.EvaluateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

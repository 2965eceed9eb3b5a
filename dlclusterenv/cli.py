"""`dlcluster`: run and compare schedulers on a scenario.

    dlcluster evaluate --scenario default --policies all --seeds 3 --out runs/default
    dlcluster run --scenario dltap --policy fifo --seed 0
    dlcluster envs
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from . import ENV_IDS, make_sim
from .config import ConfigError


def _policies(spec: str) -> list[str]:
    import baselines

    names = baselines.names() if spec == "all" else [p.strip() for p in spec.split(",") if p.strip()]
    for n in names:
        if n not in baselines.REGISTRY:
            raise SystemExit(f"unknown policy {n!r}; valid: {', '.join(baselines.names())}")
    return names


def _write_csv(path: Path, rows: list[dict]) -> None:
    """Atomic: write a temporary file beside the target, then rename over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _ci95(x: np.ndarray) -> float:
    """Half-width of a 95% interval of the mean (normal approximation; 0 for one seed)."""
    return 1.96 * float(x.std(ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else 0.0


def _one_run(scenario: str, pol: str, seed: int) -> tuple[dict, list[dict], tuple]:
    """One policy x seed: its runs.csv row, its jobs.csv rows and its utilisation timeline."""
    import baselines

    m = make_sim(scenario, seed).run(baselines.make(pol))
    run = {"policy": pol, "seed": seed, **m.summary(), "decision_latency_ms": m.decision_latency_ms}
    return run, [{"policy": pol, "seed": seed, **asdict(r)} for r in m.jobs], m.timeline


def evaluate(scenario: str, policies: list[str], seeds: int, out: Path, workers: int = 0) -> list[dict]:
    """Every policy x seed, spread over `workers` processes (0: one per core); results are
    collected in policy x seed order, so the files do not depend on which run ends first."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm import tqdm

    out.mkdir(parents=True, exist_ok=True)
    tasks = [(p, s) for p in policies for s in range(seeds)]
    done: dict[tuple[str, int], tuple[dict, list[dict], tuple]] = {}
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count()) as pool:
        futures = {pool.submit(_one_run, scenario, p, s): (p, s) for p, s in tasks}
        for f in tqdm(as_completed(futures), total=len(tasks), desc="runs", file=sys.stderr):
            done[futures[f]] = f.result()
    runs = [done[t][0] for t in tasks]
    jobs = [row for t in tasks for row in done[t][1]]
    _write_csv(out / "runs.csv", runs)
    _write_csv(out / "jobs.csv", jobs)
    board = []
    for pol in policies:
        rs = [r for r in runs if r["policy"] == pol]
        row = {"policy": pol}
        for k in ("avg_jct_s", "makespan_s", "cross_node_gb", "gpu_util", "jain_index"):
            x = np.array([r[k] for r in rs], dtype=float)
            row[k] = (float(x.mean()), _ci95(x))
        row["unfinished"] = sum(r["jobs_unfinished"] for r in rs)
        board.append(row)
    board.sort(key=lambda r: r["avg_jct_s"][0])
    _plots(out, policies, runs, jobs, {p: done[(p, 0)][2] for p in policies})
    return board


def _save(fig, out: Path, name: str) -> None:
    """Atomic PNG write: a temporary file beside the target, then a rename."""
    fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".png")
    os.close(fd)
    fig.savefig(tmp, dpi=100)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out / f"{name}.png")


def _plots(out: Path, policies: list[str], runs: list[dict], jobs: list[dict], timelines: dict) -> None:
    """jct.png (CDF and bars of avg JCT and makespan with 95% intervals), utilisation.png (GPU use
    over time, seed 0), traffic.png (cross-node / cross-rack GB), locality.png (data-local,
    rack-local, off-switch fractions)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def per(key: str, scale: float = 1.0):
        xs = [np.array([r[key] for r in runs if r["policy"] == p], dtype=float) / scale for p in policies]
        return [x.mean() for x in xs], [_ci95(x) for x in xs]

    plt.rcParams["axes.prop_cycle"] = plt.cycler(color=plt.cm.tab20.colors)  # 16+ policies
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.5))
    for pol in policies:
        x = np.sort([j["jct_s"] for j in jobs if j["policy"] == pol])
        a.plot(x / 3600, np.arange(1, len(x) + 1) / len(x), label=pol)
    a.set(xlabel="JCT (h)", ylabel="CDF of jobs", title="Job completion time")
    a.legend(fontsize=7)
    for ax, key, title in ((b, "avg_jct_s", "Average JCT (h)"), (c, "makespan_s", "Makespan (h)")):
        m, e = per(key, 3600)
        ax.bar(policies, m, yerr=e, capsize=3)
        ax.set(title=f"{title}, 95% interval over seeds")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
    fig.tight_layout()
    _save(fig, out, "jct")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    for pol in policies:
        tl = np.array(timelines[pol]) if timelines.get(pol) else np.zeros((0, 5))
        if len(tl):
            ax.step(tl[:, 0] / 3600, tl[:, 2], where="post", label=pol, lw=1)
    ax.set(xlabel="time (h)", ylabel="GPUs busy (fraction)", title="GPU utilisation, seed 0")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    _save(fig, out, "utilisation")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    x = np.arange(len(policies))
    for k, (key, label) in enumerate((("cross_node_gb", "across nodes"), ("cross_rack_gb", "across racks"))):
        m, e = per(key)
        ax.bar(x + 0.4 * k, m, 0.4, yerr=e, capsize=3, label=label)
    ax.set_xticks(x + 0.2, policies, rotation=60, fontsize=7)
    ax.set(ylabel="GB per run", title="Network traffic, 95% interval over seeds")
    ax.legend()
    fig.tight_layout()
    _save(fig, out, "traffic")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4))
    bottom = np.zeros(len(policies))
    for key, label in (("data_local_frac", "data-local"), ("rack_local_frac", "rack-local"),
                       ("off_switch_frac", "off-switch")):
        m, _ = per(key)
        ax.bar(policies, m, bottom=bottom, label=label)
        bottom += np.array(m)
    ax.set(ylabel="fraction of worker starts", title="Input locality (D²S Table 1 classes)")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax.legend()
    fig.tight_layout()
    _save(fig, out, "locality")
    plt.close(fig)


def _print_board(board: list[dict]) -> None:
    cols = ("avg_jct_s", "makespan_s", "cross_node_gb", "gpu_util", "jain_index")
    better = {"avg_jct_s": min, "makespan_s": min, "cross_node_gb": min, "gpu_util": max, "jain_index": max}
    best = {c: better[c](r[c][0] for r in board) for c in cols}
    bold = sys.stdout.isatty()
    head = f"{'rank':<5}{'policy':<12}" + "".join(f"{c:>24}" for c in cols) + f"{'unfinished':>12}"
    print(head)
    for i, r in enumerate(board, 1):
        cells = []
        for c in cols:
            m, h = r[c]
            s = f"{m:,.3f} ± {h:,.3f}" if abs(m) < 10 else f"{m:,.0f} ± {h:,.0f}"
            s = f"{s:>24}"
            if bold and m == best[c]:
                s = f"\033[1m{s}\033[0m"
            cells.append(s)
        print(f"{i:<5}{r['policy']:<12}" + "".join(cells) + f"{r['unfinished']:>12}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dlcluster", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ev = sub.add_parser("evaluate", help="compare policies over seeds; leaderboard, CSVs, plots")
    ev.add_argument("--scenario", default="default")
    ev.add_argument("--policies", default="all")
    ev.add_argument("--seeds", type=int, default=3)
    ev.add_argument("--out", default="runs/latest")
    ev.add_argument("--workers", type=int, default=0, help="processes (0: one per core)")
    rn = sub.add_parser("run", help="one policy, one seed; prints the metrics")
    rn.add_argument("--scenario", default="default")
    rn.add_argument("--policy", default="fifo")
    rn.add_argument("--seed", type=int, default=0)
    rp = sub.add_parser("reproduce", help="a seed paper's experiment: its claims beside ours")
    rp.add_argument("name", help="dltap, d2s, optimus, gandiva, flowcon or drf")
    rp.add_argument("--seeds", type=int, default=3)
    rp.add_argument("--json", help="write [{claim, paper, simulated, direction_ok}] here")
    sub.add_parser("envs", help="list the registered Gym env ids")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "envs":
            print("\n".join(ENV_IDS))
        elif a.cmd == "reproduce":
            from baselines import reproduce

            claims = reproduce.run(a.name, a.seeds)
            w = max(len(c.claim) for c in claims)
            print(f"{'claim':<{w}}  {'paper':>14}  {'simulated':>14}  direction")
            for c in claims:
                print(f"{c.claim:<{w}}  {c.paper:>14}  {c.simulated:>14}  {'ok' if c.direction_ok else 'WRONG'}")
            if a.json:
                import json

                path = Path(a.json)
                fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".")
                with os.fdopen(fd, "w") as f:
                    json.dump([c.row() for c in claims], f, indent=2)
                os.replace(tmp, path)
        elif a.cmd == "run":
            import baselines

            pol = _policies(a.policy)[0]
            m = make_sim(a.scenario, a.seed).run(baselines.make(pol))
            for k, v in m.summary().items():
                print(f"{k:>20}: {v:,.4g}")
        else:
            out = Path(a.out)
            board = evaluate(a.scenario, _policies(a.policies), a.seeds, out, a.workers)
            print(f"\nscenario {a.scenario}, {a.seeds} seeds; mean ± 95% interval; ranked by avg JCT")
            _print_board(board)
            print(f"\nwrote {out}/runs.csv, {out}/jobs.csv and the plots {out}/"
                  "{jct,utilisation,traffic,locality}.png")
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The evaluation plots (evaluate.plots saves them): jct.png, queueing.png, utilisation.png, pending.png, traffic.png and
locality.png, written by `dlcluster evaluate`.

Every plot gives a policy the same colour and line style (`styles`: the policies sorted by name,
matplotlib's qualitative tab10 for the hue, then a line style / hatch per further ten), so a
policy is found by one look across files; titles name the scenario and the seeds."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .metrics import ci95

if TYPE_CHECKING:
    from .evaluate import RunResult

LINES = ("-", "--", ":", "-.")
HATCHES = ("", "//", "..", "xx")
MAX_POLICIES = 10 * len(LINES)


def styles(policies: Sequence[str]) -> dict[str, dict]:
    """policy -> {color, linestyle, hatch}: fixed by the sorted policy names, not by their order
    on the leaderboard (which changes with the results)."""
    import matplotlib

    if len(policies) > MAX_POLICIES:
        raise ValueError(f"plots: {len(policies)} policies; at most {MAX_POLICIES} have distinct styles")
    hues = matplotlib.colormaps["tab10"].colors
    return {p: {"color": hues[i % 10], "linestyle": LINES[i // 10], "hatch": HATCHES[i // 10]}
            for i, p in enumerate(sorted(policies))}


def _seeds(results: list[RunResult]) -> str:
    s = sorted({r.seed for r in results})
    if not s:
        return "no seeds"
    if s == list(range(s[0], s[-1] + 1)) and len(s) > 2:
        return f"seeds {s[0]}-{s[-1]}"
    return "seed " + ", ".join(map(str, s)) if len(s) == 1 else "seeds " + ", ".join(map(str, s))


def censored_cdf(jobs: list[dict], key: str = "jct_s") -> tuple[np.ndarray, np.ndarray]:
    """(sorted values of the jobs that have one, fraction of all jobs at or below each): a job left
    unfinished has no JCT, and one never started no queueing delay, only a lower bound, so it is
    censored (never a step) and the curve ends below 1 instead of drawing it as done at the end."""
    def known(j: dict) -> bool:
        return j["finished"] if key == "jct_s" else not math.isnan(j["first_start_s"])

    x = np.sort([j[key] for j in jobs if known(j)])
    return x, np.arange(1, len(x) + 1) / max(len(jobs), 1)


def _end(r: RunResult) -> float:
    """When the run stopped: its last simulated interval, else its last arrival or finish."""
    if r.timeline:
        return float(r.timeline[-1][1])
    times = [j["arrival_s"] for j in r.jobs] + [j["finish_s"] for j in r.jobs if j["finished"]]
    return max(times, default=0.0)


def _small_multiples(plt, policies: list[str], draw: Callable, suptitle: str, ylabel: str):
    """One panel per policy (leaderboard order), shared axes: 17 lines on one axes are unreadable."""
    n = max(len(policies), 1)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.3 * rows + 0.6), sharex=True,
                             sharey=True, squeeze=False)
    for ax, pol in zip(axes.flat, policies):
        draw(ax, pol)
        ax.set_title(pol, fontsize=9)
    for ax in list(axes.flat)[len(policies):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("time (h)")
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def figures(policies: list[str], results: list[RunResult], scenario: str = "") -> dict:
    """name -> matplotlib Figure of the six plots. `policies` in leaderboard order (bars, panels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sty = styles(policies)
    where = f"scenario {scenario}, {_seeds(results)}" if scenario else _seeds(results)
    runs = {p: [r for r in results if r.policy == p] for p in policies}

    figs: dict = {}

    def per(key: str, scale: float = 1.0):
        xs = [np.array([r.summary[key] for r in runs[p]], dtype=float) / scale for p in policies]
        return np.array([x.mean() if len(x) else 0.0 for x in xs]), np.array([ci95(x) for x in xs])

    unfinished = {p: sum(int(r.summary["jobs_unfinished"]) for r in runs[p]) for p in policies}

    def bars(ax, key: str, scale: float, title: str) -> None:
        """Means with their intervals; these metrics are >= 0, so the lower whisker stops at 0. A
        policy that left jobs unfinished has only a lower bound: its bar is black cross-hatched."""
        m, e = per(key, scale)
        for i, p in enumerate(policies):
            cut = unfinished[p] > 0
            ax.bar(i, m[i], yerr=[[min(e[i], m[i])], [e[i]]], capsize=3, color=sty[p]["color"],
                   hatch="xx" if cut else sty[p]["hatch"], edgecolor="black" if cut else "white")
        ax.set_xticks(range(len(policies)), policies, rotation=60, ha="right", fontsize=7)
        note = "\nblack cross-hatched: jobs unfinished, a lower bound" if any(unfinished.values()) else ""
        ax.set(title=f"{title}, 95% interval over seeds{note}")

    def cdf(ax, key: str, xlabel: str, title: str) -> None:
        for p in policies:
            x, y = censored_cdf([j for r in runs[p] for j in r.jobs], key)
            label = f"{p} ({unfinished[p]} unfinished)" if unfinished[p] else p
            ax.plot(x / 3600, y, label=label, lw=1.3, color=sty[p]["color"],
                    linestyle=sty[p]["linestyle"])
        ax.set(xlabel=xlabel, ylabel="fraction of jobs", title=title)

    def legend(fig, ax) -> None:
        """Below the axes row, off the data."""
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8,
                       frameon=False)

    # jct.png: CDF over all jobs and seeds, bars of avg JCT and makespan
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 5.2))
    cdf(a, "jct_s", "JCT (h)", "Job completion time (unfinished jobs censored:\nthe curve ends below 1)")
    bars(b, "avg_jct_s", 3600, "Average JCT (h)")
    bars(c, "makespan_s", 3600, "Makespan (h)")
    fig.suptitle(f"Job completion time: {where}")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    legend(fig, a)
    figs["jct"] = fig

    # queueing.png: time from arrival to first start (bars: avg_queue_s, where a job never started
    # counts to the run's end)
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.2))
    cdf(a, "queue_s", "queueing delay (h)", "Arrival to first start (jobs never started\ncensored: the curve ends below 1)")
    bars(b, "avg_queue_s", 3600, "Average queueing delay (h)")
    fig.suptitle(f"Queueing delay: {where}")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    legend(fig, a)
    figs["queueing"] = fig

    # utilisation.png: GPU use over time on the first seed evaluated (timelines differ per seed)
    first = min((r.seed for r in results), default=0)

    def util(ax, pol: str) -> None:
        for r in runs[pol]:
            if r.seed == first and r.timeline:
                tl = np.array(r.timeline)
                ax.step(tl[:, 0] / 3600, tl[:, 2], where="post", lw=1, color=sty[pol]["color"])
        ax.set_ylim(0, 1.05)

    fig = _small_multiples(plt, policies, util, f"GPU utilisation: scenario {scenario}, seed {first}"
                           if scenario else f"GPU utilisation, seed {first}", "GPUs busy")
    figs["utilisation"] = fig

    # pending.png: jobs arrived and not yet started, mean over seeds on a common grid
    horizon = max((_end(r) for r in results), default=0.0)
    grid = np.linspace(0.0, horizon, 400) if horizon > 0 else np.zeros(1)

    def pending(ax, pol: str) -> None:
        counts = []
        for r in runs[pol]:
            arr = np.array([j["arrival_s"] for j in r.jobs], dtype=float)
            start = np.array([j["first_start_s"] for j in r.jobs], dtype=float)
            start = np.where(np.isnan(start), np.inf, start)
            c = ((arr[None, :] <= grid[:, None]) & (grid[:, None] < start[None, :])).sum(1)
            counts.append(np.where(grid <= _end(r), c, 0))
        if counts:
            ax.plot(grid / 3600, np.mean(counts, axis=0), lw=1.2, color=sty[pol]["color"])

    fig = _small_multiples(plt, policies, pending,
                           f"Jobs waiting for their first start (mean over seeds): {where}", "jobs")
    figs["pending"] = fig

    # traffic.png: log scale (policies differ by orders of magnitude), intervals clipped above 0
    fig, ax = plt.subplots(figsize=(11, 4.8))
    x = np.arange(len(policies))
    tiny = None
    zero = {}  # key -> policies with no traffic, annotated "0" below the log axis
    for k, (key, label, marker) in enumerate((("cross_node_gb", "across nodes", "o"),
                                              ("cross_rack_gb", "across racks", "s"))):
        m, e = per(key)
        zero[key] = np.flatnonzero(m <= 0)
        pos = m > 0
        lo = np.minimum(e, m * 0.9)  # a lower bound at or below 0 has no place on a log axis
        for i in np.flatnonzero(pos):
            p = policies[i]
            eb = ax.errorbar(x[i] + 0.15 * (2 * k - 1), m[i], yerr=[[lo[i]], [e[i]]], fmt=marker,
                             color=sty[p]["color"], capsize=3, ms=6,
                             mfc=sty[p]["color"] if k == 0 else "white")
            eb[2][0].set_linestyle(sty[p]["linestyle"])
        if pos.any():
            low = (m - lo)[pos].min()
            tiny = low if tiny is None else min(tiny, low)
        ax.plot([], [], marker, color="grey", mfc="grey" if k == 0 else "white", label=label)
    ax.set_xticks(x, policies, rotation=60, ha="right", fontsize=7)
    for i, p in enumerate(policies):
        ax.get_xticklabels()[i].set_color(sty[p]["color"])
    if tiny is not None:
        ax.set_yscale("log")
        for k, key in enumerate(("cross_node_gb", "cross_rack_gb")):
            for i in zero[key]:
                ax.annotate("0", (x[i] + 0.15 * (2 * k - 1), tiny / 2), ha="center", fontsize=7)
        ax.set_ylim(bottom=tiny / 3)
    ax.set(ylabel="GB per run (log)", title=f"Network traffic, 95% interval over seeds: {where}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    figs["traffic"] = fig

    # locality.png: stacked fractions per policy
    fig, ax = plt.subplots(figsize=(11, 4.8))
    bottom = np.zeros(len(policies))
    for (key, label), shade in zip((("data_local_frac", "data-local"), ("rack_local_frac", "rack-local"),
                                    ("off_switch_frac", "off-switch")), ("#4c72b0", "#dd8452", "#c44e52")):
        m, _ = per(key)
        ax.bar(x, m, bottom=bottom, label=label, color=shade)
        bottom += m
    ax.set_xticks(x, policies, rotation=60, ha="right", fontsize=7)
    ax.set(ylabel="fraction of worker starts", title=f"Input locality (D²S Table 1 classes): {where}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    figs["locality"] = fig
    return figs


def shape_choices(records: Sequence[dict], shapes: Sequence[tuple[int, int]], title: str = "",
                  labels: Sequence[str] | None = None):
    """A learned allocation policy's chosen shapes across states (issue 15: show that it decides):
    the share of each shape among its decisions, by jobs waiting and by free GPUs when it chose,
    and by the GPUs the job asked for where the records have "job_gpus" (DLClusterGrow-v0's).
    `records`: one dict per decision with "waiting", "free_gpus" and "shape" (an index of `shapes`);
    `labels`: the legend's name of each choice (default "p PS x w workers")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names_of = list(labels) if labels is not None else [f"{p} PS x {w} workers" for p, w in shapes]
    hues = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, len(names_of)))
    panels = [("waiting", (0, 2, 5, 10, 20, 40, math.inf), "jobs waiting"),
              ("free_gpus", (0, 4, 8, 16, 32, 48, math.inf), "free GPUs")]
    if records and all("job_gpus" in r for r in records):
        panels.append(("job_gpus", (0, 2, 3, 5, 9, 17, math.inf), "GPUs the job asked for"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.6))
    for ax, (key, edges, label) in zip(axes, panels):
        x = np.array([r[key] for r in records], dtype=float)
        k = np.array([r["shape"] for r in records], dtype=int)
        bins = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if ((x >= lo) & (x < hi)).any()]
        names = [f"{lo:g}+" if hi == math.inf else f"{lo:g}-{hi - 1:g}" for lo, hi in bins]
        bottom = np.zeros(len(bins))
        for s, name in enumerate(names_of):
            share = np.array([np.mean(k[(x >= lo) & (x < hi)] == s) for lo, hi in bins])
            ax.bar(range(len(bins)), share, bottom=bottom, color=hues[s], label=name)
            bottom += share
        counts = [int(((x >= lo) & (x < hi)).sum()) for lo, hi in bins]
        ax.set_xticks(range(len(bins)), [f"{n}\n({c})" for n, c in zip(names, counts)], fontsize=8)
        ax.set(xlabel=f"{label} at the decision (decisions)", ylabel="share of decisions", ylim=(0, 1))
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title or f"Shapes chosen over {len(records)} decisions")
    fig.tight_layout()
    return fig

"""`render_mode="rgb_array"` frames: the cluster as racks of nodes, each node a row of one CPU cell
(shaded by the share of its cores in use) and one cell per GPU (coloured by the job on it, a
white dot where GPU time-slicing or packing puts several tasks), beside the visible jobs in that
colour with their state, under a title with the simulated time.

Drawn with matplotlib's Agg canvas on a Figure of its own (no pyplot state, so envs in threads or
processes do not share one); the cells are one image rather than a patch each. The frame size is fixed by the cluster (960 wide, at least 480
high: a size a video shows); every frame of an episode has it."""

from __future__ import annotations

import colorsys
import math

import numpy as np

WIDTH_PX, MIN_HEIGHT_PX, DPI = 960, 480, 80
AX_W, AX_H = 0.62, 0.86  # the cluster's share of the frame
MIN_CELL_PX = 6
MAX_LISTED = 18
EMPTY, ABSENT = (0.88, 0.88, 0.88), (1.0, 1.0, 1.0)


def job_colour(k: int) -> tuple[float, float, float]:
    """Colour of the k-th job to arrive: hues a golden angle apart, so neighbours in arrival order
    differ most and no two of the first few dozen jobs look alike."""
    r, g, b = colorsys.hsv_to_rgb((k * 0.618034) % 1.0, 0.65, 0.9 - 0.25 * ((k // 7) % 2))
    return r, g, b


def _layout(cluster):
    """(row, column) of each node's CPU cell, and the grid's size: racks side by side, bands of
    racks stacked, as many racks to a band as make the cells largest in the frame."""
    best = max(range(1, cluster.n_racks + 1), key=lambda k: (_cell_px(cluster, k), k))
    return _grid(cluster, best)


def _cell_px(cluster, per_band: int) -> float:
    _, grid_h, grid_w, _, _, _ = _grid(cluster, per_band)
    return min(AX_W * WIDTH_PX / max(grid_w, 1), AX_H * MIN_HEIGHT_PX / grid_h)


def _grid(cluster, per_band: int):
    gpus = max(int(cluster.gpus.max()), 0) if cluster.n_nodes else 0
    block_w = 1 + gpus + 1  # CPU cell, GPU cells, gap
    rows_per_rack = np.bincount(cluster.node_rack, minlength=cluster.n_racks)
    block_h = int(rows_per_rack.max()) + 1  # a gap row for the rack label
    cols = min(cluster.n_racks, per_band)
    bands = math.ceil(cluster.n_racks / per_band)
    seen = np.zeros(cluster.n_racks, int)
    place = []
    for i in range(cluster.n_nodes):
        r = int(cluster.node_rack[i])
        band, col = divmod(r, per_band)
        place.append((band * block_h + 1 + seen[r], col * block_w))
        seen[r] += 1
    return place, bands * block_h, cols * block_w - 1, block_w, block_h, per_band


def frame(env) -> np.ndarray:
    """The picture of `env`'s state now, (H, W, 3) uint8."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sim, c = env.sim, env.cluster
    place, grid_h, grid_w, block_w, block_h, per_band = _layout(c)
    order = {jid: k for k, jid in enumerate(sim.jobs)}
    img = np.ones((grid_h, max(grid_w, 1), 3))
    shared = []
    for i, (y, x) in enumerate(place):
        use = min(sim.used_cpu[i] / c.cpus[i], 1.0) if c.cpus[i] > 0 else 0.0
        img[y, x] = (0.93 - 0.7 * use, 0.95 - 0.6 * use, 1 - 0.15 * use)  # pale to dark blue
        for s in range(int(c.gpus[i])):
            owners = sim.gpu_tasks[c.gpu_base[i] + s]
            img[y, x + 1 + s] = job_colour(order[owners[0].rpartition("/")[0]]) if owners else EMPTY
            if len(owners) > 1:
                shared.append((x + 1 + s, y))
        img[y, x + 1 + int(c.gpus[i]): x + block_w - 1] = ABSENT

    # a cluster too big for MIN_CELL_PX cells at the minimum height gets a taller frame
    cell = AX_W * WIDTH_PX / max(grid_w, 1)
    height_in = max(MIN_HEIGHT_PX, min(cell, MIN_CELL_PX) * grid_h / AX_H) / DPI
    fig = Figure(figsize=(WIDTH_PX / DPI, height_in), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.02, 0.02, AX_W, AX_H))
    ax.imshow(img, interpolation="nearest", aspect="equal")  # square cells
    ax.set_anchor("NW")
    if shared:
        ax.scatter(*zip(*shared), s=6, c="white")
    for r in range(c.n_racks):
        band, col = divmod(r, per_band)
        ax.text(col * block_w - 0.5, band * block_h + 0.4, f"rack {r}", fontsize=8, va="center")
    ax.set_xticks(np.arange(-0.5, grid_w, 1), minor=True)  # white lines between cells
    ax.set_yticks(np.arange(-0.5, grid_h, 1), minor=True)
    ax.grid(which="minor", color="white", lw=1.2)
    ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)

    active = sim.active_jobs()
    done = len(sim.jobs) - len(active)
    fig.text(0.02, 0.975, f"{env.scenario.name}   t = {sim.now / 3600:.2f} h ({sim.now:,.0f} s)   "
             f"decision {env.decision_index}", fontsize=12, weight="bold", va="top")
    fig.text(0.02, 0.925, f"{c.n_nodes} nodes, {c.n_gpus} GPUs   jobs: {len(active)} active, "
             f"{done} done, {len(sim.specs) - len(sim.jobs)} to arrive   cell = GPU (colour = job), "
             "first cell = CPU use", fontsize=8, va="top")
    legend = fig.add_axes((0.66, 0.02, 0.33, 0.86))
    legend.set_axis_off()
    legend.set_xlim(0, 1)
    legend.set_ylim(MAX_LISTED + 1, 0)
    for row, j in enumerate(active[:MAX_LISTED]):
        legend.add_patch(_square(row, job_colour(order[j.job_id])))
        legend.text(0.09, row + 0.5, f"{j.job_id} {j.spec.model}", fontsize=8, va="center")
        legend.text(0.58, row + 0.5, f"{j.status[:7]} {j.num_ps} PS {j.num_workers} W  "
                    f"ep {j.epochs_done}/{j.model.convergence.max_epochs}", fontsize=7, va="center")
    if len(active) > MAX_LISTED:
        legend.text(0.0, MAX_LISTED + 0.5, f"+ {len(active) - MAX_LISTED} more active jobs",
                    fontsize=8, va="center")
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _square(row: int, colour):
    from matplotlib.patches import Rectangle

    return Rectangle((0.0, row + 0.15), 0.06, 0.7, color=colour)

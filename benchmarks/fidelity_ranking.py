"""Why the Pollux ranking (Spearman at a fixed local batch) misses 0.80: what any model could reach.

    python benchmarks/fidelity_ranking.py

For each declared placements file (../shared/profiles/pollux_*_placements.csv) and each local
batch, the multi-GPU layouts' measured step times are ranked by four predictors, and the median
Spearman over batches is printed:
- engine: the speed model with constants fitted on the other two files (`dlcluster fidelity`);
- same model, other batches: each layout's mean relative extra time (step / one-GPU step - 1,
  scaled by its batch's mean) at the file's other batches. It knows the file itself, so it is not
  a model; it shows how much batch-independent structure the file holds;
- other models (lookup): the same per-layout shape averaged over the other two files. No function
  of the layout fitted leave-one-model-out can do better than its training data's own shape, so
  this bounds what a layout mechanism (any term in the nodes and GPUs per node) transfers;
- layout features: least squares on the other files' shapes over (1 node, 2 nodes, ring volume
  2 (n-1) / n, most GPUs on a node, GPUs in all), evaluated on this file.
Then the files' agreement with each other on the layouts' batch-averaged order, by node count.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from dlclusterenv import fidelity as F
from dlclusterenv.profiles import shared_dir


def _shapes(rows, compute):
    """{batch: {layout: extra / mean extra}} over the multi-GPU layouts."""
    out = {}
    for b in sorted(compute):
        sel = [r for r in rows if r.local_bsz == b and r.layout != (1,)]
        e = np.array([r.step_s - compute[b] for r in sel])
        out[b] = {r.layout: x for r, x in zip(sel, e / e.mean())}
    return out


def _features(lay):
    n = sum(lay)
    return [1.0, len(lay) == 1, len(lay) == 2, 2 * (n - 1) / n, max(lay), n]


def _median_rho(rows, compute, predict):
    rho = []
    for b in sorted(compute):
        sel = [r for r in rows if r.local_bsz == b and r.layout != (1,)]
        rho.append(spearmanr([predict(r) for r in sel], [r.step_s for r in sel])[0])
    return float(np.median(rho))


def main() -> None:
    profiles = shared_dir() / "profiles"
    sets = {n: F._pollux_set(n, profiles) for n in F.POLLUX_MODELS}
    shapes = {n: _shapes(rows, comp) for n, (rows, comp, *_) in sets.items()}
    mean_shape = {n: {lay: np.mean([s[lay] for s in sh.values() if lay in s])
                      for lay in {l for s in sh.values() for l in s}} for n, sh in shapes.items()}
    print(f"{'file':<10} {'engine':>7} {'same model, other batches':>26} {'other models (lookup)':>22} "
          f"{'layout features':>16} {'data self-consistency':>22}")
    for name, (rows, comp, params, gpus, nic, comm) in sets.items():
        c = F.fit_pollux(exclude=(name,), profiles=profiles)
        engine = _median_rho(rows, comp, lambda r: F.step_time(r.layout, comp[r.local_bsz], params, c,
                                                               gpus=gpus, nic_MBps=nic, comm=comm))
        sh = shapes[name]
        same = _median_rho(rows, comp, lambda r: np.mean(
            [sh[b][r.layout] for b in sh if b != r.local_bsz and r.layout in sh[b]]))
        others = [o for o in sets if o != name]
        lookup = _median_rho(rows, comp, lambda r: np.mean([mean_shape[o][r.layout] for o in others]))
        X = np.array([_features(l) for o in others for s in shapes[o].values() for l in s], float)
        y = np.array([x for o in others for s in shapes[o].values() for x in s.values()])
        w = np.linalg.lstsq(X, y, rcond=None)[0]
        lin = _median_rho(rows, comp, lambda r: float(np.array(_features(r.layout), float) @ w))
        sc = F.self_consistency(rows)["adjacent_spearman"]
        print(f"{name:<10} {engine:>7.2f} {same:>26.2f} {lookup:>22.2f} {lin:>16.2f} {sc:>22.2f}")
    print("files' agreement on the layouts' batch-averaged order (Spearman), all / 2 / 3 / 4 nodes")
    names = list(sets)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = sorted(set(mean_shape[a]) & set(mean_shape[b]))
            row = []
            for k in (None, 2, 3, 4):
                ls = [l for l in common if k is None or len(l) == k]
                row.append(spearmanr([mean_shape[a][l] for l in ls], [mean_shape[b][l] for l in ls])[0])
            print(f"  {a} vs {b}: " + " / ".join(f"{x:.2f}" for x in row))


if __name__ == "__main__":
    main()

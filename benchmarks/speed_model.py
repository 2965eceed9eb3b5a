"""Speed-model sanity figures on the default cluster (issue 11's targets beyond the fidelity report).

    python benchmarks/speed_model.py

For each GPU model of the default scenario, alone on the empty `default` cluster:
- samples/s (local batches/s) on one node as workers are added, with p = ceil(w / 4) PS on the
  same node (a sensible PS count): it must never fall when a worker is added;
- the 1-node / spread speed ratio at 4 and 8 GPUs (spread: one worker per node, PS on the first
  node), against the ranges measured by Gavel (consolidated / spread, 0.74-5.94) and Pollux.
"""

from __future__ import annotations

import math

from dlclusterenv.workload import build

MODELS = ("ResNet-50", "VGG-16", "ResNeXt-110", "AlexNet", "Inception-V3", "LSTM-Video",
          "SuperResolution", "RHN", "MI-LSTM")


def main() -> None:
    sc, cluster, zoo, specs = build("default", seed=0)
    from dlclusterenv.sim import Simulator
    from dlclusterenv.jobs import JobSpec

    jobs = [JobSpec(f"J{i}", m, 0.0, 1, 1) for i, m in enumerate(MODELS)]
    sim = Simulator(cluster, jobs, zoo)
    print(f"{'model':<16} {'batches/s on one node, w = 1..8 (p = ceil(w/4))':<58} {'mono':>5} "
          f"{'4: node/spread':>14} {'8: node/spread':>14}")
    for i, m in enumerate(MODELS):
        jid = f"J{i}"
        v = [sim.isolated_speed(jid, [0] * math.ceil(w / 4), [0] * w) for w in range(1, 9)]
        mono = all(b >= a for a, b in zip(v, v[1:]))
        ratio = {}
        for g in (4, 8):
            node = sim.isolated_speed(jid, [0], [0] * g)
            spread = sim.isolated_speed(jid, [0], list(range(g)))
            ratio[g] = node / spread
        print(f"{m:<16} {' '.join(f'{x:6.1f}' for x in v):<58} {'yes' if mono else 'NO':>5} "
              f"{ratio[4]:>14.2f} {ratio[8]:>14.2f}")


if __name__ == "__main__":
    main()

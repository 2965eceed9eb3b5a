"""SB3 callbacks for training on the DLCluster envs from your own code (`dlcluster train` uses
them too)."""

from __future__ import annotations

from collections.abc import Sequence

from stable_baselines3.common.callbacks import BaseCallback

from dlclusterenv.metrics import Metrics

SIM_METRICS = ("avg_jct_s", "makespan_s", "cross_node_gb", "gpu_util", "jobs_finished",
               "jobs_unfinished")
_KNOWN = tuple(k for k in Metrics.__dataclass_fields__ if k not in ("jobs", "timeline"))


class SimMetricsCallback(BaseCallback):
    """Logs the simulator's metrics of each episode that ends (the `info["metrics"]` every DLCluster
    env puts in an episode's last info) as `episode/<key>`, plus `episode/reward` where a Monitor
    wrapper reports the return, and `episode/truncated` (1 for an episode cut with jobs
    unfinished, see ClusterEnv's "Episode End").

    Values go through the model's logger with `record_mean`, so they are the mean over the episodes
    that ended since the last dump and appear in every output format the logger has (TensorBoard,
    CSV, stdout) at SB3's own dump steps, like `rollout/ep_rew_mean`. Dumping per episode instead
    would flush the algorithm's pending `train/*` values at the wrong step.

    `keys`: which metrics (default SIM_METRICS: average JCT, makespan, cross-node GB, GPU
    utilisation, finished and unfinished jobs); an unknown key is a ValueError naming it."""

    def __init__(self, keys: Sequence[str] = SIM_METRICS, verbose: int = 0):
        super().__init__(verbose)
        if isinstance(keys, str):
            raise ValueError(f"SimMetricsCallback: keys: expected a list of metric names, got {keys!r}")
        unknown = [k for k in keys if k not in _KNOWN]
        if unknown:
            raise ValueError(f"SimMetricsCallback: keys: unknown {unknown}; known: {list(_KNOWN)}")
        self.keys = tuple(keys)

    def _on_step(self) -> bool:
        for info, done in zip(self.locals["infos"], self.locals["dones"]):
            if not (done and "metrics" in info):
                continue
            if "episode" in info:
                self.logger.record_mean("episode/reward", float(info["episode"]["r"]))
            self.logger.record_mean("episode/truncated", float(info.get("episode_end") != "finished"))
            for k in self.keys:
                self.logger.record_mean(f"episode/{k}", float(info["metrics"][k]))
        return True

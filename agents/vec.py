"""SB3 `VecEnv` over a native batched env (dlclusterenv.envs.vector), for `vec: batched`.

SB3 resets an ended episode in the step that ended it and hands back its last observation as
`info["terminal_observation"]`, and `TimeLimit.truncated` for a truncation: Gymnasium's SAME_STEP
autoreset, so the batched env runs in that mode and this class only renames. Seeds follow
DummyVecEnv: `seed(s)` makes the next reset seed env i with s + i; later episodes draw their
seeds from each env's own generator. `env_method("action_masks")` gives MaskablePPO its masks.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv


class BatchedVecEnv(VecEnv):
    def __init__(self, env_id: str, num_envs: int, **env_kwargs: Any):
        self.venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                                 autoreset_mode=AutoresetMode.SAME_STEP, **env_kwargs)
        self.envs = self.venv.envs  # before VecEnv.__init__, which reads their render_mode
        super().__init__(num_envs, self.venv.single_observation_space, self.venv.single_action_space)
        self._actions: np.ndarray | None = None

    def reset(self):
        seeds = [None if s is None else int(s) for s in self._seeds]
        options = self._options[0] if self._options and self._options[0] else None
        obs, _ = self.venv.reset(seed=seeds, options=options)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self):
        rewards, terms, truncs, infos = self.venv.step_raw(self._actions)
        out = []
        for i, info in enumerate(infos):
            if terms[i] or truncs[i]:  # SAME_STEP: info is the reset's, plus the final step's
                final = info.pop("final_info")
                final["terminal_observation"] = info.pop("final_obs")
                self.reset_infos[i] = info
                info = final
            info["TimeLimit.truncated"] = bool(truncs[i] and not terms[i])
            out.append(info)
        obs = {k: v.copy() for k, v in self.venv.batch_obs().items()}
        return obs, rewards.astype(np.float32), terms | truncs, out

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self.envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        for i in self._get_indices(indices):
            setattr(self.envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        return [getattr(self.envs[i], method_name)(*method_args, **method_kwargs)
                for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]  # the sub-envs are bare

    def get_images(self):
        return [e.render() for e in self.envs]

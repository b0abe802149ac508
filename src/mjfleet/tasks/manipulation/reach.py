# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Reach: bring the arm's end-effector to a target position drawn each episode."""

from __future__ import annotations

import mujoco
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import VideoMarker
from mjfleet.tasks.manipulation.config import ReachConfig
from mjfleet.tasks.manipulation.model import build_model
from mjfleet.tasks.manipulation.task import ArmTask, uniform_in


class ReachTask(ArmTask[ReachConfig]):
    """End-effector to a target position; see docs/manipulation.md for the MDP."""

    def _build(self) -> mujoco.MjModel:
        return build_model(self.arm, self.cfg)

    def setup(self, env: MjEnv) -> None:
        super().setup(env)
        n, dev = env.num_envs, env.device
        self.target = torch.zeros(n, 3, device=dev)
        """Target position of each environment (base frame)."""
        self._error = torch.zeros(n, device=dev)
        self._error_sum = torch.zeros(n, device=dev)
        self._steps = torch.zeros(n, device=dev)

    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        if env_ids.numel() == 0:
            return
        self.reset_arm(env, env_ids)
        self.target[env_ids] = uniform_in(self.cfg.target, env_ids.numel(), env.device, env.generator)
        self._error_sum[env_ids] = 0.0
        self._steps[env_ids] = 0.0
        self._error[env_ids] = torch.inf  # until after_step measures it

    def after_step(self, env: MjEnv) -> None:
        self._error = torch.linalg.vector_norm(self.ee_pos(env) - self.target, dim=-1)
        self._error_sum += self._error
        self._steps += 1.0

    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        to_target = self.target - self.ee_pos(env)
        obs = torch.cat([*self.arm_observations(env), to_target], dim=-1)
        return {"policy": obs, "critic": obs}

    def policy_terms(self) -> list[tuple[str, int, str]]:
        return [*super().policy_terms(), ("target_minus_gripper", 3, "the target minus gripper_point, world frame (m)")]

    def video_markers(self, env: MjEnv, world: int) -> list[VideoMarker]:
        """The target, as the sphere within which an episode's end counts as a success (green)."""
        pos = tuple(float(v) for v in self.target[world].tolist())
        return [VideoMarker((pos[0], pos[1], pos[2]), self.cfg.success_distance, (0.2, 0.9, 0.3, 0.4))]

    def termination_names(self) -> tuple[str, ...]:
        return ("hand_on_table",)

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {"hand_on_table": self.hand_on_table(env)}

    # --- reward terms ------------------------------------------------------------------------------------------
    def reward_reach(self, env: MjEnv) -> torch.Tensor:
        """1 - tanh(distance / reach_std)."""
        return 1.0 - torch.tanh(self._error / self.cfg.reach_std)

    def reward_reach_fine(self, env: MjEnv) -> torch.Tensor:
        """exp(-distance^2 / reach_fine_std^2)."""
        return torch.exp(-torch.square(self._error / self.cfg.reach_fine_std))

    # --- statistics --------------------------------------------------------------------------------------------
    def metric_names(self) -> tuple[str, ...]:
        return ("final_distance", "mean_distance")

    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            "final_distance": self._error[env_ids],
            "mean_distance": self._error_sum[env_ids] / self._steps[env_ids].clamp(min=1.0),
        }

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """Timed out with the end-effector within ``success_distance`` of the target."""
        return time_outs & (self._error[env_ids] < self.cfg.success_distance)

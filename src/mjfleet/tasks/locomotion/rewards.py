"""The velocity task's reward terms, each a method ``reward_<name>`` (see :class:`mjfleet.envs.task.Task`)."""

from __future__ import annotations

import torch

from mjfleet.envs.env import MjEnv
from mjfleet.tasks.locomotion.columns import Index
from mjfleet.tasks.locomotion.config import LocomotionConfig

MOVING_SPEED = 0.1
"""Gait rewards (air time) only pay while the commanded speed exceeds this (m/s)."""


class LocomotionRewards:
    """Reward terms of :class:`~mjfleet.tasks.locomotion.task.LocomotionTask`, and the joint readings they share.

    They read the per-environment state the task refreshes in ``after_step``; the names below are that state.
    """

    cfg: LocomotionConfig
    lin_vel: torch.Tensor
    ang_vel: torch.Tensor
    gravity: torch.Tensor
    base_height: torch.Tensor
    target_height: float
    feet_contact: torch.Tensor
    undesired_count: torch.Tensor
    default_joint_pos: torch.Tensor
    _qpos_idx: Index
    _qvel_idx: Index
    _foot_sites: torch.Tensor
    _deviation_idx: torch.Tensor
    _soft_low: torch.Tensor
    _soft_high: torch.Tensor
    _lin_err_sq: torch.Tensor
    _yaw_err_sq: torch.Tensor
    _moving: torch.Tensor
    _touchdown_reward: torch.Tensor
    _stance_time: torch.Tensor
    _swing_time: torch.Tensor

    # --- joint readings ----------------------------------------------------------------------------------------
    def joint_pos(self, env: MjEnv) -> torch.Tensor:
        """Joint angles in actuator order, ``(num_envs, num_actions)``."""
        return env.sim.qpos[:, self._qpos_idx]

    def joint_vel(self, env: MjEnv) -> torch.Tensor:
        """Joint velocities in actuator order, ``(num_envs, num_actions)``."""
        return env.sim.qvel[:, self._qvel_idx]

    # --- reward terms ------------------------------------------------------------------------------------------
    def reward_track_lin_vel_xy(self, env: MjEnv) -> torch.Tensor:
        """Exponential tracking of the commanded planar velocity."""
        return torch.exp(-self._lin_err_sq / self.cfg.tracking_std**2)

    def reward_track_yaw_rate(self, env: MjEnv) -> torch.Tensor:
        """Exponential tracking of the commanded yaw rate."""
        return torch.exp(-self._yaw_err_sq / self.cfg.tracking_std**2)

    def reward_lin_vel_z(self, env: MjEnv) -> torch.Tensor:
        """Squared vertical base velocity."""
        return torch.square(self.lin_vel[:, 2])

    def reward_ang_vel_xy(self, env: MjEnv) -> torch.Tensor:
        """Squared roll and pitch rates."""
        return torch.sum(torch.square(self.ang_vel[:, :2]), dim=-1)

    def reward_torques(self, env: MjEnv) -> torch.Tensor:
        """Sum of squared actuator forces."""
        return torch.sum(torch.square(env.sim.actuator_force), dim=-1)

    def reward_joint_acc(self, env: MjEnv) -> torch.Tensor:
        """Sum of squared joint accelerations."""
        return torch.sum(torch.square(env.sim.qacc[:, self._qvel_idx]), dim=-1)

    def reward_action_rate(self, env: MjEnv) -> torch.Tensor:
        """Sum of squared action changes."""
        return torch.sum(torch.square(env.actions - env.last_actions), dim=-1)

    def reward_feet_air_time(self, env: MjEnv) -> torch.Tensor:
        """Swing time minus the threshold, paid at touchdown, while moving."""
        return self._touchdown_reward * self._moving

    def reward_biped_air_time(self, env: MjEnv) -> torch.Tensor:
        """In single stance, the shorter of stance and swing time, capped, while moving."""
        in_mode = torch.where(self.feet_contact, self._stance_time, self._swing_time)
        single = self.feet_contact.sum(dim=-1) == 1
        value = torch.where(single, in_mode.min(dim=-1).values, 0.0).clamp(max=self.cfg.air_time_threshold)
        return value * self._moving

    def reward_feet_slide(self, env: MjEnv) -> torch.Tensor:
        """Horizontal speed of the feet that touch the ground."""
        vel = env.sim.site_lin_vel(self._foot_sites)
        return torch.sum(torch.linalg.vector_norm(vel[..., :2], dim=-1) * self.feet_contact, dim=-1)

    def reward_undesired_contacts(self, env: MjEnv) -> torch.Tensor:
        """Number of undesired geoms touching the ground."""
        return self.undesired_count

    def reward_flat_orientation(self, env: MjEnv) -> torch.Tensor:
        """Squared horizontal part of the projected gravity."""
        return torch.sum(torch.square(self.gravity[:, :2]), dim=-1)

    def reward_joint_limits(self, env: MjEnv) -> torch.Tensor:
        """Joint excursions beyond the soft limits."""
        q = self.joint_pos(env)
        return torch.sum((self._soft_low - q).clamp(min=0) + (q - self._soft_high).clamp(min=0), dim=-1)

    def reward_joint_deviation(self, env: MjEnv) -> torch.Tensor:
        """Absolute deviation of the deviation joints from their default angles."""
        q = self.joint_pos(env)[:, self._deviation_idx] - self.default_joint_pos[self._deviation_idx]
        return torch.sum(torch.abs(q), dim=-1)

    def reward_base_height(self, env: MjEnv) -> torch.Tensor:
        """Squared error of the base height above the ground."""
        return torch.square(self.base_height - self.target_height)

    def reward_alive(self, env: MjEnv) -> torch.Tensor:
        """1 unless the episode terminates (fall or base contact) this step."""
        return (~env.terminated).float()

    def reward_termination(self, env: MjEnv) -> torch.Tensor:
        """1 when the episode terminates (fall or base contact) this step."""
        return env.terminated.float()

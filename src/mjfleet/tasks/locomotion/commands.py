"""Base-velocity commands: uniform draws per environment, redrawn on per-environment timers without host syncs."""

from __future__ import annotations

import math

import torch

from mjfleet.tasks.locomotion.config import CommandConfig


class VelocityCommands:
    """Holds one (lin_x, lin_y, yaw_rate) command per environment and its time until the next draw."""

    def __init__(self, cfg: CommandConfig, num_envs: int, dt: float, device: torch.device, generator: torch.Generator):
        self.cfg = cfg
        self.dt = dt
        self.generator = generator
        self.command = torch.zeros(num_envs, 3, device=device)
        """Current commands, ``(num_envs, 3)``: forward and sideways velocity (m/s, base frame), yaw rate (rad/s)."""
        self.time_left = torch.zeros(num_envs, device=device)
        """Seconds until each environment draws a new command."""
        bounds = torch.tensor((cfg.lin_vel_x, cfg.lin_vel_y, cfg.yaw_rate), dtype=torch.float32, device=device)
        self._low, self._span = bounds[:, 0], bounds[:, 1] - bounds[:, 0]

    def draw(self, count: int) -> torch.Tensor:
        """``count`` fresh commands, ``(count, 3)``."""
        dev, g = self.command.device, self.generator
        cmd = self._low + torch.rand(count, 3, device=dev, generator=g) * self._span
        slow = torch.linalg.vector_norm(cmd[:, :2], dim=-1) < self.cfg.min_lin_speed
        cmd[:, :2] *= (~slow).unsqueeze(-1)
        standing = torch.rand(count, device=dev, generator=g) < self.cfg.standing_fraction
        return cmd * (~standing).unsqueeze(-1)

    def hold(self, values: dict[int, float] | None) -> None:
        """Set command columns (0: lin_x, 1: lin_y, 2: yaw rate) of every environment and stop the timers until
        a reset; ``None`` lets every timer run out, so the next step draws."""
        if values is None:
            self.time_left.zero_()
            return
        for column, value in values.items():
            self.command[:, column] = value
        self.time_left.fill_(math.inf)

    def reset(self, env_ids: torch.Tensor) -> None:
        """New commands and a full interval for the listed environments."""
        self.command[env_ids] = self.draw(env_ids.numel())
        self.time_left[env_ids] = self.cfg.resample_interval_s

    def step(self) -> None:
        """Advance the timers by one control step; environments whose timer ran out draw a new command.

        Drawing for every environment and selecting with a mask costs a few microseconds and avoids the host sync
        of looking up which environments are due.
        """
        self.time_left -= self.dt
        due = self.time_left <= 0.0
        self.command = torch.where(due.unsqueeze(-1), self.draw(self.command.shape[0]), self.command)
        self.time_left = torch.where(due, self.cfg.resample_interval_s, self.time_left)

"""Base-velocity commands: uniform draws per environment, redrawn on per-environment timers without host syncs."""

from __future__ import annotations

import math

import torch

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.config import CommandConfig, CommandCurriculumConfig


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
        self.scale = torch.ones(num_envs, device=device)
        """Share of the ranges each environment draws from: every bound times it (the command curriculum's level in
        training environments; 1 in evaluation ones)."""
        bounds = torch.tensor((cfg.lin_vel_x, cfg.lin_vel_y, cfg.yaw_rate), dtype=torch.float32, device=device)
        self._low, self._span = bounds[:, 0], bounds[:, 1] - bounds[:, 0]
        self._held: dict[int, float] = {}
        """Columns :meth:`hold` keeps, by index: resets keep them too."""

    def draw(self, scale: torch.Tensor) -> torch.Tensor:
        """Fresh commands for environments with these range shares ``(count,)``: ``(count, 3)``."""
        dev, g, count = self.command.device, self.generator, scale.shape[0]
        cmd = (self._low + torch.rand(count, 3, device=dev, generator=g) * self._span) * scale.unsqueeze(-1)
        slow = torch.linalg.vector_norm(cmd[:, :2], dim=-1) < self.cfg.min_lin_speed
        cmd[:, :2] *= (~slow).unsqueeze(-1)
        standing = torch.rand(count, device=dev, generator=g) < self.cfg.standing_fraction
        return cmd * (~standing).unsqueeze(-1)

    def set_level(self, level: torch.Tensor, first_eval_env: int) -> None:
        """Draw the training rows' commands from ``level`` of the ranges and the evaluation rows' (from
        ``first_eval_env`` on) from the full ranges; cheap enough for every step, so it holds after a resume restored
        the level or rows were set aside for evaluation."""
        self.scale[:first_eval_env] = level
        self.scale[first_eval_env:] = 1.0

    def hold(self, values: dict[int, float] | None) -> None:
        """Set command columns (0: lin_x, 1: lin_y, 2: yaw rate) of every environment and stop the timers, resets
        included; ``None`` lets every timer run out, so the next step draws."""
        if values is None:
            self._held = {}
            self.time_left.zero_()
            return
        self._held = dict(values)
        for column, value in values.items():
            self.command[:, column] = value
        self.time_left.fill_(math.inf)

    def reset(self, env_ids: torch.Tensor) -> None:
        """New commands and a full interval for the listed environments (while :meth:`hold` holds, its columns and
        no timer: the observation after a reset shows the held command)."""
        self.command[env_ids] = self.draw(self.scale[env_ids])
        if self._held:
            for column, value in self._held.items():
                self.command[env_ids, column] = value
            self.time_left[env_ids] = math.inf
            return
        self.time_left[env_ids] = self.cfg.resample_interval_s

    def step(self) -> None:
        """Advance the timers by one control step; environments whose timer ran out draw a new command.

        Drawing for every environment and selecting with a mask costs a few microseconds and avoids the host sync
        of looking up which environments are due.
        """
        self.time_left -= self.dt
        due = self.time_left <= 0.0
        self.command = torch.where(due.unsqueeze(-1), self.draw(self.scale), self.command)
        self.time_left = torch.where(due, self.cfg.resample_interval_s, self.time_left)


class CommandCurriculum:
    """The level of the command curriculum (the share of the ranges training draws from), judged once per episode
    length on the training episodes that ended in it; on the device, without host syncs."""

    def __init__(self, cfg: CommandCurriculumConfig, num_envs: int, episode_steps: int, device: torch.device) -> None:
        if not 0.0 < cfg.start <= 1.0:
            raise UsageError(f"--env.commands.curriculum.start must be in (0, 1] (got {cfg.start})")
        if cfg.step <= 0.0:
            raise UsageError(f"--env.commands.curriculum.step must be positive (got {cfg.step})")
        if not 0.0 < cfg.promote_at <= 1.0:
            raise UsageError(f"--env.commands.curriculum.promote-at must be in (0, 1] (got {cfg.promote_at})")
        self.cfg = cfg
        self.episode_steps = episode_steps
        self.level = torch.tensor(cfg.start, device=device)
        """Share of every command range the training environments draw from."""
        self._tracking = torch.zeros(num_envs, device=device)
        self._sum = torch.zeros((), device=device)
        self._count = torch.zeros((), device=device)
        self._steps = 0

    def step(self, tracking: torch.Tensor) -> None:
        """One control step with each environment's tracking reward kernel (0-1); after each episode length, widen
        the ranges if the episodes that ended in it tracked well."""
        self._tracking += tracking
        self._steps += 1
        if self._steps < self.episode_steps:
            return
        self._steps = 0
        good = (self._count > 0) & (self._sum > self.cfg.promote_at * self._count)
        self.level = torch.where(good, torch.clamp(self.level + self.cfg.step, max=1.0), self.level)
        self._sum.zero_()
        self._count.zero_()

    def episodes_ended(self, env_ids: torch.Tensor, counted: torch.Tensor) -> None:
        """The listed environments' episodes ended: those ``counted`` (training ones) add their tracking, summed and
        divided by the full episode length (a fall forfeits the rest); every listed one starts afresh."""
        weight = counted.float()
        # A diverged world tracked nothing (its kernel read NaN, which times a weight of 0 is still NaN: one lost the
        # whole window's promotion).
        tracked = torch.nan_to_num(self._tracking[env_ids], nan=0.0, posinf=0.0, neginf=0.0)
        self._sum += torch.sum(tracked / self.episode_steps * weight)
        self._count += torch.sum(weight)
        self._tracking[env_ids] = 0.0

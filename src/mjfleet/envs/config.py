"""Configuration shared by every task's environment."""

from __future__ import annotations

from dataclasses import dataclass, field

from mjfleet.sim.config import SimConfig


@dataclass
class EnvConfig:
    """Settings every batched environment has; tasks subclass it with their own fields."""

    num_envs: int = 1024
    """Parallel environments per worker (each worker of a multi-worker run simulates this many)."""
    episode_length_s: float = 5.0
    """Episode time limit in seconds; reaching it is a time-out, not a termination."""
    clip_actions: float = 10.0
    """Policy outputs are clipped to [-clip_actions, clip_actions] before the task scales them."""
    sim: SimConfig = field(default_factory=SimConfig)
    """Physics settings."""

    def prepare_assets(self) -> None:
        """Fetch or check the files the task loads, once, before any worker starts.

        Raises :class:`~mjfleet.errors.UsageError` when they cannot be had, so a multi-worker run fails with one
        line in the launcher instead of in every worker. Tasks whose models are built in need not override it.
        """

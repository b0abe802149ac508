"""Terrain curriculum: each environment trains on one tile (difficulty level x terrain type) and changes level by
how far it walked in its last episode."""

from __future__ import annotations

import torch

from mjfleet.tasks.locomotion.config import TerrainConfig
from mjfleet.tasks.locomotion.terrain import TerrainMap


class TerrainCurriculum:
    """Per-environment terrain level and type, and the spawn point of its tile."""

    def __init__(
        self, cfg: TerrainConfig, terrain: TerrainMap, num_envs: int, device: torch.device, generator: torch.Generator
    ) -> None:
        self.cfg = cfg
        self.generator = generator
        self.num_levels = cfg.num_levels
        top = min(max(cfg.max_init_level, 0), cfg.num_levels - 1)
        self.levels = torch.randint(0, top + 1, (num_envs,), device=device, generator=generator)
        """Current difficulty level (tile row) of each environment."""
        self.types = torch.arange(num_envs, device=device) % len(cfg.types)
        """Terrain type (tile column) of each environment; fixed."""
        self._centres = torch.as_tensor(terrain.tile_centres, dtype=torch.float32, device=device)
        self._ground = torch.as_tensor(terrain.tile_heights, dtype=torch.float32, device=device)

    def update(
        self, env_ids: torch.Tensor, walked: torch.Tensor, covered: torch.Tensor, commanded: torch.Tensor
    ) -> None:
        """Move the listed environments up a level if they ended farther than ``promote_fraction`` of a tile from
        their spawn point (``walked``), down if the path they ``covered`` is shorter than ``demote_fraction`` of the
        one their commands asked for (``commanded``; for a fall, that of a whole episode): a turning command's arc
        ends near its start, however well it was followed. One that beats the hardest level restarts on a random
        level, so every level stays populated."""
        if not self.cfg.curriculum or env_ids.numel() == 0:
            return
        up = walked > self.cfg.promote_fraction * self.cfg.tile_size
        down = (covered < self.cfg.demote_fraction * commanded) & ~up
        level = self.levels[env_ids] + up.long() - down.long()
        restart = torch.randint(0, self.num_levels, level.shape, device=level.device, generator=self.generator)
        level = torch.where(level >= self.num_levels, restart, level).clamp(min=0)
        self.levels[env_ids] = level

    def spawn(self, env_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Centre xy ``(len, 2)`` and platform ground height ``(len,)`` of the listed environments' tiles."""
        level, kind = self.levels[env_ids], self.types[env_ids]
        return self._centres[level, kind], self._ground[level, kind]

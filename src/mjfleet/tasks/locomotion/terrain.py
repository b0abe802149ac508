"""Tiled rough terrain: a height grid of (difficulty level x terrain type) tiles, and height lookups on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mjfleet.tasks.locomotion.config import TerrainConfig, TerrainType


@dataclass(frozen=True)
class TerrainMap:
    """Heights on a regular grid centred on the world origin; tiles laid out as rows of levels along x and columns
    of types along y."""

    heights: np.ndarray
    """Heights in metres, ``(nrow, ncol)``: row ``r`` is at y = y0 + r * resolution, column ``c`` at x = x0 + c *
    resolution (MuJoCo's heightfield layout)."""
    resolution: float
    """Grid spacing (metres)."""
    tile_centres: np.ndarray
    """World xy of each tile's centre, ``(num_levels, num_types, 2)``."""
    tile_heights: np.ndarray
    """Ground height at each tile's spawn platform, ``(num_levels, num_types)``."""

    @property
    def half_extent(self) -> tuple[float, float]:
        """Half the grid's size along x and y (metres)."""
        nrow, ncol = self.heights.shape
        return 0.5 * (ncol - 1) * self.resolution, 0.5 * (nrow - 1) * self.resolution


def generate(cfg: TerrainConfig) -> TerrainMap:
    """Build the height grid for ``cfg`` (deterministic for a given ``cfg.seed``)."""
    rng = np.random.default_rng(cfg.seed)
    res = cfg.resolution
    n_tile = round(cfg.tile_size / res)
    n_border = round(cfg.border / res)
    nx = cfg.num_levels * n_tile + 2 * n_border + 1
    ny = len(cfg.types) * n_tile + 2 * n_border + 1
    heights = np.zeros((ny, nx), dtype=np.float64)
    # Tile-local coordinates of the samples of one tile (identical for every tile).
    local = (np.arange(n_tile + 1) - 0.5 * n_tile) * res
    u, v = np.meshgrid(local, local)  # u along x (columns), v along y (rows)
    for level in range(cfg.num_levels):
        difficulty = level / max(cfg.num_levels - 1, 1)
        for col, kind in enumerate(cfg.types):
            tile = _tile(kind, difficulty, u, v, cfg, rng)
            r0, c0 = n_border + col * n_tile, n_border + level * n_tile
            # Neighbouring tiles share their edge samples, which are 0 for every tile type.
            heights[r0 : r0 + n_tile + 1, c0 : c0 + n_tile + 1] = tile
    half_x, half_y = 0.5 * (nx - 1) * res, 0.5 * (ny - 1) * res
    levels = np.arange(cfg.num_levels)[:, None]
    types = np.arange(len(cfg.types))[None, :]
    centres = np.stack(
        np.broadcast_arrays(
            -half_x + (n_border + (levels + 0.5) * n_tile) * res,
            -half_y + (n_border + (types + 0.5) * n_tile) * res,
        ),
        axis=-1,
    )
    terrain = TerrainMap(heights, res, centres, np.zeros(centres.shape[:2]))
    tile_heights = _platform_heights(terrain, cfg.platform_size)
    return TerrainMap(heights, res, centres, tile_heights)


def _tile(
    kind: TerrainType,
    difficulty: float,
    u: np.ndarray,
    v: np.ndarray,
    cfg: TerrainConfig,
    rng: np.random.Generator,
) -> np.ndarray:
    """Heights of one tile; the edges are at 0 so tiles join without steps, the centre platform is flat."""
    half, platform = 0.5 * cfg.tile_size, 0.5 * cfg.platform_size
    square = np.maximum(np.abs(u), np.abs(v))  # the Chebyshev (square) rings of a pyramid
    # Distance from the platform edge to the tile edge, along those rings.
    ring = np.clip(half - square, 0.0, half - platform)
    if kind == "bumps":
        amplitude = _lerp(cfg.bump_height, difficulty)
        tile = _bumps(u, v, amplitude, cfg.bump_spacing, rng)
        # Flat platform and zero edges: bumps fade in over one bump spacing from both (no ledge at either).
        room = np.minimum(half - square, square - platform)
        return tile * np.clip(room / max(cfg.bump_spacing, 1e-6), 0.0, 1.0)
    if kind in ("slope_up", "slope_down"):
        tile = _lerp(cfg.slope, difficulty) * ring
        return -tile if kind == "slope_up" else tile
    if kind in ("stairs_up", "stairs_down"):
        # Whole treads from the tile edge: the outermost lies at the edge's height, as its neighbour's does (a
        # riser there left one grid cell between two tiles at 0: a trench or a ridge a foot could catch in).
        steps = np.floor(np.round(ring / cfg.step_width, 6))
        tile = _lerp(cfg.step_height, difficulty) * steps
        return -tile if kind == "stairs_up" else tile
    raise ValueError(f"unknown terrain type {kind!r}")


def _bumps(u: np.ndarray, v: np.ndarray, amplitude: float, spacing: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform random heights on a coarse grid, bilinearly interpolated onto the samples ``(u, v)``."""
    lo = float(u.min())
    n = int(np.ceil((float(u.max()) - lo) / spacing)) + 2
    coarse = rng.uniform(-amplitude, amplitude, size=(n, n))
    fx, fy = (u - lo) / spacing, (v - lo) / spacing
    ix, iy = np.floor(fx).astype(int), np.floor(fy).astype(int)
    tx, ty = fx - ix, fy - iy
    return (
        coarse[iy, ix] * (1 - tx) * (1 - ty)
        + coarse[iy, ix + 1] * tx * (1 - ty)
        + coarse[iy + 1, ix] * (1 - tx) * ty
        + coarse[iy + 1, ix + 1] * tx * ty
    )


def _lerp(bounds: tuple[float, float], t: float) -> float:
    return bounds[0] + t * (bounds[1] - bounds[0])


def _platform_heights(terrain: TerrainMap, platform_size: float) -> np.ndarray:
    """Highest ground within each tile's spawn platform (robots spawn above it)."""
    res, (half_x, half_y) = terrain.resolution, terrain.half_extent
    out = np.zeros(terrain.tile_centres.shape[:2])
    reach = round(0.5 * platform_size / res)
    for level, col in np.ndindex(*out.shape):
        x, y = terrain.tile_centres[level, col]
        c, r = round((x + half_x) / res), round((y + half_y) / res)
        out[level, col] = terrain.heights[r - reach : r + reach + 1, c - reach : c + reach + 1].max()
    return out


class HeightLookup:
    """Bilinear ground height at world xy points, on the simulation's device (points off the grid read its edge)."""

    def __init__(self, terrain: TerrainMap, device: torch.device) -> None:
        self.heights = torch.as_tensor(terrain.heights, dtype=torch.float32, device=device)
        self.resolution = terrain.resolution
        self.half_x, self.half_y = terrain.half_extent
        self._max_r, self._max_c = self.heights.shape[0] - 1, self.heights.shape[1] - 1

    def near_edge(self, xy: torch.Tensor, margin: float) -> torch.Tensor:
        """Whether each point of ``xy`` (..., 2) lies within ``margin`` of the grid's edge or beyond it."""
        return (xy[..., 0].abs() > self.half_x - margin) | (xy[..., 1].abs() > self.half_y - margin)

    def __call__(self, xy: torch.Tensor) -> torch.Tensor:
        """Heights at ``xy`` (..., 2), shape (...)."""
        fc = ((xy[..., 0] + self.half_x) / self.resolution).clamp(0.0, self._max_c - 1e-3)
        fr = ((xy[..., 1] + self.half_y) / self.resolution).clamp(0.0, self._max_r - 1e-3)
        c0, r0 = fc.long(), fr.long()
        tc, tr = fc - c0, fr - r0
        h = self.heights
        return (
            h[r0, c0] * (1 - tc) * (1 - tr)
            + h[r0, c0 + 1] * tc * (1 - tr)
            + h[r0 + 1, c0] * (1 - tc) * tr
            + h[r0 + 1, c0 + 1] * tc * tr
        )

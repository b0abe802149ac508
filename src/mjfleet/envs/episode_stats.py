"""Running sums and counts of finished-episode statistics, reducible across ranks."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class EpisodeStats:
    """Accumulates per-key sums and counts of values reported when episodes end.

    Keys are fixed at construction so every rank holds the same keys in the same order: the runner reduces the
    stacked ``(sums, counts)`` across ranks with one all-reduce and logs ``sum / count``, i.e. the mean over all
    ranks' finished episodes rather than rank 0's. Nothing here synchronises with the device.
    """

    def __init__(self, keys: Iterable[str], device: torch.device | str) -> None:
        self.keys: tuple[str, ...] = tuple(dict.fromkeys(keys))
        self._index = {k: i for i, k in enumerate(self.keys)}
        self._sums = torch.zeros(len(self.keys), dtype=torch.float64, device=device)
        self._counts = torch.zeros(len(self.keys), dtype=torch.float64, device=device)
        self._rows: dict[tuple[str, ...], torch.Tensor] = {}

    def add(self, key: str, values: torch.Tensor) -> None:
        """Add one value per finished episode (a 1-D tensor, possibly empty) under ``key``."""
        i = self._index[key]
        self._sums[i] += values.sum(dtype=torch.float64)
        self._counts[i] += values.numel()

    def add_many(self, values: dict[str, torch.Tensor], where: torch.Tensor | None = None) -> None:
        """Add several keys at once; all tensors hold one value per finished episode. With ``where`` (a boolean
        tensor of the same length) only the episodes it marks count. A few stacked operations for all keys, and no
        device sync."""
        if not values:
            return
        names = tuple(values)
        index = self._rows.get(names)
        if index is None:
            index = self._rows[names] = torch.tensor([self._index[k] for k in names], device=self._sums.device)
        stacked = torch.stack([v.to(torch.float32) for v in values.values()])
        if where is None:
            self._sums.index_add_(0, index, stacked.sum(dim=1, dtype=torch.float64))
            self._counts[index] += stacked.shape[1]
        else:
            self._sums.index_add_(0, index, torch.where(where, stacked, 0.0).sum(dim=1, dtype=torch.float64))
            self._counts[index] += where.sum(dtype=torch.float64)

    def pop(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(sums, counts)`` in :attr:`keys` order and start afresh."""
        sums, counts = self._sums.clone(), self._counts.clone()
        self._sums.zero_()
        self._counts.zero_()
        return sums, counts

    def pop_as(self, keys: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`pop` in the order of ``keys``, another simulation's statistics (the training simulation's, for the
        evaluation's own, whose task may report other metrics: a training-only curriculum's): keys missing here
        count no episode, keys beyond ``keys`` are left out."""
        sums, counts = self.pop()
        if keys == self.keys:
            return sums, counts
        pairs = [(j, self._index[k]) for j, k in enumerate(keys) if k in self._index]
        out_sums, out_counts = sums.new_zeros(len(keys)), counts.new_zeros(len(keys))
        if pairs:
            to, of = (torch.tensor(side, device=sums.device) for side in zip(*pairs, strict=True))
            out_sums[to], out_counts[to] = sums[of], counts[of]
        return out_sums, out_counts

    @staticmethod
    def means(keys: tuple[str, ...], sums: torch.Tensor, counts: torch.Tensor) -> dict[str, float]:
        """Means of the keys that saw at least one episode."""
        out: dict[str, float] = {}
        for key, s, c in zip(keys, sums.tolist(), counts.tolist(), strict=True):
            if c > 0:
                out[key] = s / c
        return out

"""rsl-rl-lib's PPO, with the time its ranks spend in the gradient all-reduce measured.

Its distributed update is rsl_rl's own: with the adaptive schedule that is three collectives per mini-batch (the KL's
all-reduce, rank 0's learning rate broadcast, the gradient all-reduce). Sending the KL in the gradient buffer instead
saved two of them, but only by rebinding the rollout storage's mini-batch generators, which rsl_rl's ``update`` reads
through the instance; on the CPU that saved too little to keep a dependency on how ``update`` is put together, and
there is no GPU measurement that would justify it (docs/notes/performance_log.md, "rsl_rl's own distributed update").
"""

from __future__ import annotations

import time
from typing import Any

import torch
from rsl_rl.algorithms import PPO


class SyncedPPO(PPO):
    """:class:`rsl_rl.algorithms.PPO` that measures :meth:`reduce_parameters`, the gradient all-reduce that rsl_rl
    runs once per mini-batch between the backward pass and the optimizer step in distributed training."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sync_s = 0.0
        """Seconds spent in :meth:`reduce_parameters` since the caller last reset it (the gradient sync's share)."""
        self.reductions = 0
        """Gradient all-reduces entered since the caller last reset it (where a rank is inside an update)."""
        self._on_cuda = torch.device(self.device).type == "cuda"

    def reduce_parameters(self) -> None:
        """rsl_rl's gradient all-reduce, timed: waiting for the slowest rank is part of it."""
        # On a GPU the collective is only queued: time it between two waits for the device, or the backward pass
        # (before) and the all-reduce itself (after) would be counted in the wrong place. Multi-worker runs only.
        self.reductions += 1
        self.synchronize()
        start = time.perf_counter()
        super().reduce_parameters()
        self.synchronize()
        self.sync_s += time.perf_counter() - start

    def synchronize(self) -> None:
        """Wait for this rank's device (a GPU) to finish the work queued so far; nothing on the CPU."""
        if self._on_cuda:
            torch.cuda.synchronize(self.device)

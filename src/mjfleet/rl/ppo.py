"""PPO whose ranks meet once per mini-batch.

rsl-rl-lib 5.5's distributed PPO issues three collectives per mini-batch when the learning rate adapts to the KL
divergence: an all-reduce of the KL, a broadcast of rank 0's learning rate, and the gradient all-reduce. Each is a
round trip that also waits for the slowest rank, which dominates on gloo (a few hundred microseconds each on one
machine, far more between hosts). The learning rate only takes effect at ``optimizer.step()``, after the gradient
all-reduce, so the KL can travel in the gradient buffer: every rank then applies the same rule to the same averaged
KL and arrives at the same learning rate without a broadcast. The arithmetic is the same as rsl_rl's, so results
are bit-identical (``tests/test_ppo_sync.py``, gloo). With NCCL and three or more ranks the order of the sum can
depend on the buffer's size, which the KL changes by one element, so the last bit may differ from rsl_rl's; the
replicas still agree with each other, since every rank receives the same all-reduce result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

import torch
import torch.distributed as dist
from rsl_rl.algorithms import PPO

MIN_LEARNING_RATE = 1e-5
MAX_LEARNING_RATE = 1e-2
MINI_BATCH_GENERATORS = ("mini_batch_generator", "recurrent_mini_batch_generator")
"""The ``RolloutStorage`` methods through which ``PPO.update`` draws its mini-batches."""


def adapt_learning_rate(learning_rate: float, kl: torch.Tensor, desired_kl: float) -> float:
    """The adaptive schedule: shrink by 1.5 above twice the target KL, grow by 1.5 below half of it.

    ``kl`` stays a tensor so the thresholds are compared in its precision, as rsl_rl does.
    """
    if kl > desired_kl * 2.0:
        return max(MIN_LEARNING_RATE, learning_rate / 1.5)
    if kl < desired_kl / 2.0 and kl > 0.0:
        return min(MAX_LEARNING_RATE, learning_rate * 1.5)
    return learning_rate


class SyncedPPO(PPO):
    """:class:`rsl_rl.algorithms.PPO` with one collective per mini-batch in distributed adaptive-KL training.

    The choice is made once, at construction. When fusing, rsl_rl runs its ``"fixed"`` schedule (so its update never
    touches the learning rate or issues the KL collectives) and :meth:`reduce_parameters`, which rsl_rl calls once
    per mini-batch between the backward pass and the optimizer step, applies the adaptive rule to the averaged KL.
    Single-process training, the fixed schedule and symmetry augmentation (whose KL covers only the original
    samples) run rsl_rl's update unchanged. What this relies on in rsl-rl-lib is pinned by
    ``tests/test_rsl_rl_contract.py``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fuse_kl = bool(
            self.is_multi_gpu and self.schedule == "adaptive" and self.desired_kl is not None and not self.symmetry
        )
        """Whether the adaptive schedule's KL travels in the gradient all-reduce (see the class docstring)."""
        self.sync_s = 0.0
        """Seconds spent in :meth:`reduce_parameters` since the caller last reset it (the gradient sync's share)."""
        self._on_cuda = torch.device(self.device).type == "cuda"
        self._batch: Any = None
        """The mini-batch being learned from (recorded only when fusing)."""
        if self.fuse_kl:
            self.schedule = "fixed"
            # The KL needs the mini-batch's old distribution; rsl_rl's update only hands the batch to its own code.
            for name in MINI_BATCH_GENERATORS:
                setattr(self.storage, name, self._recording(getattr(self.storage, name)))

    def _recording(self, generator: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def record(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for batch in generator(*args, **kwargs):
                self._batch = batch
                yield batch

        return record

    def reduce_parameters(self) -> None:
        """Average gradients over ranks; when fusing, the mini-batch's KL rides along and sets the learning rate."""
        # On a GPU the collective is only queued: time it between two waits for the device, or the backward pass
        # (before) and the all-reduce itself (after) would be counted in the wrong place. Multi-worker runs only.
        self.synchronize()
        start = time.perf_counter()
        if self.fuse_kl:
            self._reduce_with_kl()
        else:
            super().reduce_parameters()
        self.synchronize()
        self.sync_s += time.perf_counter() - start

    def synchronize(self) -> None:
        """Wait for this rank's device (a GPU) to finish the work queued so far; nothing on the CPU."""
        if self._on_cuda:
            torch.cuda.synchronize(self.device)

    def _reduce_with_kl(self) -> None:
        assert self.desired_kl is not None and self._batch is not None
        with torch.no_grad():
            new_params = self.actor.output_distribution_params  # from this mini-batch's forward pass
            kl = torch.mean(self.actor.get_kl_divergence(self._batch.old_distribution_params, new_params))
        params = chain(self.actor.parameters(), self.critic.parameters())
        if self.rnd:
            params = chain(params, self.rnd.parameters())
        grads = [p.grad.view(-1) for p in params if p.grad is not None]
        if grads and sum(g.numel() * g.element_size() for g in grads) <= self.grad_reduce_bucket_mb * 1024 * 1024:
            buffer = torch.cat([*grads, kl.reshape(1).to(grads[0].dtype)])
            dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
            buffer /= self.gpu_world_size
            offset = 0
            for g in grads:
                g.copy_(buffer[offset : offset + g.numel()])
                offset += g.numel()
            kl = buffer[offset]
        else:  # larger than one bucket: rsl_rl's bounded buckets, then the KL on its own (still no broadcast)
            super().reduce_parameters()
            dist.all_reduce(kl, op=dist.ReduceOp.SUM)
            kl /= self.gpu_world_size
        learning_rate = adapt_learning_rate(self.learning_rate, kl, self.desired_kl)
        # rsl_rl broadcasts the rate as a float32 tensor; keep that rounding so both paths agree bit for bit.
        self.learning_rate = torch.tensor(learning_rate, dtype=torch.float32).item()
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

"""Are the data-parallel replicas still identical? A digest of everything the ranks must agree on."""

from __future__ import annotations

import hashlib

import torch
import torch.distributed as dist

from mjfleet.errors import FatalTrainingError
from mjfleet.rl.learners.base import Learner


class ReplicaDivergenceError(FatalTrainingError):
    """Workers no longer hold identical parameters or optimizer state."""


def digest(tensors: list[torch.Tensor]) -> str:
    """SHA-256 of the tensors' bytes, in order."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def replica_digest(learner: Learner) -> str:
    """Digest of parameters, normaliser statistics, optimizer state and learning rate
    (:meth:`~mjfleet.rl.learners.base.Learner.replica_tensors`)."""
    return digest(learner.replica_tensors())


def check_replicas(learner: Learner, world_size: int, iteration: int) -> str:
    """Stop with :class:`ReplicaDivergenceError` unless every rank holds the same digest (a collective); returns
    the digest they agree on."""
    gathered: list[str] = [""] * world_size
    dist.all_gather_object(gathered, replica_digest(learner))
    differing = [rank for rank, d in enumerate(gathered) if d != gathered[0]]
    if differing:
        raise ReplicaDivergenceError(f"ranks {differing} diverged from rank 0 at iteration {iteration}")
    return gathered[0]

"""Are the data-parallel replicas still identical? A digest of everything the ranks must agree on."""

from __future__ import annotations

import hashlib

import torch
import torch.distributed as dist
from rsl_rl.algorithms import PPO

from mjfleet.errors import FatalTrainingError


class ReplicaDivergenceError(FatalTrainingError):
    """Workers no longer hold identical parameters or optimizer state."""


def digest(tensors: list[torch.Tensor]) -> str:
    """SHA-256 of the tensors' bytes, in order."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def replica_digest(alg: PPO) -> str:
    """Digest of parameters, normaliser statistics, optimizer state and learning rate."""
    tensors: list[torch.Tensor] = []
    for model in (alg.actor, alg.critic):
        tensors += list(model.state_dict().values())
    for state in alg.optimizer.state_dict()["state"].values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    tensors.append(torch.tensor([alg.learning_rate], dtype=torch.float64))
    return digest(tensors)


def check_replicas(alg: PPO, world_size: int, iteration: int) -> str:
    """Stop with :class:`ReplicaDivergenceError` unless every rank holds the same digest (a collective); returns
    the digest they agree on."""
    gathered: list[str] = [""] * world_size
    dist.all_gather_object(gathered, replica_digest(alg))
    differing = [rank for rank, d in enumerate(gathered) if d != gathered[0]]
    if differing:
        raise ReplicaDivergenceError(f"ranks {differing} diverged from rank 0 at iteration {iteration}")
    return gathered[0]

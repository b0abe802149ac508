"""skrl imported without its own process group, and told this worker's place in the job by mjfleet.

``skrl/__init__.py`` reads ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK`` when it is first imported and, where
``WORLD_SIZE`` is above 1, calls ``torch.distributed.init_process_group("nccl", ...)`` and ``torch.cuda.set_device``
itself. mjfleet's worker has created the job's one process group before any learner exists (gloo on CPU workers and
on GPUs that several workers share, NCCL otherwise: :mod:`mjfleet.runtime.context`); a second initialisation fails,
and on CPU workers it would ask for NCCL, which they have not. So importing this module imports skrl with
``WORLD_SIZE`` hidden (1) for the duration of the import, and :func:`configure_skrl` then sets skrl's torch
configuration from mjfleet's :class:`~mjfleet.runtime.context.DistributedContext`. It has no public setter for
these, so the private fields its properties read are set: ``_is_distributed``, ``_rank``, ``_world_size``,
``_local_rank`` and ``_device``. skrl's own collectives (the models' gradient all-reduce ``reduce_parameters`` and
``broadcast_parameters``, PPO's KL all-reduce) read them and run on mjfleet's group, gloo or NCCL.

Every mjfleet module that uses skrl imports this one first (``# isort: split`` keeps the order).
``tests/test_skrl_contract.py`` fails loudly if an upgrade of skrl changes what this relies on.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mjfleet.runtime.context import DistributedContext


def _import_skrl() -> ModuleType:
    """``import skrl`` with ``WORLD_SIZE`` hidden, so that its import sets up no process group of its own."""
    world_size = os.environ.get("WORLD_SIZE")
    if world_size is not None:
        os.environ["WORLD_SIZE"] = "1"
    try:
        import skrl
    finally:
        if world_size is not None:
            os.environ["WORLD_SIZE"] = world_size
    # skrl logs through a coloured handler of its own at DEBUG; its warnings go through mjfleet's logging instead.
    for handler in list(skrl.logger.handlers):
        skrl.logger.removeHandler(handler)
    skrl.logger.setLevel(logging.WARNING)
    return skrl


skrl = _import_skrl()


def configure_skrl(ctx: DistributedContext) -> None:
    """Give skrl's torch configuration this worker's rank, world size and device (before any skrl agent or model is
    built: agents broadcast their parameters at construction where it says the run is distributed)."""
    torch_config = skrl.config.torch
    torch_config._is_distributed = ctx.is_distributed
    torch_config._rank = ctx.rank
    torch_config._world_size = ctx.world_size
    torch_config._local_rank = ctx.local_rank
    torch_config._device = ctx.device

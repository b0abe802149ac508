"""A run that diverged: which quantity of a rank became NaN or Inf, and the one message every rank raises."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from mjfleet.errors import FatalTrainingError


class NonFiniteTrainingError(FatalTrainingError):
    """A loss, parameter or normaliser statistic became NaN or Inf."""


def nonfinite_quantity(losses: Mapping[str, float], modules: Mapping[str, nn.Module]) -> str | None:
    """Which of ``losses`` or of the parameters and buffers of ``modules`` is NaN/Inf, in words, or None."""
    for name, value in losses.items():
        if not math.isfinite(value):
            return f"the {name} loss is {value}"
    for label, model in modules.items():
        for name, t in model.state_dict().items():
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                return f"{label} {name} is not finite"
    return None


def divergence_message(it: int, what: str, last_checkpoint: Path | None, learning_rate_flag: str) -> str:
    """What diverged at iteration ``it``, what is kept, and the flag to turn."""
    kept = (
        f"the last good checkpoint is {last_checkpoint}"
        if last_checkpoint is not None
        else "no checkpoint was written before it"
    )
    return (
        f"training diverged at iteration {it}: {what}; this iteration was not saved and {kept}"
        f" (try a lower {learning_rate_flag})"
    )

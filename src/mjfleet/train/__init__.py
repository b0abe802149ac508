"""The training flow: configuration and its checks, the launch plan, the worker function, restarts.

The public API, light to import (no torch, simulator or rsl_rl until a run starts)::

    from mjfleet.train import TrainConfig, describe, prepare, run
"""

from mjfleet.train.api import Prepared, describe, prepare, run
from mjfleet.train.config import TrainConfig, validate

__all__ = ["Prepared", "TrainConfig", "describe", "prepare", "run", "validate"]

"""Rank 0's metric sinks: TensorBoard events, optionally mirrored to Weights & Biases."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class MetricsWriter:
    """Writes scalars to TensorBoard in the run directory; with ``use_wandb`` W&B mirrors them.

    W&B honours ``WANDB_MODE`` (``offline`` writes under ``<run_dir>/wandb`` and never touches the network).
    """

    def __init__(
        self, run_dir: Path, use_wandb: bool = False, project: str = "mjfleet", config: dict[str, Any] | None = None
    ) -> None:
        self._wandb_run: Any = None
        if use_wandb:
            import wandb

            self._wandb_run = wandb.init(
                project=project, name=run_dir.name, dir=str(run_dir), config=config or {}, sync_tensorboard=True
            )
        from torch.utils.tensorboard import SummaryWriter

        self._tb = SummaryWriter(log_dir=str(run_dir), flush_secs=10)

    def add_scalars(self, values: dict[str, float], step: int) -> None:
        """Log each value under its key at ``step``."""
        for key, value in values.items():
            self._tb.add_scalar(key, value, step)

    def close(self) -> None:
        """Flush and close every sink."""
        self._tb.flush()
        self._tb.close()
        if self._wandb_run is not None:
            self._wandb_run.finish()

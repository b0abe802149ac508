"""Where a run starts (fresh or from a checkpoint) and where it ends."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint import hidden_dims, load_checkpoint, newest_loadable_checkpoint, resolve_checkpoint
from mjfleet.train.checkpoint_source import is_onnx
from mjfleet.train.config import TrainConfig
from mjfleet.train.wandb_source import DOWNLOAD_DIR, fetch, is_wandb_ref


@dataclass(frozen=True)
class StartPoint:
    """Where a (re)started run begins and where it ends; identical for every worker of a launch."""

    checkpoint: Path | None
    """Checkpoint file every rank loads first (already resolved, so all ranks load the same file); None: fresh."""
    final_iteration: int
    """Train until this iteration has completed (a restart runs only the iterations left)."""
    start_iteration: int = 0
    """Iteration stored in ``checkpoint`` (0 for a fresh start)."""


def plan_start(cfg: TrainConfig) -> StartPoint:
    """The first attempt's start: ``--resume`` resolved to one validated checkpoint, then ``max_iterations`` more.

    A ``wandb:`` reference is downloaded here, once, under ``<log_root>/.wandb_downloads``; every worker then loads
    that file.

    Raises :class:`~mjfleet.errors.UsageError` for a missing, truncated or foreign checkpoint.
    """
    if cfg.resume is None:
        return StartPoint(checkpoint=None, final_iteration=cfg.agent.max_iterations)
    resume = cfg.resume
    if is_wandb_ref(resume):
        resume = fetch(str(resume), cfg.log_root / DOWNLOAD_DIR)
        if is_onnx(resume):
            raise UsageError(f"--resume {cfg.resume}: an ONNX export holds no training state; name a model_<it>.pt")
    checkpoint = resolve_checkpoint(resume)
    data = load_checkpoint(checkpoint)
    _check_networks(cfg, checkpoint, data)
    start_iteration = int(data["iter"])
    return StartPoint(
        checkpoint=checkpoint,
        final_iteration=start_iteration + cfg.agent.max_iterations,
        start_iteration=start_iteration,
    )


def _check_networks(cfg: TrainConfig, checkpoint: Path, data: dict[str, Any]) -> None:
    """The networks this run builds must take the checkpoint's weights (otherwise every worker would fail to load
    them after the run directory exists)."""
    for role in ("actor", "critic"):
        saved = hidden_dims(data.get(f"{role}_state_dict") or {})
        wanted = getattr(cfg.agent.policy, f"{role}_hidden_dims")
        if saved is not None and saved != tuple(wanted):
            flag = f"--agent.policy.{role}-hidden-dims"
            raise UsageError(
                f"--resume {checkpoint}: its {role} has hidden layers {' '.join(map(str, saved))}, this run's"
                f" {' '.join(map(str, wanted))}; pass {flag} {' '.join(map(str, saved))} to continue it"
            )


def continue_point(run_dir: Path, first: StartPoint) -> StartPoint:
    """Where a run continues (a restart, a restarted or requeued job): the newest loadable checkpoint of
    ``run_dir``, else where its first start began (from scratch, or the checkpoint of the run it resumed)."""
    newest = newest_loadable_checkpoint(run_dir)
    if newest is None:
        return first
    path, data = newest
    return replace(first, checkpoint=path, start_iteration=int(data["iter"]))

"""A run's start point: where a (re)started run begins (fresh or from a checkpoint) and where it ends."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from mjfleet.rl.checkpoint.files import newest_loadable_checkpoint


@dataclass(frozen=True)
class StartPoint:
    """Where a (re)started run begins and where it ends; identical for every worker of a launch."""

    checkpoint: Path | None
    """Checkpoint file every rank loads first (already resolved, so all ranks load the same file); None: fresh."""
    final_iteration: int
    """Train until this iteration has completed (a restart runs only the iterations left)."""
    start_iteration: int = 0
    """Iteration stored in ``checkpoint`` (0 for a fresh start)."""
    another_run: bool = False
    """Whether ``checkpoint`` is another run's (``--resume`` starts a new run, with its settings): the learning rate is
    then this run's setting and the stop condition counts this run's evaluation episodes alone. A run's own
    checkpoint (a restart, ``--finish``) continues the rate it saved (an adaptive schedule's), its evaluation window
    and the condition's streak."""


def continue_point(run_dir: Path, first: StartPoint) -> StartPoint:
    """Where a run continues (a restart, a restarted or requeued job): the newest loadable checkpoint of
    ``run_dir``, else where its first start began (from scratch, or the checkpoint of the run it resumed)."""
    newest = newest_loadable_checkpoint(run_dir)
    if newest is None:
        return first
    path, data = newest
    return replace(first, checkpoint=path, start_iteration=int(data["iter"]), another_run=False)

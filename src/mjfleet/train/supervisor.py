"""Automatic restarts: relaunch every worker from the newest checkpoint of the same run after a worker dies.

A restart continues the run rather than extending it: it loads the newest loadable ``model_<k>.pt`` of the run
directory (or, if none was written yet, what the first attempt started from) and trains only up to the final
iteration the first attempt was asked for. Each restart appends one line to ``<run_dir>/restarts.log``.

Failures that a restart would only repeat are never retried: invalid input (:class:`~mjfleet.errors.UsageError`),
:class:`~mjfleet.errors.FatalTrainingError` (non-finite values, diverged replicas, a full disk), code that cannot
be imported on the workers. Neither is a run the user asked to stop.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from mjfleet.cluster.hosts import HostError
from mjfleet.launch.launcher import LaunchPlan, WorkerFailure
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.runs.start import StartPoint, continue_point
from mjfleet.runtime.stop import StopRequest
from mjfleet.train.config import TrainConfig
from mjfleet.train.own_launcher import launch_training

logger = logging.getLogger(__name__)

RESTART_LOG = "restarts.log"
"""One line per automatic restart: time, attempt, failed rank, iteration resumed from, checkpoint, cause."""


def append_restart_log(
    run_dir: Path, attempt: int, max_restarts: int, failure: WorkerFailure, start: StartPoint
) -> None:
    """Append one line describing a restart to ``<run_dir>/restarts.log``."""
    cause = failure.error.splitlines()[0] if failure.error else "unknown"
    rank = "-" if failure.rank is None else str(failure.rank)
    checkpoint = "none (from scratch)" if start.checkpoint is None else str(start.checkpoint)
    line = (
        f"{datetime.now().astimezone().isoformat(timespec='seconds')} restart={attempt}/{max_restarts}"
        f" rank={rank} resume_iteration={start.start_iteration} checkpoint={checkpoint} cause={cause}\n"
    )
    with (run_dir / RESTART_LOG).open("a") as f:
        f.write(line)


def supervise(
    cfg: TrainConfig,
    run_dir: Path,
    plan: LaunchPlan,
    first: StartPoint,
    stop: StopRequest | None = None,
) -> list[WorkerResult]:
    """Launch the workers of ``plan``, and relaunch them after a retryable failure up to ``cfg.max_restarts`` times.

    Raises the last :class:`WorkerFailure` when a failure is not retryable, the restarts are used up, or a stop
    was requested; a host that cannot take part in the first launch raises its :class:`HostError` (a relaunch that
    finds a host gone is a failed attempt).
    """
    start = first
    attempt = 0
    while True:
        try:
            return launch_training(cfg, run_dir, plan, start, stop)
        except HostError as e:
            if attempt == 0:
                raise  # the hosts as given cannot take part: the user's to fix, nothing was trained
            failure = WorkerFailure(f"relaunch {attempt} failed: {e}", rank=None, error=str(e))
        except WorkerFailure as e:
            failure = e
        if not failure.retryable or attempt >= cfg.max_restarts or (stop is not None and stop.signum):
            if not failure.retryable and cfg.max_restarts > 0:
                logger.info("not restarting: a restart would fail the same way")
            raise failure
        attempt += 1
        start = continue_point(run_dir, first)
        append_restart_log(run_dir, attempt, cfg.max_restarts, failure, start)
        logger.error("%s", str(failure).splitlines()[0])
        logger.warning(
            "restarting all workers (%d of %d) from %s; training continues to iteration %d",
            attempt,
            cfg.max_restarts,
            f"iteration {start.start_iteration} ({start.checkpoint})" if start.checkpoint is not None else "scratch",
            start.final_iteration,
        )

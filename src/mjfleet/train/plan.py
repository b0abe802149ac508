"""The plan of a run: every input checked and resolved once by :func:`mjfleet.train.prepare`, read by everything
downstream (the launcher, the workers, ``--dry-run``), never derived again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from mjfleet.launch.launcher import LaunchPlan
from mjfleet.runs.directory import create_run_dir, remove_stale_temporaries
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.train.config import TrainConfig
from mjfleet.train.external import ExternalJob
from mjfleet.train.planner import RunStart

logger = logging.getLogger("mjfleet.train")


@dataclass(frozen=True)
class Prepared:
    """A checked and planned run that has not created anything yet."""

    cfg: TrainConfig
    selection: DeviceSelection
    run: RunStart | None
    """The run this start trains and where it begins; None where rank 0 of another launcher's job decides it once
    the ranks have met (:attr:`external`)."""
    launch_plan: LaunchPlan | None
    """How mjfleet's own launcher starts the workers (restarts reuse it); None: this process trains."""
    external: ExternalJob | None = None
    """The job another launcher (torchrun, srun) made this process a rank of; None when it started no one."""


def open_run_dir(run: RunStart) -> Path:
    """Create the planned run directory with its ``job.json``, or reopen the one this start continues."""
    if run.continues:
        identity = run.identity
        given = f" (run id {identity.value} from {identity.source})" if identity is not None else ""
        remove_stale_temporaries(run.run_dir)
        if run.extended_from is not None:
            run.record.write(run.run_dir)
            logger.info(
                "extending run %s from iteration %d to %d (--agent.max-iterations)",
                run.run_dir,
                run.extended_from,
                run.record.final_iteration,
            )
        logger.info(
            "continuing run %s%s at iteration %d, to iteration %d",
            run.run_dir,
            given,
            run.start.start_iteration + 1,
            run.start.final_iteration,
        )
        return run.run_dir
    run_dir = create_run_dir(run.run_dir)
    run.record.write(run_dir)
    logger.info("run directory: %s", run_dir)
    return run_dir

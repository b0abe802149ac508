"""The plan of a run: every input checked and resolved once by :func:`mjfleet.train.prepare`, read by everything
downstream (the launcher, the workers, ``--dry-run``), never derived again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from mjfleet.launch.launcher import LaunchPlan
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.train.config import TrainConfig
from mjfleet.train.external import ExternalJob
from mjfleet.train.run_dir import create_run_dir
from mjfleet.train.run_identity import RunIdentity, record
from mjfleet.train.start import StartPoint

logger = logging.getLogger("mjfleet.train")


@dataclass(frozen=True)
class Prepared:
    """A checked and planned run that has not created anything yet."""

    cfg: TrainConfig
    selection: DeviceSelection
    start: StartPoint
    run_dir: Path
    """The run directory, named now and created by :func:`run` (worker logs go inside it); an existing one when
    :attr:`continues`. Under an external launcher rank 0's choice is the one every rank uses."""
    plan: LaunchPlan | None
    """How mjfleet's own launcher starts the workers (restarts reuse it); None: this process trains."""
    external: ExternalJob | None = None
    """The job another launcher (torchrun, srun) made this process a rank of; None when it started no one."""
    identity: RunIdentity | None = None
    """The job the run belongs to (``--run-id``, the SLURM job, torchrun's run id); None: a new run."""
    continues: bool = False
    """The identity already has :attr:`run_dir`: training continues there from its newest checkpoint."""


def open_run_dir(prepared: Prepared) -> Path:
    """Create the planned run directory (recording its identity), or reopen the one the identity continues."""
    if prepared.continues:
        start = prepared.start
        logger.info(
            "continuing run %s (run id %s from %s) at iteration %d, to iteration %d",
            prepared.run_dir,
            prepared.identity.value if prepared.identity else "",
            prepared.identity.source if prepared.identity else "",
            start.start_iteration + 1,
            start.final_iteration,
        )
        return prepared.run_dir
    run_dir = create_run_dir(prepared.run_dir)
    if prepared.identity is not None:
        record(run_dir, prepared.identity, prepared.start)
    logger.info("run directory: %s", run_dir)
    return run_dir

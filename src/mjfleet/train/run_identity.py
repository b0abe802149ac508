"""A run directory belongs to a job, not to a process start: a restarted or requeued job continues its own run.

The identity is resolved once, first match wins: ``--run-id``; the SLURM job (with its array task and step), which
survives a requeue; torchrun's run id (``--rdzv-id``, or the random one of ``--standalone``), which stays the same
across one torchrun's restarts; with torchrun's default static rendezvous (run id ``none``), the torchrun process
on rank 0's node. Without any of them every start is a new run.

A run made under an identity records it in ``<run_dir>/job.json`` with where the run began and the iteration it
trains to; a later start with the same identity finds that directory and continues from its newest checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mjfleet.files import write_text_atomic
from mjfleet.train.external import ExternalJob
from mjfleet.train.start import StartPoint

logger = logging.getLogger(__name__)

JOB_FILE = "job.json"
"""In a run directory made under an identity: ``{"run_id", "source", "final_iteration", "start_iteration",
"checkpoint"}``."""


@dataclass(frozen=True)
class RunIdentity:
    """Which job a run belongs to."""

    value: str
    source: str
    """Where it came from, for the log: ``--run-id``, ``SLURM_JOB_ID``, ``TORCHELASTIC_RUN_ID`` or ``torchrun``."""


def run_identity(run_id: str | None, env: Mapping[str, str], job: ExternalJob | None) -> RunIdentity | None:
    """The identity of this start (see the module docstring); None: a new run.

    The job's own identities apply to the ranks of an external launcher: mjfleet's own launcher inside a SLURM
    batch script names the job with ``--run-id $SLURM_JOB_ID``, so two ``train`` commands of one interactive
    allocation stay two runs.
    """
    if run_id:
        return RunIdentity(run_id, "--run-id")
    if job is None:
        return None
    slurm_job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if slurm_job:
        value = f"slurm-{slurm_job}"
        if env.get("SLURM_ARRAY_TASK_ID"):
            value += f"_{env['SLURM_ARRAY_TASK_ID']}"
        step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")
        if step:
            value += f".{step}"
        return RunIdentity(value, "SLURM_JOB_ID")
    if job.launcher != "torchrun":
        return None
    elastic = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic != "none":
        return RunIdentity(f"torchrun-{elastic}", "TORCHELASTIC_RUN_ID")
    if elastic:
        # The static rendezvous' run id is "none" for every torchrun: only rank 0's torchrun process is constant
        # across its restarts (rank 0 decides the run directory, so the other nodes need not agree on this).
        return RunIdentity(f"torchrun-{socket.gethostname()}-{os.getppid()}", "torchrun")
    return None


def find_run(experiment_dir: Path, identity: RunIdentity) -> Path | None:
    """The run directory of ``experiment_dir`` recorded under ``identity`` (the newest, should there be several)."""
    try:
        runs = sorted(p for p in experiment_dir.iterdir() if (p / JOB_FILE).is_file())
    except OSError:
        return None
    for run in reversed(runs):
        try:
            if json.loads((run / JOB_FILE).read_text()).get("run_id") == identity.value:
                return run
        except (OSError, ValueError):
            logger.warning("ignoring unreadable %s", run / JOB_FILE)
    return None


def record(run_dir: Path, identity: RunIdentity, start: StartPoint) -> None:
    """Write ``job.json`` into a new run directory (rank 0, once, before training)."""
    payload = {
        "run_id": identity.value,
        "source": identity.source,
        "final_iteration": start.final_iteration,
        "start_iteration": start.start_iteration,
        "checkpoint": None if start.checkpoint is None else str(start.checkpoint),
    }
    write_text_atomic(run_dir / JOB_FILE, json.dumps(payload, indent=2) + "\n")


def first_start(run_dir: Path) -> StartPoint:
    """Where the run recorded in ``run_dir`` began and where it ends."""
    data = json.loads((run_dir / JOB_FILE).read_text())
    checkpoint = data.get("checkpoint")
    return StartPoint(
        checkpoint=None if checkpoint is None else Path(checkpoint),
        final_iteration=int(data["final_iteration"]),
        start_iteration=int(data.get("start_iteration", 0)),
    )

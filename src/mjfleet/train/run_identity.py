"""A run directory belongs to a job and its configuration, not to a process start.

The job part is resolved once, first match wins: ``--run-id`` (chosen by the user); the SLURM job (with its array
task and step), which survives a requeue; torchrun's run id (``--rdzv-id``, or the random one of ``--standalone``),
which stays the same across one torchrun's restarts; with torchrun's static rendezvous (run id ``none``), a token
that rank 0 leaves in torchrun's own store, which lives exactly as long as that torchrun. Without any of them every
start is a new run. No process id takes part: a container re-created with the same name and torchrun as PID 1 is
another invocation.

The configuration part is :func:`~mjfleet.train.fingerprint.fingerprint`. Every run records both in
``<run_dir>/job.json`` (:class:`RunRecord`) when it is created, with where it began, the iteration it trains to and,
once it ended, how. A later start of the same job with the same fingerprint continues that run; with another
fingerprint it is another run (a sweep in one allocation), except under ``--run-id``, which refuses it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mjfleet.files import write_text_atomic
from mjfleet.train.external import ExternalJob, slurm_job_key
from mjfleet.train.start import StartPoint

logger = logging.getLogger(__name__)

JOB_FILE = "job.json"
"""The run's record (:class:`RunRecord`), written when the run directory is created."""

Ending = Literal["finished", "condition", "stopped", "failed"]


@dataclass(frozen=True)
class RunIdentity:
    """Which job a run belongs to."""

    value: str
    source: str
    """Where it came from, for the log: ``--run-id``, ``SLURM_JOB_ID``, ``TORCHELASTIC_RUN_ID`` or ``torchrun``."""

    @property
    def chosen(self) -> bool:
        """Named by the user (``--run-id``): another configuration under it is refused, not made a second run."""
        return self.source == "--run-id"


def run_identity(
    run_id: str | None, env: Mapping[str, str], job: ExternalJob | None, invocation: str | None = None
) -> RunIdentity | None:
    """The identity of this start (see the module docstring); None: a new run.

    The job's own identities apply to the ranks of an external launcher: mjfleet's own launcher inside a SLURM
    batch script names the job with ``--run-id $SLURM_JOB_ID``, so two ``train`` commands of one interactive
    allocation stay two runs. ``invocation``: the token of this torchrun invocation where its rendezvous is static.
    """
    if run_id:
        return RunIdentity(run_id, "--run-id")
    if job is None:
        return None
    slurm = slurm_job_key(env)
    if slurm is not None:
        return RunIdentity(slurm, "SLURM_JOB_ID")
    if job.launcher != "torchrun":
        return None
    elastic = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic != "none":
        return RunIdentity(f"torchrun-{elastic}", "TORCHELASTIC_RUN_ID")
    if invocation:
        return RunIdentity(f"torchrun-{invocation}", "torchrun")  # static rendezvous: this invocation's token
    return None


@dataclass(frozen=True)
class RunRecord:
    """What ``<run_dir>/job.json`` holds: the run's configuration and identity, its first start, how it ended."""

    fingerprint: str
    """:func:`~mjfleet.train.fingerprint.fingerprint` of :attr:`settings`."""
    settings: dict[str, Any]
    """What decides what the run trains (:func:`~mjfleet.train.fingerprint.training_settings`)."""
    task: str
    final_iteration: int
    """The iteration the run trains to."""
    start_iteration: int = 0
    """Where its first start began (the iteration of the checkpoint it resumed, else 0)."""
    checkpoint: str | None = None
    """The checkpoint its first start resumed (``--resume``), or None."""
    run_id: str | None = None
    source: str | None = None
    ended: dict[str, Any] | None = None
    """``{"how": finished|condition|stopped|failed, "iteration", "message"}`` of the last start that ended."""

    @property
    def identity(self) -> RunIdentity | None:
        """The job the run was made for, or None."""
        return None if self.run_id is None else RunIdentity(self.run_id, self.source or "")

    @property
    def first_start(self) -> StartPoint:
        """Where the run began and where it ends."""
        checkpoint = None if self.checkpoint is None else Path(self.checkpoint)
        return StartPoint(checkpoint, self.final_iteration, self.start_iteration)

    @property
    def over(self) -> bool:
        """Whether the run ended for good: trained to its end, or its ``--stop-when`` condition held."""
        return self.ended is not None and self.ended.get("how") in ("finished", "condition")

    @property
    def failed(self) -> bool:
        """Whether its training failed in a way that a restart would repeat (diverged)."""
        return self.ended is not None and self.ended.get("how") == "failed"

    def describe_end(self) -> str:
        """``ended at iteration 80 (--stop-when held)`` and the like."""
        ended = self.ended or {}
        how = {"finished": "finished", "condition": "its --stop-when condition held", "stopped": "stopped"}
        what = how.get(str(ended.get("how")), str(ended.get("message") or "failed"))
        return f"ended at iteration {ended.get('iteration')} ({what})"

    def write(self, run_dir: Path) -> None:
        """(Re)write ``job.json`` whole."""
        write_text_atomic(run_dir / JOB_FILE, json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, run_dir: Path) -> RunRecord | None:
        """The record of ``run_dir``; None where there is none, or one an older mjfleet wrote without its
        configuration (such a run is never continued)."""
        path = run_dir / JOB_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            logger.warning("ignoring unreadable %s", path)
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or "fingerprint" not in data:
            return None
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except TypeError:
            logger.warning("ignoring incomplete %s", path)
            return None


def runs_of(experiment_dir: Path, identity: RunIdentity) -> list[tuple[Path, RunRecord]]:
    """The runs of ``experiment_dir`` recorded under ``identity``, newest first."""
    try:
        candidates = sorted((p for p in experiment_dir.iterdir() if (p / JOB_FILE).is_file()), reverse=True)
    except OSError:
        return []
    found = []
    for run_dir in candidates:
        record = RunRecord.read(run_dir)
        if record is not None and record.run_id == identity.value:
            found.append((run_dir, record))
    return found


def record_end(run_dir: Path, how: Ending, iteration: int, message: str | None = None) -> None:
    """Note in ``job.json`` how this start of the run ended (rank 0, at the end)."""
    record = RunRecord.read(run_dir)
    if record is None:
        return
    ended = {"how": how, "iteration": iteration, "message": message}
    try:
        dataclasses.replace(record, ended=ended).write(run_dir)
    except OSError as e:  # the run's checkpoints are what matter; a full disk must not hide the real ending
        logger.warning("could not record the end of the run in %s: %s", run_dir / JOB_FILE, e)

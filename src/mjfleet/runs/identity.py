"""A run directory belongs to a job and its configuration, not to a process start.

The job part is resolved once, first match wins: ``--run-id`` (chosen by the user); the SLURM job (with its array
task and step), which survives a requeue; torchrun's run id (``--rdzv-id``, or the random one of ``--standalone``),
which stays the same across one torchrun's restarts; with torchrun's static rendezvous (run id ``none``), a token
that rank 0 leaves in torchrun's own store, which lives exactly as long as that torchrun. Without any of them every
start is a new run. No process id takes part: a container re-created with the same name and torchrun as PID 1 is
another invocation.

The configuration part is :func:`~mjfleet.runs.fingerprint.fingerprint`. Every run records both in
``<run_dir>/job.json`` (:class:`~mjfleet.runs.record.RunRecord`) when it is created. A later start of the same job
with the same fingerprint continues that run; with another fingerprint it is another run (a sweep in one
allocation), except under ``--run-id``, which refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RunIdentity:
    """Which job a run belongs to."""

    value: str
    """The job's name, as recorded in ``job.json`` (``slurm-99_3.1``, ``torchrun-<id>``, or ``--run-id``'s)."""
    source: str
    """Where it came from, for the log: ``--run-id``, ``SLURM_JOB_ID``, ``TORCHELASTIC_RUN_ID`` or ``torchrun``."""

    @property
    def chosen(self) -> bool:
        """Named by the user (``--run-id``): another configuration under it is refused, not made a second run."""
        return self.source == "--run-id"


def run_identity(
    run_id: str | None, env: Mapping[str, str], launcher: str | None, invocation: str | None = None
) -> RunIdentity | None:
    """The identity of this start (see the module docstring); None: a new run.

    ``launcher``: the launcher that made this process one rank of its job (``torchrun``, ``srun``), or None when
    ``train`` was started by itself. The job's own identities apply to the ranks of such a launcher only: mjfleet's
    own launcher inside a SLURM batch script names the job with ``--run-id $SLURM_JOB_ID``, so two ``train``
    commands of one interactive allocation stay two runs. ``invocation``: the token of this torchrun invocation
    where its rendezvous is static.
    """
    if run_id:
        return RunIdentity(run_id, "--run-id")
    if launcher is None:
        return None
    slurm = slurm_job_key(env)
    if slurm is not None:
        return RunIdentity(slurm, "SLURM_JOB_ID")
    if launcher != "torchrun":
        return None
    elastic = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic != "none":
        return RunIdentity(f"torchrun-{elastic}", "TORCHELASTIC_RUN_ID")
    if invocation:
        return RunIdentity(f"torchrun-{invocation}", "torchrun")  # static rendezvous: this invocation's token
    return None


def slurm_job_key(env: Mapping[str, str]) -> str | None:
    """``slurm-<job>[_<array task>][.<step>]``: the same in every task of one step and after a requeue."""
    job = (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "").strip()
    if not job:
        return None
    value = f"slurm-{job}"
    if env.get("SLURM_ARRAY_TASK_ID", "").strip():
        value += f"_{env['SLURM_ARRAY_TASK_ID'].strip()}"
    step = (env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID") or "").strip()
    if step:
        value += f".{step}"
    return value

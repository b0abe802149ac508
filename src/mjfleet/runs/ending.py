"""How a run ended (:data:`Ending`, the one word for it: in ``job.json``, in its last lines and in ``train``'s exit),
and the last lines of a run: how it ended, what it trained, where it is and what to run next."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mjfleet.rl.checkpoint.files import list_checkpoints
from mjfleet.rl.reporting.progress import format_duration

if TYPE_CHECKING:
    from mjfleet.envs.config import EnvConfig

Ending = Literal["finished", "condition", "stopped", "interrupted", "failed", "nothing"]
"""How a start of a run ended: ``finished`` (all iterations), ``condition`` (``--stop-when`` held), ``stopped`` (a
signal, after a checkpoint), ``interrupted`` (a second signal: at once), ``failed``, ``nothing`` (the run had
already ended). ``job.json`` records ``finished``, ``condition``, ``stopped`` and ``failed``
(:func:`~mjfleet.runs.record.record_end`)."""


@dataclass(frozen=True)
class RunEnd:
    """What the end of one ``train`` command knows about its run."""

    how: Ending
    """How this command's start of the run ended."""
    task: str
    """The task it trained."""
    run_dir: Path | None
    """The run's directory; None when the command ended before one was chosen."""
    started_at: int | None
    """The iteration this command started from (that of the checkpoint it loaded, else 0); None: unknown."""
    final_iteration: int | None
    """The iteration the run trains to; None: unknown (the command ended before the run was chosen)."""
    last_iteration: int | None
    """The last iteration this command completed (None: unknown; the newest checkpoint then tells)."""
    env_steps_per_iteration: int
    """Over all workers, in a run's first iteration."""
    wall_s: float
    """From the command's start to now."""
    detail: str = ""
    """The condition, the signal's name, or the error."""
    finishable: bool = False
    """A later start could finish the run in place (it was stopped, or failed in a way a restart may get past)."""
    prefix: str = ""
    """What the printed commands begin with, as the user started this one (``uv run `` under uv)."""
    launcher: str | None = None
    """The launcher that started this command as one rank of its job (``torchrun``, ``srun``), whose own command
    continues the run; None: ``train`` itself."""
    env_steps: int | None = None
    """Environment steps this command simulated over all workers, as the workers counted them (the evaluation may
    step faster near the stop); None: ``env_steps_per_iteration`` per iteration trained."""
    restarts_left: int = 0
    """How many more times :attr:`launcher` starts the job's ranks again by itself after a failure (torchrun's
    ``--max-restarts``)."""


def command_prefix(env: Mapping[str, str], model_files: Sequence[Path] = ()) -> str:
    """What a printed command needs before the entry point to work where the user's did: ``MENAGERIE_ROOT=<dir> ``
    where the run's robot files (``model_files``) came from that copy of Menagerie (it may have been set for this
    command alone), and ``uv run `` when this process runs under ``uv run`` (which marks its children with
    ``UV_RUN_RECURSION_DEPTH``)."""
    root = env.get("MENAGERIE_ROOT", "").strip()
    menagerie = ""
    if root and any(Path(f).resolve().is_relative_to(Path(root).expanduser().resolve()) for f in model_files):
        menagerie = f"MENAGERIE_ROOT={_quote(Path(root))} "
    return menagerie + ("uv run " if env.get("UV_RUN_RECURSION_DEPTH") else "")


def known_model_files(env: EnvConfig) -> list[Path]:
    """The run's robot files for :func:`command_prefix`, or none where they cannot be named (the run may have failed
    finding them)."""
    try:
        return env.model_files()
    except Exception:  # what the printed commands need is a nicety; the run's own error was said
        return []


def ending_lines(end: RunEnd) -> list[str]:
    """The lines that close a run (see the module docstring)."""
    checkpoints = list_checkpoints(end.run_dir) if end.run_dir is not None else []
    last = end.last_iteration if end.last_iteration is not None else (checkpoints[-1][0] if checkpoints else None)
    lines = [_headline(end, last)]
    if end.run_dir is None:
        return lines
    lines.append(f"run directory: {end.run_dir}")
    if not checkpoints:
        lines.append("no checkpoint was written")
    else:
        newest = checkpoints[-1][1]
        onnx = newest.with_suffix(".onnx")
        lines.append(f"checkpoint: {newest}" + (f" (ONNX: {onnx})" if onnx.is_file() else ""))
        lines.append(f"watch it: {end.prefix}play {end.task} --checkpoint {_quote(newest)}")
    unfinished = end.final_iteration is not None and (last is None or last < end.final_iteration)
    # --finish reads the run's settings from params/, written once its simulations were built: a start stopped
    # before that left nothing to finish (the same command again starts the run afresh).
    finishable = end.finishable and unfinished and (end.run_dir / "params" / "run.yaml").is_file()
    if finishable and end.launcher is not None and end.restarts_left > 0 and end.how == "failed":
        lines.append(
            f"{end.launcher} starts the job's ranks again ({end.restarts_left} restart"
            f"{'s' if end.restarts_left != 1 else ''} left): they continue this run in place to iteration"
            f" {end.final_iteration}"
        )
    elif finishable and end.launcher is not None:
        # A rank's --finish alone would train the whole job's run in one process: the job's own command, every rank
        # of it given --finish, continues it. Without it only a job the run's identity survives in (the same
        # --run-id, rendezvous id or SLURM job) continues it: torchrun --standalone draws another id each time.
        lines.append(
            f"finish it: start the job's {end.launcher} command again with --finish {_quote(end.run_dir)} added to"
            f" train's options (it continues this run in place to iteration {end.final_iteration})"
        )
    elif finishable:
        lines.append(
            f"finish it: {end.prefix}train {end.task} --finish {_quote(end.run_dir)}"
            f" (continues in place to iteration {end.final_iteration})"
        )
    return lines


def _headline(end: RunEnd, last: int | None) -> str:
    wall = f"{format_duration(end.wall_s)} from the command"
    if end.how == "nothing":
        return f"nothing trained ({end.detail}); {wall}"
    if end.started_at is None:
        steps = ""
    else:
        trained = 0 if last is None else max(0, last - end.started_at)
        simulated = trained * end.env_steps_per_iteration if end.env_steps is None else end.env_steps
        steps = f"{trained} iteration{'s' if trained != 1 else ''}, {simulated:,} env-steps in "
    of = f" of {end.final_iteration}" if end.final_iteration is not None else ""
    where = f"at iteration {last}{of}" if last is not None else "with no checkpoint written"
    headline = {
        "finished": f"finished {where}",
        "condition": f"finished {where}: --stop-when {end.detail} held",
        "stopped": f"stopped by {end.detail} {where}",
        "interrupted": f"stopped immediately by {end.detail}, {where}",
        "failed": f"failed {where}: {end.detail}" if last is not None else f"failed: {end.detail}",
    }[end.how]
    return f"{headline} ({steps}{wall})"


def _quote(path: Path) -> str:
    return shlex.quote(str(path))

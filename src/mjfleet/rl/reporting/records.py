"""What training measured and returns: per-iteration records (also in the run directory's ``progress.jsonl``) and
each worker's result.

No torch or simulator imports: the launcher unpickles these when workers finish, and scripts read ``progress.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEPT_RECORDS = 1000
"""A worker result carries the records of at most this many most recent iterations."""

PROGRESS_FILE = "progress.jsonl"
"""Every iteration's :class:`IterationRecord` as one JSON line in the run directory, appended by rank 0 as the
iteration ends: what the console's progress line says, as data (:func:`read_progress`)."""


@dataclass
class IterationRecord:
    """What one iteration measured (the same numbers are logged); handed to the runner's hooks."""

    iteration: int
    losses: dict[str, float]
    episode: dict[str, float]
    """Means over every rank's training episodes (stochastic policy) that ended during this iteration."""
    env_steps_per_s: float
    """Environment steps simulated per second in this iteration (every rank, evaluation environments included)."""
    collect_s: float
    learn_s: float
    sync_s: float
    evaluation: dict[str, float] = field(default_factory=dict)
    """Means over the most recent evaluation episodes (deterministic policy) of every rank, by ``Eval...`` name."""
    evaluation_episodes: int = 0
    """How many evaluation episodes :attr:`evaluation` covers."""
    evaluation_restored: bool = False
    """Whether those episodes are all a checkpoint's (this start's own have not ended yet)."""
    env_steps: int = 0
    """Environment steps the run has simulated up to this iteration, earlier starts included."""
    elapsed_s: float = 0.0
    """Training wall time of this start up to this iteration."""
    run_elapsed_s: float = 0.0
    """Training wall time of the run up to this iteration, earlier starts (resume, restarts) included."""


def append_progress(run_dir: Path, record: IterationRecord) -> None:
    """Append ``record`` to ``<run_dir>/progress.jsonl`` as one JSON line (its fields by name), flushed at once; a
    last line a killed process cut short is ended first, so that this record is a line of its own."""
    line = (json.dumps(dataclasses.asdict(record)) + "\n").encode()
    with (run_dir / PROGRESS_FILE).open("ab+") as f:
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)


def read_progress(run_dir: Path, every_start: bool = False) -> list[IterationRecord]:
    """The run's history from ``<run_dir>/progress.jsonl``, one record per iteration (none where there is no file).

    A continued run's starts append to one file, so iterations trained again after a restart (those after the
    checkpoint it continued from) appear twice there: the later start's records replace the earlier's from its first
    iteration on, as TensorBoard shows them. ``every_start``: every line as written instead. A line cut short by a
    killed process is skipped.
    """
    try:
        lines = (run_dir / PROGRESS_FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    names = {f.name for f in dataclasses.fields(IterationRecord)}
    records = []
    for line in lines:
        try:
            data = json.loads(line)
            record = IterationRecord(**{k: v for k, v in data.items() if k in names})
        except (ValueError, TypeError, AttributeError):
            continue
        if not every_start:
            while records and records[-1].iteration >= record.iteration:  # a later start trains these again
                records.pop()
        records.append(record)
    return records


@dataclass
class WorkerResult:
    """What each worker hands back to the launcher."""

    rank: int
    device: str
    final_iteration: int
    records: list[IterationRecord]
    """This run's most recent iterations (at most :data:`KEPT_RECORDS`), oldest first."""
    start_iteration: int | None = None
    """The iteration this start went on from (0: from scratch): the records above may begin later."""
    stop_signal: int | None = None
    """Signal number that stopped training early (after a final checkpoint), or None if it ran to the end."""
    condition_met_at: int | None = None
    """The iteration at which the ``--stop-when`` condition ended training, or None."""
    met_condition: str | None = None
    """The ``--stop-when`` condition that ended training, as read (``Eval/success >= 0.95``), or None."""
    last_checkpoint: str | None = None
    """The newest checkpoint written (or resumed from) by this run."""
    run_dir: str | None = None
    """The run directory every worker wrote to (or None when writing nothing)."""
    extras: dict[str, Any] = field(default_factory=dict)
    """What the worker hook returned at the end (see :mod:`mjfleet.train.worker_hook`); empty without one."""

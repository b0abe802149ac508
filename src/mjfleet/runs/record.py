"""``<run_dir>/job.json``: the run's record, written when its directory is created.

It holds the run's configuration (the settings that decide what it trains and their
:func:`~mjfleet.runs.fingerprint.fingerprint`) and identity (:mod:`mjfleet.runs.identity`), where it began, the
iteration it trains to and, once a start of it ended, how (:data:`~mjfleet.runs.ending.Ending`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mjfleet.files import write_text_atomic
from mjfleet.runs.ending import Ending
from mjfleet.runs.identity import RunIdentity
from mjfleet.runs.start import StartPoint

logger = logging.getLogger(__name__)

JOB_FILE = "job.json"
"""The run's record (:class:`RunRecord`), written when the run directory is created."""


@dataclass(frozen=True)
class RunRecord:
    """What ``<run_dir>/job.json`` holds: the run's configuration and identity, its first start, how it ended."""

    fingerprint: str
    """:func:`~mjfleet.runs.fingerprint.fingerprint` of :attr:`settings`."""
    settings: dict[str, Any]
    """What decides what the run trains (:func:`~mjfleet.runs.fingerprint.training_settings`)."""
    task: str
    """The task it trains."""
    final_iteration: int
    """The iteration the run trains to."""
    start_iteration: int = 0
    """Where its first start began (the iteration of the checkpoint it resumed, else 0)."""
    checkpoint: str | None = None
    """The checkpoint its first start resumed (``--resume``), or None."""
    run_id: str | None = None
    """The job it was made for (:attr:`RunIdentity.value`), or None."""
    source: str | None = None
    """Where :attr:`run_id` came from (:attr:`RunIdentity.source`)."""
    ended: dict[str, Any] | None = None
    """``{"how": <an Ending: finished, condition, stopped or failed>, "iteration", "message"}`` of the last start
    that ended."""

    @property
    def identity(self) -> RunIdentity | None:
        """The job the run was made for, or None."""
        return None if self.run_id is None else RunIdentity(self.run_id, self.source or "")

    @property
    def first_start(self) -> StartPoint:
        """Where the run began and where it ends."""
        checkpoint = None if self.checkpoint is None else Path(self.checkpoint)
        return StartPoint(checkpoint, self.final_iteration, self.start_iteration, another_run=checkpoint is not None)

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
            record = cls(**{k: v for k, v in data.items() if k in names})
        except TypeError:
            logger.warning("ignoring incomplete %s", path)
            return None
        wrong = next((name for name, kinds in _TYPES.items() if not _is(getattr(record, name), kinds)), None)
        if wrong is not None:  # edited by hand: read on, it failed later in a traceback
            logger.warning("ignoring %s: its %s is %r", path, wrong, getattr(record, wrong))
            return None
        return record


_TYPES: dict[str, tuple[type, ...]] = {
    "fingerprint": (str,),
    "settings": (dict,),
    "task": (str,),
    "final_iteration": (int,),
    "start_iteration": (int,),
    "checkpoint": (str, type(None)),
    "run_id": (str, type(None)),
    "source": (str, type(None)),
    "ended": (dict, type(None)),
}
"""What each field of a readable record holds."""


def _is(value: object, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)  # JSON's true is no iteration


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

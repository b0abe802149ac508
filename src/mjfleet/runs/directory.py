"""The run directory: named when a run is planned, created once by the launcher before any worker starts."""

from __future__ import annotations

import contextlib
import os
import shutil
from datetime import datetime
from pathlib import Path

from mjfleet.errors import UsageError

MIN_FREE_BYTES = 100 * 2**20
"""Free space a log root needs before a run starts: checkpoints, event files and worker logs of small runs.
A disk that fills up later stops the run with an error and keeps the last complete checkpoint."""


def run_dir_name(run_name: str = "", now: datetime | None = None) -> str:
    """``<YYYY-MM-DD_HH-MM-SS>[_<run_name>]``."""
    stamp = (now or datetime.now()).strftime("%Y-%m-%d_%H-%M-%S")
    return f"{stamp}_{run_name}" if run_name else stamp


def check_log_root(parent: Path, min_free_bytes: int = MIN_FREE_BYTES) -> None:
    """Fail with :class:`UsageError` unless runs can be created under ``parent`` (``<log_root>/<experiment>``).

    Creates nothing: the nearest existing ancestor must be a writable directory on a file system with at least
    ``min_free_bytes`` free.
    """
    text = str(parent)
    if "\x00" in text:
        raise UsageError(f"log directory {text!r} contains a NUL character")
    existing = parent
    try:
        while not existing.exists():
            if existing.parent == existing:
                break
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError(f"cannot create log directory {parent}: {existing} is not a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"log directory {existing} is not writable")
        free = shutil.disk_usage(existing).free
    except OSError as e:
        raise UsageError(f"cannot use log directory {parent}: {e.strerror or e}") from None
    if free < min_free_bytes:
        raise UsageError(
            f"log directory {existing} has only {free / 2**20:.0f} MiB free; a run needs at least"
            f" {min_free_bytes / 2**20:.0f} MiB (free some space or choose another --log-root)"
        )


def next_run_dir(log_root: Path, experiment: str, run_name: str = "", now: datetime | None = None) -> Path:
    """``<log_root>/<experiment>/<YYYY-MM-DD_HH-MM-SS>[_<run_name>]``, not created yet; two runs named in the same
    second get ``-1``, ``-2``... suffixes instead of sharing a directory.

    A run names its directory when it is planned (the launch plan puts worker logs inside it) and
    :func:`create_run_dir` creates exactly that path when it starts.
    """
    name = run_dir_name(run_name, now)
    parent = log_root / experiment
    for suffix in range(1000):
        candidate = parent / (name if suffix == 0 else f"{name}-{suffix}")
        try:
            if not candidate.exists():
                return candidate
        except OSError as e:
            raise UsageError(f"cannot use log directory {parent}: {e.strerror or e}") from None
    raise UsageError(f"too many runs named {name} in {parent}")


def create_run_dir(run_dir: Path, movable: bool = False) -> Path:
    """Create ``run_dir`` (named by :func:`next_run_dir`) and its parents; it must not exist yet, unless ``movable``
    (nothing refers to the planned path yet): then the next free suffix is taken where another run started in the
    same second took it since it was planned (members of a sweep that start together)."""
    _make_parent(run_dir.parent)
    base, first = _suffixed(run_dir)
    for suffix in range(first, first + (1000 if movable else 1)):
        candidate = run_dir if suffix == first else run_dir.with_name(f"{base}-{suffix}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
        except OSError as e:
            raise UsageError(f"cannot create run directory {candidate}: {e.strerror}") from None
    # Another run named in the same second took it after this one was planned (or this plan already ran).
    raise UsageError(f"run directory {run_dir} already exists (taken since it was planned); start again")


def _suffixed(run_dir: Path) -> tuple[str, int]:
    """The name :func:`next_run_dir` suffixed and its suffix (``X-2`` beside an ``X``: ``("X", 2)``), so that the
    next free name after ``X-1`` is ``X-2``, not ``X-1-1``; otherwise the name itself and 0."""
    base, _, number = run_dir.name.rpartition("-")
    if (
        base
        and number.isascii()
        and number.isdigit()
        and not number.startswith("0")
        and (run_dir.parent / base).exists()
    ):
        return base, int(number)
    return run_dir.name, 0


def _make_parent(parent: Path) -> None:
    check_log_root(parent)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create log directory {parent}: {e.strerror}") from None
    if not os.access(parent, os.W_OK):
        raise UsageError(f"log directory {parent} is not writable")


def remove_stale_temporaries(run_dir: Path) -> None:
    """Remove the hidden ``.<name>.<random>.tmp`` files of writes that were killed half-way (a continued run)."""
    for tmp in run_dir.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()

"""The run directory: computed and created once, by the launcher, before any worker starts."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from mjfleet.errors import UsageError


def make_run_dir(log_root: Path, experiment: str, run_name: str = "", now: datetime | None = None) -> Path:
    """Create ``<log_root>/<experiment>/<YYYY-MM-DD_HH-MM-SS>[_<run_name>]`` and return it.

    Two runs started in the same second get ``-1``, ``-2``... suffixes instead of sharing a directory.
    An unwritable log root is reported as a :class:`UsageError` before anything else happens.
    """
    stamp = (now or datetime.now()).strftime("%Y-%m-%d_%H-%M-%S")
    name = f"{stamp}_{run_name}" if run_name else stamp
    parent = log_root / experiment
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create log directory {parent}: {e.strerror}") from None
    if not os.access(parent, os.W_OK):
        raise UsageError(f"log directory {parent} is not writable")
    for suffix in range(1000):
        candidate = parent / (name if suffix == 0 else f"{name}-{suffix}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise UsageError(f"too many runs named {name} in {parent}")

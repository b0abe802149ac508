"""Paths a user types, as a run records them: ``~`` expanded and absolute, one line where that cannot be done."""

from __future__ import annotations

import os
from pathlib import Path

from mjfleet.errors import UsageError


def absolute_path(value: str | Path, flag: str) -> Path:
    """``value`` with ``~`` expanded, made absolute against the folder the command runs in (as typed, a relative path
    is another file for ``play`` of the run from elsewhere, or for a restart) and its ``..`` taken out where that
    names the same place (``a/link/..`` is the link target's parent, kept as typed); a ``~user`` of no such user is
    one line naming ``flag`` (:class:`UsageError`), not the traceback ``Path.expanduser`` raises."""
    try:
        path = Path(value).expanduser().absolute()
    except RuntimeError as e:  # "Could not determine home directory."
        raise UsageError(f"{flag} {value}: {e}") from None
    if ".." not in path.parts:
        return path
    # Recorded with its "..", one file had two names: two runs, and a shipped file not known by its own path.
    tidy = Path(os.path.normpath(path))
    return tidy if os.path.realpath(tidy) == os.path.realpath(path) else path

"""One process trains a run at a time: the process that opens a run directory (the launcher, or rank 0 of another
launcher's job) holds its lock until the run ends or the process does.

Without it a ``--finish`` of a run still training, or a job started twice under one ``--run-id``, trained the run twice
in its directory, each overwriting the other's checkpoints and progress. The lock is ``flock`` on ``<run_dir>/.lock``:
the kernel drops it with the process (a crash, ``kill -9``, a node's restart), so a requeue or a restart never finds it
held by a process that is gone. A file system without locks leaves runs unchecked.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import TextIO

from mjfleet.errors import UsageError

LOCK_FILE = ".lock"
"""The run directory's lock file; it names the process holding the lock."""

_held: dict[Path, TextIO] = {}


def hold_run(run_dir: Path) -> None:
    """Take ``run_dir``'s lock for this process (no-op where it holds it already); :class:`UsageError` where another
    process holds it."""
    if run_dir in _held:
        return
    try:
        handle = (run_dir / LOCK_FILE).open("a+", encoding="utf-8")
    except OSError:  # a run directory it cannot write: the run says so when it writes its own files
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise UsageError(
            f"run {run_dir} is being trained by {holder}: one process trains a run at a time; let it end or stop it"
            " first"
        ) from None
    except OSError:  # no locks on this file system (some network ones)
        handle.close()
        return
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    handle.flush()
    _held[run_dir] = handle


def release_run(run_dir: Path) -> None:
    """Give ``run_dir``'s lock back (closing the file drops it); no-op where this process does not hold it."""
    handle = _held.pop(run_dir, None)
    if handle is not None:
        handle.close()

"""Files replaced whole: a reader (another process, or a run after a crash) never sees half of one.

The one atomic writer of the project: checkpoints, ONNX exports, reports and benchmark results all go through
:func:`write_atomic`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the process's umask (read once, at import: setting it back
    at once leaves no window for other threads)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


NEW_FILE_MODE = _new_file_mode()
"""What the files written here get (``mkstemp``'s are 0o600 whatever the umask: a team's shared run directories
held checkpoints and ONNX exports that only their writer could read)."""


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then rename it over ``path``.

    The data reach the disk before the rename (``fsync``), and the directory entry after it, so after a crash
    ``path`` holds either the previous file or the complete new one. The temporary file is a hidden
    ``.<name>.<random>.tmp`` and is removed on any error (one left by a killed process is removed when its run
    continues).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # POSIX
                os.fchmod(f.fileno(), NEW_FILE_MODE)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (some file systems refuse to open or sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """:func:`write_atomic` of ``text`` (UTF-8)."""
    write_atomic(path, lambda f: f.write(text.encode()))

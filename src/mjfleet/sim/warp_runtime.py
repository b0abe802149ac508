"""Starting Warp's runtime without a misleading warning on CPU-only runs."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

_NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"


def init_warp(device: str) -> None:
    """Initialise Warp (idempotent). For a CPU device, drop its native "no CUDA driver" warning.

    Warp prints that warning from C on every start on a machine without an NVIDIA driver, which is every CPU-only
    machine; launched workers' stderr reaches the console as ERROR records, so a healthy CPU run looked broken.
    Everything else Warp writes to stderr during initialisation is passed through.
    """
    import warp as wp  # here, not at module level: a CPU run on MuJoCo C never loads Warp (about a second)

    # Warp's start-up banner (info level) goes to stdout, which is where `play` writes its JSON result.
    wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)
    if not device.startswith("cpu"):
        wp.init()
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode(errors="replace")
    for line in text.splitlines(keepends=True):
        if _NO_DRIVER not in line:
            sys.stderr.write(line)


@contextmanager
def scoped_device(device: str) -> Iterator[None]:
    """``wp.ScopedDevice(device)`` after :func:`init_warp` on a GPU. On the CPU nothing: a Warp simulation starts
    Warp and scopes its own work, and a MuJoCo C one never needs it (saving Warp's start-up in every CPU worker)."""
    if device.startswith("cpu"):
        yield
        return
    import warp as wp

    init_warp(device)
    with wp.ScopedDevice(device):
        yield

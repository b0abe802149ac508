"""The processes this one started and what is left of them: wait for them, then SIGTERM, then SIGKILL (a launch must
leave nothing running behind it, whatever ended it)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from typing import NoReturn

import psutil

logger = logging.getLogger(__name__)

SWEEP_GRACE_S = 10.0
# After an interrupt torchrunx has already asked its agents to stop; an agent blocked in its gloo sync with the
# launcher ignores SIGTERM until that sync times out, so waiting longer is pointless.
SWEEP_GRACE_INTERRUPTED_S = 2.0


def _alive(procs: list[psutil.Process]) -> dict[psutil.Process, str]:
    """``process -> status`` of those still running; a zombie has exited and a reused PID is another process."""
    alive = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and (status := proc.status()) not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                alive[proc] = status
    return alive


def _signal(procs: list[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def sweep(children_before: set[psutil.Process], grace_s: float) -> None:
    """Wait for, then SIGTERM, then SIGKILL every process the launch started (agents, workers, log collector).
    Stopped processes (SIGSTOP, a debugger) are SIGKILLed at once: they can neither exit nor handle SIGTERM."""
    procs: list[psutil.Process] = []
    for child in set(psutil.Process().children()) - children_before:
        with contextlib.suppress(psutil.Error):
            procs += [child, *child.children(recursive=True)]
    deadline = time.monotonic() + grace_s
    while _alive(procs) and time.monotonic() < deadline:
        if stopped := kill_stopped(procs):
            logger.warning("killing stopped launch process(es) %s", ", ".join(map(str, stopped)))
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not (left := list(_alive(procs))):
            return
        logger.warning("stopping %d leftover launch process(es) with %s", len(left), sig.name)
        _signal(left, sig)
        deadline = time.monotonic() + 3.0
        while _alive(left) and time.monotonic() < deadline:
            time.sleep(0.1)


def kill_stopped(procs: list[psutil.Process]) -> list[int]:
    """SIGKILL those of ``procs`` that are stopped (SIGSTOP, a debugger): they can neither exit nor handle SIGTERM
    (torch gives a process it SIGTERMs after a peer failed 30 s before SIGKILL). Returns their PIDs."""
    stopped = [p for p, s in _alive(procs).items() if s in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)]
    _signal(stopped, signal.SIGKILL)
    return [p.pid for p in stopped]


def hard_exit(code: int) -> NoReturn:
    """Flush logs, give torchrunx's stdio-forwarding threads a moment, then exit immediately. The moment also lets
    the log collector store a failure report before the launcher hears of the death (and torchrunx kills it)."""
    # A broken handler or stream must not keep a dead worker alive.
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    time.sleep(0.2)
    os._exit(code)

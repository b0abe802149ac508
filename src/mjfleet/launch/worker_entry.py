"""Worker-side wrapper: turn any failure into a fast, reported process death.

torchrunx notices a worker that *raises* only once every other worker has finished, so a rank failing while its peers
wait in a collective would surface after the collective timeout, as the waiting rank's error. :class:`WorkerEntry`
instead logs the traceback (to the rank's log file), reports it and hard-exits: the agent sees the death in seconds.

What a worker tells the launcher (started, heartbeat, failure) is a report attached to a log record, which torchrunx
forwards from any host to the launcher's log collector (:mod:`~mjfleet.launch.worker_logs`). Only faulthandler's crash
file and the launcher's stop request use the launch report directory, and only on the launcher's machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from mjfleet.errors import UsageError, exception_line, is_finishable, is_retryable, is_user_facing
from mjfleet.runtime.context import MASTER_ADDR_ENV
from mjfleet.runtime.peers import is_peer_failure
from mjfleet.runtime.process_end import end_quickly_at_exit
from mjfleet.runtime.processes import hard_exit
from mjfleet.runtime.stop import signals_reach_every_process

logger = logging.getLogger(__name__)

T = TypeVar("T")

REPORT_DIR_ENV = "MJFLEET_LAUNCH_REPORT_DIR"
"""The launcher's report directory: the collector stores reports there, rank 0 reads the stop request from it."""
REPORT_ATTR = "mjfleet_report"
"""LogRecord attribute carrying a report to the launcher's log collector."""

TRACEBACK_LINES = 20
_PR_SET_PDEATHSIG = 1
_fault_file: IO[str] | None = None  # Kept open for the life of the worker for faulthandler.

# Started and heartbeat reports are DEBUG records, which keeps them out of log files and the console. Their logger's
# level is pinned: the launched code may raise "mjfleet" to INFO, and a record below its logger's level is never made.
_reports = logging.getLogger("mjfleet.launch.reports")
_reports.setLevel(logging.DEBUG)


def set_parent_death_signal() -> None:
    """Ask Linux to SIGKILL this process when its parent dies, so nothing is orphaned (elsewhere: nothing)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def write_heartbeat(rank: int, iteration: int, phase: str = "iteration") -> None:
    """Tell the launcher that ``rank`` completed ``iteration`` of the launched function's loop (``phase="ready"``:
    set up after it); outside a launch, nothing. A collective timeout names the rank whose heartbeat is behind."""
    if os.environ.get(REPORT_DIR_ENV):
        report = {"kind": "heartbeat", "rank": rank, "iteration": iteration, "phase": phase, "time": time.time()}
        _reports.debug("rank %d: %s %d", rank, phase, iteration, extra={REPORT_ATTR: report})


def local_report_dir() -> Path | None:
    """The launch report directory if this worker runs on the launcher's machine, else None."""
    value = os.environ.get(REPORT_DIR_ENV)
    # On a remote host the launcher's temp dir does not exist.
    return Path(value) if value and Path(value).is_dir() else None


def _identity() -> dict[str, Any]:
    return {"rank": int(os.environ.get("RANK", "0")), "pid": os.getpid(), "time": time.time()}


def failure_report(exc: BaseException) -> dict[str, Any]:
    """Short, JSON-safe description of ``exc`` for this worker."""
    error = exception_line(exc)
    lines = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return {
        **_identity(),
        "kind": "failure",
        "error": error[:500],
        "traceback": lines[-TRACEBACK_LINES:],
        "peer_failure": is_peer_failure(exc),
        "retryable": is_retryable(exc),
        "finishable": is_finishable(exc),
        "user_facing": is_user_facing(exc),
        "usage_error": isinstance(exc, UsageError),
        # Bad input's own words, whole and without the type: what one process prints for it.
        "message": str(exc).strip() if isinstance(exc, UsageError) else "",
    }


def report_failure(exc: BaseException) -> None:
    """Tell the launcher that this worker failed with ``exc`` (an ERROR record with the traceback, which is also the
    failure's entry in the rank's log file)."""
    report = failure_report(exc)
    _reports.error(
        "worker rank %d failed: %s", report["rank"], report["error"], exc_info=exc, extra={REPORT_ATTR: report}
    )


def _drop_console_handlers() -> None:
    """Remove root handlers writing to fd 1/2: torchrunx pipes those back into logging, forever."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        stream = getattr(handler, "stream", None)
        if stream is None or isinstance(handler, logging.FileHandler):
            continue
        try:
            fd = stream.fileno()
        except (OSError, ValueError, AttributeError):
            continue
        if fd in (1, 2):
            root.removeHandler(handler)
            logger.warning(
                "removed a console log handler in worker: it would loop through torchrunx's"
                " stdout/stderr capture; worker logs reach the launcher without it"
            )


def _enable_faulthandler(rank: int) -> None:
    """Dump native crashes (segfaults) to a file the launcher can read; stderr would be lost."""
    global _fault_file
    report_dir = local_report_dir()
    if report_dir is None or _fault_file is not None:
        return
    try:
        _fault_file = (report_dir / f"fault-rank{rank}.txt").open("w")
        faulthandler.enable(file=_fault_file, all_threads=True)
    except OSError:
        logger.debug("faulthandler not enabled", exc_info=True)


class WorkerEntry(Generic[T]):
    """Picklable (with the ``__name__`` torchrunx logs): runs ``fn(*args)`` in a launched worker; on any exception
    reports it and ``os._exit(1)``. SIGINT is ignored: stopping is the launcher's decision, and a stray Ctrl-C to the
    process group must not kill one rank mid-collective (a KeyboardInterrupt raised otherwise exits 130, unreported).
    So is SIGTERM where a scheduler sends it to every process of the job (:func:`signals_reach_every_process`): the
    launcher's stop request then has rank 0 checkpoint first.

    ``env``: variables set in the worker first; they travel with the function (the launcher's connection to its
    agents), never on a command line.
    """

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...], env: dict[str, str] | None = None) -> None:
        self.fn = fn
        self.args = args
        self.env = dict(env or {})
        # Decided where the launch starts: a remote host's worker does not see the allocation's variables.
        self.ignore_sigterm = signals_reach_every_process(os.environ)
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self) -> T:
        set_parent_death_signal()
        os.environ.update(self.env)
        if master_addr := os.environ.get(MASTER_ADDR_ENV):
            os.environ["MASTER_ADDR"] = master_addr
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if self.ignore_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _drop_console_handlers()
        identity = _identity()
        rank = identity["rank"]
        _enable_faulthandler(rank)
        started = {**identity, "kind": "started"}
        _reports.debug("worker rank %d started (pid %d)", rank, identity["pid"], extra={REPORT_ATTR: started})
        try:
            result = self.fn(*self.args)
        except KeyboardInterrupt:
            logger.warning("worker rank %d interrupted", rank)
            hard_exit(130)
        except BaseException as exc:  # SystemExit too: a worker must never hang its peers.
            report_failure(exc)
            hard_exit(1)
        if multiprocessing.parent_process() is not None:  # a launched worker's own process (torch's spawn)
            end_quickly_at_exit()
        return result

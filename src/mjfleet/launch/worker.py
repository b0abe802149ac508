"""Worker-side wrapper: turn any failure into a fast, reported process death.

torchrunx only notices a worker that *raises* once every other worker has finished, so a rank that
fails while its peers wait in a collective would surface only after the collective timeout, as the
waiting rank's error. :func:`run_worker` instead logs the traceback (it lands in that rank's log
file), publishes a short report for the launcher, and hard-exits so the agent sees the death in
seconds and stops the other workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from mjfleet.errors import is_retryable, is_user_facing

logger = logging.getLogger(__name__)

T = TypeVar("T")

REPORT_DIR_ENV = "MJFLEET_LAUNCH_REPORT_DIR"
"""Launcher-local directory collecting worker reports (``started-rankN.json``, ``failure-rankN.json``,
``heartbeat-rankN.json``) and the launcher's ``stop-request``."""
REPORT_ATTR = "mjfleet_report"
"""LogRecord attribute carrying a report to the launcher's log server (works across hosts)."""

TRACEBACK_LINES = 20
_PR_SET_PDEATHSIG = 1
_fault_file: IO[str] | None = None  # Kept open for the life of the worker for faulthandler.


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies, so nothing is orphaned."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            logger.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    except (OSError, AttributeError):
        logger.debug("prctl unavailable; parent-death signal not set", exc_info=True)


def report_path(report_dir: Path, kind: str, rank: int) -> Path:
    """Where a report of ``kind`` (``"started"``/``"failure"``) for ``rank`` is stored."""
    return report_dir / f"{kind}-rank{rank}.json"


def write_report(report_dir: Path, report: dict[str, Any]) -> None:
    """Atomically write ``report`` into ``report_dir`` (rename, so readers never see half a file)."""
    path = report_path(report_dir, str(report["kind"]), int(report["rank"]))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report))
    tmp.replace(path)


def read_reports(report_dir: Path, kind: str) -> list[dict[str, Any]]:
    """All reports of ``kind`` in ``report_dir``; unreadable ones are skipped."""
    reports = []
    for path in sorted(report_dir.glob(f"{kind}-rank*.json")):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            logger.debug("skipping unreadable report %s", path, exc_info=True)
    return reports


def write_heartbeat(rank: int, iteration: int, phase: str = "iteration") -> None:
    """Record that ``rank`` completed ``iteration`` (``phase="ready"``: finished setting up at that iteration).

    The launcher reads these to name the rank that stopped responding when a collective times out. A
    rename-based write costs well under a millisecond; nothing is written when the report directory is not on
    this machine.
    """
    report_dir = _local_report_dir()
    if report_dir is None:
        return
    report = {"kind": "heartbeat", "rank": rank, "iteration": iteration, "phase": phase, "time": time.time()}
    try:
        write_report(report_dir, report)
    except OSError:
        logger.debug("could not write heartbeat to %s", report_dir, exc_info=True)


def local_report_dir() -> Path | None:
    """The launch report directory if this worker runs on the launcher's machine, else None."""
    return _local_report_dir()


def _local_report_dir() -> Path | None:
    value = os.environ.get(REPORT_DIR_ENV)
    if not value:
        return None
    path = Path(value)
    # On a remote host the launcher's temp dir does not exist; the log record still gets there.
    return path if path.is_dir() else None


def _publish(report: dict[str, Any], level: int, message: str, exc: BaseException | None) -> None:
    """Send ``report`` through logging (reaches the launcher from any host) and to the local dir."""
    logger.log(level, message, exc_info=exc, extra={REPORT_ATTR: report})
    report_dir = _local_report_dir()
    if report_dir is not None:
        try:
            write_report(report_dir, report)
        except OSError:
            logger.debug("could not write report to %s", report_dir, exc_info=True)


def _identity() -> dict[str, Any]:
    env = os.environ
    return {
        "rank": int(env.get("RANK", "0")),
        "local_rank": int(env.get("LOCAL_RANK", "0")),
        "node_rank": int(env.get("GROUP_RANK", "0")),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "time": time.time(),
    }


_PEER_LOSS_TYPES = frozenset({"DistNetworkError", "DistBackendError", "DistStoreError"})
_PEER_LOSS_RE = re.compile(
    r"connection (closed|reset) by peer|broken pipe|communicator was aborted|"
    r"remote (process|worker)|watchdog|timed out",
    re.IGNORECASE,
)


def is_peer_failure(exc: BaseException) -> bool:
    """True when ``exc`` looks like fallout from *another* worker dying (lost peer, timeout)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        if names & _PEER_LOSS_TYPES or _PEER_LOSS_RE.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def failure_report(exc: BaseException) -> dict[str, Any]:
    """Short, JSON-safe description of ``exc`` for this worker."""
    text = str(exc).strip()
    error = type(exc).__name__ + (f": {text.splitlines()[0]}" if text else "")
    lines = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return {
        **_identity(),
        "kind": "failure",
        "error": error[:500],
        "traceback": lines[-TRACEBACK_LINES:],
        "peer_failure": is_peer_failure(exc),
        "retryable": is_retryable(exc),
        "user_facing": is_user_facing(exc),
    }


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


def _hard_exit(code: int) -> None:
    """Flush logs, give torchrunx's stdio-forwarding threads a moment, then exit immediately."""
    # A broken handler or stream must not keep a dead worker alive.
    for handler in [*logging.getLogger().handlers, *logger.handlers]:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    time.sleep(0.2)
    os._exit(code)


def _enable_faulthandler(rank: int) -> None:
    """Dump native crashes (segfaults) to a file the launcher can read; stderr would be lost."""
    global _fault_file
    report_dir = _local_report_dir()
    if report_dir is None or _fault_file is not None:
        return
    try:
        _fault_file = (report_dir / f"fault-rank{rank}.txt").open("w")
        faulthandler.enable(file=_fault_file, all_threads=True)
    except OSError:
        logger.debug("faulthandler not enabled", exc_info=True)


def run_worker(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a launched worker; on any exception report it and ``os._exit(1)``.

    SIGINT is ignored: stopping is the launcher's decision (it asks rank 0 to stop cleanly, or stops every
    worker), and a stray Ctrl-C sent to the whole process group must not kill one rank mid-collective.
    KeyboardInterrupt raised otherwise exits with 130 without a report.
    """
    set_parent_death_signal()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _drop_console_handlers()
    identity = _identity()
    rank = identity["rank"]
    _enable_faulthandler(rank)
    _publish(
        {**identity, "kind": "started"},
        logging.DEBUG,
        f"worker rank {rank} started (pid {identity['pid']})",
        None,
    )
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt:
        logger.warning("worker rank %d interrupted", rank)
        _hard_exit(130)
        raise  # Unreachable; keeps type checkers happy.
    except BaseException as exc:  # SystemExit too: a worker must never hang its peers.
        report = failure_report(exc)
        _publish(report, logging.ERROR, f"worker rank {rank} failed: {report['error']}", exc)
        _hard_exit(1)
        raise


class WorkerEntry(Generic[T]):
    """Picklable ``run_worker(fn, *args)`` closure; torchrunx wants a ``__name__`` to log."""

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self) -> T:
        return run_worker(self.fn, *self.args)

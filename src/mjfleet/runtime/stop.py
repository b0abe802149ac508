"""Clean interrupts: the first SIGINT/SIGTERM asks training to stop after the current iteration, the second stops now.

In-process training polls :meth:`StopRequest.poll` after every iteration. Launched workers cannot see the
launcher's signals (they run in their own session, so a terminal Ctrl-C reaches only the launcher); the launcher
writes a stop-request file into the launch report directory instead, which rank 0 polls with
:func:`file_stop_check` and broadcasts to the other ranks (see ``Runner._agree_after_iteration``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType

logger = logging.getLogger(__name__)

STOP_FILE = "stop-request"
"""Name of the file in the launch report directory whose presence asks rank 0 to stop (content: signal number)."""
SIGNALS = (signal.SIGINT, signal.SIGTERM)
REPEAT_WINDOW_S = 0.5
"""The same signal again within this many seconds is one request delivered twice, not a second one: wrappers such
as ``uv run`` pass on a signal that reached their whole process group, and SLURM signals every process of a task."""


def signals_reach_every_process(env: Mapping[str, str]) -> bool:
    """Whether a SIGTERM may reach every process of a launch at once, not only the launcher: inside a SLURM
    allocation (``SLURM_JOB_ID``), whose preemption, ``scancel`` and time limit signal all of a job's processes. Its
    launched workers and local agents then ignore SIGTERM, so that the launcher's stop request has rank 0 checkpoint
    first (elsewhere they keep dying of it: torch gives a SIGTERMed process 30 s before SIGKILL when a peer failed)."""
    return bool(env.get("SLURM_JOB_ID", "").strip())


def exit_code(signum: int) -> int:
    """The conventional exit status of a process stopped by ``signum`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


def signal_name(signum: int) -> str:
    """``"SIGINT"`` for 2 and so on."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopRequest:
    """Handler for SIGINT and SIGTERM that turns the first one into a stop request.

    - First signal: remembered (:attr:`signum`); if a launch is attached, its stop-request file is written.
    - Second signal: ``KeyboardInterrupt`` right away, unless cleanup is running (:meth:`deferring`), it is the
      first one again within :data:`REPEAT_WINDOW_S`, or the attached launch cannot stop cleanly (then already the
      first signal raises).
    """

    def __init__(self) -> None:
        self.signals: list[int] = []
        self._first_at = 0.0
        self._stop_file: Path | None = None
        self._graceful = True
        self._deferring = False

    @property
    def signum(self) -> int | None:
        """The first signal received, or None."""
        return self.signals[0] if self.signals else None

    def poll(self) -> int:
        """Stop check for in-process training: the first signal's number, or 0."""
        return self.signum or 0

    @contextlib.contextmanager
    def install(self) -> Iterator[StopRequest]:
        """Handle SIGINT and SIGTERM while the block runs (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
        for sig in SIGNALS:
            signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @contextlib.contextmanager
    def attach(self, report_dir: Path, graceful: bool = True) -> Iterator[StopRequest]:
        """Route stop requests to a launch's report directory while the block runs.

        ``graceful=False`` (rank 0 cannot read the directory, e.g. it runs on another machine) makes the first
        signal stop immediately; one that came before the block (during the host check, between restarts) then
        raises ``KeyboardInterrupt`` here, before any worker starts.
        """
        if self.signum is not None and not graceful:
            raise KeyboardInterrupt(f"received {signal_name(self.signum)}")
        self._stop_file = report_dir / STOP_FILE
        self._graceful = graceful
        if self.signum is not None:
            self._publish(self.signum)
        try:
            yield self
        finally:
            self._stop_file = None
            self._graceful = True

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Signals during the block are recorded but never raise (cleanup must finish)."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if not self.signals:
            self._first_at = now
        elif signum == self.signals[0] and now - self._first_at < REPEAT_WINDOW_S:
            return  # the first signal again, passed on by a wrapper
        self.signals.append(signum)
        if self._deferring:
            return
        name = signal_name(signum)
        if len(self.signals) == 1 and self._graceful:
            logger.warning(
                "received %s: stopping after the current iteration and writing a checkpoint"
                " (send it again to stop immediately)",
                name,
            )
            self._publish(signum)
            return
        raise KeyboardInterrupt(f"received {name}")

    def _publish(self, signum: int) -> None:
        if self._stop_file is None:
            return
        try:
            tmp = self._stop_file.with_name(f".{STOP_FILE}.tmp")
            tmp.write_text(str(signum))
            tmp.replace(self._stop_file)
        except OSError as e:  # The launch may be tearing down its directory; the signal is still recorded.
            logger.debug("could not write %s: %s", self._stop_file, e)


def file_stop_check(report_dir: Path) -> Callable[[], int]:
    """Stop check for rank 0 of a launched job: the signal number written to ``<report_dir>/stop-request``."""
    path = report_dir / STOP_FILE

    def check() -> int:
        try:
            text = path.read_text().strip()
        except OSError:
            return 0
        try:
            return int(text) or int(signal.SIGTERM)
        except ValueError:
            return int(signal.SIGTERM)

    return check

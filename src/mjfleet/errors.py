"""User-facing errors: one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import NoReturn, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

USAGE_EXIT_CODE = 2
"""Invalid input: a flag, a file, a run that cannot be continued with these settings. Retrying repeats it."""
FATAL_EXIT_CODE = 3
"""Training cannot go on (diverged, a run whose training diverged before): a restart or requeue would repeat it."""
FAILED_EXIT_CODE = 1
"""Training failed for another reason (a crash, an error of mjfleet's): a restart may or may not help."""
PEER_LOST_EXIT_CODE = 138
"""One rank of another launcher's job: another rank or node was lost, or a collective timed out. Retry: the run
continues from its newest checkpoint (the code Kubeflow's ``restartPolicy: ExitCode`` retries, 128 + SIGUSR1)."""
INTERRUPTED_EXIT_CODE = 130
"""Stopped by Ctrl-C (128 + SIGINT), the shell's code for it."""


class UsageError(Exception):
    """Something the user typed or pointed at is wrong; the message says what and how to fix it."""


class FatalTrainingError(RuntimeError):
    """Training cannot continue and restarting it would fail the same way (e.g. NaN losses, diverged replicas).

    Shown as one clean error line (no traceback); automatic restarts never retry it.
    """

    repeats: bool = True
    """A later start of the same run would fail the same way, so the run records it and is not continued (False:
    the cause lies outside the run, e.g. a full disk)."""


class PeerFailed(Exception):
    """Another rank of the job failed; its own output says why. Shown as one line."""


class RanksMissing(Exception):
    """Not every rank of another launcher's job arrived within ``--rendezvous-timeout-s`` (one started late, was
    rescheduled, or failed first): the launcher's to retry (:data:`PEER_LOST_EXIT_CODE`). Shown as one line."""


def exception_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (just ``Type`` without one): an error in one line."""
    text = str(exc).strip()
    return type(exc).__name__ + (f": {text.splitlines()[0]}" if text else "")


def mujoco_message(exc: BaseException) -> str:
    """MuJoCo's whole message in one line: its parse and schema errors put the element and line number on lines of
    their own (``XML Error: Schema violation: unrecognized attribute: 'sizze'; Element 'geom', line 4``)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0]
    for line in lines[1:]:
        text += f" {line}" if text.endswith(":") else f"; {line}"
    return text


def is_retryable(exc: BaseException) -> bool:
    """Whether an automatic restart may help after a worker raised ``exc``.

    Configuration and input errors, deterministic training failures and missing modules would recur on every
    attempt; anything else (crashes, lost peers, timeouts, transient I/O) might not.
    """
    return not isinstance(exc, UsageError | FatalTrainingError | ImportError)


def is_finishable(exc: BaseException) -> bool:
    """Whether ``--finish`` may take the run on after ``exc`` once its cause outside the run is mended (a full disk, a
    module installed, a crash): not bad input, not a training failure that would repeat (a divergence)."""
    if isinstance(exc, FatalTrainingError):
        return not exc.repeats
    return not isinstance(exc, UsageError)


def is_user_facing(exc: BaseException) -> bool:
    """Whether the message of ``exc`` says everything (its traceback would only distract)."""
    return isinstance(exc, UsageError | FatalTrainingError | PeerFailed)


def usage_line(exc: UsageError) -> str:
    """What a :class:`UsageError` prints: its message's first line (its type's name where it has none)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def fail(message: str) -> NoReturn:
    """Print ``message`` as one line on stderr and exit with code 2."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(USAGE_EXIT_CODE)


def exits_on_usage_error(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a :class:`UsageError` raised by a CLI entry point into a one-line message and exit 2, and a Ctrl-C that
    reaches it into exit 130 without a traceback (the shell shows the ``^C``; what the command was doing has
    cleaned up on the way out)."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            fail(usage_line(e))
        except KeyboardInterrupt:
            raise SystemExit(INTERRUPTED_EXIT_CODE) from None

    return wrapper

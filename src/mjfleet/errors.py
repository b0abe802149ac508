"""User-facing errors: one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import NoReturn, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

USAGE_EXIT_CODE = 2


class UsageError(Exception):
    """Something the user typed or pointed at is wrong; the message says what and how to fix it."""


def fail(message: str) -> NoReturn:
    """Print ``message`` as one line on stderr and exit with code 2."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(USAGE_EXIT_CODE)


def exits_on_usage_error(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a :class:`UsageError` raised by a CLI entry point into a one-line message and exit 2."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            fail(str(e).splitlines()[0] if str(e) else type(e).__name__)

    return wrapper

"""tyro parsing with one-line errors: a bad flag exits 2 with a single line, not a boxed report."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from typing import TypeVar

import tyro

from mjfleet.errors import UsageError

T = TypeVar("T")
_BOX = re.compile(r"[│╭╮╰╯─━┃┏┓┗┛┡┩╇┳┻╋]+")
_ASCII_RULE = re.compile(r"-{3,}")


def parse(cls: type[T], args: list[str], prog: str, default: T | None = None) -> T:
    """``tyro.cli`` whose parse errors raise :class:`UsageError` with tyro's first message line."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            if default is None:
                return tyro.cli(cls, args=args, prog=prog)
            return tyro.cli(cls, default=default, args=args, prog=prog)
    except SystemExit as e:
        if e.code in (0, None):
            sys.stdout.write(captured.getvalue())
            raise
        raise UsageError(summarize_error(captured.getvalue()) + f" (see {prog} --help)") from None


def summarize_error(text: str) -> str:
    """The meaningful lines of tyro's boxed error report, joined into one line."""
    lines = [_BOX.sub(" ", line).strip() for line in text.splitlines()]
    # Without a terminal the box may be drawn in ASCII: drop rules made of dashes and the side bars.
    lines = [_ASCII_RULE.sub(" ", line.strip("|+ ")).strip() for line in lines]
    lines = [line for line in lines if line and not line.lower().startswith(("usage:", "for full helptext"))]
    head = [line for line in lines if not line.lower().startswith("argument helptext")]
    message = " ".join(head[:3]) if head else "invalid arguments"
    return re.sub(r"\s+", " ", message)

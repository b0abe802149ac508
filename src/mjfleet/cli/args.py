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
    """tyro's boxed error report as one line: the message, plus its suggestions or the expected form."""
    sections: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        # Without a terminal the box may be drawn in ASCII: drop rules made of dashes and the side bars.
        clean = _ASCII_RULE.sub(" ", _BOX.sub(" ", line).strip().strip("|+ ")).strip()
        if clean:
            current.append(clean)
        elif current:  # a rule or the bottom edge ends a section
            sections.append(current)
            current = []
    if current:
        sections.append(current)
    # tyro titles its report ("Unrecognized options", "Value error") with the gist of the message that follows.
    if sum(len(s) for s in sections) > 1:
        sections[0] = sections[0][1:]
    sections = [s for s in sections if s]
    sections = [s for s in sections if not s[0].lower().startswith(("for full helptext", "usage:"))]
    if not sections:
        return "invalid arguments"
    message = " ".join(sections[0])
    for section in sections[1:]:
        head = section[0].lower()
        flags = [line.split()[0] for line in section[1:] if line.startswith("--")]
        if head.startswith("perhaps you meant") and flags:
            message += f"; did you mean {_one_of(flags[:3])}?"
        elif head.startswith("argument helptext") and flags:
            expected = next(line for line in section[1:] if line.startswith("--"))
            message += f" (expected {expected})"
    return re.sub(r"\s+", " ", message)


def _one_of(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"

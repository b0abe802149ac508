"""Console logging: rich on a terminal, plain lines elsewhere (a file, a pipe, a scheduler's log)."""

from __future__ import annotations

import logging
import sys

from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

UNWRAPPED = {"unwrapped": True}
"""``extra`` of a log record that holds a command or a path to copy: one line, never wrapped at the terminal's width
(rich breaks long messages into indented lines, which copied do not run)."""

PLAIN_FORMAT = "[%(asctime)s] %(levelname)-8s %(message)s"
"""A record as rich shows it on a terminal (time, level, message), without its wrapping or padding."""


class _TerminalHandler(RichHandler):
    """rich's handler, but records marked :data:`UNWRAPPED` print as one soft-wrapped line (the terminal folds it
    for the eye; a copy is the whole line)."""

    def emit(self, record: logging.LogRecord) -> None:
        if not getattr(record, "unwrapped", False):
            super().emit(record)
            return
        when = logging.Formatter(datefmt="[%X]").formatTime(record, "[%X]")
        line = Text(f"{when} ", style="log.time")
        line.append(f"{record.levelname:<8} ", style=f"logging.level.{record.levelname.lower()}")
        line.append(record.getMessage())
        self.console.print(line, soft_wrap=True)


def configure_logging(level: int = logging.INFO) -> None:
    """Send ``mjfleet`` records to stderr (through rich on a terminal); quiet down chatty libraries."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler: logging.Handler
    if sys.stderr.isatty():
        handler = _TerminalHandler(
            console=Console(stderr=True),
            show_path=False,
            show_time=True,
            omit_repeated_times=False,
            markup=False,
            rich_tracebacks=False,
        )
        handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    else:  # lines as they were logged: no wrapping at a width nobody reads them at, no padding to it
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(PLAIN_FORMAT, datefmt="%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("mjfleet").setLevel(level)

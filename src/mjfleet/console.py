"""Console logging: rich on the main process, plain records elsewhere."""

from __future__ import annotations

import logging
import os
import sys

from rich.console import Console
from rich.logging import RichHandler


def configure_logging(level: int = logging.INFO) -> None:
    """Send ``mjfleet`` records to stderr through rich; quiet down chatty libraries."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    width = None if sys.stderr.isatty() else int(os.environ.get("COLUMNS", "160"))
    handler = RichHandler(
        console=Console(stderr=True, width=width),
        show_path=False,
        show_time=True,
        omit_repeated_times=False,
        markup=False,
        rich_tracebacks=False,
    )
    handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("mjfleet").setLevel(level)

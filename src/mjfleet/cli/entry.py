"""The console commands' entry points (``[project.scripts]``): each loads its command's module when called, so that
a Ctrl-C while torch and MuJoCo load ends the command as one during its run does, with exit code 130 and no
traceback, and ends its process without the interpreter's teardown (``runtime/process_end.py``)."""

from __future__ import annotations

import importlib
from typing import NoReturn

from mjfleet.errors import INTERRUPTED_EXIT_CODE
from mjfleet.runtime.process_end import run_as_process


def _run(module: str) -> NoReturn:
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED_EXIT_CODE) from None
    run_as_process(main)


def train() -> None:
    """``train``: :func:`mjfleet.cli.train.main`."""
    _run("mjfleet.cli.train")


def play() -> None:
    """``play``: :func:`mjfleet.cli.play.main`."""
    _run("mjfleet.cli.play")


def list_tasks() -> None:
    """``list-tasks``: :func:`mjfleet.cli.list_tasks.main`."""
    _run("mjfleet.cli.list_tasks")


def bench() -> None:
    """``bench``: :func:`mjfleet.cli.bench.main`."""
    _run("mjfleet.cli.bench")

"""Ending a command's or a worker's process without the interpreter's teardown of every module.

Once torch is imported, the interpreter's teardown (clearing every module, then garbage-collecting what they held)
takes 0.5 s, and 1-1.5 s with torch's compiler stack, which its optimizers import: after a command's last line, and
in a launch on the path from the workers' last iteration to the launcher's end. Everything an exit does for the
program still happens: the exit handlers run (logging's flush and close, W&B's and TensorBoard's), the standard
streams are flushed, non-daemon threads are waited for; only the freeing of memory the operating system takes back
anyway is skipped.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def _exit_after_handlers(code: int) -> NoReturn:
    getattr(atexit, "_run_exitfuncs")()  # noqa: B009  # private, but what the interpreter's exit calls
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    """The status the interpreter exits with for ``exc`` (a message is printed and gives 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_as_process(main: Callable[[], object]) -> NoReturn:
    """Run a console command's ``main`` as what its process does, then end the process with its exit status. An
    exception other than ``SystemExit`` goes on to the interpreter (its traceback and exit status 1); so does the
    exit while a non-daemon thread runs, which the interpreter waits for."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if threading.current_thread() is not threading.main_thread() or any(t.is_alive() for t in others):
        raise SystemExit(code)
    _exit_after_handlers(code)


def end_quickly_at_exit() -> None:
    """Have this process's next ``sys.exit`` (where a ``multiprocessing`` child's ends) end it as
    :func:`run_as_process` does. Call it once what the process was for has succeeded."""
    interpreter_exit = sys.exit

    def exit_quickly(status: str | int | None = None) -> NoReturn:
        sys.exit = interpreter_exit
        run_as_process(lambda: interpreter_exit(status))

    sys.exit = exit_quickly

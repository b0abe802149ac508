"""A command's process ends right after its exit handlers, with the status it exits with, and skips the interpreter's
teardown of its modules (1-1.5 s once torch is imported)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
import atexit, sys, threading, time
from mjfleet.runtime.process_end import end_quickly_at_exit, run_as_process

class TornDown:
    def __del__(self):
        sys.__stdout__.write("torn down\\n")

KEPT = TornDown()  # deleted by the interpreter's teardown of this module, which an ending without it skips
atexit.register(lambda: print("exit handler", flush=True))
"""


def _run(body: str) -> subprocess.CompletedProcess[str]:
    program = PROGRAM + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("ending", "status"), [("return None", 0), ("raise SystemExit(3)", 3), ("sys.exit()", 0)])
def test_a_command_ends_with_its_status_after_its_exit_handlers_and_without_the_teardown(
    ending: str, status: int
) -> None:
    result = _run(f"""
        def main():
            print("unflushed output", end="")
            {ending}
        run_as_process(main)
    """)
    assert result.returncode == status, result.stderr
    assert result.stdout == "unflushed outputexit handler\n"


def test_a_message_given_to_exit_is_printed_and_exits_1() -> None:
    result = _run("""
        def main():
            raise SystemExit("cannot go on")
        run_as_process(main)
    """)
    assert (result.returncode, result.stderr, result.stdout) == (1, "cannot go on\n", "exit handler\n")


def test_a_running_thread_leaves_the_ending_to_the_interpreter_which_waits_for_it() -> None:
    result = _run("""
        def main():
            threading.Thread(target=lambda: (time.sleep(0.5), print("thread done", flush=True))).start()
        run_as_process(main)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "thread done\nexit handler\ntorn down\n"


def test_a_worker_ends_quickly_at_the_exit_its_process_makes() -> None:
    result = _run("""
        end_quickly_at_exit()
        atexit.register(lambda: print("registered later", flush=True))
        sys.exit(5)
    """)
    assert result.returncode == 5, result.stderr
    assert result.stdout == "registered later\nexit handler\n"

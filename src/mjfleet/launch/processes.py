"""Process hygiene for launches: find and stop what a launch started, SIGTERM handling, agent sessions."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from types import FrameType

logger = logging.getLogger(__name__)

SWEEP_GRACE_S = 10.0
# After an interrupt torchrunx has already asked its agents to stop; an agent blocked in its gloo
# sync with the launcher ignores SIGTERM until that sync times out, so waiting longer is pointless.
SWEEP_GRACE_INTERRUPTED_S = 2.0


def process_table() -> dict[int, tuple[int, int, str]]:
    """``pid -> (ppid, start time, state)`` from /proc; empty where /proc is unavailable."""
    table: dict[int, tuple[int, int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses; fields follow the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0])
    return table


def children(pid: int, table: Mapping[int, tuple[int, int, str]]) -> set[int]:
    return {p for p, (ppid, _, _) in table.items() if ppid == pid}


def _descendants(roots: set[int], table: Mapping[int, tuple[int, int, str]]) -> set[int]:
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        found |= frontier
        frontier = {p for p, (ppid, _, _) in table.items() if ppid in frontier} - found
    return found


def _alive(procs: Mapping[int, int]) -> dict[int, int]:
    """Subset of ``pid -> start time`` still running (same start time, not a zombie)."""
    table = process_table()
    return {
        pid: start
        for pid, start in procs.items()
        if pid in table and table[pid][1] == start and table[pid][2] not in ("Z", "X")
    }


def sweep(children_before: set[int], grace_s: float = SWEEP_GRACE_S) -> None:
    """Wait for, then kill, every process the launch started (agents, workers, log collector)."""
    table = process_table()
    new = children(os.getpid(), table) - children_before
    procs = {pid: table[pid][1] for pid in _descendants(new, table)}
    deadline = time.monotonic() + grace_s
    while (left := _alive(procs)) and time.monotonic() < deadline:
        _kill_stopped(left)
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = _alive(procs)
        if not left:
            return
        logger.warning("stopping %d leftover launch process(es) with %s", len(left), sig.name)

        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3.0
        while _alive(left) and time.monotonic() < deadline:
            time.sleep(0.1)


def _kill_stopped(procs: Mapping[int, int]) -> None:
    """SIGKILL processes that are stopped (SIGSTOP, a debugger): they cannot exit or handle SIGTERM."""
    table = process_table()
    for pid, start in procs.items():
        if pid in table and table[pid][1] == start and table[pid][2] in ("T", "t"):
            logger.warning("killing stopped launch process %d", pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class _TermGuard:
    """SIGTERM handler: the first one becomes KeyboardInterrupt, unless cleanup is running."""

    def __init__(self) -> None:
        self.received = False
        self.cleaning = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.received:
            return
        self.received = True
        if not self.cleaning:  # During cleanup it is raised once cleanup is done.
            raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[_TermGuard]:
    """Turn SIGTERM into KeyboardInterrupt so torchrunx's and our cleanup run."""
    guard = _TermGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = signal.signal(signal.SIGTERM, guard)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, previous)


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine (torchrunx's own test: loopback, or an address shared with it)."""
    try:
        ip = ipaddress.ip_address(socket.gethostbyname(host))
        if ip.is_loopback:
            return True
        host_addrs = {a[4][0] for a in socket.getaddrinfo(str(ip), None)}
        local_addrs = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except (OSError, ValueError):
        return False
    return bool(host_addrs & local_addrs)


@contextlib.contextmanager
def agents_in_own_session() -> Iterator[None]:
    """Start local torchrunx agents (and so their workers) in a new session while the block runs.

    torchrunx 0.4.0 starts local agents with ``Popen(shell=True)`` in the launcher's process group, so a
    terminal Ctrl-C would reach every agent and worker at once and kill them mid-iteration. In their own session
    only the launcher sees it and decides: stop cleanly after the iteration, or stop everything. Remote agents
    (SSH) are not affected by a local terminal and are started by torchrunx as usual.
    """
    import torchrunx.launcher as torchrunx_launcher

    original = torchrunx_launcher.execute_command  # pyright: ignore[reportPrivateImportUsage]

    def execute_command(
        command: str,
        hostname: str,
        *,
        ssh_config_file: str | os.PathLike[str] | None = None,
        return_stdout_stderr: bool = False,
    ) -> tuple[str, str]:
        if return_stdout_stderr or not is_local_host(hostname):
            return original(
                command, hostname, ssh_config_file=ssh_config_file, return_stdout_stderr=return_stdout_stderr
            )
        subprocess.Popen(command, shell=True, text=True, start_new_session=True)
        return ("", "")

    torchrunx_launcher.execute_command = execute_command  # pyright: ignore[reportPrivateImportUsage]
    try:
        yield
    finally:
        torchrunx_launcher.execute_command = original  # pyright: ignore[reportPrivateImportUsage]

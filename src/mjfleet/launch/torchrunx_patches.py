"""Every patch of torchrunx 0.4.0 internals, in one place, applied only while a launch runs.

``tests/test_launch_patches.py`` pins what these rely on (names and signatures in ``torchrunx.launcher``), so a
torchrunx upgrade that moves them fails loudly there instead of silently unpatching.

* Local agents start in their own session (``execute_command``): a terminal Ctrl-C reaches only the launcher.
* The launcher announces a chosen address (``socket.getfqdn`` as seen by ``torchrunx.launcher``): torchrunx uses
  this machine's fully qualified name, which is ``localhost`` on many images, so remote agents would call
  themselves.
* Remote agent start commands are recorded, so a failed launch can stop those agents over SSH.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shlex
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from mjfleet.cluster.hosts import is_local_host

logger = logging.getLogger(__name__)

# What torchrunx.launcher must provide for these patches (checked by the pinning test).
PATCHED_NAMES = ("execute_command", "socket")


class _AnnouncingSocket(ModuleType):
    """The ``socket`` module as ``torchrunx.launcher`` sees it, with ``getfqdn`` answering ``address``."""

    def __init__(self, address: str) -> None:
        super().__init__("socket")
        self._address = address

    def getfqdn(self, name: str = "") -> str:
        return self._address if not name else socket.getfqdn(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)


@dataclass
class LaunchRecord:
    """What the patched torchrunx started on remote hosts during one launch."""

    remote_agents: dict[str, str] = field(default_factory=dict)
    """host -> the agent's ``--launcher-port N`` argument (unique to this launch)."""


_PORT_RE = re.compile(r"--launcher-port \d+")


@contextlib.contextmanager
def patched_torchrunx(announce: str | None) -> Iterator[LaunchRecord]:
    """Apply the patches while the block runs; ``announce`` (None: leave torchrunx's choice) is the launcher
    address that agents and the log collector are told to connect to."""
    import torchrunx.launcher as torchrunx_launcher

    record = LaunchRecord()
    original_execute = torchrunx_launcher.execute_command  # pyright: ignore[reportPrivateImportUsage]
    original_socket = torchrunx_launcher.socket  # pyright: ignore[reportPrivateImportUsage]

    def execute_command(command: str, hostname: str, **kwargs: Any) -> tuple[str, str]:
        if kwargs.get("return_stdout_stderr"):
            return original_execute(command, hostname, **kwargs)
        if not is_local_host(hostname):
            if "-m torchrunx" in command and (match := _PORT_RE.search(command)):
                record.remote_agents[hostname] = match.group(0)
            return original_execute(command, hostname, **kwargs)
        # Local agents: torchrunx uses Popen(shell=True) in our process group; a new session keeps the terminal's
        # Ctrl-C for the launcher to decide (stop cleanly or at once).
        subprocess.Popen(command, shell=True, text=True, start_new_session=True)
        return ("", "")

    torchrunx_launcher.execute_command = execute_command  # pyright: ignore[reportPrivateImportUsage]
    if announce is not None:
        torchrunx_launcher.socket = _AnnouncingSocket(announce)  # pyright: ignore[reportPrivateImportUsage]
    try:
        yield record
    finally:
        torchrunx_launcher.execute_command = original_execute  # pyright: ignore[reportPrivateImportUsage]
        torchrunx_launcher.socket = original_socket  # pyright: ignore[reportPrivateImportUsage]


def stop_remote_agents(record: LaunchRecord, ssh_config: str | None, timeout_s: float = 15.0) -> None:
    """Stop the agents (and so their workers) this launch started on remote hosts that are still running.

    torchrunx kills remote agents only once they have all joined; an agent stuck before that would linger until its
    own timeout. Each is found by its unique ``--launcher-port`` argument.
    """
    import fabric

    for host, marker in record.remote_agents.items():
        # "[t]" keeps the pattern from matching the command line of the shell that runs pkill.
        pattern = shlex.quote(f"[t]orchrunx .*{marker} ")
        command = f"pkill -TERM -f -- {pattern}; sleep 1; pkill -KILL -f -- {pattern}; true"
        try:
            with fabric.Connection(
                host, config=fabric.Config(runtime_ssh_path=ssh_config), connect_timeout=timeout_s
            ) as conn:
                conn.run(command, hide=True, warn=True, in_stream=False, timeout=timeout_s)
        except Exception as exc:  # best effort: the host may be the reason the launch failed
            logger.debug("could not stop the agent on %s: %s", host, exc)

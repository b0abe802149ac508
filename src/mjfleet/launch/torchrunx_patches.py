"""The two patches of torchrunx 0.4.0 internals, applied only while a launch runs, and stopping leftover remote agents.
``tests/test_launch_patches.py`` checks their effect on a real launch: an upgrade that moves what they replace fails
there instead of silently unpatching."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import subprocess
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

from mjfleet.cluster.hosts import is_local_host
from mjfleet.runtime.stop import signals_reach_every_process

logger = logging.getLogger(__name__)

AGENT_SIGNALS = {"TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGHUP,SIGQUIT"}
"""The signals an agent's torch process context turns into the end of its workers, SIGTERM left out."""


@contextlib.contextmanager
def patched_torchrunx(announce: str | None) -> Iterator[None]:
    """Apply the patches while the block runs; ``announce`` (None: leave torchrunx's choice) is the launcher
    address that agents and the log collector are told to connect to."""
    import torchrunx.launcher as launcher

    original_execute = launcher.execute_command  # pyright: ignore[reportPrivateImportUsage]
    original_socket = launcher.socket  # pyright: ignore[reportPrivateImportUsage]

    def execute_command(command: str, hostname: str, **kwargs: Any) -> tuple[str, str]:
        if kwargs.get("return_stdout_stderr"):
            return original_execute(command, hostname, **kwargs)
        # A scheduler's SIGTERM reaches every process of the job on every node, sessions apart: the agents ignore it
        # (torch's process context would raise on it and end the workers, as the agent's death would).
        ignoring = signals_reach_every_process(os.environ)
        if not is_local_host(hostname):
            if ignoring:  # the remote shell exports nothing of ours but what the command says
                exports = " ".join(f"{name}={value}" for name, value in AGENT_SIGNALS.items())
                command = f"trap '' TERM; export {exports}; {command}"
            return original_execute(command, hostname, **kwargs)
        if ignoring:
            agent = {**os.environ, **AGENT_SIGNALS}
            subprocess.Popen(f"trap '' TERM; {command}", shell=True, text=True, start_new_session=True, env=agent)
        else:
            subprocess.Popen(command, shell=True, text=True, start_new_session=True)
        return ("", "")

    # No option starts local agents apart: torchrunx runs them with Popen(shell=True) in our process group, where a
    # terminal's Ctrl-C would kill them mid-iteration; in their own session, stopping stays the launcher's decision.
    launcher.execute_command = execute_command  # pyright: ignore[reportPrivateImportUsage]
    if announce is not None:
        # No option names the address agents call back to: torchrunx announces socket.getfqdn(), which is
        # "localhost" on many images, so remote agents would call themselves. Its own socket module answers announce.
        announcing = ModuleType("socket")
        announcing.__dict__.update(vars(socket), getfqdn=lambda name="": socket.getfqdn(name) if name else announce)
        launcher.socket = announcing  # pyright: ignore[reportPrivateImportUsage]
    try:
        yield
    finally:
        launcher.execute_command, launcher.socket = original_execute, original_socket  # pyright: ignore[reportPrivateImportUsage]


def stop_command(marker: str) -> str:
    """Shell command: SIGTERM, then SIGKILL, the processes whose environment holds ``marker`` (``NAME=value``)."""
    each = (
        "for e in /proc/[0-9]*/environ; do tr '\\000' '\\n' 2>/dev/null <\"$e\" | grep -qxF -e \"$m\""
        ' && p="${e%/environ}" && kill -s "$1" "${p#/proc/}" 2>/dev/null; done'
    )
    return f"m={shlex.quote(marker)}; k() {{ {each}; }}; k TERM; sleep 1; k KILL; true"


def stop_remote_agents(hosts: Sequence[str], marker: str, ssh_config: str | None, timeout_s: float = 15.0) -> None:
    """Stop what a launch left on remote ``hosts``: the processes whose environment holds ``marker``, a ``NAME=value``
    unique to the launch that its agents (and so their workers) were given. torchrunx stops remote agents only once
    all have joined; one stuck before that would linger until its own timeout. The hosts are reached at once: a few
    that no longer answer cost one ``timeout_s``, not one each."""
    import fabric

    def stop(host: str) -> None:
        try:
            with fabric.Connection(
                host, config=fabric.Config(runtime_ssh_path=ssh_config), connect_timeout=timeout_s
            ) as conn:
                conn.run(stop_command(marker), hide=True, warn=True, in_stream=False, timeout=timeout_s)
        except Exception as exc:  # best effort: the host may be the reason the launch failed
            logger.debug("could not stop the agent on %s: %s", host, exc)

    if hosts:
        with ThreadPoolExecutor(max_workers=min(len(hosts), 32)) as pool:
            list(pool.map(stop, hosts))

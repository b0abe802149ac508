"""The three patches of torchrunx 0.4.0 internals, applied only while a launch runs, and stopping leftover remote
agents. ``tests/test_launch_patches.py`` checks their effect on a real launch: an upgrade that moves what they replace
fails there instead of silently unpatching."""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import shlex
import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, TypeVar

from mjfleet.cluster.hosts import is_local_host
from mjfleet.runtime.stop import signals_reach_every_process

logger = logging.getLogger(__name__)

_R = TypeVar("_R")

AGENT_SIGNALS = {"TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGHUP,SIGQUIT"}
"""The signals an agent's torch process context turns into the end of its workers, SIGTERM left out."""


def bounded_launcher_group(base: Any) -> Any:
    """torchrunx's launcher-agent group class ``base`` with its launcher side formed within the agent timeout.

    gloo waits five times the group's timeout for the connections of agents that posted their addresses and then died
    (their own connects refused: an interface the other hosts cannot reach): the launcher reported agents that
    cannot join after five ``--agent-timeout-s``. The store comes first, as torchrunx makes it (it waits for every
    agent to reach it, under its own longer timeout); the gloo group then forms in a thread of its own, given up on
    after the agent timeout (a group formed after that is destroyed in its thread)."""

    class BoundedLauncherGroup(base[_R]):  # generic as the base: torchrunx subscripts it
        def __post_init__(self) -> None:
            if self.rank != 0:
                super().__post_init__()
                return
            import torch.distributed as dist

            store = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
                host_name=self.launcher_hostname, port=self.launcher_port, world_size=self.world_size, is_master=True
            )
            lock, formed, abandoned, failed = (
                threading.Lock(),
                threading.Event(),
                threading.Event(),
                list[BaseException](),
            )

            def form() -> None:
                try:
                    group = dist.init_process_group(
                        backend="gloo",
                        world_size=self.world_size,
                        rank=0,
                        store=store,
                        timeout=datetime.timedelta(seconds=self.agent_timeout),
                    )
                except BaseException as exc:  # handed to the launch's thread
                    failed.append(exc)
                    formed.set()
                    return
                with lock:
                    if abandoned.is_set():
                        dist.destroy_process_group()
                    else:
                        self.group = group
                        formed.set()

            threading.Thread(target=form, name="mjfleet-launcher-group", daemon=True).start()
            # A second more than the group's own timeout: where gloo keeps it, its own error says more.
            if not formed.wait(self.agent_timeout + 1.0):
                with lock:
                    if not formed.is_set():
                        abandoned.set()
                        raise RuntimeError(
                            f"the launcher-agent group did not form within {self.agent_timeout} s of every agent"
                            " reaching the launcher's store"
                        )
            if failed:
                raise failed[0]

    return BoundedLauncherGroup


@contextlib.contextmanager
def patched_torchrunx(announce: str | None) -> Iterator[None]:
    """Apply the patches while the block runs; ``announce`` (None: leave torchrunx's choice) is the launcher
    address that agents and the log collector are told to connect to."""
    import torchrunx.launcher as launcher

    original_execute = launcher.execute_command  # pyright: ignore[reportPrivateImportUsage]
    original_socket = launcher.socket  # pyright: ignore[reportPrivateImportUsage]
    original_group = launcher.LauncherAgentGroup  # pyright: ignore[reportPrivateImportUsage]

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
    launcher.LauncherAgentGroup = bounded_launcher_group(original_group)  # pyright: ignore[reportPrivateImportUsage]
    try:
        yield
    finally:
        launcher.execute_command, launcher.socket = original_execute, original_socket  # pyright: ignore[reportPrivateImportUsage]
        launcher.LauncherAgentGroup = original_group  # pyright: ignore[reportPrivateImportUsage]


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

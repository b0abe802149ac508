"""What mjfleet's three patches of torchrunx internals (mjfleet.launch.torchrunx_patches) do, on a real launch.

A torchrunx release that moves what they replace fails here, rather than silently unpatching: local agents would share
the terminal's Ctrl-C again, and remote agents would call back to ``localhost``. (The third, the launcher's side of the
launcher-agent group formed within the agent timeout, is shown on two hosts in tests/test_multihost.py.)
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from typing import Any

import cloudpickle
import psutil
import pytest

from mjfleet.launch.torchrunx_patches import patched_torchrunx, stop_command, stop_remote_agents

from .pinned import assert_checked_range

# Workers unpickle the worker function; pytest's module name is not importable there.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CHECKED = "~=0.4.0"
"""The torchrunx versions these tests were run against (pyproject.toml must allow exactly these)."""


def test_pyproject_allows_the_torchrunx_versions_checked_here() -> None:
    assert_checked_range("torchrunx", CHECKED)


def where_i_run() -> dict[str, Any]:
    """In a launched worker: its session, and the addresses it is connected to (torchrunx's log stream among them)."""
    logging.getLogger("mjfleet.test").warning("a record, so that the log stream is connected")
    peers = {c.raddr.ip for c in psutil.Process().net_connections("tcp") if c.raddr}
    return {"sid": os.getsid(0), "peers": sorted(peers)}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="any 127.x address is this machine on Linux only")
def test_local_agents_run_apart_and_agents_are_told_the_announced_address() -> None:
    import torchrunx

    default = socket.gethostbyname(socket.getfqdn())  # what torchrunx would announce
    announce = next(a for a in ("127.0.0.2", "127.0.0.3") if a != default)
    launcher = torchrunx.Launcher(hostnames=["localhost"], workers_per_host=1, backend=None, agent_timeout=60)
    launcher.set_logging_handlers(None)
    with patched_torchrunx(announce):
        (seen,) = launcher.run(where_i_run).results["localhost"]
    # The agent (and so its worker) has a session of its own: a terminal's Ctrl-C reaches only the launcher.
    assert seen["sid"] != os.getsid(0)
    # The worker streams its log records to the launcher at the announced address, not at socket.getfqdn().
    assert announce in seen["peers"], seen


def test_the_patches_apply_only_inside_the_block() -> None:
    import torchrunx.launcher as launcher

    before = (launcher.execute_command, launcher.socket, launcher.LauncherAgentGroup)  # pyright: ignore[reportPrivateImportUsage]
    with patched_torchrunx("10.9.8.7"):
        assert launcher.socket.getfqdn() == "10.9.8.7"  # pyright: ignore[reportPrivateImportUsage]
        assert launcher.socket.AF_INET == socket.AF_INET  # pyright: ignore[reportPrivateImportUsage]
        assert socket.getfqdn() != "10.9.8.7"  # the real module is untouched
        assert issubclass(launcher.LauncherAgentGroup, before[2])  # pyright: ignore[reportPrivateImportUsage]
    assert (launcher.execute_command, launcher.socket, launcher.LauncherAgentGroup) == before  # pyright: ignore[reportPrivateImportUsage]
    with patched_torchrunx(None):
        assert launcher.socket is socket  # pyright: ignore[reportPrivateImportUsage]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_stop_command_stops_exactly_the_processes_that_carry_the_launch_marker() -> None:
    marker = ("MJFLEET_LAUNCH_REPORT_DIR", "/tmp/mjfleet-launch-a b'c")
    env = {**os.environ, marker[0]: marker[1]}
    marked = subprocess.Popen(["sleep", "60"], env=env)
    similar = subprocess.Popen(["sleep", "60"], env={**env, marker[0]: marker[1] + "d"})
    try:
        subprocess.run(["sh", "-c", stop_command("=".join(marker))], check=True, timeout=30)
        deadline = time.monotonic() + 5
        while marked.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked.poll() is not None and similar.poll() is None
    finally:
        for proc in (marked, similar):
            proc.kill()
            proc.wait()


def test_remote_agents_are_stopped_on_every_host_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # After a failed launch with hosts that no longer answer, each took its own connect timeout, one after another.
    import threading

    import fabric

    reached: list[str] = []
    lock = threading.Lock()

    class SlowHost:
        def __init__(self, host: str, **kwargs: object) -> None:
            self.host = host

        def __enter__(self) -> SlowHost:
            time.sleep(0.5)  # a host that takes its time to answer
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def run(self, command: str, **kwargs: object) -> None:
            with lock:
                reached.append(self.host)

    monkeypatch.setattr(fabric, "Connection", SlowHost)
    began = time.monotonic()
    stop_remote_agents(["a", "b", "c", "d"], "MARKER=1", None)
    assert sorted(reached) == ["a", "b", "c", "d"]
    assert time.monotonic() - began < 1.5

"""Pins what mjfleet's patches of torchrunx internals rely on (mjfleet.launch.torchrunx_patches).

A torchrunx upgrade that renames or reworks any of these must fail here, loudly, rather than silently unpatch:
remote agents would call back to ``localhost`` again, and local agents would share the terminal's Ctrl-C.
"""

from __future__ import annotations

import inspect
import socket
import subprocess
from importlib.metadata import version

import pytest
import torchrunx.launcher as torchrunx_launcher
import torchrunx.worker as torchrunx_worker

from mjfleet.launch.torchrunx_patches import PATCHED_NAMES, LaunchRecord, patched_torchrunx


def test_torchrunx_version_is_the_one_the_patches_were_written_for() -> None:
    assert version("torchrunx") == "0.4.0", "re-check mjfleet/launch/torchrunx_patches.py against the new torchrunx"


def test_the_patched_names_exist_with_the_expected_shape() -> None:
    for name in PATCHED_NAMES:
        assert hasattr(torchrunx_launcher, name), name
    assert torchrunx_launcher.socket is socket  # pyright: ignore[reportPrivateImportUsage]
    params = inspect.signature(torchrunx_launcher.execute_command).parameters  # pyright: ignore[reportPrivateImportUsage]
    assert list(params)[:2] == ["command", "hostname"]
    assert {"ssh_config_file", "return_stdout_stderr"} <= set(params)
    run_source = inspect.getsource(torchrunx_launcher.Launcher.run)
    # The launcher address comes from getfqdn() and is what agents and the log collector connect to.
    assert "launcher_hostname = socket.getfqdn()" in run_source
    assert "execute_command(" in run_source
    # Workers get MASTER_ADDR from torchrunx before our worker wrapper replaces it (MJFLEET_MASTER_ADDR).
    assert 'os.environ["MASTER_ADDR"] = worker_args.master_hostname' in inspect.getsource(
        torchrunx_worker.worker_entrypoint
    )
    # The agent start command carries the unique launcher port that stop_remote_agents() looks for.
    build = inspect.getsource(torchrunx_launcher.build_launch_command)  # pyright: ignore[reportPrivateImportUsage]
    assert "-m torchrunx" in build and "--launcher-port {launcher_port}" in build


def test_patches_apply_only_inside_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    original = torchrunx_launcher.execute_command  # pyright: ignore[reportPrivateImportUsage]
    started: list[str] = []
    monkeypatch.setattr(subprocess, "Popen", lambda command, **_: started.append(command))
    with patched_torchrunx("10.9.8.7") as record:
        assert isinstance(record, LaunchRecord)
        assert torchrunx_launcher.socket.getfqdn() == "10.9.8.7"  # pyright: ignore[reportPrivateImportUsage]
        assert torchrunx_launcher.socket.AF_INET == socket.AF_INET  # pyright: ignore[reportPrivateImportUsage]
        assert socket.getfqdn() != "10.9.8.7"  # the real module is untouched
        torchrunx_launcher.execute_command("echo hi", "localhost")  # pyright: ignore[reportPrivateImportUsage]
    assert started == ["echo hi"]
    assert torchrunx_launcher.socket is socket  # pyright: ignore[reportPrivateImportUsage]
    assert torchrunx_launcher.execute_command is original  # pyright: ignore[reportPrivateImportUsage]
    with patched_torchrunx(None):
        assert torchrunx_launcher.socket is socket  # pyright: ignore[reportPrivateImportUsage]

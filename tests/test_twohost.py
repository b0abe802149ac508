"""The namespace "second host" that the multi-host tests run on (see tests/twohost.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.twohost import namespace_host, unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_namespace_host_is_reached_over_ssh_and_cleaned_up(tmp_path: Path) -> None:
    with namespace_host(tmp_path) as host:
        # Same file system: this interpreter runs there; this machine's name resolves to its link address.
        script = f"import socket; print(socket.gethostbyname({socket.gethostname()!r}))"
        result = host.ssh(f"{sys.executable} -c {script!r}")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == host.local_address
        # Its loopback is its own: a port listening on ours is not reachable there.
        with socket.create_server(("127.0.0.1", 0)) as server:
            port = server.getsockname()[1]
            probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
            assert host.ssh(f"{sys.executable} -c {probe!r}").returncode != 0
            socket.create_connection(("127.0.0.1", port), 2).close()  # while it is reachable here
        host.stop_sshd()
        assert host.ssh("true", timeout=20).returncode != 0
        name = host.name
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not Path("/etc/netns", name).exists()

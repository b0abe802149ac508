"""Where mjfleet restates a torchrunx helper instead of calling it: the restatement decides as torchrunx does, and the
reason given for not calling it (planning imports no torch or torchrunx) holds."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mjfleet.cluster.hosts import is_local_host


def _torchrunx_starts_locally(host: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Which way torchrunx's own ``execute_command`` goes for ``host``: a local process, or SSH (both faked)."""
    from torchrunx.utils import environment

    ways: list[str] = []

    class Connection:
        def __init__(self, **kwargs: Any) -> None:
            ways.append("ssh")

        def __enter__(self) -> Connection:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def run(self, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(environment, "fabric", SimpleNamespace(Connection=Connection, Config=lambda **kw: None))
    monkeypatch.setattr(environment, "subprocess", SimpleNamespace(Popen=lambda *a, **kw: ways.append("local")))
    environment.execute_command("true", host)
    assert len(ways) == 1
    return ways[0] == "local"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1", "<own name>", "192.0.2.1", "2001:db8::1"])
def test_is_local_host_decides_as_torchrunx_does(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    host = socket.gethostname() if host == "<own name>" else host  # 192.0.2.1, 2001:db8::1: documentation addresses
    assert is_local_host(host) == _torchrunx_starts_locally(host, monkeypatch)


@pytest.mark.slow
def test_planning_on_the_nodes_of_a_slurm_job_imports_no_torch(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text("#!/bin/sh\nprintf 'localhost\\n127.0.0.1\\n'\n")
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SLURM_JOB_ID="7", SLURM_JOB_NODELIST="node[1-2]")
    env["CUDA_VISIBLE_DEVICES"] = ""
    code = (
        "import sys\n"
        "from mjfleet.cli import train\n"
        "from mjfleet.train import prepare\n"
        "cfg = train.parse_args(['cartpole-balance', '--gpu-ids', 'None', '--hostnames', 'slurm',"
        " '--log-root', sys.argv[1]])\n"
        "plan = prepare(cfg).launch_plan\n"
        "assert plan is not None and plan.hostnames == ('localhost', '127.0.0.1'), plan\n"
        "print(sorted(m for m in ('torch', 'torchrunx') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "logs")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

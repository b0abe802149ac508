"""Training across two real hosts over SSH, and every way a host can fail to take part (see tests/twohost.py).

The second host is a network namespace with its own sshd; it shares this machine's file system (like a cluster with
a shared file system) and process table, so leftover processes are found on both "hosts" by the test token.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torchrunx

import mjfleet
from mjfleet.cluster.hosts import check_host
from mjfleet.rl.checkpoint.files import list_checkpoints
from tests.helpers import ONE_PASS_UPDATE, TOKEN_ENV, assert_no_processes_left
from tests.twohost import NamespaceHost, namespace_host, unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

FAIL_WITHIN_S = 120.0
SMALL = ["--env.num-envs", "32", "--agent.num-steps-per-env", "8", "--agent.max-iterations", "3", *ONE_PASS_UPDATE]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[NamespaceHost]:
    with namespace_host(tmp_path / "host") as made:
        yield made


def train(
    host: NamespaceHost, tmp_path: Path, hostnames: list[str], *extra: str, ifname: str | None = None
) -> tuple[subprocess.CompletedProcess[str], float, str]:
    """Run the ``train`` CLI across ``hostnames``; returns the result, seconds taken and the processes' token."""
    token = uuid.uuid4().hex
    env = {**os.environ, "GLOO_SOCKET_IFNAME": ifname or host.ifname, TOKEN_ENV: token}
    env.pop("MJFLEET_LAUNCHER_ADDRESS", None)
    command = [
        sys.executable,
        "-m",
        "mjfleet.cli.train",
        "cartpole-balance",
        "--gpu-ids",
        "None",
        "--cpu-workers",
        "1",
        "--hostnames",
        *hostnames,
        "--ssh-config",
        str(host.ssh_config),
        "--log-root",
        str(tmp_path / "logs"),
        *SMALL,
        *extra,
    ]
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    return result, time.monotonic() - started, token


def assert_one_line_failure(result: subprocess.CompletedProcess[str], took_s: float, *expected: str) -> str:
    output = result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, output
    assert len(errors) == 1, output
    assert "Traceback" not in output, output
    assert took_s < FAIL_WITHIN_S, f"took {took_s:.0f} s"
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def assert_namespace_empty(host: NamespaceHost) -> None:
    deadline = time.monotonic() + 10  # sshd's per-connection processes take a moment to exit
    while host.processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host.processes() == [], "processes left in the namespace host"


def assert_nothing_left(host: NamespaceHost, token: str) -> None:
    assert_no_processes_left(token, context="processes left on one of the hosts")
    assert_namespace_empty(host)


def test_trains_on_two_hosts_over_ssh(host: NamespaceHost, tmp_path: Path) -> None:
    me = socket.gethostname()
    # The product checks replicas at every iteration and fails the run (exit 1) if any digest differs.
    result, _, token = train(host, tmp_path, [me, host.address], "--replica-check-interval", "1")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"2 workers (1 CPU process on each of 2 hosts ({me}, {host.address})" in output
    assert f"launcher address {host.local_address}" in output
    assert "finished at iteration 3" in output
    runs = list((tmp_path / "logs" / "cartpole_balance").iterdir())
    assert len(runs) == 1, runs
    assert (runs[0] / "model_3.pt").is_file()
    (log_run_dir,) = (runs[0] / "torchrunx").iterdir()
    for worker_host in (me, host.address):  # both agents started a worker; each has its own log file
        assert "Starting 1 worker processes" in (log_run_dir / f"{worker_host}.log").read_text()
        assert (log_run_dir / f"{worker_host}[0].log").is_file()
    assert "it 3/3" in (log_run_dir / f"{me}[0].log").read_text()  # rank 0's progress lines
    remote_log = (log_run_dir / f"{host.address}[0].log").read_text()
    assert "Traceback" not in remote_log, remote_log
    assert_nothing_left(host, token)


def test_stopped_sshd_fails_fast_naming_host_and_log(host: NamespaceHost, tmp_path: Path) -> None:
    host.stop_sshd()
    result, took, token = train(host, tmp_path, [socket.gethostname(), host.address])
    line = assert_one_line_failure(result, took, f"host {host.address}", "SSH connection refused", "(log: ")
    log = Path(line.rsplit("(log: ", 1)[1].rstrip(")"))
    assert "pre-flight check" in log.read_text()
    assert_nothing_left(host, token)


def test_address_nothing_answers_at_fails_fast(host: NamespaceHost, tmp_path: Path) -> None:
    result, took, token = train(host, tmp_path, [socket.gethostname(), host.unused_address])
    assert_one_line_failure(result, took, f"host {host.unused_address} cannot take part")
    assert_nothing_left(host, token)


def test_unauthorised_key_fails_without_prompting(host: NamespaceHost, tmp_path: Path) -> None:
    key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = tmp_path / "ssh_config"
    config.write_text(host.ssh_config.read_text().replace(str(host.ssh_config.parent / "id_ed25519"), str(key)))
    result, took, token = train(host, tmp_path, [socket.gethostname(), host.address], "--ssh-config", str(config))
    assert_one_line_failure(result, took, f"host {host.address}", "SSH authentication failed")
    assert_nothing_left(host, token)


def test_unresolvable_name_fails_before_the_run_directory(host: NamespaceHost, tmp_path: Path) -> None:
    result, took, token = train(host, tmp_path, [socket.gethostname(), "no-such-host.invalid"])
    assert_one_line_failure(result, took, "'no-such-host.invalid' does not resolve")
    assert not (tmp_path / "logs").exists()
    assert_nothing_left(host, token)


def test_loopback_launcher_address_is_refused_up_front(host: NamespaceHost, tmp_path: Path) -> None:
    hosts = [socket.gethostname(), host.address]
    result, took, token = train(host, tmp_path, hosts, "--launcher-address", "127.0.0.1")
    assert_one_line_failure(result, took, "--launcher-address 127.0.0.1 is a loopback address")
    assert not (tmp_path / "logs").exists()
    assert_nothing_left(host, token)


def test_launcher_address_the_host_cannot_reach_fails_fast(host: NamespaceHost, tmp_path: Path) -> None:
    import psutil

    # An address of this machine off the link: the namespace has no route to it.
    others = [
        a.address
        for name, addrs in psutil.net_if_addrs().items()
        for a in addrs
        if a.family == socket.AF_INET and name not in ("lo", host.ifname) and not a.address.startswith("127.")
    ]
    if not others:
        pytest.skip("this machine has no address besides loopback and the test link")
    hosts = [socket.gethostname(), host.address]
    result, took, token = train(host, tmp_path, hosts, "--launcher-address", others[0])
    assert_one_line_failure(result, took, f"host {host.address}", f"cannot connect back to the launcher at {others[0]}")
    assert_nothing_left(host, token)


def test_agents_that_cannot_join_fail_within_the_agent_timeout(host: NamespaceHost, tmp_path: Path) -> None:
    # gloo on loopback: the pre-flight passes, but the remote agent cannot reach the launcher's gloo pair.
    hosts = [socket.gethostname(), host.address]
    result, took, token = train(host, tmp_path, hosts, "--agent-timeout-s", "5", ifname="lo")
    assert_one_line_failure(result, took, "did not all start and join within --agent-timeout-s 5", "agent logs: ")
    # gloo alone waited five timeouts for agents that had posted their addresses and died (30 s here, 5 min at 60 s).
    assert took < 25, f"took {took:.0f} s"
    assert_nothing_left(host, token)


def test_preflight_names_missing_project_directory_and_interpreter(host: NamespaceHost, tmp_path: Path) -> None:
    # What a host without the shared file system would answer (this one shares ours, so point at missing paths).
    with socket.create_server((host.local_address, 0)) as server:
        port = server.getsockname()[1]
        args = (host.address, host.ssh_config, host.local_address, port)
        own = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}  # as agents get it
        assert check_host(*args, Path.cwd(), sys.executable, env=own) is None
        missing_dir = check_host(*args, tmp_path / "not-there", sys.executable)
        assert (
            missing_dir is not None and f"project directory {tmp_path / 'not-there'} does not exist" in missing_dir[0]
        )
        missing_python = check_host(*args, Path.cwd(), "/nonexistent/bin/python")
        assert missing_python is not None
        assert "Python interpreter /nonexistent/bin/python does not exist there" in missing_python[0]
        bare = tmp_path / "bare-python"  # this interpreter without site-packages: no mjfleet
        bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
        bare.chmod(0o755)
        no_mjfleet = check_host(*args, Path.cwd(), str(bare))
        assert no_mjfleet is not None and "cannot import mjfleet there" in no_mjfleet[0]
        # An environment that imports only through PYTHONPATH (a module system, an offline kit) passes with the
        # variables the agent will be given, as torchrunx exports PYTHONPATH to it.
        no_site = tmp_path / "python-without-site"
        no_site.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
        no_site.chmod(0o755)
        assert check_host(*args, Path.cwd(), str(no_site)) is not None
        paths = os.pathsep.join(str(Path(m.__file__).parents[1]) for m in (mjfleet, torchrunx))
        assert check_host(*args, Path.cwd(), str(no_site), env={"PYTHONPATH": paths}) is None
    assert_namespace_empty(host)


def test_a_schedulers_sigterm_to_every_process_on_both_hosts_checkpoints_and_stops(
    host: NamespaceHost, tmp_path: Path
) -> None:
    """Inside a SLURM allocation, preemption, ``scancel`` and the time limit SIGTERM every process of the job on every
    node, the remote agents and workers too: they ignore it, as the local ones do, so that the launcher's stop has
    rank 0 checkpoint (the remote agent died of it, its worker with it, and the run ended "failed")."""
    me = socket.gethostname()
    token = uuid.uuid4().hex
    env = {**os.environ, "GLOO_SOCKET_IFNAME": host.ifname, TOKEN_ENV: token, "SLURM_JOB_ID": "4242"}
    env.pop("MJFLEET_LAUNCHER_ADDRESS", None)
    command = [sys.executable, "-m", "mjfleet.cli.train", "cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "1"]
    command += [
        "--hostnames",
        me,
        host.address,
        "--ssh-config",
        str(host.ssh_config),
        "--log-root",
        str(tmp_path / "logs"),
    ]
    command += [*SMALL, "--agent.max-iterations", "100000", "--agent.save-interval", "100000"]
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("logs/*/*/torchrunx/*/*[[]0[]].log")) or not any(
            "it 2/" in log.read_text() for log in tmp_path.glob(f"logs/*/*/torchrunx/*/{me}[[]0[]].log")
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "training did not reach iteration 2"
            time.sleep(0.5)
        remote = host.processes()  # the SSH session, the agent and its worker (the SSH server's excepted)
        assert remote, "nothing runs on the remote host"
        launch = psutil.Process(proc.pid)
        for each in [launch, *launch.children(recursive=True), *map(psutil.Process, remote)]:  # at once, both hosts
            with contextlib.suppress(psutil.Error):
                each.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    (run_dir,) = tmp_path.glob("logs/*/*")
    ((stopped_at, _),) = list_checkpoints(run_dir)  # the checkpoint the stop wrote
    assert stopped_at >= 2
    assert "stopped by SIGTERM at iteration" in " ".join(stderr.split())
    assert_nothing_left(host, token)

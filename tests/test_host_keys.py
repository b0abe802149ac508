"""The pre-flight checks each remote host's SSH key against known_hosts (mjfleet.cluster.host_keys).

fabric and torchrunx accept any host key; the pre-flight, which runs before torchrunx connects, refuses a key that
differs from the recorded one, and records an unknown host's key the way ``StrictHostKeyChecking accept-new`` does.
The slow tests run against the network-namespace host of tests/twohost.py.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from mjfleet.cluster import host_keys
from mjfleet.cluster.host_keys import known_hosts_policy, read_known_hosts
from mjfleet.cluster.hosts import HostError, preflight
from tests.twohost import NamespaceHost, namespace_host, unavailable

# --- which files, which mode (no SSH) ----------------------------------------------------------------------------


def test_without_settings_ssh_defaults_apply_and_new_keys_go_to_the_users_file() -> None:
    policy = known_hosts_policy({}, "node2")
    home = Path.home()
    assert policy.files == (
        Path("/etc/ssh/ssh_known_hosts"),
        Path("/etc/ssh/ssh_known_hosts2"),
        home / ".ssh/known_hosts",
        home / ".ssh/known_hosts2",
    )
    assert policy.record_in == home / ".ssh/known_hosts"
    assert not policy.strict and not policy.hash_names


def test_configured_files_replace_the_defaults_with_tokens_expanded() -> None:
    config = {
        "userknownhostsfile": "~/cluster/%u_%h /tmp/second",
        "globalknownhostsfile": "/dev/null",
        "stricthostkeychecking": "accept-new",
        "hashknownhosts": "yes",
    }
    policy = known_hosts_policy(config, "node2")
    first = Path.home() / "cluster" / f"{getpass.getuser()}_node2"
    assert policy.files == (first, Path("/tmp/second"))
    assert policy.record_in == first
    assert not policy.strict and policy.hash_names


@pytest.mark.parametrize(("value", "strict"), [("yes", True), ("ask", True), ("no", False), ("accept-new", False)])
def test_strict_host_key_checking_yes_or_ask_refuses_unknown_hosts(value: str, strict: bool) -> None:
    assert known_hosts_policy({"stricthostkeychecking": value}, "node2").strict is strict


def test_dev_null_holds_no_keys_and_records_none() -> None:
    policy = known_hosts_policy({"userknownhostsfile": "/dev/null", "globalknownhostsfile": "none"}, "node2")
    assert policy.files == () and policy.record_in is None


def _key_line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


def test_damaged_lines_and_markers_are_skipped_not_fatal(tmp_path: Path) -> None:
    key = paramiko.ECDSAKey.generate()
    known = tmp_path / "known_hosts"
    known.write_text(
        "# comment\n"
        "@cert-authority *.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n"
        "broken ssh-ed25519 not!base64\n"
        "short\n"
        f"node2,10.0.0.2 {_key_line(key)}\n"
    )
    keys = read_known_hosts(known)
    assert keys.check("node2", key) and keys.check("10.0.0.2", key)
    assert read_known_hosts(tmp_path / "missing").lookup("node2") is None


@pytest.mark.parametrize("hashed", [False, True])
def test_a_first_contact_is_recorded_once_as_ssh_would(tmp_path: Path, hashed: bool) -> None:
    known = tmp_path / "ssh" / "known_hosts"
    config = {"userknownhostsfile": str(known), "hashknownhosts": "yes" if hashed else "no"}
    policy = known_hosts_policy(config, "node2")
    first_contact = host_keys._first_contact_policy(policy, 2222)
    key = paramiko.ECDSAKey.generate()
    client = paramiko.SSHClient()
    for _ in range(2):  # the second contact finds the key recorded
        first_contact.missing_host_key(client, "[node2]:2222", key)
    lines = known.read_text().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("|1|" if hashed else "[node2]:2222 ")
    assert read_known_hosts(known).check("[node2]:2222", key)
    assert oct(known.parent.stat().st_mode & 0o777) == oct(0o700)


def test_strict_checking_refuses_an_unknown_host_saying_how_to_record_it(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    policy = known_hosts_policy({"userknownhostsfile": str(known), "stricthostkeychecking": "yes"}, "node2")
    with pytest.raises(host_keys.HostKeyRefused, match=f"record it with `ssh-keyscan -p 2222 node2 >> {known}`"):
        host_keys._first_contact_policy(policy, 2222).missing_host_key(
            paramiko.SSHClient(), "[node2]:2222", paramiko.ECDSAKey.generate()
        )
    assert not known.exists()


# --- against a real sshd -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespaceHost]:
    if reason := unavailable():  # root, ip and sshd
        pytest.skip(reason)
    with namespace_host(tmp_path_factory.mktemp("keyhost"), index=3) as made:
        yield made


def client_config(host: NamespaceHost, path: Path, known_hosts: Path, strict: str = "accept-new") -> Path:
    """An ssh config for ``host`` that reads (and records in) ``known_hosts`` only."""
    path.write_text(
        f"Host {host.address}\n  User root\n  IdentityFile {host.identity}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking {strict}\n"
        "  BatchMode yes\n  ConnectTimeout 5\n"
    )
    return path


def wrong_key(tmp_path: Path) -> str:
    """A freshly generated ed25519 public key: what a reinstalled (or impersonated) host would show."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    return " ".join((tmp_path / "other.pub").read_text().split()[:2])


def right_key(host: NamespaceHost) -> str:
    return " ".join(host.host_public_key.read_text().split()[:2])


def assert_no_connection_left(host: NamespaceHost) -> None:
    """No sshd connection process is left: a refused handshake is closed, not left to the garbage collector."""
    deadline = time.monotonic() + 10  # sshd's per-connection processes take a moment to exit
    while host.processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host.processes() == [], "connections left open to the namespace host"


def run_preflight(host: NamespaceHost, ssh_config: Path) -> None:
    preflight([host.address], ssh_config, host.local_address, None, {"GLOO_SOCKET_IFNAME": host.ifname})


@pytest.mark.slow
def test_a_changed_host_key_is_refused_naming_the_file_and_the_fix(host: NamespaceHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"{host.address} {wrong_key(tmp_path)}\n")
    before = known.read_text()
    with pytest.raises(HostError) as refused:
        run_preflight(host, client_config(host, tmp_path / "config", known))
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith(f"host {host.address} cannot take part: its SSH host key (ssh-ed25519 SHA256:")
    assert f"differs from the one recorded for {host.address} in {known}" in line
    assert f"`ssh-keygen -R {host.address} -f {known}`" in line
    assert known.read_text() == before  # the recorded key is left as it was
    assert_no_connection_left(host)
    # OpenSSH's own client agrees that this key is wrong (the test's premise).
    ssh = ["ssh", "-F", str(tmp_path / "config"), "-o", "StrictHostKeyChecking=yes", host.address, "true"]
    assert subprocess.run(ssh, capture_output=True, timeout=30).returncode != 0


@pytest.mark.slow
def test_the_recorded_key_passes_and_an_unknown_host_is_recorded_on_first_contact(
    host: NamespaceHost, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"{host.address} {right_key(host)}\n")
    run_preflight(host, client_config(host, tmp_path / "config", known))

    fresh = tmp_path / "fresh" / "known_hosts"
    with caplog.at_level(logging.WARNING, logger="mjfleet.cluster.hosts"):
        run_preflight(host, client_config(host, tmp_path / "config-new", fresh))  # accept-new
    assert fresh.read_text() == f"{host.address} {right_key(host)}\n"
    assert f"first contact with {host.address}: accepted its ssh-ed25519 SHA256:" in caplog.text
    assert f"recorded it in {fresh}" in caplog.text
    run_preflight(host, client_config(host, tmp_path / "config-new", fresh))  # checked now, not recorded twice
    assert len(fresh.read_text().splitlines()) == 1


@pytest.mark.slow
def test_strict_checking_refuses_an_unknown_host(host: NamespaceHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    with pytest.raises(HostError, match=f"is not in known_hosts .* record it with `ssh-keyscan {host.address} >> "):
        run_preflight(host, client_config(host, tmp_path / "config", known, strict="yes"))
    assert not known.exists()
    assert_no_connection_left(host)


@pytest.mark.slow
def test_dev_null_known_hosts_accepts_without_recording(host: NamespaceHost) -> None:
    run_preflight(host, host.ssh_config)  # the namespace's own config: StrictHostKeyChecking no, /dev/null


@pytest.mark.slow
def test_train_refuses_a_changed_host_key_with_one_line_and_exit_2(host: NamespaceHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"{host.address} {wrong_key(tmp_path)}\n")
    config = client_config(host, tmp_path / "config", known)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": host.ifname}
    env.pop("MJFLEET_LAUNCHER_ADDRESS", None)
    command = [
        *(sys.executable, "-m", "mjfleet.cli.train", "cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "1"),
        *("--hostnames", socket.gethostname(), host.address, "--ssh-config", str(config)),
        *("--log-root", str(tmp_path / "logs"), "--agent.max-iterations", "1"),
    ]
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, output
    assert len(errors) == 1 and "Traceback" not in output, output
    assert f"host {host.address} cannot take part: its SSH host key" in errors[0]
    assert f"ssh-keygen -R {host.address} -f {known}" in errors[0]
    assert time.monotonic() - started < 120
    assert_no_connection_left(host)

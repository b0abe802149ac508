"""A real second host for tests: a network namespace with its own address on a veth link and an sshd inside.

The namespace shares this machine's file system (the project and its virtual environment are at the same path, as
on a cluster with a shared file system) but has its own network stack: its loopback is not ours, and it reaches
this machine only over the link. ``ip netns exec`` mounts ``/etc/netns/<ns>/hosts`` over ``/etc/hosts``, so this
machine's name resolves to its link address inside the namespace. Both veth ends carry the same name, so one
``GLOO_SOCKET_IFNAME`` serves both "hosts".

Needs root, ``ip`` and ``sshd`` (``openssh-server``); :func:`unavailable` says why not where they are missing.
Everything is removed on exit, also when the block raises.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def unavailable() -> str | None:
    """Why a namespace host cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "ssh-keygen", "ssh"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path(SSHD).exists():
        return "sshd is not installed (apt-get install openssh-server)"
    probe = f"mjfprobe{os.getpid() % 100000}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "cannot create network namespaces here"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@dataclass(frozen=True)
class NamespaceHost:
    """A second host reachable over SSH at :attr:`address`."""

    name: str
    """Network namespace name."""
    address: str
    """The namespace's address on the link (what ``--hostnames`` names)."""
    unused_address: str
    """An address on the link's subnet that nothing answers at."""
    local_address: str
    """This machine's address on the link (what the namespace reaches it at)."""
    ifname: str
    """Name of the link interface, the same on both sides (for ``GLOO_SOCKET_IFNAME``)."""
    ssh_config: Path
    """An OpenSSH client config for the namespace: key, user, no host-key prompts, BatchMode."""
    sshd: subprocess.Popen[bytes]

    @property
    def host_public_key(self) -> Path:
        """The public half of the namespace sshd's host key (``<type> <base64>``), as ``known_hosts`` records it."""
        return self.ssh_config.parent / "host_key.pub"

    @property
    def identity(self) -> Path:
        """The private key that logs in to the namespace host."""
        return self.ssh_config.parent / "id_ed25519"

    def ssh(self, command: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on the namespace host through SSH."""
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), self.address, command],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop_sshd(self) -> None:
        """Stop the SSH server (the host then refuses connections)."""
        if self.sshd.poll() is None:
            self.sshd.terminate()
            self.sshd.wait(timeout=10)

    def processes(self) -> list[int]:
        """PIDs of the processes running inside the namespace, the SSH server's excepted."""
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True).stdout.split()
        return [int(p) for p in out if int(p) != self.sshd.pid]


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def namespace_host(workdir: Path, index: int = 0) -> Iterator[NamespaceHost]:
    """Create the namespace, link, keys and sshd under ``workdir``; tear all of it down afterwards."""
    tag = f"{os.getpid() % 10000}{index}"
    ns, ifname, peer = f"mjf{tag}", f"mjfl{tag}", f"mjfp{tag}"
    subnet = 1 + (os.getpid() + index) % 250
    local, remote = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
    netns_etc = Path("/etc/netns") / ns
    workdir.mkdir(parents=True, exist_ok=True)
    sshd: subprocess.Popen[bytes] | None = None
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", ifname, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", ns)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", peer, "name", ifname)
        _run("ip", "addr", "add", f"{local}/24", "dev", ifname)
        _run("ip", "link", "set", ifname, "up")
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{remote}/24", "dev", ifname)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", ifname, "up")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        netns_etc.mkdir(parents=True, exist_ok=True)
        names = " ".join(n for n in dict.fromkeys([socket.gethostname(), socket.getfqdn()]) if n != "localhost")
        (netns_etc / "hosts").write_text(f"127.0.0.1 localhost\n{local} {names}\n{remote} {ns}\n")

        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / "host_key"))
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / "id_ed25519"))
        shutil.copy(workdir / "id_ed25519.pub", workdir / "authorized_keys")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
        config = workdir / "sshd_config"
        config.write_text(
            f"ListenAddress {remote}\nPort 22\nHostKey {workdir / 'host_key'}\nPidFile {workdir / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {workdir / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\nPrintMotd no\n"
        )
        sshd = subprocess.Popen(
            ["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(config)],
            stderr=(workdir / "sshd.log").open("wb"),
        )
        ssh_config = workdir / "ssh_config"
        ssh_config.write_text(
            f"Host {remote} {ns}\n  HostName {remote}\n  User root\n  IdentityFile {workdir / 'id_ed25519'}\n"
            "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n"
            "  ConnectTimeout 5\n  LogLevel ERROR\n"
        )
        host = NamespaceHost(ns, remote, f"10.231.{subnet}.77", local, ifname, ssh_config, sshd)
        deadline = time.monotonic() + 15
        while host.ssh("true", timeout=10).returncode != 0:
            if time.monotonic() > deadline or sshd.poll() is not None:
                raise RuntimeError(f"sshd in {ns} did not come up: {(workdir / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.2)
        yield host
    finally:
        if sshd is not None and sshd.poll() is None:
            sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                sshd.wait(timeout=5)
        # Whatever a test left running on the "remote host" goes with it.
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "link", "del", ifname], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(netns_etc, ignore_errors=True)

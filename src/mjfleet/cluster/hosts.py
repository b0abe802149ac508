"""Remote hosts before a launch: the address the launcher announces, and a pre-flight check of every remote host.

torchrunx starts one agent per host over SSH; the agent calls back to the launcher, and the workers meet at rank 0's
host. When any of that cannot work, torchrunx hangs until a timeout or dies with a paramiko or store traceback. The
checks here find each case in seconds and say in one line which host failed, what was tried and what to check:

* a host name that does not resolve;
* a launcher address that other hosts cannot reach (loopback, or the wrong interface);
* SSH refused, unreachable or not authorised (keys only: nothing ever prompts);
* a host key that differs from the one recorded in ``known_hosts`` (see :func:`known_hosts_policy`);
* the project directory or Python interpreter missing on the host, or ``mjfleet`` not importable there;
* the host cannot open a connection to the launcher address (firewall, routing).

Every problem raises :class:`HostError` (a :class:`~mjfleet.errors.UsageError`: exit code 2, not retried): the
cluster setup must be fixed, nothing has trained yet.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, cast

from mjfleet.cluster.host_keys import HostKeyRefused, check_host_key, host_key_changed
from mjfleet.errors import UsageError

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

LAUNCHER_ADDRESS_ENV = "MJFLEET_LAUNCHER_ADDRESS"
"""Overrides the address the launcher announces to agents (like ``--launcher-address``, which wins)."""
SSH_CONNECT_TIMEOUT_S = 10.0
PREFLIGHT_TIMEOUT_S = 60.0
"""The remote check imports mjfleet (not torch): seconds even on a cold shared file system."""


def is_local_host(host: str) -> bool:
    """Whether torchrunx starts ``host``'s agent here, not over SSH: loopback, or an address of this machine's name.

    Restated: torchrunx inlines this test in ``execute_command`` (no function to call), and planning imports no torch.
    """
    try:
        try:
            ip = ipaddress.ip_address(host)  # an address is taken as given, as torchrunx does (IPv6 included)
        except ValueError:
            ip = ipaddress.ip_address(socket.gethostbyname(host))
        if ip.is_loopback:
            return True
        host_addrs = {a[4][0] for a in socket.getaddrinfo(str(ip), None)}
        local_addrs = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except (OSError, ValueError):  # torchrunx raises; a name that does not resolve is not this machine
        return False
    return bool(host_addrs & local_addrs)


def is_own_address(address: str) -> bool:
    """Whether ``address`` is loopback or an address of one of this machine's interfaces.

    Wider than :func:`is_local_host` (torchrunx's test, which decides who is reached over SSH): where this machine's
    name maps to 127.0.1.1, its own LAN address is still this machine.
    """
    import psutil

    return _is_loopback(address) or any(a.address == address for ads in psutil.net_if_addrs().values() for a in ads)


class HostError(UsageError):
    """A host cannot take part in the launch; the message names it, what was tried and what to check."""


def resolve(host: str) -> str:
    """The IPv4 address ``host`` resolves to on this machine; :class:`HostError` if it does not."""
    try:
        return socket.gethostbyname(host)
    except (OSError, UnicodeError) as exc:
        raise HostError(
            f"host {host!r} does not resolve on this machine ({exc}); check the name, DNS or /etc/hosts"
        ) from exc


def remote_hosts(hostnames: Sequence[str]) -> list[str]:
    """The hosts that are not this machine (torchrunx reaches them over SSH); resolves every name first, and
    refuses two names of one other machine (two agents would put their workers on the same GPUs)."""
    remote: dict[str, str] = {}
    for host in hostnames:
        address = resolve(host)
        if is_local_host(host):
            continue
        if address in remote:
            raise HostError(
                f"hosts {remote[address]!r} and {host!r} are the same machine ({address}): list each host once"
            )
        remote[address] = host
    return list(remote.values())


def _is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def route_address(remote_ip: str) -> str:
    """This machine's address on the interface that routes to ``remote_ip`` (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((remote_ip, 9))
        except OSError as exc:
            raise HostError(
                f"no route from this machine to {remote_ip} ({exc}); check the network, or set --launcher-address"
            ) from exc
        return probe.getsockname()[0]


def launcher_address(hostnames: Sequence[str], override: str | None) -> str | None:
    """The address agents and workers on other hosts call back to; None when every host is this machine.

    ``override`` (``--launcher-address``) beats ``$MJFLEET_LAUNCHER_ADDRESS``; without either, the address of the
    interface that routes to the first remote host. A loopback address is refused: it would make each remote agent
    call itself.
    """
    remote = remote_hosts(hostnames)
    if not remote:
        return None
    source, value = "--launcher-address", override
    if not value:
        source, value = LAUNCHER_ADDRESS_ENV, os.environ.get(LAUNCHER_ADDRESS_ENV, "").strip()
    if value:
        try:
            address = socket.gethostbyname(value)
        except (OSError, UnicodeError) as exc:
            raise HostError(f"{source} {value!r} does not resolve on this machine ({exc})") from exc
        if _is_loopback(address):
            raise HostError(
                f"{source} {value} is a loopback address: {remote[0]} would call itself; give an address of this"
                f" machine that every host can reach"
            )
        return address
    address = route_address(resolve(remote[0]))
    if _is_loopback(address):
        raise HostError(
            f"this machine reaches {remote[0]} only through loopback ({address}); set --launcher-address or"
            f" {LAUNCHER_ADDRESS_ENV} to an address of this machine that every host can reach"
        )
    return address


def master_address(hostnames: Sequence[str], launcher: str) -> str:
    """A routable address of ``hostnames[0]``, where rank 0 serves the workers' rendezvous store."""
    first = hostnames[0]
    return launcher if is_local_host(first) else resolve(first)


def check_gloo_interface(address: str) -> None:
    """Refuse a launch whose gloo traffic would announce loopback to the other hosts.

    torchrunx's launcher-agent group and CPU workers use gloo, which binds to the address this machine's name
    resolves to unless ``GLOO_SOCKET_IFNAME`` names an interface; many images map the name to 127.0.0.1.
    """
    if configured := os.environ.get("GLOO_SOCKET_IFNAME", "").strip():
        import psutil

        known = psutil.net_if_addrs()
        if missing := [i for i in configured.split(",") if i.strip() not in known]:
            raise HostError(
                f"GLOO_SOCKET_IFNAME={configured}: no interface {', '.join(missing)} on this machine"
                f" (interfaces: {', '.join(sorted(known))})"
            )
        return
    name = socket.gethostname()
    try:
        own = socket.gethostbyname(name)
    except OSError:
        own = "127.0.0.1"  # gloo falls back to loopback too
    if _is_loopback(own):
        iface = interface_of(address) or "<interface>"
        raise HostError(
            f"this machine's name {name!r} resolves to {own}, so gloo would announce loopback to the other hosts;"
            f" set GLOO_SOCKET_IFNAME={iface} (the interface with {address}; the variable is copied to every host)"
            f" or map {name!r} to {address} in /etc/hosts"
        )


def interface_of(address: str) -> str | None:
    """The name of this machine's interface that carries ``address``, if any."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == address for a in addrs):
            return name
    return None


# The remote half of the pre-flight; exit codes say which step failed (stderr carries the details).
_REMOTE_CHECK = """
import os, socket, sys
try:
    import importlib.util, mjfleet
    if importlib.util.find_spec("torchrunx") is None:  # importing it would load torch: seconds
        raise ImportError("No module named 'torchrunx'")
except Exception as exc:
    sys.stderr.write(f"{type(exc).__name__}: {exc}\\n"); sys.exit(3)
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
except OSError as exc:
    sys.stderr.write(f"{exc}\\n"); sys.exit(4)
if not os.environ.get("GLOO_SOCKET_IFNAME"):
    try:
        own = socket.gethostbyname(socket.gethostname())
    except OSError:
        own = "127.0.0.1"
    if own.startswith("127."):
        sys.stderr.write(f"{socket.gethostname()} resolves to {own}\\n"); sys.exit(5)
"""
_NO_DIR, _NO_PYTHON = 6, 7


def _remote_command(address: str, port: int, workdir: Path, python: str, env: Mapping[str, str]) -> str:
    python = shlex.quote(python)
    exports = [shlex.quote(f"{k}={v}") for k, v in env.items()]
    return " ; ".join(
        [
            f"cd {shlex.quote(str(workdir))} 2>/dev/null || exit {_NO_DIR}",
            f"test -x {python} || exit {_NO_PYTHON}",
            *(["export " + " ".join(exports)] if exports else []),
            f"exec {python} -c {shlex.quote(_REMOTE_CHECK)} {shlex.quote(address)} {port}",
        ]
    )


def _explain(code: int, stderr: str, address: str, port: int, workdir: Path, python: str) -> str:
    detail = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if code == _NO_DIR:
        return f"the project directory {workdir} does not exist there; use a shared file system or the same path"
    if code == _NO_PYTHON:
        return f"the Python interpreter {python} does not exist there; install the same environment there"
    if code == 3:
        return f"{python} cannot import mjfleet there ({detail}); install the same environment there"
    if code == 4:
        return (
            f"it cannot connect back to the launcher at {address}:{port} ({detail}); check the firewall and"
            " --launcher-address"
        )
    if code == 5:
        return (
            f"its name resolves to loopback ({detail}), so gloo would announce loopback; set GLOO_SOCKET_IFNAME"
            " to the interface that reaches the other hosts"
        )
    return f"the check command exited with {code}{f' ({detail})' if detail else ''}"


def _ssh_error(exc: BaseException, timeout_s: float) -> str:
    """Why an SSH connection failed, worded for the user (``timeout_s``: the connection's timeout)."""
    import paramiko
    from paramiko.ssh_exception import NoValidConnectionsError

    if isinstance(exc, HostKeyRefused):
        return str(exc)
    if isinstance(exc, paramiko.AuthenticationException):
        return f"SSH authentication failed ({exc}); set up key-based login (ssh-copy-id) or check --ssh-config"
    if isinstance(exc, NoValidConnectionsError):
        if all(getattr(e, "errno", None) == errno.ECONNREFUSED for e in exc.errors.values()):
            return "SSH connection refused; check that sshd runs there and the port (--ssh-config)"
        return "host unreachable (no route or no answer to ARP); check the address and the network"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"no answer within {timeout_s:.0f} s; check the address, the network and firewalls"
    if isinstance(exc, OSError):
        return f"SSH connection failed ({exc}); check the address and the network"
    return f"SSH failed ({type(exc).__name__}: {exc}); check --ssh-config and that `ssh <host> true` works"


def check_host(
    host: str,
    ssh_config: Path | None,
    address: str,
    port: int,
    workdir: Path,
    python: str,
    env: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """None if ``host`` passes (``python`` imports mjfleet in ``workdir`` with ``env`` exported, and connects to
    ``address:port``); else ``(one-line reason, details for its log file)``."""
    import fabric
    import invoke
    import paramiko

    command = _remote_command(address, port, workdir, python, env or {})
    # The SSH config's ConnectTimeout for the host, where it gives one, else ours (fabric's own default waits forever).
    config = fabric.Config(
        runtime_ssh_path=str(ssh_config) if ssh_config else None,
        overrides={"timeouts": {"connect": SSH_CONNECT_TIMEOUT_S}},
    )
    connect_kwargs = {"banner_timeout": SSH_CONNECT_TIMEOUT_S, "auth_timeout": SSH_CONNECT_TIMEOUT_S}
    name, recorded, timeout_s = host, {}, SSH_CONNECT_TIMEOUT_S
    try:
        conn = fabric.Connection(host, config=config, connect_kwargs=connect_kwargs)
        timeout_s = float(conn.connect_timeout or SSH_CONNECT_TIMEOUT_S)
        name, recorded = check_host_key(conn)
        # fabric closes only a connection that opened: one refused mid-handshake would keep its transport thread.
        with conn, contextlib.closing(cast(paramiko.SSHClient, conn.client)):
            conn.open()
            result = conn.run(command, hide=True, warn=True, in_stream=False, timeout=PREFLIGHT_TIMEOUT_S)
    except invoke.exceptions.CommandTimedOut:
        return f"the check command did not finish within {PREFLIGHT_TIMEOUT_S:.0f} s", command
    except paramiko.BadHostKeyException as exc:
        return host_key_changed(exc, name, recorded), f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # paramiko/fabric raise many unrelated types; each is a reason the host cannot take part
        return _ssh_error(exc, timeout_s), f"{type(exc).__name__}: {exc}"
    if result.exited == 0:
        return None
    reason = _explain(result.exited, result.stderr, address, port, workdir, python)
    return reason, f"command: {command}\nexit code: {result.exited}\nstderr:\n{result.stderr}"


def preflight(
    hosts: Sequence[str],
    ssh_config: Path | None,
    address: str,
    log_file: Callable[[str], Path] | None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Check every remote host in parallel the way torchrunx will use it: SSH with the same client config, the
    project directory and interpreter, the environment variables the agent will get (``env``: an environment
    installed through ``PYTHONPATH`` or ``LD_LIBRARY_PATH`` imports only with them), ``import mjfleet``, and a TCP
    connection back to ``address``.

    Raises :class:`HostError` for the first failing host (in ``hosts`` order), naming ``log_file(host)`` where the
    details were written.
    """
    if not hosts:
        return
    if ssh_config is not None and not ssh_config.is_file():
        raise HostError(f"--ssh-config {ssh_config} is not a file")
    try:
        server = socket.create_server((address, 0))
    except OSError as exc:
        raise HostError(
            f"the launcher address {address} is not an address of this machine ({exc}); fix --launcher-address or"
            f" {LAUNCHER_ADDRESS_ENV}"
        ) from exc
    started = time.monotonic()
    with server, ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        port = server.getsockname()[1]
        workdir = Path.cwd()  # torchrunx starts agents there, with this interpreter
        outcomes = list(
            pool.map(lambda h: check_host(h, ssh_config, address, port, workdir, sys.executable, env), hosts)
        )
    logger.debug("pre-flight of %s took %.1f s", ", ".join(hosts), time.monotonic() - started)
    for host, outcome in zip(hosts, outcomes, strict=True):
        if outcome is None:
            continue
        reason, details = outcome
        where = ""
        if log_file is not None:
            log = log_file(host)
            with contextlib.suppress(OSError):
                log.write_text(f"pre-flight check of {host} failed: {reason}\n{details}\n")
                where = f" (log: {log})"
        raise HostError(f"host {host} cannot take part: {reason} [tried: ssh {host}, launcher {address}]{where}")

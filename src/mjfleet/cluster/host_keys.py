"""SSH host keys as OpenSSH checks them, for the pre-flight connection fabric makes (fabric itself loads no
known_hosts and accepts any key): the user's known_hosts files, accept-new on first contact, a changed key refused."""

from __future__ import annotations

import base64
import contextlib
import getpass
import hashlib
import logging
import os
import shlex
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import fabric
    import paramiko

logger = logging.getLogger(__name__)

GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
"""OpenSSH's defaults for ``GlobalKnownHostsFile`` and ``UserKnownHostsFile``."""
_NO_FILE = {"/dev/null", "none"}


@dataclass(frozen=True)
class KnownHostsPolicy:
    """How the pre-flight treats one host's SSH key, following the host's OpenSSH client settings.

    fabric and torchrunx accept any host key (paramiko's AutoAddPolicy, no ``known_hosts`` loaded); the pre-flight
    runs first and checks the key the way ``ssh`` with ``StrictHostKeyChecking accept-new`` would, so that a changed
    key stops the launch before torchrunx connects.
    """

    files: tuple[Path, ...]
    """The ``known_hosts`` files read (global ones first); missing files hold no keys."""
    record_in: Path | None
    """Where the key of a host met for the first time is recorded; None for ``/dev/null``."""
    strict: bool
    """``StrictHostKeyChecking yes`` (or ``ask``, as nothing can prompt): an unknown host is refused."""
    hash_names: bool
    """``HashKnownHosts yes``: record the host name hashed, as ``ssh`` would."""


def _expand_path(value: str, host: str) -> Path:
    """A ``known_hosts`` path from an ssh config value: ``~`` and the tokens that name the user and the host."""
    home = str(Path.home())
    tokens = {"%%": "%", "%d": home, "%u": getpass.getuser(), "%h": host}
    out, i = "", 0
    while i < len(value):
        token = value[i : i + 2]
        if token in tokens:
            out, i = out + tokens[token], i + 2
        else:
            out, i = out + value[i], i + 1
    return Path(os.path.expanduser(out))


def _paths(value: Any, default: Sequence[str], host: str) -> list[Path]:
    words = str(value).split() if value else list(default)
    return [_expand_path(w, host) for w in words]


def known_hosts_policy(ssh_config: Mapping[str, Any], host: str) -> KnownHostsPolicy:
    """The :class:`KnownHostsPolicy` for ``host`` from its ssh config entries (paramiko's lookup, lower-case keys).

    ``UserKnownHostsFile`` and ``GlobalKnownHostsFile`` replace OpenSSH's defaults; the first user file receives new
    keys (accept-new: as ``ssh`` records them), unless it is ``/dev/null``, which also means no keys are recorded.
    """
    users = _paths(ssh_config.get("userknownhostsfile"), USER_KNOWN_HOSTS, host)
    globals_ = _paths(ssh_config.get("globalknownhostsfile"), GLOBAL_KNOWN_HOSTS, host)
    files = tuple(p for p in (*globals_, *users) if str(p) not in _NO_FILE)
    record_in = users[0] if users and str(users[0]) not in _NO_FILE else None
    strict = str(ssh_config.get("stricthostkeychecking", "")).lower() in {"yes", "true", "ask"}
    hash_names = str(ssh_config.get("hashknownhosts", "")).lower() in {"yes", "true"}
    return KnownHostsPolicy(files, record_in, strict, hash_names)


def known_host_name(host: str, port: int) -> str:
    """How ``known_hosts`` names ``host``: ``[host]:port`` unless the port is 22."""
    return host if port == 22 else f"[{host}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    """``ssh-ed25519 SHA256:...``: the type and fingerprint that ``ssh`` and ``ssh-keygen -l`` show."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def _display(path: Path) -> str:
    home = str(Path.home())
    return "~" + str(path)[len(home) :] if str(path).startswith(home + os.sep) else str(path)


def read_known_hosts(path: Path) -> paramiko.HostKeys:
    """The keys recorded in one ``known_hosts`` file (none if it is missing or unreadable).

    Lines paramiko cannot use (``@cert-authority`` and ``@revoked`` markers, unknown key types, damaged lines) are
    skipped, as ``ssh`` skips what it cannot parse; paramiko's own loader would stop at a damaged line.
    """
    import paramiko
    from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

    keys = paramiko.HostKeys()
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return keys
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "@")):
            continue
        with contextlib.suppress(InvalidHostKey, paramiko.SSHException, ValueError):
            entry = HostKeyEntry.from_line(line, lineno)
            if entry is not None and entry.key is not None:
                for name in entry.hostnames:
                    keys.add(name, entry.key.get_name(), entry.key)
    return keys


class HostKeyRefused(Exception):
    """A host with no recorded key while ``StrictHostKeyChecking`` is on; the message says how to record it."""


_record_lock = threading.Lock()
"""The pre-flight checks hosts in threads; their first-contact records go to the same file."""


def _record(policy: KnownHostsPolicy, name: str, key: paramiko.PKey) -> None:
    """Append ``name``'s key to ``policy.record_in`` (created with the modes ``ssh`` uses) unless it is there."""
    import paramiko

    path = policy.record_in
    if path is None:
        logger.debug("accepted the %s key of %s without recording it (UserKnownHostsFile none)", fingerprint(key), name)
        return
    with _record_lock:
        try:
            if read_known_hosts(path).check(name, key):
                return  # another thread recorded the same host
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            entry = paramiko.HostKeys.hash_host(name) if policy.hash_names else name
            needs_newline = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
            with path.open("a") as out:
                out.write(("\n" if needs_newline else "") + f"{entry} {key.get_name()} {key.get_base64()}\n")
        except OSError as exc:  # ssh too goes on when it cannot record the key
            logger.warning("first contact with %s: could not record its key in %s (%s)", name, _display(path), exc)
            return
    logger.warning(
        "first contact with %s: accepted its %s key and recorded it in %s", name, fingerprint(key), _display(path)
    )


def _first_contact_policy(policy: KnownHostsPolicy, port: int) -> paramiko.MissingHostKeyPolicy:
    """paramiko's hook for a host with no recorded key: accept-new, or refusal under ``StrictHostKeyChecking``."""
    import paramiko

    class FirstContact(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
            if policy.strict:
                target = policy.record_in or Path(os.path.expanduser(USER_KNOWN_HOSTS[0]))
                host = hostname[1:].rsplit("]:", 1)[0] if hostname.startswith("[") else hostname
                scan = f"ssh-keyscan {'' if port == 22 else f'-p {port} '}{host} >> {_display(target)}"
                raise HostKeyRefused(
                    f"its SSH host key ({fingerprint(key)}) is not in known_hosts"
                    f" ({', '.join(_display(p) for p in policy.files) or 'none'}) and StrictHostKeyChecking is on;"
                    f" verify the key, then record it with `{scan}`"
                )
            _record(policy, hostname, key)

    return FirstContact()


def host_key_changed(exc: paramiko.BadHostKeyException, name: str, recorded: Mapping[Path, paramiko.HostKeys]) -> str:
    """The reason for a host whose key differs from the recorded one, naming the file that records it."""
    recorded_in = next((path for path, keys in recorded.items() if keys.lookup(name) is not None), None)
    where = _display(recorded_in) if recorded_in is not None else "known_hosts"
    default = recorded_in is not None and recorded_in == Path(os.path.expanduser(USER_KNOWN_HOSTS[0]))
    remove = f"ssh-keygen -R {shlex.quote(name)}" + ("" if default or recorded_in is None else f" -f {where}")
    return (
        f"its SSH host key ({fingerprint(exc.key)}) differs from the one recorded for {name} in {where}: the host"
        " was reinstalled, or something intercepts the connection;"
        f" verify the new key, then remove the old one with `{remove}`"
    )


def check_host_key(conn: fabric.Connection) -> tuple[str, dict[Path, paramiko.HostKeys]]:
    """Make ``conn`` check the host's key against known_hosts as ``ssh`` would (fabric accepts any key: AutoAddPolicy,
    nothing loaded); returns the host's name in known_hosts and the keys of each file read."""
    import paramiko

    host, port = str(conn.host), int(conn.port or 22)
    policy = known_hosts_policy(conn.ssh_config or {}, host)
    recorded = {path: read_known_hosts(path) for path in policy.files}
    client = cast(paramiko.SSHClient, conn.client)
    known = client.get_host_keys()  # paramiko compares the server's key with these before asking the policy
    for file_keys in recorded.values():
        for name in file_keys:
            for key_type, key in file_keys[name].items():
                known.add(name, key_type, key)
    client.set_missing_host_key_policy(_first_contact_policy(policy, port))
    return known_host_name(host, port), recorded

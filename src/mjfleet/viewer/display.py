"""Whether a window can open here, and whether the web viewer can listen where it is told (no simulator imports:
``play`` checks them while parsing)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import socket
import sys
import threading
from collections.abc import Mapping

from mjfleet.errors import UsageError


def check_display(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> None:
    """Raise a one-line :class:`UsageError` when no display can host a window (Linux without X11 or Wayland).

    MuJoCo's GLFW talks Wayland only in a Wayland session (``XDG_SESSION_TYPE=wayland``), X11 otherwise: the display
    it will open is checked (a Wayland compositor's socket, an X server that answers), so that a stale variable (a
    tmux session reattached over SSH) is one line, not GLFW's error in C after the simulation was built."""
    if not platform.startswith("linux"):
        return
    env = os.environ if environ is None else environ
    wayland = env.get("WAYLAND_DISPLAY")
    if wayland and env.get("XDG_SESSION_TYPE") == "wayland":
        socket_path = wayland if os.path.isabs(wayland) else os.path.join(env.get("XDG_RUNTIME_DIR", ""), wayland)
        if not os.path.exists(socket_path):
            raise UsageError(
                f"--viewer native cannot open the display WAYLAND_DISPLAY={wayland} (no compositor socket at"
                f" {socket_path}); use --viewer web on a remote machine"
            )
        return
    display = env.get("DISPLAY")
    if not display:
        raise UsageError("--viewer native needs a display (DISPLAY is not set); use --viewer web on a remote machine")
    if x11_opens(display) is False:
        raise UsageError(
            f"--viewer native cannot open the display DISPLAY={display} (no X server answers there within"
            f" {X11_TIMEOUT_S:g} s: an SSH session without X forwarding?); use --viewer web on a remote machine"
        )


X11_TIMEOUT_S = 5.0
"""How long a display may take to answer (one on a host that drops packets would hold ``play`` for the connection's
own timeout, minutes)."""


def x11_opens(display: str, timeout_s: float = X11_TIMEOUT_S) -> bool | None:
    """Whether X11's ``XOpenDisplay`` opens ``display`` within ``timeout_s`` (None where libX11 is not installed:
    nothing to tell)."""
    name = ctypes.util.find_library("X11")
    try:
        lib = ctypes.CDLL(name or "libX11.so.6")
    except OSError:
        return None
    lib.XOpenDisplay.restype = ctypes.c_void_p
    lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    lib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    opened: list[bool] = []

    def try_it() -> None:
        handle = lib.XOpenDisplay(display.encode())
        if handle:
            lib.XCloseDisplay(handle)
        opened.append(bool(handle))

    # A daemon thread: one that never returns is left behind (ctypes calls cannot be interrupted), not waited for.
    attempt = threading.Thread(target=try_it, name="x11-check", daemon=True)
    attempt.start()
    attempt.join(timeout_s)
    return bool(opened and opened[0])


def check_listen_host(host: str) -> None:
    """Raise a one-line :class:`UsageError` when the web viewer cannot listen on ``host`` (a name that does not
    resolve, an address of another machine): its server would wait for a free port forever."""
    try:
        infos = socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UsageError(f"--viewer-host {host!r} does not resolve ({e.strerror})") from None
    failure: OSError | None = None
    for family, kind, proto, _, address in infos:  # the server listens on every one it can
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(address)  # port 0: a taken --viewer-port is the server's to step past
            return
        except OSError as e:
            failure = failure or e
    assert failure is not None
    if failure.errno == errno.EADDRNOTAVAIL:
        raise UsageError(
            f"--viewer-host {host}: not an address of this machine ({failure.strerror}); the default 127.0.0.1, or"
            " 0.0.0.0 for every interface"
        )
    raise UsageError(f"--viewer-host {host}: cannot listen there ({failure.strerror})")

"""Whether a window can open here (no simulator imports: ``play`` checks it while parsing)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from mjfleet.errors import UsageError


def check_display(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> None:
    """Raise a one-line :class:`UsageError` when no display can host a window (Linux without X11 or Wayland)."""
    env = os.environ if environ is None else environ
    if platform.startswith("linux") and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        raise UsageError("--viewer native needs a display (DISPLAY is not set); use --viewer web on a remote machine")

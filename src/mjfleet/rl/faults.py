"""Deliberate faults for testing failure handling with real processes.

``MJFLEET_FAULT=<kind>@<rank>:<iteration>`` (comma-separated for several) makes that rank misbehave right after
that iteration: ``raise`` raises an exception, ``kill`` SIGKILLs its own process, ``hang`` stops participating
(sleeps forever). Unset, the hook does nothing.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mjfleet.rl.runner import Runner

ENV_VAR = "MJFLEET_FAULT"


class InjectedFaultError(RuntimeError):
    """Raised by ``raise@rank:iteration``."""


def parse_faults(spec: str) -> list[tuple[str, int, int]]:
    """``"raise@1:3,hang@0:5"`` -> ``[("raise", 1, 3), ("hang", 0, 5)]``."""
    faults = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, _, where = item.partition("@")
        rank, _, iteration = where.partition(":")
        if kind not in ("raise", "kill", "hang"):
            raise ValueError(f"unknown fault kind {kind!r} in {ENV_VAR}={spec!r}")
        faults.append((kind, int(rank), int(iteration)))
    return faults


def fault_injection_hook(runner: Runner, iteration: int) -> None:
    """Runner hook: trigger the faults named in ``MJFLEET_FAULT`` for this rank and iteration."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return
    for kind, rank, at in parse_faults(spec):
        if rank != runner.ctx.rank or at != iteration:
            continue
        if kind == "raise":
            raise InjectedFaultError(f"injected fault on rank {rank} at iteration {iteration}")
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        while kind == "hang":
            time.sleep(3600)

"""Deliberate faults for testing failure handling with real processes.

``MJFLEET_FAULT=<kind>@<rank>:<iteration>`` (comma-separated for several) makes that rank misbehave right after
that iteration (after its checkpoint, if one is due):

- ``raise``: raise an exception (the worker reports it and exits).
- ``kill``: SIGKILL its own process (no report, like the OOM killer).
- ``hang``: stop participating (sleep forever) while the other ranks wait in the next collective.
- ``nan``: overwrite one weight of the actor's output layer with NaN, so the next iteration's losses are not
  finite (like a diverging update would leave them).
- ``sigint`` / ``sigterm``: send that signal to its own process (in-process runs: like pressing Ctrl-C).

Only :mod:`mjfleet.rl.probes` installs the hook, when the variable is set and only in the first attempt of a run:
automatic restarts (see :mod:`mjfleet.train.supervisor`) do not install it, so a restarted run can get past the
fault.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from mjfleet.rl.records import IterationRecord
    from mjfleet.rl.runner import Runner

ENV_VAR = "MJFLEET_FAULT"
KINDS = ("raise", "kill", "hang", "nan", "sigint", "sigterm")


class InjectedFaultError(RuntimeError):
    """Raised by ``raise@rank:iteration``."""


def parse_faults(spec: str) -> list[tuple[str, int, int]]:
    """``"raise@1:3,hang@0:5"`` -> ``[("raise", 1, 3), ("hang", 0, 5)]``."""
    faults = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, _, where = item.partition("@")
        rank, _, iteration = where.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r} in {ENV_VAR}={spec!r}")
        faults.append((kind, int(rank), int(iteration)))
    return faults


def fault_injection_hook(runner: Runner, record: IterationRecord) -> None:
    """Runner hook: trigger the faults named in ``MJFLEET_FAULT`` for this rank and iteration."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return
    iteration = record.iteration
    for kind, rank, at in parse_faults(spec):
        if rank != runner.ctx.rank or at != iteration:
            continue
        if kind == "raise":
            raise InjectedFaultError(f"injected fault on rank {rank} at iteration {iteration}")
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "nan":
            weights = [p for name, p in runner.alg.actor.named_parameters() if name.endswith("weight")]
            with torch.no_grad():
                weights[-1].view(-1)[0] = float("nan")
        if kind in ("sigint", "sigterm"):
            os.kill(os.getpid(), signal.SIGINT if kind == "sigint" else signal.SIGTERM)
        while kind == "hang":
            time.sleep(3600)

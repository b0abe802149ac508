"""Where a worker's time before its first iteration goes: one line on rank 0 once that iteration is done.

The first iteration of a start carries more than PPO's work (Warp kernels compiled or loaded at their first launch, the
physics graph captured at its second, torch's first allocations), so it is its own phase.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import psutil

from mjfleet.rl.reporting.records import IterationRecord

logger = logging.getLogger(__name__)


def process_started_at() -> float | None:
    """Wall-clock time this process started (None where the system does not say)."""
    try:
        return psutil.Process().create_time()
    except (psutil.Error, OSError):
        return None


@dataclass
class StartupClock:
    """Wall-clock marks of a worker's start; :meth:`hook` logs them after the first iteration of this start."""

    process_started: float | None = field(default_factory=process_started_at)
    """When the process started: its imports, the plan and (launched workers) the process group come before the
    worker's training function."""
    worker_started: float = field(default_factory=time.time)
    """When the worker's training function began."""
    marks: list[tuple[str, float]] = field(default_factory=list)
    """Phases in order, each with the wall-clock time it ended."""
    logged: bool = False
    """Whether :meth:`hook` has logged the line (once per start)."""

    def mark(self, phase: str) -> None:
        """``phase`` ended now."""
        self.marks.append((phase, time.time()))

    def phases(self, first_iteration_done: float) -> list[tuple[str, float]]:
        """Each phase with its seconds, from the process's start to the end of the first iteration."""
        ends = [*self.marks, ("first iteration", first_iteration_done)]
        previous = self.worker_started
        phases = []
        if self.process_started is not None:
            phases.append(("imports, plan and launch", max(0.0, self.worker_started - self.process_started)))
        for phase, end in ends:
            phases.append((phase, max(0.0, end - previous)))
            previous = end
        return phases

    def describe(self, first_iteration_done: float) -> str:
        """``start-up: first iteration done 5.1 s after the process started: ...``."""
        phases = self.phases(first_iteration_done)
        origin = self.process_started if self.process_started is not None else self.worker_started
        since = "the process started" if self.process_started is not None else "the worker started"
        parts = ", ".join(f"{name} {_seconds(seconds)}" for name, seconds in phases)
        return f"start-up: first iteration done {first_iteration_done - origin:.1f} s after {since}: {parts}"

    def hook(self, _runner: object, _record: IterationRecord) -> None:
        """A runner hook: logs :meth:`describe` once, after the first iteration of this start."""
        if self.logged:
            return
        self.logged = True
        logger.info(self.describe(time.time()))


def _seconds(seconds: float) -> str:
    """``0.04 s`` below a second, ``3.9 s`` above."""
    return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"

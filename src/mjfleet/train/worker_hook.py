"""The worker hook: your own code inside every training worker, named by ``$MJFLEET_WORKER_HOOK``.

``MJFLEET_WORKER_HOOK=package.module:function`` names a callable that every worker (in-process or launched)
imports and calls once, after its runner is built (and a checkpoint loaded) and before training starts::

    def hook(runner: Runner, context: WorkerHookContext) -> Callable[[], dict[str, Any]] | None: ...

The hook may append to ``runner.hooks`` (each is called as ``fn(runner, record)`` on its rank after every iteration,
after that iteration's checkpoint) or ``runner.step_hooks``, and may wrap anything it can reach. It may return a
callable: when training ends without an error, the dict it returns becomes
:attr:`~mjfleet.rl.reporting.records.WorkerResult.extras` of that worker (plain, picklable data: launched workers send
it to the launcher). Rank, world size and device are in ``runner.ctx``.

Launched workers inherit the variable (the launcher copies ``MJFLEET*`` variables to remote hosts too), and the
module must be importable where they run: installed, or on ``PYTHONPATH``. Unset, nothing is imported or called.
Uses: instrumentation (per-iteration timings written to a file, extra statistics returned with the result); the
project's tests install their digests and deliberate failures through it (``tests/instruments.py``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from mjfleet.errors import UsageError
from mjfleet.runs.start import StartPoint
from mjfleet.train.config import TrainConfig

if TYPE_CHECKING:
    from mjfleet.rl.runner import Runner

WORKER_HOOK_ENV = "MJFLEET_WORKER_HOOK"


@dataclass(frozen=True)
class WorkerHookContext:
    """What a worker knows about its run besides the runner."""

    cfg: TrainConfig
    """The full training configuration (identical on every worker)."""
    run_dir: Path | None
    """The run directory (the same across automatic restarts), or None when the run writes nothing."""
    start: StartPoint
    """The checkpoint this worker started from (already loaded) and the iteration training ends at."""


WorkerHook = Callable[["Runner", WorkerHookContext], Callable[[], dict[str, Any]] | None]


def load_worker_hook(value: str | None = None) -> WorkerHook | None:
    """The callable ``value`` (default ``$MJFLEET_WORKER_HOOK``) names, imported; None when it is unset or empty.

    A malformed value or a missing module or attribute raises :class:`UsageError` (never retried).
    """
    value = os.environ.get(WORKER_HOOK_ENV, "") if value is None else value
    if not value:
        return None
    module_name, _, attribute = value.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"{WORKER_HOOK_ENV}={value!r}: expected package.module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not f"{module_name}.".startswith(f"{e.name}."):
            raise  # the hook's module exists but imports something missing: its own traceback says more
        raise UsageError(
            f"{WORKER_HOOK_ENV}={value}: no module named {e.name!r} here (install it or add its folder to PYTHONPATH)"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise UsageError(f"{WORKER_HOOK_ENV}={value}: {module_name} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise UsageError(f"{WORKER_HOOK_ENV}={value}: {attribute!r} is not callable")
    return cast(WorkerHook, target)  # the signature is not checked here: a wrong one fails at the call

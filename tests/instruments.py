"""Test instruments for real training runs, installed in every worker through the worker hook.

:func:`install` is a worker hook (:mod:`mjfleet.train.worker_hook`); :func:`instrument_env` gives the variables that
install it in every worker of a run started from this process, in-process or launched:

- ``MJFLEET_PROBES=1``: :class:`Probes` returns, in ``WorkerResult.extras``:

  - ``"replica_digest"``: digest of parameters, normaliser statistics, optimizer state and learning rate at the
    end (equal on every rank of a healthy run), whichever the learner;
  - ``"first_rollout_digest"``: digest of this rank's policy observations of its first rollout (differs between
    ranks, whose seeds differ): rsl_rl's rollout storage, or an skrl agent's memory;
  - ``"local_sums"`` / ``"local_counts"``: per iteration, this rank's own episode sums and counts (in
    ``env.stats.keys`` order) before the cross-rank reduction.

- ``MJFLEET_FAULT=<kind>@<rank>:<iteration>`` (comma-separated for several): that rank misbehaves right after that
  iteration (after its checkpoint, if one is due):

  - ``raise``: raise an exception (the worker reports it and exits);
  - ``timeout``: raise another library's timeout (an HTTP client's "Read timed out"), not torch.distributed's;
  - ``kill``: SIGKILL its own process (no report, like the OOM killer);
  - ``hang``: stop participating (sleep forever) while the other ranks wait in the next collective;
  - ``nan``: overwrite one weight of the actor's output layer with NaN, so the next iteration's losses are not
    finite (like a diverging update would leave them);
  - ``sigint`` / ``sigterm``: send that signal to its own process (in-process runs: like pressing Ctrl-C);
  - ``nospace``: the disk fills: every later checkpoint write of its process fails as a full disk does.

  Each fault fires once per run directory (a marker file there remembers it), so an automatic restart, which
  continues in the same directory, gets past it. Runs without a run directory fire it every time.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mjfleet.rl.replicas import digest, replica_digest
from mjfleet.rl.reporting.records import IterationRecord
from mjfleet.rl.runner import Runner
from mjfleet.train.worker_hook import WORKER_HOOK_ENV, WorkerHookContext

if TYPE_CHECKING:
    import pytest  # workers import this module; they need no pytest

HOOK = f"{__name__}:install"
PROBES_ENV = "MJFLEET_PROBES"
FAULT_ENV = "MJFLEET_FAULT"
KINDS = ("raise", "timeout", "kill", "hang", "freeze", "nan", "sigint", "sigterm", "nospace")
REPO = Path(__file__).resolve().parents[1]
"""Launched workers import this module as ``tests.instruments``: the repository root goes on their PYTHONPATH."""


def instrument_env(probes: bool = False, fault: str = "") -> dict[str, str]:
    """The variables that install the instruments in a run started from this process (they name the hook)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    env = {WORKER_HOOK_ENV: HOOK, "PYTHONPATH": path}
    if probes:
        env[PROBES_ENV] = "1"
    if fault:
        env[FAULT_ENV] = fault
    return env


def instrument(monkeypatch: pytest.MonkeyPatch, probes: bool = False, fault: str = "") -> None:
    """Set :func:`instrument_env` (and nothing else: an unnamed instrument stays off) for one test."""
    monkeypatch.delenv(PROBES_ENV, raising=False)
    monkeypatch.delenv(FAULT_ENV, raising=False)
    for name, value in instrument_env(probes, fault).items():
        monkeypatch.setenv(name, value)


def install(runner: Runner, context: WorkerHookContext) -> Callable[[], dict[str, Any]] | None:
    """The worker hook: attach what the environment asks for; returns the probes' results, if any."""
    probes = Probes(runner) if os.environ.get(PROBES_ENV) else None
    spec = os.environ.get(FAULT_ENV)
    if spec:
        runner.hooks.append(Faults(parse_faults(spec), context.run_dir))  # after the probes: they see the iteration
    return None if probes is None else partial(probes.results, runner)


class Probes:
    """Records what tests compare across ranks and runs (see the module docstring)."""

    def __init__(self, runner: Runner) -> None:
        self.first_rollout_digest = ""
        self.local_sums: list[list[float]] = []
        self.local_counts: list[list[float]] = []
        self._popped: tuple[torch.Tensor, torch.Tensor] | None = None
        stats = runner.env.stats
        pop = stats.pop

        def recording_pop() -> tuple[torch.Tensor, torch.Tensor]:
            self._popped = pop()
            return self._popped

        stats.pop = recording_pop  # type: ignore[method-assign]
        runner.hooks.append(self._after_iteration)

    def _after_iteration(self, runner: Runner, record: IterationRecord) -> None:
        if not self.first_rollout_digest:
            # The storage (or memory) still holds the rollout the update learned from.
            self.first_rollout_digest = digest([_rollout_observations(runner)])
        assert self._popped is not None
        sums, counts = self._popped
        self.local_sums.append(sums.tolist())
        self.local_counts.append(counts.tolist())

    def results(self, runner: Runner) -> dict[str, Any]:
        """What ``WorkerResult.extras`` holds."""
        return {
            "replica_digest": replica_digest(runner.learner),
            "first_rollout_digest": self.first_rollout_digest,
            "local_sums": self.local_sums,
            "local_counts": self.local_counts,
        }


def _rollout_observations(runner: Runner) -> torch.Tensor:
    """The policy observations the learner recorded: rsl_rl's rollout storage, FastTD3's replay buffer, or an skrl
    agent's memory."""
    from mjfleet.rl.learners.fast_td3 import FastTd3
    from mjfleet.rl.learners.rsl_rl import RslRlPpo

    learner = runner.learner
    if isinstance(learner, RslRlPpo):
        return learner.alg.storage.observations["policy"]
    if isinstance(learner, FastTd3):
        return learner.buffer.data["obs"]
    from mjfleet.rl.learners.skrl.learner import SkrlLearner

    assert isinstance(learner, SkrlLearner)
    assert learner.agent.memory is not None
    return learner.agent.memory.get_tensor_by_name("observations")


class InjectedFaultError(RuntimeError):
    """Raised by ``raise@rank:iteration``."""


def parse_faults(spec: str) -> list[tuple[str, int, int]]:
    """``"raise@1:3,hang@0:5"`` -> ``[("raise", 1, 3), ("hang", 0, 5)]``."""
    faults = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, _, where = item.partition("@")
        rank, _, iteration = where.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r} in {FAULT_ENV}={spec!r}")
        faults.append((kind, int(rank), int(iteration)))
    return faults


class Faults:
    """Runner hook: trigger the faults meant for this rank and iteration, each once per run directory."""

    def __init__(self, faults: list[tuple[str, int, int]], run_dir: Path | None) -> None:
        self.faults = faults
        self.run_dir = run_dir

    def __call__(self, runner: Runner, record: IterationRecord) -> None:
        for kind, rank, at in self.faults:
            if rank == runner.ctx.rank and at == record.iteration and self._first_time(kind, rank, at):
                self._trigger(kind, runner, record.iteration)

    def _first_time(self, kind: str, rank: int, at: int) -> bool:
        if self.run_dir is None:
            return True
        marker = self.run_dir / f".fault-{kind}-{rank}-{at}"
        try:
            marker.touch(exist_ok=False)  # before the fault: a killed process cannot write it afterwards
        except FileExistsError:
            return False
        return True

    @staticmethod
    def _trigger(kind: str, runner: Runner, iteration: int) -> None:
        rank = runner.ctx.rank
        if kind == "raise":
            raise InjectedFaultError(f"injected fault on rank {rank} at iteration {iteration}")
        if kind == "timeout":
            raise TimeoutError("HTTPSConnectionPool(host='api.wandb.ai', port=443): Read timed out. (read timeout=20)")
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "nan":
            from .helpers import rsl_ppo

            weights = [p for name, p in rsl_ppo(runner).actor.named_parameters() if name.endswith("weight")]
            with torch.no_grad():
                weights[-1].view(-1)[0] = float("nan")
        if kind in ("sigint", "sigterm"):
            os.kill(os.getpid(), signal.SIGINT if kind == "sigint" else signal.SIGTERM)
        if kind == "nospace":
            import errno

            from mjfleet.rl.checkpoint import saving

            def full(payload: object, path: Path) -> None:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            saving.save_atomic = full  # type: ignore[assignment]
        if kind == "freeze":  # SIGSTOP: as a debugger or a suspended job leaves it, unable to answer SIGTERM
            os.kill(os.getpid(), signal.SIGSTOP)
        while kind == "hang":
            time.sleep(3600)

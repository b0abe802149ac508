"""Test instruments for real training runs, in-process or in launched workers.

:func:`mjfleet.train.worker.train_worker` imports this module only when ``MJFLEET_PROBES`` or ``MJFLEET_FAULT`` is
set (launched workers inherit ``MJFLEET*`` variables), so real runs neither compute nor ship any of it.

- ``MJFLEET_PROBES=1``: :class:`Probes` records into :attr:`~mjfleet.rl.records.WorkerResult.probes`:

  - ``"replica_digest"``: digest of parameters, normaliser statistics, optimizer state and learning rate at the
    end (equal on every rank of a healthy run);
  - ``"first_rollout_digest"``: digest of this rank's policy observations of its first rollout (differs between
    ranks, whose seeds differ);
  - ``"local_sums"`` / ``"local_counts"``: per iteration, this rank's own episode sums and counts (in
    ``env.stats.keys`` order) before the cross-rank reduction.

- ``MJFLEET_FAULT=<kind>@<rank>:<iteration>``: the fault injection hook of :mod:`mjfleet.rl.faults`, first attempt
  of a run only.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from mjfleet.rl.faults import ENV_VAR as FAULT_ENV_VAR
from mjfleet.rl.faults import fault_injection_hook
from mjfleet.rl.records import IterationRecord
from mjfleet.rl.replicas import digest, replica_digest
from mjfleet.rl.runner import Runner

PROBES_ENV_VAR = "MJFLEET_PROBES"


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
            # The storage still holds the rollout the update learned from.
            self.first_rollout_digest = digest([runner.alg.storage.observations["policy"]])
        assert self._popped is not None
        sums, counts = self._popped
        self.local_sums.append(sums.tolist())
        self.local_counts.append(counts.tolist())

    def results(self, runner: Runner) -> dict[str, Any]:
        """What :attr:`~mjfleet.rl.records.WorkerResult.probes` holds."""
        return {
            "replica_digest": replica_digest(runner.alg),
            "first_rollout_digest": self.first_rollout_digest,
            "local_sums": self.local_sums,
            "local_counts": self.local_counts,
        }


def install(runner: Runner, attempt: int) -> Probes | None:
    """Attach the instruments the environment asks for; the probes, if ``MJFLEET_PROBES`` is set."""
    probes = Probes(runner) if os.environ.get(PROBES_ENV_VAR) else None
    if os.environ.get(FAULT_ENV_VAR) and attempt == 0:
        runner.hooks.append(fault_injection_hook)  # after the probes, so they see the iteration a fault follows
    return probes

"""What training measured and returns: per-iteration records and each worker's result.

No torch or simulator imports: the launcher unpickles these when workers finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IterationRecord:
    """What one iteration measured (kept for the caller; the same numbers are logged)."""

    iteration: int
    losses: dict[str, float]
    episode: dict[str, float]
    """Means over every rank's episodes that ended during this iteration."""
    local_sums: list[float]
    """This rank's own per-key sums (in ``env.stats.keys`` order), before the cross-rank reduction."""
    local_counts: list[float]
    """This rank's own per-key episode counts."""
    env_steps_per_s: float
    collect_s: float
    learn_s: float
    sync_s: float


@dataclass
class TrainingHistory:
    """Per-iteration records plus the digest of this rank's first rollout."""

    records: list[IterationRecord] = field(default_factory=list)
    first_rollout_digest: str = ""


@dataclass
class WorkerResult:
    """What each worker hands back to the launcher."""

    rank: int
    device: str
    final_iteration: int
    replica_digest: str
    first_rollout_digest: str
    records: list[IterationRecord]
    stop_signal: int | None = None
    """Signal number that stopped training early (after a final checkpoint), or None if it ran to the end."""
    last_checkpoint: str | None = None
    """The newest checkpoint written (or resumed from) by this run."""

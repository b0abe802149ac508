"""Statistics of the evaluation episodes: the deterministic policy (what ``play`` runs) on a slice of the environments.

Their names mirror the training episodes' (``Episode/success`` -> ``Eval/success``, ``Metrics/<name>`` ->
``Eval_Metrics/<name>``, ...). No torch import: the launcher checks ``--stop-when`` names before any worker starts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

_PREFIXES = (
    ("Episode/", "Eval/"),
    ("Episode_Reward/", "Eval_Reward/"),
    ("Episode_Termination/", "Eval_Termination/"),
    ("Metrics/", "Eval_Metrics/"),
)
"""Each training-episode prefix and its evaluation counterpart."""


def evaluation_name(key: str) -> str:
    """The evaluation statistic of a training statistic's name (an evaluation name or another name: unchanged)."""
    for training, evaluation in _PREFIXES:
        if key.startswith(training):
            return evaluation + key[len(training) :]
    return key


def training_name(key: str) -> str:
    """The training statistic an evaluation statistic mirrors (any other name: unchanged)."""
    for training, evaluation in _PREFIXES:
        if key.startswith(evaluation):
            return training + key[len(evaluation) :]
    return key


def is_evaluation_name(key: str) -> bool:
    """Whether ``key`` names a statistic of the evaluation episodes."""
    return training_name(key) != key


class EvaluationWindow:
    """Means over the most recent evaluation episodes of every worker: whole iterations, newest first, as many as
    hold at least ``episodes`` episodes (an evaluation episode lasts many iterations and only a few end in each).

    Fed with the all-reduced sums and counts of each iteration, so every rank holds the same window without another
    collective; the runner saves it with each checkpoint, so a restarted run judges the episodes that ended before
    the checkpoint with those after it (the evaluation episodes running at the checkpoint are lost: they start
    afresh).
    """

    def __init__(self, keys: Sequence[str], episodes: int) -> None:
        self.keys = tuple(keys)
        """The training statistics' names, in the order of the sums and counts."""
        self.episodes = episodes
        self._iterations: deque[tuple[list[float], list[float]]] = deque()
        self._restored = 0
        """How many of the held iterations a checkpoint's window brought (episodes before this start)."""

    def add(self, sums: Sequence[float], counts: Sequence[float]) -> bool:
        """One iteration's sums and counts (over every rank), in :attr:`keys` order; whether the window changed (an
        evaluation episode ended in the iteration)."""
        if not counts or not max(counts):
            return False
        self._iterations.append((list(sums), list(counts)))
        while len(self._iterations) > 1 and self.count - _episodes(self._iterations[0][1]) >= self.episodes:
            self._iterations.popleft()
            self._restored = max(self._restored - 1, 0)
        return True

    @property
    def restored_only(self) -> bool:
        """Whether every episode held is a checkpoint's (none of this start has ended yet): its means are of the
        policy the checkpoint was saved with, or earlier."""
        return bool(self._iterations) and self._restored == len(self._iterations)

    @property
    def count(self) -> int:
        """Evaluation episodes the window holds."""
        return sum(_episodes(counts) for _, counts in self._iterations)

    @property
    def full(self) -> bool:
        """Whether the window holds at least :attr:`episodes` episodes (only then may ``--stop-when`` read it)."""
        return self.count >= self.episodes

    def means(self) -> dict[str, float]:
        """Means by evaluation name (``Eval/success``, ...), for the keys that saw an episode."""
        out: dict[str, float] = {}
        for i, key in enumerate(self.keys):
            total = sum(counts[i] for _, counts in self._iterations)
            if total > 0:
                out[evaluation_name(key)] = sum(sums[i] for sums, _ in self._iterations) / total
        return out

    def clear(self) -> None:
        """Forget every episode (the next ones fill it afresh)."""
        self._iterations.clear()
        self._restored = 0

    def state_dict(self) -> dict[str, Any]:
        """Plain lists, for a checkpoint that loads with ``weights_only=True``."""
        return {"keys": list(self.keys), "iterations": [[s, c] for s, c in self._iterations]}

    def load_state_dict(self, state: Any) -> bool:
        """Restore a saved window of the same statistics; False (and empty) for another task's or none."""
        self._iterations.clear()
        self._restored = 0
        if not isinstance(state, dict) or list(state.get("keys", ())) != list(self.keys):
            return False
        for sums, counts in state.get("iterations", ()):
            self._iterations.append((list(sums), list(counts)))
        self._restored = len(self._iterations)
        return True


def _episodes(counts: Iterable[float]) -> int:
    """Episodes behind one iteration's counts: every ended episode reports every key."""
    return int(max(counts, default=0))

"""``--stop-when``: end training once an episode statistic holds a condition for some iterations in a row.

The statistic is one of the evaluation episodes (the deterministic policy that ``play`` runs, on a slice of the
environments: :mod:`mjfleet.rl.evaluation.window`), whichever name it is given by: ``success``, ``Episode/success`` and
``Eval/success`` all read ``Eval/success``. Checked on the means over every rank's episodes (identical on all ranks
after the iteration's all-reduce), so every rank reaches the same verdict at the same iteration without another
collective. No torch import: the launcher parses and checks conditions before any worker starts.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeAlias

import tyro

from mjfleet.errors import UsageError
from mjfleet.rl.evaluation.window import evaluation_name, is_evaluation_name, training_name

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_SHORT_NAMES = {"success": "Episode/success", "return": "Episode/return", "length": "Episode/length"}
EVALUATION_STREAK = 1
"""Iterations in a row a condition on the evaluation episodes must hold by default: their statistics are already
the mean over a window of episodes, not one iteration's (docs/performance.md measured 1 against 10)."""
TRAINING_STREAK = 10
"""Iterations in a row a condition on the training episodes (one iteration's episodes each) must hold by default."""
_CONDITION_RE = re.compile(r"\s*([A-Za-z0-9_./-]+)\s*(>=|<=|>|<)\s*(\S+)\s*")


@dataclass(frozen=True)
class StopCondition:
    """`<statistic> <op> <value>` (how many iterations in a row it must hold is the tracker's business)."""

    key: str
    """The logged statistic, e.g. `Eval/success`."""
    op: str
    """One of `>=`, `<=`, `>`, `<`."""
    value: float

    @classmethod
    def parse(cls, text: str) -> StopCondition:
        """Parse ``success>=0.9`` (short names: success, return, length; otherwise the logged name, e.g.
        ``Metrics/lin_vel_error<0.2``) into a condition on the evaluation episodes (``Eval/success``,
        ``Eval_Metrics/lin_vel_error``). Raises :class:`UsageError` naming the flag."""
        match = _CONDITION_RE.fullmatch(text)
        if match is None:
            # A name alone is what a shell leaves of an unquoted condition: it took > or < as a redirection.
            shell = " (quote it: --stop-when 'success>=0.95'; unquoted, the shell reads > and < itself)"
            raise UsageError(
                f"--stop-when {text!r} is not a condition like 'success>=0.9' or 'Metrics/<name><0.2'"
                " (a statistic, one of >= <= > <, a number)" + (shell if re.fullmatch(r"[\w/.]+", text) else "")
            )
        name, op, number = match.groups()
        try:
            value = float(number)
        except ValueError:
            said = f"{number!r} is not a number" if number.strip("=<> ") else "no number after the comparison"
            raise UsageError(f"--stop-when {text!r}: {said}") from None
        if not math.isfinite(value):
            raise UsageError(f"--stop-when {text!r}: the threshold must be a finite number")
        condition = cls(evaluation_name(_SHORT_NAMES.get(name, name)), op, value)
        # A share of episodes: a threshold past 0..1 (95 for 95%) can never be met, or always is.
        if training_name(condition.key).startswith(_SHORT_NAMES["success"]) and not 0 <= value <= 1:
            raise UsageError(f"--stop-when {text!r}: success is a share of episodes, from 0 to 1 (0.95 for 95%)")
        return condition

    def check_key(self, available: Iterable[str]) -> None:
        """Raise :class:`UsageError` unless the statistic is one the task logs (``available``: the training
        episodes' names, which the evaluation episodes mirror)."""
        keys = sorted(available)
        if training_name(self.key) not in keys:
            episode = [k for k in keys if k.startswith(("Episode/", "Metrics/"))]
            raise UsageError(
                f"--stop-when: this task logs no statistic {training_name(self.key)!r}; use success, return, length"
                f" or one of {', '.join(k for k in episode if k not in _SHORT_NAMES.values()) or '(none)'}"
            )

    def check_evaluated(self, evaluated: Iterable[str]) -> None:
        """Raise :class:`UsageError` where the condition reads the evaluation episodes and they do not log its
        statistic (``evaluated``: the training names of what the evaluation episodes log): a statistic of the
        training episodes alone (a command curriculum's level, successes from starts only training has)."""
        if is_evaluation_name(self.key) and training_name(self.key) not in set(evaluated):
            raise UsageError(
                f"--stop-when: the evaluation episodes (the deterministic policy, as play runs it) log no"
                f" {training_name(self.key)!r}, a statistic of the training episodes alone; with --agent.eval-envs 0"
                " the condition reads the training episodes"
            )

    def on_training_episodes(self) -> StopCondition:
        """The same condition on the training episodes' statistic (for a run without evaluation environments)."""
        return StopCondition(training_name(self.key), self.op, self.value)

    @property
    def default_streak(self) -> int:
        """Iterations in a row the condition must hold unless ``--stop-when-iterations`` says otherwise."""
        return EVALUATION_STREAK if is_evaluation_name(self.key) else TRAINING_STREAK

    def holds(self, episode: Mapping[str, float]) -> bool:
        """Whether one iteration's means satisfy the condition (no episode ended, or NaN: it does not)."""
        value = episode.get(self.key)
        return value is not None and math.isfinite(value) and _OPERATORS[self.op](value, self.value)

    def nearly_holds(self, value: float) -> bool:
        """Whether ``value`` of the statistic meets the condition, or would with its threshold moved a tenth of the
        threshold's size (at least 0.01) in its favour: ``success >= 0.95`` from 0.855 on."""
        margin = max(NEAR_SHARE * abs(self.value), 0.01)
        if not math.isfinite(value):
            return False
        return value >= self.value - margin if self.op in (">", ">=") else value <= self.value + margin

    def near_statistic(self, episode: Mapping[str, float], evaluation: Mapping[str, float]) -> tuple[str, float] | None:
        """The first of this condition's statistic on the training episodes (``episode``) and on the evaluation
        window (``evaluation``, empty until it is full) that :meth:`nearly_holds`, by name, or None."""
        training = self.on_training_episodes().key
        read = ((training, episode.get(training)), (self.key, evaluation.get(self.key)))
        return next(((k, v) for k, v in read if v is not None and self.nearly_holds(v)), None)

    def __str__(self) -> str:
        return f"{self.key} {self.op} {_number(self.value)}"


NEAR_SHARE = 0.1
"""How near its threshold a condition's statistic counts as near (:meth:`StopCondition.nearly_holds`)."""


def _number(value: float) -> str:
    """``value`` short (``0.9``, ``100``) where that is exact, else every digit it has (``123.456789``)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _parse_words(words: list[str]) -> StopCondition:
    return StopCondition.parse(" ".join(words))


StopWhen: TypeAlias = Annotated[
    StopCondition,
    tyro.constructors.PrimitiveConstructorSpec(
        nargs=1,
        metavar="CONDITION",
        instance_from_str=_parse_words,
        is_instance=lambda value: isinstance(value, StopCondition),
        str_from_instance=lambda condition: [f"{condition.key}{condition.op}{_number(condition.value)}"],
    ),
]
"""A config field that the command line fills with a parsed :class:`StopCondition` (``success>=0.9``)."""


def as_condition(value: StopCondition | str | Any) -> StopCondition:
    """A condition given from Python as text (``TrainConfig(stop_when="success>=0.9")``) parsed once, else as is."""
    return StopCondition.parse(value) if isinstance(value, str) else value


class StopConditionTracker:
    """Counts the consecutive iterations a :class:`StopCondition` held."""

    def __init__(self, condition: StopCondition, iterations: int) -> None:
        self.condition = condition
        self.iterations = iterations
        self.streak = 0

    @classmethod
    def continuing(
        cls, condition: StopCondition, iterations: int, progress: Mapping[str, Any]
    ) -> tuple[StopConditionTracker, bool]:
        """A tracker that goes on from a checkpoint's ``progress`` of ``condition`` (its streak), and whether the
        condition had been met there: training past it was asked for (``--finish`` with more iterations,
        ``--resume``), so the streak starts again at 0 (the caller starts its evaluation afresh)."""
        tracker = cls(condition, iterations)
        tracker.streak = int(progress["streak"])
        met = progress.get("met")
        if met is None:  # a checkpoint from before it was saved: a streak that long had stopped the run
            met = tracker.streak >= tracker.iterations
        if met:
            tracker.streak = 0
        return tracker, bool(met)

    def update(self, episode: Mapping[str, float]) -> bool:
        """Record one iteration; True once the condition held for ``iterations`` iterations in a row. An iteration
        without the statistic (no episode ended in it) neither holds nor breaks the streak: with few environments
        or long episodes most iterations end none."""
        if self.condition.key not in episode:
            return False
        self.streak = self.streak + 1 if self.condition.holds(episode) else 0
        return self.streak >= self.iterations

"""The console's account of a training run: a compact line every iteration, followed every few by a fuller block.

Pure text from numbers the runner gathers (no torch, no clock of its own), so the wording is tested without training.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

RECENT_ITERATIONS = 20
"""The ETA assumes the remaining iterations take as long as the mean of this many most recent ones."""

_SHORT = {"return": ".1f", "length": ".0f", "success": ".2f"}
"""Episode statistics every task logs (``Episode/<name>`` and ``Eval/<name>``), with their precision."""


@dataclass(frozen=True)
class Progress:
    """What one iteration's report says."""

    iteration: int
    final: int
    """The iteration the run trains to (the ETA's target)."""
    elapsed_s: float
    """Wall time since this start began training."""
    run_elapsed_s: float | None
    """The run's training wall time over every start, where this start continues a run (resume or restart)."""
    eta_s: float | None
    """Seconds to :attr:`final`, or None while no iteration after the first of this start has been timed."""
    env_steps: int
    """Environment steps the run has simulated so far (every worker, evaluation environments included; the
    current-policy checks, which log their own, not)."""
    env_steps_per_s: float
    collect_s: float
    learn_s: float
    episode: Mapping[str, float] = field(default_factory=dict)
    """Means over the training episodes (stochastic policy) that ended in the latest iteration that ended any."""
    evaluation: Mapping[str, float] = field(default_factory=dict)
    """Means over the most recent evaluation episodes (deterministic policy), by logged name."""
    evaluation_episodes: int = 0
    """How many evaluation episodes :attr:`evaluation` covers."""
    evaluation_restored: bool = False
    """Whether those are all a checkpoint's episodes (none of this start's has ended yet)."""
    evaluation_window: int = 0
    """The evaluation episodes ``--stop-when`` waits for before it reads :attr:`evaluation`."""
    ending: bool = False
    """This start's last iteration (its count reached, a stop signal or the condition): no time is left to estimate."""
    stop_when: str | None = None
    """The ``--stop-when`` condition as text (with how many iterations in a row), which may end the run early."""
    losses: Mapping[str, float] = field(default_factory=dict)
    learning_rate: float = math.nan
    action_std: float = math.nan


def format_duration(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03`` (hours grow without bound: ``30:00:00``)."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_count(value: float) -> str:
    """``950``, ``12.3k``, ``4.56M``, ``1.23G``: three significant digits at most."""
    if abs(value) < 999.5:
        return f"{value:.0f}"
    for scale, suffix in ((1e3, "k"), (1e6, "M")):
        if abs(value / scale) < 999.5:
            return f"{value / scale:.3g}{suffix}"
    return f"{value / 1e9:.3g}G" if abs(value / 1e9) < 999.5 else f"{value / 1e9:.0f}G"


def _time_part(p: Progress) -> str:
    elapsed = format_duration(p.elapsed_s)
    if p.run_elapsed_s is not None:
        elapsed += f" (run {format_duration(p.run_elapsed_s)})"
    if p.iteration >= p.final or p.ending:
        return elapsed
    if p.eta_s is None:
        return f"{elapsed} ETA -"
    # --stop-when may end the run before its last iteration: the ETA is an upper bound then.
    return f"{elapsed} ETA {'<=' if p.stop_when else ''}{format_duration(p.eta_s)}"


def _success_part(p: Progress) -> str:
    trained = p.episode.get("Episode/success")
    evaluated = p.evaluation.get("Eval/success")
    parts = [] if trained is None else [f"success {trained:.2f}"]
    if evaluated is not None:
        notes = []
        if p.evaluation_episodes < p.evaluation_window:
            notes.append(f"{p.evaluation_episodes}/{p.evaluation_window} ep")
        if p.evaluation_restored:  # none of this start's evaluation episodes has ended yet
            notes.append("checkpoint's")
        parts.append(f"eval {evaluated:.2f}" + (f" ({', '.join(notes)})" if notes else ""))
    return " ".join(parts)


def progress_line(p: Progress) -> str:
    """The compact line of every iteration (about 100 characters):

    ``it 50/300 | 1:05 ETA 5:25 | 1.23M steps 18.9k/s | collect 0.83 learn 0.47 s | success 0.45 eval 0.60``
    """
    parts = [
        f"it {p.iteration}/{p.final}",
        _time_part(p),
        f"{format_count(p.env_steps)} steps {format_count(p.env_steps_per_s)}/s",
        f"collect {p.collect_s:.2f} learn {p.learn_s:.2f} s",
    ]
    success = _success_part(p)
    if success:
        parts.append(success)
    elif "Episode/return" in p.episode:
        parts.append(f"return {p.episode['Episode/return']:.1f}")
    return " | ".join(parts)


def _stats(values: Mapping[str, float], prefix: str, metrics_prefix: str) -> str:
    shown = [f"{name} {values[prefix + name]:{spec}}" for name, spec in _SHORT.items() if prefix + name in values]
    shown += [f"{key[len(metrics_prefix) :]} {v:.3g}" for key, v in values.items() if key.startswith(metrics_prefix)]
    return ", ".join(shown) or "no episode ended"


def progress_block(p: Progress) -> str:
    """Every few iterations: the iteration's line, then time, samples, both kinds of episodes and the losses."""
    run = "" if p.run_elapsed_s is None else f" (the run's total {format_duration(p.run_elapsed_s)})"
    eta = ""
    if p.eta_s is not None and p.iteration < p.final and not p.ending:
        eta = f", ETA {'<=' if p.stop_when else ''}{format_duration(p.eta_s)}"  # as the line above says it
    lines = [
        progress_line(p),
        f"  time: {format_duration(p.elapsed_s)} since this start{run}{eta}",
        f"  per iteration: {p.collect_s + p.learn_s:.2f} s, collecting {p.collect_s:.2f} s"
        f" and learning {p.learn_s:.2f} s",
        f"  env-steps: {p.env_steps:,} so far, {p.env_steps_per_s:,.0f} per second",
        f"  training episodes (stochastic policy): {_stats(p.episode, 'Episode/', 'Metrics/')}",
    ]
    if p.evaluation_episodes:
        lines.append(
            f"  evaluation episodes (deterministic policy), last {p.evaluation_episodes}:"
            f" {_stats(p.evaluation, 'Eval/', 'Eval_Metrics/')}"
        )
    losses = ", ".join(f"{name} {value:.4g}" for name, value in p.losses.items())
    lines.append(f"  losses: {losses}; learning rate {p.learning_rate:.2e}, action std {p.action_std:.3f}")
    if p.stop_when and p.iteration < p.final:
        lines.append(f"  --stop-when {p.stop_when} may end the run before iteration {p.final}")
    return "\n".join(lines)


class IterationClock:
    """Elapsed time and the ETA of a start that trains from ``first`` to ``final``, from the times the caller reports.

    The first iteration of a start carries compilation, allocation and warm-up, so it never enters the ETA's mean.
    """

    def __init__(self, began: float, first: int, final: int, previous_s: float = 0.0) -> None:
        self.began = began
        self.first = first
        self.final = final
        self.previous_s = previous_s
        """Training wall time of the run's earlier starts (from the checkpoint this start continues)."""
        self._last = began
        self._recent: deque[float] = deque(maxlen=RECENT_ITERATIONS)

    def tick(self, iteration: int, now: float) -> None:
        """Iteration ``iteration`` ended at ``now`` (same clock as ``began``)."""
        if iteration > self.first:
            self._recent.append(now - self._last)
        self._last = now

    def elapsed_s(self, now: float) -> float:
        """Since this start began."""
        return now - self.began

    def run_elapsed_s(self, now: float) -> float:
        """The run's training wall time, earlier starts included."""
        return self.previous_s + now - self.began

    def eta_s(self, iteration: int) -> float | None:
        """Seconds to :attr:`final` after ``iteration``; None until an iteration after the first has been timed."""
        if not self._recent:
            return None
        return (self.final - iteration) * sum(self._recent) / len(self._recent)

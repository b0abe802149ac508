"""The stop condition's part of a :class:`~mjfleet.rl.runner.Runner`: which condition a run can check, the progress a
continued start takes over from its checkpoint, and the pace of the evaluation's own simulation near the condition
(``--agent.eval-speedup``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mjfleet.rl.evaluation.stop_condition import StopCondition, StopConditionTracker
from mjfleet.rl.evaluation.window import is_evaluation_name

if TYPE_CHECKING:
    from mjfleet.rl.config import AgentConfig
    from mjfleet.rl.evaluation.policy_check import PolicyCheck
    from mjfleet.rl.evaluation.simulation import SeparateEvaluation
    from mjfleet.rl.evaluation.window import EvaluationWindow
    from mjfleet.runtime.context import DistributedContext

logger = logging.getLogger("mjfleet.rl.runner")


class Stopping:
    """The stop condition's half of the runner; the attributes below are the runner's (set in its ``__init__``)."""

    agent_cfg: AgentConfig
    ctx: DistributedContext
    evaluation: SeparateEvaluation | None
    evaluates: bool
    eval_window: EvaluationWindow
    policy_check: PolicyCheck | None
    stop_condition: StopCondition | None
    stop_when_iterations: int | None
    stop_progress: dict[str, Any]
    steps_per_iteration: int
    train_envs: int

    def _continue_condition(self) -> StopConditionTracker | None:
        """The tracker of the condition this start checks, going on from the checkpoint's progress of the same
        condition (its streak, the evaluation's pace); None without a condition."""
        condition = self._resolved_condition()
        tracker, met_before = None, False
        if another := self.stop_progress["condition"] != str(condition or ""):
            # Another condition than the checkpoint's, or none: nothing of the old one's progress carries over.
            self.stop_progress = {"condition": str(condition or ""), "streak": 0, "met": False}
        if condition is not None:
            iterations = self.stop_when_iterations or condition.default_streak
            tracker, met_before = StopConditionTracker.continuing(condition, iterations, self.stop_progress)
            if self.stop_progress.get("near"):  # the start this one continues had come near the condition
                self._evaluate_at_full_pace()
        if (another or met_before) and self.policy_check is not None:
            self.policy_check.next_check_steps = 0
        if met_before:  # its window and streak would stop it again at once
            self.eval_window.clear()
            logger.info(
                "the condition %s held at the checkpoint this start continues from: training goes on, and the"
                " evaluation starts afresh",
                condition,
            )
        return tracker

    def _evaluate_at_full_pace(self) -> None:
        """The evaluation's own simulation takes all its steps per training step from the next iteration on; the
        checkpoints say so (a continued run of the same condition goes on at that pace)."""
        own = self.evaluation
        if own is None or not own.speed_up():
            return
        self.stop_progress["near"] = True
        on_gpu = self.ctx.device_kind == "cuda"
        self.steps_per_iteration = self.agent_cfg.env_steps_per_iteration(
            self.train_envs, on_gpu, self.ctx.world_size, own.steps
        )
        if self.policy_check is not None:
            self.policy_check.steps_per_iteration = self.steps_per_iteration

    def _speed_up_evaluation_near(
        self, it: int, condition: StopCondition, episode: Mapping[str, float], evaluation: Mapping[str, float]
    ) -> None:
        """``--agent.eval-speedup near-stop``: the evaluation's own simulation takes all its steps per training step
        from the iteration after the condition's statistic, on the training episodes or the evaluation window's, first
        came near the threshold (every rank alike: the statistics are all-reduced)."""
        own = self.evaluation
        if own is None or own.at_full_pace:
            return
        near = condition.near_statistic(episode, evaluation if self.eval_window.full else {})
        if near is None:
            return
        self._evaluate_at_full_pace()
        if self.ctx.is_main:
            logger.info(
                "iteration %d: %s %.3g is near --stop-when %s: the evaluation steps %d times per training step from"
                " now on",
                it,
                *near,
                condition,
                own.steps,
            )

    def _resolved_condition(self) -> StopCondition | None:
        """:attr:`stop_condition` as this run can check it: a condition on the evaluation episodes reads the training
        episodes' statistic where no environment evaluates (``--agent.eval-envs 0``)."""
        condition = self.stop_condition
        if condition is None or self.evaluates or not is_evaluation_name(condition.key):
            return condition
        training = condition.on_training_episodes()
        if self.ctx.is_main:
            logger.warning(
                "no environment runs the deterministic policy (--agent.eval-envs 0): --stop-when reads the training"
                " episodes' %s instead of %s",
                training.key,
                condition.key,
            )
        return training

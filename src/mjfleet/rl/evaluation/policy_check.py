"""The check of the current policy before a run stops (``--agent.eval-confirm``).

The evaluation window describes the policies of the last many iterations; when the stop condition holds on it, the
current deterministic policy plays whole episodes from a fresh start, as ``play`` runs it, and the run stops only if
the condition holds on those. A check that fails makes the next wait until training has taken as many env-steps as
the check played, so that checks take at most about half of a run's steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from tensordict import TensorDict

from mjfleet.envs.episode_stats import EpisodeStats
from mjfleet.rl.evaluation.simulation import SeparateEvaluation
from mjfleet.rl.evaluation.stop_condition import StopCondition, StopConditionTracker
from mjfleet.rl.evaluation.window import evaluation_name, is_evaluation_name
from mjfleet.runtime.context import DistributedContext

logger = logging.getLogger(__name__)

Policy = Callable[[TensorDict], torch.Tensor]


@dataclass(frozen=True)
class Verdict:
    """The current policy's fresh episodes against the stop condition."""

    met: bool
    words: str
    """For the log: how many episodes, the statistic's value, and the outcome."""
    env_steps: int
    """Environment steps the check simulated over all ranks."""


def confirm_condition(
    judge: SeparateEvaluation,
    policy: Policy,
    condition: StopCondition,
    episodes: int,
    ctx: DistributedContext,
) -> Verdict:
    """Play ``policy`` from a reset in every environment of ``judge`` on every rank, as many rounds of whole episodes
    as make ``episodes``, and check ``condition`` on those episodes alone (identically on every rank: their sums and
    counts are all-reduced)."""
    per_round = judge.env.num_envs * ctx.world_size
    rounds = -(-episodes // per_round)
    with torch.inference_mode():
        sums, counts = judge.judge(policy, rounds)
    if ctx.is_distributed:
        packed = torch.cat((sums, counts)).to(ctx.device, torch.float64)
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        sums, counts = packed.cpu().split(len(sums))
    means = {evaluation_name(k): v for k, v in EpisodeStats.means(judge.env.stats.keys, sums, counts).items()}
    met = condition.holds(means)
    outcome = "the condition holds" if met else "not met, training goes on"
    value = means.get(condition.key, math.nan)
    played = f"the current policy from a fresh start, {rounds * per_round} episodes"
    words = f"{played}: {condition.key} = {value:.3f}: {outcome}"
    return Verdict(met, words, rounds * per_round * judge.round_steps)


class PolicyCheck:
    """Checks the current policy when a stop condition on the evaluation episodes held on the window.

    ``build`` makes the simulation the check plays in (the evaluation's own, or one of its own), called at the
    first check. Every rank holds one and decides alike: the env-step counts are over all ranks and the verdict's
    episodes are all-reduced.
    """

    def __init__(
        self,
        build: Callable[[], SeparateEvaluation],
        episodes: int,
        ctx: DistributedContext,
        steps_per_iteration: int,
    ) -> None:
        self._build = build
        self._judge: SeparateEvaluation | None = None
        """What :attr:`_build` made, at the first check."""
        self.episodes = episodes
        """Episodes a check plays over all ranks (``--agent.eval-confirm-episodes``, rounded up to whole rounds)."""
        self.ctx = ctx
        self.steps_per_iteration = steps_per_iteration
        """Env-steps one training iteration takes over all ranks (the wait in iterations, for the log)."""
        self.next_check_steps = 0
        """No check runs before training has taken this many env-steps: after a check that failed, as many more as
        it played."""

    @staticmethod
    def applies(condition: StopCondition) -> bool:
        """Whether ``condition`` is one the check judges: a statistic of the evaluation episodes."""
        return is_evaluation_name(condition.key)

    def confirms(self, tracker: StopConditionTracker, it: int, env_steps: int, policy: Policy) -> bool:
        """Whether the current ``policy`` meets the condition that held on the window after iteration ``it``, when
        training has taken ``env_steps``. During the wait after a failed check it is not checked (False, the streak
        left as it is: the first iteration after the wait checks); a check that fails starts the streak over."""
        if env_steps < self.next_check_steps:
            return False
        if self._judge is None:
            self._judge = self._build()
        held = confirm_condition(self._judge, policy, tracker.condition, self.episodes, self.ctx)
        if held.met:
            if self.ctx.is_main:
                logger.info("iteration %d: %s", it, held.words)
            return True
        tracker.streak = 0
        self.next_check_steps = env_steps + held.env_steps
        if self.ctx.is_main:
            wait = -(-held.env_steps // self.steps_per_iteration)
            logger.info(
                "iteration %d: %s; the next check from iteration %d (first, as many env-steps of training as it"
                " played: %s)",
                it,
                held.words,
                it + wait,
                f"{held.env_steps:,}",
            )
        return False

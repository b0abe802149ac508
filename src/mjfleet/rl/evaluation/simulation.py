"""Evaluation environments in a simulation of their own, stepped several times per training step.

An evaluation episode scores the policy over every step it lasts; in the training simulation a 1,000-step episode
spans about 40 iterations, so ``Eval/...`` describe the policy of about 20 iterations earlier. Stepped ``k`` times
per training step, an episode spans ``k`` times fewer iterations for the same physics (on the CPU the cost of a step
is the number of worlds it advances).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict

from mjfleet.envs.env import MjEnv
from mjfleet.profiling import part


class SeparateEvaluation:
    """``env`` (every one of its environments evaluates) stepped with the deterministic policy: :attr:`steps` times
    on every :attr:`interval`-th training step of an iteration. Its episodes accumulate in ``env.eval_stats`` (those
    that began with a reset). Checkpoints carry its task state (curriculum levels,
    :mod:`mjfleet.rl.checkpoint.rank_state`); its episodes and random streams start afresh in a continued run."""

    def __init__(
        self,
        env: MjEnv,
        steps: int,
        device: torch.device | str,
        first_steps: int | None = None,
        first_interval: int = 1,
    ) -> None:
        if steps < 1 or first_interval < 1:
            raise ValueError(f"evaluation steps ({steps}) and their interval ({first_interval}) must be at least 1")
        env.split_evaluation(env.num_envs)
        env.role = "evaluation"
        self.env = env
        self.full_steps = steps
        """Steps of :attr:`env` per training step once :meth:`speed_up` was called."""
        self.steps = steps if first_steps is None else min(first_steps, steps)
        """Steps of :attr:`env` per training step it steps on, now."""
        self.interval = first_interval
        """It steps on the first training step of an iteration and every this many after, now."""
        self.device = torch.device(device)
        self._obs: TensorDict = env.get_observations()
        self._fresh_task_state = env.task.state_dict()
        """The task's state as built (curriculum levels): every check of :meth:`judge` starts from it, as ``play``
        does."""

    @property
    def at_full_pace(self) -> bool:
        """Whether it takes :attr:`full_steps` on every training step."""
        return self.steps == self.full_steps and self.interval == 1

    def speed_up(self) -> bool:
        """Step :attr:`full_steps` times on every training step from now on; whether that changed anything."""
        faster = not self.at_full_pace
        self.steps, self.interval = self.full_steps, 1
        return faster

    def start(self) -> None:
        """Stagger the episodes over one episode's length, as random episode starts do for training, so some end in
        every iteration; those first episodes, cut short, do not count."""
        env = self.env
        env.episode_length_buf = torch.randint(
            0, int(env.max_episode_length), (env.num_envs,), device=env.device, generator=env.generator
        )
        env.from_reset = env.episode_length_buf == 0
        env.eval_stats.pop()
        self._obs = env.get_observations()

    def step(self, policy: Callable[[TensorDict], torch.Tensor], training_step: int = 0) -> None:
        """Advance every evaluation environment :attr:`steps` steps with ``policy`` where ``training_step`` (from 0
        in each iteration) is a multiple of :attr:`interval`."""
        if training_step % self.interval:
            return
        for _ in range(self.steps):
            with part("policy (evaluation)"):
                actions = policy(self._obs.to(self.device))
            with part("environment step (evaluation): the task's work"):
                self._obs = self.env.step(actions.to(self.env.device))[0]

    @property
    def round_steps(self) -> int:
        """Steps of one round of :meth:`judge`: a time-out ends every first episode within this many."""
        return int(self.env.max_episode_length) + 1

    def judge(self, policy: Callable[[TensorDict], torch.Tensor], rounds: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The current policy from a fresh start, as ``play`` runs it: ``rounds`` times, every environment reset
        and stepped for one whole episode (the first of each environment counts). Returns the episodes' sums and
        counts (:meth:`~mjfleet.envs.episode_stats.EpisodeStats.pop`); then the windowed evaluation starts afresh."""
        env = self.env
        env.eval_stats.pop()
        windowed = env.task.state_dict()  # the windowed evaluation's (curriculum levels move with its resets)
        for _ in range(rounds):
            env.task.load_state_dict(self._fresh_task_state)
            env.reset_all()
            obs = env.get_observations()
            for _ in range(self.round_steps):
                obs, _, dones, _ = env.step(policy(obs.to(self.device)).to(env.device))
                env.from_reset[dones.bool()] = False  # an environment's second episode does not count
        totals = env.eval_stats.pop()
        # The check left every environment mid-episode: the window's episodes start from resets, with the window's
        # task state (loaded again after the resets, which move curriculum levels by the check's episodes).
        env.task.load_state_dict(windowed)
        env.reset_all()
        env.task.load_state_dict(windowed)
        self.start()
        return totals

"""The batched environment rsl_rl trains on: a :class:`Task` driven over a :class:`Simulation`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from mjfleet.envs.config import EnvConfig
from mjfleet.envs.episode_stats import EpisodeStats
from mjfleet.envs.task import (
    ENV_TERMINATIONS,
    PRIVILEGED_SUCCESS,
    TERMINATION_NONFINITE,
    Task,
    episode_stat_keys,
)
from mjfleet.envs.task_checks import (
    check_episode_values,
    check_flags,
    check_fresh_observations,
    check_observations,
    check_reward,
)
from mjfleet.errors import UsageError
from mjfleet.profiling import part
from mjfleet.sim.factory import create_simulation


class MjEnv(VecEnv):
    """rsl_rl ``VecEnv`` over ``num_envs`` worlds (MuJoCo Warp or MuJoCo C) with auto-reset inside :meth:`step`.

    ``step`` returns observation groups as a TensorDict, the weighted reward, ``dones`` (terminated or timed
    out) and ``extras`` with ``time_outs`` and, when episodes ended, ``episodes``: ``(env_ids, {key: per-episode
    values})`` and, where :attr:`final_observations` is set, ``final_observations``: the observation groups of every
    environment before the resets (where ``dones`` is set, the state its episode ended in; elsewhere the returned
    observation). Finished-episode statistics also accumulate in :attr:`stats` (sums and counts) for exact
    cross-rank aggregation. The order of the task's calls within a step is documented on :class:`Task`.
    """

    # Narrower than VecEnv's ``dict | object`` and ``torch.device | str``: always these types here.
    cfg: EnvConfig  # pyright: ignore[reportIncompatibleVariableOverride]
    device: torch.device  # pyright: ignore[reportIncompatibleVariableOverride]

    def __init__(self, task: Task[Any], device: str = "cpu", seed: int = 0) -> None:
        self.task = task
        self.cfg = task.cfg  # pyright: ignore[reportIncompatibleVariableOverride]
        self.num_envs = task.cfg.num_envs
        self.device = torch.device(device)  # pyright: ignore[reportIncompatibleVariableOverride]
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.sim = create_simulation(
            task.build_model(), self.num_envs, str(self.device), task.cfg.sim, task.batched_model_fields
        )
        self.num_actions = task.num_actions
        self.step_dt = self.sim.control_dt
        # Rounded first: 11 s of 0.011 s steps is 1000.0000000000001 steps in floating point, not 1001.
        self.max_episode_length = math.ceil(round(task.cfg.episode_length_s / self.step_dt, 9))
        n, dev = self.num_envs, self.device
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_steps = torch.zeros(n, dtype=torch.long, device=dev)
        """Control steps each environment's episode has run since its reset: :attr:`episode_length_buf` less the
        start a run sets it to (a random one, or a checkpoint's); what the episode statistics count."""
        self.common_step_counter = 0
        self.actions = torch.zeros(n, self.num_actions, device=dev)
        self.last_actions = torch.zeros_like(self.actions)

        self.reward_weights = {k: w for k, w in task.reward_weights().items() if w != 0.0}
        """Weights of the reward terms computed (the non-zero ones), by name."""
        self._reward_fns = {k: self._reward_fn(k) for k in self.reward_weights}
        self._episode_sums = {k: torch.zeros(n, device=dev) for k in self.reward_weights}
        self.reward_terms: dict[str, torch.Tensor] = {}
        """Each computed term's weighted reward of the last step (already times the control step), by name; read by
        viewers. The tensors are the step's own, not copies."""
        self._episode_return = torch.zeros(n, device=dev)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        """Worlds whose episode terminates this step (a task condition or diverged physics), set after
        ``task.terminations`` and before the reward terms, which may read it; time-outs are not terminations."""
        self.diverged = torch.zeros(n, dtype=torch.bool, device=dev)
        """Worlds whose physics diverged this step (their state is garbage, or MuJoCo's reset pose), set with
        :attr:`terminated`: what a task learns from an episode's end at its reset (a curriculum) leaves them out."""

        self.task.setup(self)
        self._task_terminations = tuple(task.termination_names())
        self._task_time_outs = tuple(task.time_out_names())
        self.termination_names = (*self._task_terminations, *self._task_time_outs, *ENV_TERMINATIONS)
        """Every way an episode ends, as logged under ``Episode_Termination/``: the task's terminations, the task's
        time-outs, the episode-length limit (``time_out``) and diverged physics."""
        if len(set(self.termination_names)) != len(self.termination_names):
            raise ValueError(
                f"termination names must be unique and not the environment's own: {self.termination_names}"
            )
        self.stats = EpisodeStats(episode_stat_keys(task), dev)
        self.eval_stats = EpisodeStats(self.stats.keys, dev)
        self._privileged_starts = PRIVILEGED_SUCCESS in self.stats.keys  # the task's training-only starts
        """Statistics of the evaluation environments' episodes (see :meth:`split_evaluation`), kept apart."""
        self.first_eval_env = self.num_envs
        """Index of the first evaluation environment (:attr:`num_envs`: none)."""
        self.role = "training"
        """What the environments are for (``training`` or ``evaluation``): the name their physics is profiled under."""
        self.final_observations = False
        """Whether :meth:`step` hands out the observations episodes ended in (``extras["final_observations"]``): off-
        policy learners bootstrap time-outs from them; the returned observation of an ended episode is the next
        one's first. Off by default: it costs one more observation of every environment in each step where an episode
        ends."""
        self.from_reset = torch.ones(n, dtype=torch.bool, device=dev)
        """Whether each environment's episode began with a reset in this process: an evaluation episode counts only
        then, not when its counter was set (a random start, a restored checkpoint) over a fresh physics state."""
        self.episodes_ended = False
        """While :meth:`Task.reset` runs: whether the rows it resets ended their episodes in this step (a step's
        resets), not restarted mid-way (:meth:`reset_all`, :meth:`split_evaluation`): what a task learns from an
        episode's end (a curriculum, a failure tally) reads only the former."""
        self.observers: list[Callable[[], None]] = []
        """Called in order in every :meth:`step` once the physics advanced and the task judged it, before ended
        episodes reset: what draws a frame sees the state each episode ended in (its fall, its last pose)."""
        self._observations_checked = False
        self._steps_checked = False  # what the task's step methods return: checked in the first step
        self._steps_fresh_checked = False
        self._metric_names = tuple(task.metric_names())
        self.reset_all()

    # --- VecEnv ------------------------------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        """Observation groups of the current state."""
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply ``actions``, advance physics by one control step, reset finished environments."""
        clip = self.cfg.clip_actions
        self.last_actions.copy_(self.actions)
        self.actions.copy_(actions.clamp(-clip, clip))
        self.task.apply_actions(self, self.actions)
        with part(f"physics ({self.role})"):
            self.sim.step()
        self.episode_length_buf += 1
        self.episode_steps += 1
        self.common_step_counter += 1

        # A NaN action is one too: MuJoCo zeroes the control and goes on (a task's action filter stays NaN).
        nonfinite = self.diverged = self.sim.nonfinite_worlds() | ~torch.isfinite(self.actions).all(dim=-1)
        self.task.after_step(self)
        terms = self.task.terminations(self)
        if tuple(terms) != self._task_terminations:  # a few hundred nanoseconds, no device sync
            raise UsageError(
                f"{type(self.task).__name__}.terminations() returned {tuple(terms)}, "
                f"but termination_names() declares {self._task_terminations}"
            )
        if not self._steps_checked:
            check_flags(self.task, "terminations", terms, self.num_envs)
        terminated = nonfinite.clone()
        for flag in terms.values():
            terminated |= flag
        self.terminated = terminated
        ends = self.task.time_outs(self)
        if tuple(ends) != self._task_time_outs:
            raise UsageError(
                f"{type(self.task).__name__}.time_outs() returned {tuple(ends)}, "
                f"but time_out_names() declares {self._task_time_outs}"
            )
        if not self._steps_checked:
            check_flags(self.task, "time_outs", ends, self.num_envs)
        ends = {name: flag & ~terminated for name, flag in ends.items()}  # a termination takes precedence
        limit = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        task_time_out = torch.zeros_like(limit)
        for flag in ends.values():
            task_time_out |= flag
        time_outs = limit | task_time_out

        reward = self._reward(nonfinite)
        self._steps_checked = True
        for observer in self.observers:
            observer()
        dones = terminated | time_outs
        extras: dict[str, Any] = {"time_outs": time_outs}
        reset_ids = dones.nonzero(as_tuple=False).squeeze(-1)
        if reset_ids.numel() > 0:
            # A diverged world's end is nonfinite alone (its task flags read garbage, or MuJoCo's reset pose: a
            # "fall"), and time_out the length limit alone, not where a time-out of the task came with it.
            ended = {
                **{name: flag & ~nonfinite for name, flag in terms.items()},
                **ends,
                "time_out": limit & ~task_time_out,
            }
            extras["episodes"] = (reset_ids, self._finish_episodes(reset_ids, ended, nonfinite, time_outs))
            final = self._observations() if self.final_observations else None
            self._reset_envs(reset_ids, ended=True)
        else:
            final = None
        previous, self._obs = self._obs, self._observations()
        if not self._steps_fresh_checked:  # the step before's are alive: no tensor can have reused their memory
            check_fresh_observations(self.task, previous, self._obs)
            self._steps_fresh_checked = True
        if self.final_observations:
            extras["final_observations"] = self._obs if final is None else self._ended_rows(final, dones & ~nonfinite)
        return self._obs, reward, dones, extras

    def _ended_rows(self, final: TensorDict, ended: torch.Tensor) -> TensorDict:
        """The returned observations with the rows of ``ended`` (episodes that ended with finite physics) taken from
        ``final``. Every other row is the returned one: a diverged world's reset row (a termination is never
        bootstrapped, but a NaN times zero is still NaN, and a learner's normaliser reads next observations too),
        and a running episode's own (``final`` drew its observation noise afresh)."""

        def pick(before: torch.Tensor, returned: torch.Tensor) -> torch.Tensor:
            return torch.where(ended.view(-1, *([1] * (before.dim() - 1))), before, returned)

        return final.apply(pick, self._obs)

    def split_evaluation(self, count: int) -> None:
        """Let the episodes of the last ``count`` environments (which the trainer steps with the deterministic policy)
        accumulate in :attr:`eval_stats` instead of :attr:`stats`, those that began with a reset (:attr:`from_reset`)
        only; ``extras["episodes"]`` still lists every one. ``count == num_envs``: a simulation that only evaluates."""
        if not 0 <= count <= self.num_envs:
            raise ValueError(f"cannot set {count} of {self.num_envs} environments aside for evaluation")
        self.first_eval_env = self.num_envs - count
        if 0 < count < self.num_envs:
            # Every row's first episode began as a training one (a curriculum's commands, a motion's sampled start,
            # a cube in the hand): the evaluation rows start afresh, as rows the task now knows to judge.
            restart = torch.arange(self.first_eval_env, self.num_envs, device=self.device)
        elif count == 0:
            restart = torch.zeros(0, dtype=torch.long, device=self.device)  # training alone: its starts stand
        else:
            started = self.task.training_start(self)  # a simulation that only evaluates, built as judged
            restart = (
                started.nonzero(as_tuple=False).squeeze(-1)
                if started is not None
                else torch.zeros(0, dtype=torch.long, device=self.device)
            )
        if restart.numel() > 0:
            self._reset_envs(restart)
            self._obs = self._observations()

    # --- resets ------------------------------------------------------------------------------------------------
    def reset_all(self) -> None:
        """Reset every environment (episode counters, task state, physics)."""
        self._reset_envs(torch.arange(self.num_envs, device=self.device))
        self._obs = self._observations()

    def _reset_envs(self, env_ids: torch.Tensor, ended: bool = False) -> None:
        self.sim.reset_worlds(env_ids)
        self.episodes_ended = ended
        try:
            self.task.reset(self, env_ids)
        finally:
            self.episodes_ended = False
        if self.task.forward_after_reset:
            self.sim.forward(env_ids)
        self.episode_length_buf[env_ids] = 0
        self.episode_steps[env_ids] = 0
        self.from_reset[env_ids] = True
        self.actions[env_ids] = 0.0
        self.last_actions[env_ids] = 0.0
        self._episode_return[env_ids] = 0.0
        for buf in self._episode_sums.values():
            buf[env_ids] = 0.0

    def _finish_episodes(
        self,
        env_ids: torch.Tensor,
        ended: dict[str, torch.Tensor],
        nonfinite: torch.Tensor,
        time_outs: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Record statistics of the episodes ending in ``env_ids``; returns one value per episode and key.

        ``ended``: each termination and time-out condition by name (the episode-length limit as ``time_out``);
        ``time_outs``: all time-outs together, which is what success is judged on."""
        done_time_outs = time_outs[env_ids]
        success = self.task.success(self, env_ids, done_time_outs)
        task_metrics = self.task.episode_metrics(self, env_ids)
        # Every call: a success over every environment passes while all end at once (shapes only, no sync).
        check_episode_values(self.task, success, task_metrics, self._metric_names, len(env_ids))
        values: dict[str, torch.Tensor] = {
            "Episode/return": self._episode_return[env_ids],
            "Episode/length": self.episode_steps[env_ids].float(),  # a first episode begun part-way: its own steps
            "Episode/success": success.float(),
        }
        for name, buf in self._episode_sums.items():
            values[f"Episode_Reward/{name}"] = buf[env_ids]
        for name, flag in ended.items():
            values[f"Episode_Termination/{name}"] = flag[env_ids].float()
        values[f"Episode_Termination/{TERMINATION_NONFINITE}"] = nonfinite[env_ids].float()
        # A diverged world's task metrics are read off garbage (NaN on a GPU): its episode counts, they do not.
        metrics = {f"Metrics/{name}": m.float() for name, m in task_metrics.items()}
        finite = ~nonfinite[env_ids]
        evaluating = env_ids >= self.first_eval_env
        # Success is judged on whole episodes: one begun part-way (a random start of the counters, a restored
        # checkpoint's) that times out after a few steps proves nothing.
        whole = self.from_reset[env_ids]
        success = values.pop("Episode/success")
        self.stats.add_many(values, ~evaluating)
        started = self.task.training_start(self) if self._privileged_starts else None
        if started is None:
            self.stats.add_many({"Episode/success": success}, ~evaluating & whole)
        else:  # a privileged start's success is reported apart (evaluation rows never start so)
            privileged = started[env_ids]
            self.stats.add_many({"Episode/success": success}, ~evaluating & whole & ~privileged)
            self.stats.add_many({PRIVILEGED_SUCCESS: success}, ~evaluating & whole & privileged)
        values["Episode/success"] = success
        self.stats.add_many(metrics, ~evaluating & finite)
        if self.first_eval_env < self.num_envs:
            judged = evaluating & self.from_reset[env_ids]
            self.eval_stats.add_many(values, judged)
            self.eval_stats.add_many(metrics, judged & finite)
        return {**values, **metrics}

    # --- rewards and observations ------------------------------------------------------------------------------
    def _reward(self, nonfinite: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(self.num_envs, device=self.device)
        for name, weight in self.reward_weights.items():
            value = self._reward_fns[name](self)
            if not self._steps_checked:
                check_reward(self.task, name, value, self.num_envs)
            value = value * (weight * self.step_dt)
            # A diverged world's terms are garbage; it earns nothing for its last step.
            value = torch.where(nonfinite, 0.0, value)
            self._episode_sums[name] += value
            self.reward_terms[name] = value
            total += value
        self._episode_return += total
        return total

    def refresh_observations(self) -> TensorDict:
        """The observation groups of the current state, computed again (after something between steps changed what
        they read: a viewer's held commands), and returned by :meth:`get_observations` from now on."""
        self._obs = self._observations()
        return self._obs

    def _observations(self) -> TensorDict:
        groups = self.task.observations(self)
        if not self._observations_checked:  # once, when built
            check_observations(self.task, groups, self.num_envs)
            self._observations_checked = True
        if "critic" not in groups:  # the critic reads what the actor reads
            groups = {**groups, "critic": groups["policy"]}
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    # --- static structure --------------------------------------------------------------------------------------
    def _reward_fn(self, name: str) -> Callable[[MjEnv], torch.Tensor]:
        fn: Callable[[MjEnv], torch.Tensor] | None = getattr(self.task, f"reward_{name}", None)
        if fn is None:
            raise TypeError(f"{type(self.task).__name__} weights reward term {name!r} but has no reward_{name} method")
        return fn

    def close(self) -> None:
        """Free nothing explicitly; the simulation frees its arrays and threads with itself."""

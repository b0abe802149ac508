"""The training loop around a learner (rsl-rl-lib's PPO, or skrl's PPO, SAC or TD3), driven on any number of CPU or
GPU workers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict

from mjfleet.envs.env import MjEnv
from mjfleet.envs.episode_stats import EpisodeStats
from mjfleet.profiling import PROFILE, part
from mjfleet.rl.checkpoint.saving import CheckpointWriteError as CheckpointWriteError  # raised from here
from mjfleet.rl.checkpoint.saving import Saving
from mjfleet.rl.config import AgentConfig
from mjfleet.rl.divergence import NonFiniteTrainingError, divergence_message, nonfinite_quantity
from mjfleet.rl.evaluation.policy_check import PolicyCheck
from mjfleet.rl.evaluation.simulation import SeparateEvaluation
from mjfleet.rl.evaluation.stop_condition import StopCondition
from mjfleet.rl.evaluation.stopping import Stopping
from mjfleet.rl.evaluation.window import EvaluationWindow
from mjfleet.rl.learners.base import Learner
from mjfleet.rl.learners.registry import build_learner
from mjfleet.rl.replicas import check_replicas
from mjfleet.rl.reporting.metrics import MetricsWriter
from mjfleet.rl.reporting.progress import IterationClock
from mjfleet.rl.reporting.records import IterationRecord
from mjfleet.rl.reporting.report import IterationReporter, LearnerState
from mjfleet.runtime.context import DistributedContext
from mjfleet.runtime.stop import signal_name

logger = logging.getLogger(__name__)


StopCheck = Callable[[], int]
"""Polled after every iteration: the number of the signal that asked training to stop, or 0."""


IterationHook = Callable[["Runner", IterationRecord], None]
"""Called on every rank after each iteration, once its checkpoint (if due) is written."""

StepHook = Callable[["Runner"], None]
"""Called after every environment step of a rollout (e.g. to render a video frame)."""


class Runner(Saving, Stopping):
    """Trains one worker's replica of a learner (:mod:`mjfleet.rl.learners.base`: rsl-rl-lib's PPO, or skrl's PPO, SAC
    or TD3, as ``--agent.learner`` says); the loop, evaluation, checkpoints and logging are mjfleet's, for all of
    them.

    - One process group, made by the worker before the runner (``ctx.backend``: nccl, or gloo on the CPU and for
      workers sharing a GPU).
    - Every rank loads a resumed checkpoint, so optimizer state and learning rate stay replicated.
    - After every iteration all ranks meet in one all-reduce that carries every rank's stop request
      (:attr:`stop_check`), every rank's finiteness verdict and the episode sums and counts, so rank 0 logs the
      mean over all ranks' episodes and nobody is left waiting in a collective.
    - Every ``replica_check_interval`` iterations and at the end, ranks compare a digest of parameters and
      optimizer state and stop with :class:`~mjfleet.rl.replicas.ReplicaDivergenceError` if they differ.
    - The last ``eval_envs`` of each rank's environments act with the deterministic policy (the actor's mean,
      what ``play`` runs) and are left out of what the learner records, so it never sees their transitions; their
      episodes are the ``Eval/...`` statistics that ``--stop-when`` reads. With ``evaluation`` they are instead a
      simulation of their own, stepped several times per training step (:mod:`mjfleet.rl.evaluation.simulation`).
    - Only rank 0 writes checkpoints (atomically), TensorBoard/W&B, every iteration's record to ``progress.jsonl``
      and the console progress made from that record (a line every iteration, a block every
      :attr:`block_interval`). Checkpoints also carry every rank's RNG and episode state, the evaluation window and
      the training wall time, so a restart with the same number of workers continues where the run left off.

    Its collaborators come with the constructor: the hooks called after every iteration and every rollout step, the
    stop request and the ``--stop-when`` condition, the extra fields of every ONNX export. A worker hook, which is
    handed the built runner (:mod:`mjfleet.train.worker_hook`), may add hooks of its own to :attr:`hooks` and
    :attr:`step_hooks`.
    """

    def __init__(
        self,
        env: MjEnv,
        agent_cfg: AgentConfig,
        ctx: DistributedContext,
        run_dir: Path | None,
        replica_check_interval: int = 50,
        logged_config: dict[str, Any] | None = None,
        eval_envs: int = 0,
        evaluation: SeparateEvaluation | None = None,
        *,
        hooks: Sequence[IterationHook] = (),
        step_hooks: Sequence[StepHook] = (),
        stop_check: StopCheck | None = None,
        stop_condition: StopCondition | None = None,
        stop_when_iterations: int | None = None,
        export_info: Mapping[str, Any] | None = None,
        judge: Callable[[], SeparateEvaluation] | None = None,
    ) -> None:
        self.env = env
        self.agent_cfg = agent_cfg
        self.ctx = ctx
        self.device = ctx.device
        self.run_dir = run_dir
        self.replica_check_interval = replica_check_interval
        self.hooks: list[IterationHook] = list(hooks)
        """Called in order after every iteration (heartbeats, the records a worker returns, a worker hook's own)."""
        self.export_info: dict[str, Any] = dict(export_info or {})
        """Extra fields of every ONNX export's JSON (the worker's: the task id)."""
        self.step_hooks: list[StepHook] = list(step_hooks)
        """Called after every rollout step, with :attr:`current_learning_iteration` the last completed iteration."""
        self.stop_check = stop_check
        """Asked after each iteration on the ranks that have one whether to stop (any rank's request stops all; a
        checkpoint is written, then :meth:`learn` returns)."""
        self.stop_signal: int | None = None
        """Signal number that stopped :meth:`learn` early, or None."""
        self.stop_condition = stop_condition
        """``--stop-when``: :meth:`learn` ends (checkpoint written) once this held for :attr:`stop_when_iterations`
        iterations in a row. Every rank decides alike from the same all-reduced episode means."""
        self.stop_when_iterations = stop_when_iterations
        """Iterations in a row :attr:`stop_condition` must hold; None: :attr:`StopCondition.default_streak`."""
        self.ending = False
        """Whether the iteration whose hooks run is :meth:`learn`'s last (its count reached, a stop signal, the stop
        condition): what an iteration hook must finish, it finishes then."""
        self.condition_met_at: int | None = None
        """The iteration at which :attr:`stop_condition` ended :meth:`learn`, or None."""
        self.met_condition: StopCondition | None = None
        """The condition that ended :meth:`learn` as the run read it (the training episodes' without evaluation
        environments), or None."""
        self.current_learning_iteration = 0
        """Iterations completed, counting those of a resumed checkpoint."""
        self.last_checkpoint: Path | None = None
        """The newest checkpoint this run wrote or resumed from (the last known good state)."""
        self.restored_env_state = False
        """Whether :meth:`load` restored this rank's episode counters (then they are not re-randomised)."""
        self.previous_elapsed_s = 0.0
        """Training wall time of the run before this start (from the checkpoint :meth:`load` read)."""
        self.env_steps = 0
        """Environment steps the run has simulated over all ranks, evaluation environments included (the current-policy
        checks' episodes are not: each check logs its own count)."""
        self.eval_envs = eval_envs
        """This rank's evaluation environments: the last ones of ``env``, stepped with the deterministic policy
        (:meth:`~mjfleet.rl.config.AgentConfig.training_simulation_envs` sizes ``env`` for them)."""
        self.train_envs = env.num_envs - self.eval_envs
        """This rank's environments that the learner trains on (``--env.num-envs``)."""
        env.split_evaluation(self.eval_envs)
        self.evaluation = evaluation
        """Evaluation environments in a simulation of their own (instead of :attr:`eval_envs`), or None."""
        self.steps_per_iteration = agent_cfg.env_steps_per_iteration(
            self.train_envs, ctx.device_kind == "cuda", ctx.world_size
        )
        """Environment steps one iteration simulates over all ranks, evaluation environments included
        (:meth:`~mjfleet.rl.config.AgentConfig.env_steps_per_iteration`)."""
        build = judge or (None if evaluation is None else lambda: evaluation)
        self.policy_check = (
            PolicyCheck(build, agent_cfg.eval_confirm_episodes, ctx, self.steps_per_iteration)
            if agent_cfg.eval_confirm and build is not None
            else None
        )
        """Plays the current policy from a fresh start before a condition on the evaluation episodes stops the run
        (``--agent.eval-confirm``): in the simulation ``judge`` builds, else in :attr:`evaluation`; None where there
        is neither."""
        self.evaluates = bool(eval_envs or evaluation)
        """Whether any environment of this rank runs the deterministic policy."""
        self.eval_window = EvaluationWindow(env.stats.keys, agent_cfg.eval_episodes)
        """The most recent evaluation episodes of every rank (identical on all ranks)."""
        self._window_moved = False
        """Whether an evaluation episode ended in the last iteration (the window changed)."""
        self.stop_progress: dict[str, Any] = {"condition": "", "streak": 0, "met": False}
        """Iterations in a row the stop condition (named) has held: a continued run of the same condition goes on
        counting (checkpoints carry it, with the policy check's wait)."""
        self.learner: Learner = build_learner(env, agent_cfg, ctx, self.train_envs)
        """The algorithm: it records the training environments' steps only and learns once per iteration."""
        env.final_observations = self.learner.final_observations
        writes = ctx.is_main and run_dir is not None
        self.reporter = IterationReporter(
            run_dir if writes else None,
            MetricsWriter(run_dir, agent_cfg.logger == "wandb", agent_cfg.wandb_project, config=logged_config)
            if writes and run_dir is not None
            else None,
        )
        """Rank 0's progress lines, TensorBoard / W&B scalars and ``progress.jsonl`` records."""
        self._place = [0, 0, 0]
        """Iteration, phase (:data:`PHASES`) and rollout step: where this rank is (:meth:`position`)."""

    @property
    def writer(self) -> MetricsWriter | None:
        """Rank 0's TensorBoard / W&B writer while :meth:`learn` runs, else None."""
        return self.reporter.writer

    # --- training ----------------------------------------------------------------------------------------------
    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """Run ``num_learning_iterations`` iterations after the last completed one."""
        env, learner = self.env, self.learner
        steps = self.agent_cfg.num_steps_per_env
        if init_at_random_ep_len:
            env.episode_length_buf = torch.randint(
                0, int(env.max_episode_length), (env.num_envs,), device=env.device, generator=env.generator
            )
        # An episode whose counter was set (above, or restored from a checkpoint) over the physics state of a fresh
        # start ends early; the evaluation statistics take the episodes that run from a reset to their end, as play's.
        env.from_reset = env.episode_length_buf == 0
        obs = env.get_observations().to(self.device)
        learner.train_mode()
        if self.ctx.is_distributed:
            learner.broadcast_parameters()
        env.stats.pop()  # statistics of episodes cut by the random start do not belong to iteration 1
        env.eval_stats.pop()
        if self.evaluation is not None:
            self.evaluation.start()

        start = self.current_learning_iteration
        total = start + num_learning_iterations
        tracker = self._continue_condition()
        if self.ctx.is_main:  # from scratch too: a restart before the first checkpoint trains iteration 1 again
            self.reporter.start_at(start + 1)
        began = time.perf_counter()
        clock = IterationClock(began, start + 1, total, self.previous_elapsed_s)
        try:
            for it in range(start + 1, total + 1):
                t0 = time.perf_counter()
                place = self._place
                place[:] = [it, 0, 0]
                try:
                    with torch.inference_mode():
                        for step in range(steps):
                            place[2] = step + 1
                            with part("policy (training)"):
                                actions = self._act(obs)
                            with part("environment step (training): the task's work"):
                                obs, rewards, dones, extras = env.step(actions.to(env.device))
                            with part("storage and returns"):
                                obs, rewards, dones = (
                                    obs.to(self.device),
                                    rewards.to(self.device),
                                    dones.to(self.device),
                                )
                                self._process_env_step(obs, rewards, dones, extras)
                            if self.evaluation is not None:
                                self.evaluation.step(learner.act_deterministic, step)
                            for step_hook in self.step_hooks:
                                step_hook(self)
                        with part("storage and returns"):
                            learner.end_rollout(self._training(obs))
                    learner.synchronize()  # on a GPU, let the rollout's queued work count as collection, not learning
                    t1 = time.perf_counter()
                    learner.reset_sync()
                    place[1] = 1
                    with part("update"):
                        losses = learner.update()
                        learner.synchronize()
                    place[1] = 2
                except (RuntimeError, ValueError) as e:
                    # A diverging mini-batch leaves NaN weights that the next forward pass trips over (e.g. "normal
                    # expects all elements of std >= 0.0"); report the divergence, not the symptom.
                    problem = nonfinite_quantity({}, learner.modules())
                    if problem is None:
                        raise
                    raise NonFiniteTrainingError(self._divergence(it, f"{problem} ({type(e).__name__}: {e})")) from e
                t2 = time.perf_counter()
                self.current_learning_iteration = it
                self.env_steps += self.steps_per_iteration
                stop, episode = self._agree_after_iteration(it, losses)
                evaluation = self.eval_window.means()
                # The evaluation statistics count once the window holds enough episodes, and in an iteration only
                # where they moved: an unchanged window is no new evidence for `--stop-when-iterations`.
                judged = evaluation if self.eval_window.full and self._window_moved else {}
                met = tracker is not None and tracker.update({**episode, **judged})
                check = self.policy_check
                if met and tracker is not None and check is not None and check.applies(tracker.condition):
                    met = check.confirms(tracker, it, self.env_steps, self.learner.act_deterministic)
                if tracker is not None:
                    self.stop_progress.update(condition=str(tracker.condition), streak=tracker.streak, met=met)
                clock.tick(it, t2)
                record = IterationRecord(
                    iteration=it,
                    losses=losses,
                    episode=episode,
                    env_steps_per_s=self.steps_per_iteration / (t2 - t0),
                    collect_s=t1 - t0,
                    learn_s=t2 - t1,
                    sync_s=learner.sync_s,
                    evaluation=evaluation,
                    evaluation_episodes=self.eval_window.count,
                    evaluation_restored=self.eval_window.restored_only,
                    env_steps=self.env_steps,
                    elapsed_s=clock.elapsed_s(t2),
                    run_elapsed_s=clock.run_elapsed_s(t2),
                )
                if tracker is not None:  # from the next iteration on: this one's rate is of the steps it took
                    self._speed_up_evaluation_near(it, tracker.condition, episode, evaluation)
                last = it == total or bool(stop) or met
                if self.ctx.is_main:
                    self.reporter.report(
                        record,
                        LearnerState(learner.learning_rate, learner.action_std),
                        total=total,
                        eta_s=clock.eta_s(it),
                        tracker=tracker,
                        block=it == start + 1 or last,  # the fuller block at the last iteration, however the run ends
                        resumed=self.previous_elapsed_s > 0,
                        evaluation_window=self.eval_window.episodes,
                        ending=last,
                        task_scalars=self.env.task.iteration_scalars(self.env),
                    )
                self.ending = last
                if it % self.agent_cfg.save_interval == 0 or last:
                    self.save_checkpoint(clock.run_elapsed_s(time.perf_counter()))
                if self.ctx.is_distributed and (it % self.replica_check_interval == 0 or last):
                    agreed = check_replicas(learner, self.ctx.world_size, it)
                    if last and self.ctx.is_main:
                        logger.info(
                            "replicas identical on all %d ranks at iteration %d (digest %s)",
                            self.ctx.world_size,
                            it,
                            agreed[:16],
                        )
                for hook in self.hooks:
                    hook(self, record)
                PROFILE.end_iteration()
                # A condition met in the iteration a stop request arrived ends the run as met: its checkpoint
                # says so, and a requeue must not take it for an interrupted run to continue.
                if met and tracker is not None:
                    self.condition_met_at, self.met_condition = it, tracker.condition
                    logger.info(
                        "stop condition %s held for %d iteration%s: stopping after iteration %d (%.0f s of training)",
                        tracker.condition,
                        tracker.streak,
                        "" if tracker.streak == 1 else "s",
                        it,
                        time.perf_counter() - began,
                    )
                    break
                if stop and it < total:  # at the last iteration the run is over: finished, not stopped
                    self.stop_signal = stop
                    logger.info("stopping after iteration %d (%s)", it, signal_name(stop))
                    break
        except BaseException:
            # What the last seconds logged (the iterations before a divergence) reaches the disk all the same.
            self.reporter.close(failed=True)
            raise
        self.previous_elapsed_s = clock.run_elapsed_s(time.perf_counter())
        self.reporter.close()

    def position(self) -> tuple[tuple[int, ...], str]:
        """Where this rank is in :meth:`learn`: a key that grows along the loop, identical on every rank at the same
        place (the collectives are the same on all), and in words (read by another thread: see
        :class:`~mjfleet.runtime.watch.RankWatch`)."""
        it, phase, step = self._place
        if phase == 1:
            step = self.learner.reductions
        steps = self.agent_cfg.num_steps_per_env
        words = (
            f"collecting (step {step} of {steps})",
            f"its update (gradient all-reduce {step})",
            "after its update",
        )[phase]
        return (it, phase, step), f"iteration {it}, {words}"

    def _training(self, obs: TensorDict) -> TensorDict:
        """The training environments' rows (all of them without evaluation environments)."""
        return obs[: self.train_envs] if self.eval_envs else obs

    def _act(self, obs: TensorDict) -> torch.Tensor:
        """Sampled actions (recorded by the learner) for the training environments, the actor's mean for the
        evaluation environments: the deterministic actions that ``play`` computes from :meth:`get_inference_policy`."""
        if not self.eval_envs:
            return self.learner.act(obs)
        deterministic = self.learner.act_deterministic(obs[self.train_envs :])
        return torch.cat((self.learner.act(obs[: self.train_envs]), deterministic))

    def _process_env_step(
        self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]
    ) -> None:
        """Hand the training environments' part of a step to the learner."""
        if not self.eval_envs:
            self.learner.process_step(obs, rewards, dones, extras)
            return
        n = self.train_envs
        training = {key: extras[key][:n] for key in ("time_outs", "final_observations") if key in extras}
        self.learner.process_step(obs[:n], rewards[:n], dones[:n], training)

    def _agree_after_iteration(self, it: int, losses: dict[str, float]) -> tuple[int, dict[str, float]]:
        """The iteration's one collective: rank 0's stop request, every rank's finiteness verdict and the training and
        evaluation episodes' sums and counts, all-reduced together. Returns the stop signal (or 0) and the training
        episodes' means over all ranks; the evaluation episodes' totals go into :attr:`eval_window`.

        Raises :class:`NonFiniteTrainingError` on every rank (with the same message) before anything of this
        iteration is saved, so the last checkpoint stays the last good state.
        """
        problem = nonfinite_quantity(losses, self.learner.modules())
        stop = self.stop_check() if self.stop_check is not None else 0
        sums, counts = self.env.stats.pop()
        # In the training simulation's order: the evaluation's own may report other metrics.
        eval_sums, eval_counts = (self.evaluation.env if self.evaluation else self.env).eval_stats.pop_as(
            self.env.stats.keys
        )
        bad_ranks = [self.ctx.rank] if problem else []
        problems = {self.ctx.rank: problem}
        keys = len(sums)
        if self.ctx.is_distributed:
            world = self.ctx.world_size
            # float64 holds the signal numbers, the 0/1 flags and the sums and counts exactly. Each rank has a slot
            # for its stop request: a signal that reached any rank (a scheduler signals all) stops all together.
            flags = torch.zeros(2 * world, dtype=torch.float64, device=sums.device)
            flags[self.ctx.rank] = stop
            flags[world + self.ctx.rank] = problem is not None
            packed = torch.cat((flags, sums, counts, eval_sums, eval_counts)).to(self.device)
            dist.all_reduce(packed, op=dist.ReduceOp.SUM)
            packed = packed.cpu()
            values = packed.tolist()
            stop = next((int(v) for v in values[:world] if v), 0)
            bad_ranks = [r for r in range(world) if values[world + r]]
            sums, counts, eval_sums, eval_counts = packed[2 * world :].split(keys)
            if bad_ranks:  # Rare path: everyone is here, so one more collective is safe.
                gathered: list[str | None] = [None] * world
                dist.all_gather_object(gathered, problem)
                problems = dict(enumerate(gathered))
        if bad_ranks:
            first = bad_ranks[0]
            where = f" on rank {first}" if self.ctx.is_distributed else ""
            others = f" (and on ranks {', '.join(map(str, bad_ranks[1:]))})" if len(bad_ranks) > 1 else ""
            raise NonFiniteTrainingError(self._divergence(it, f"{problems[first]}{where}{others}"))
        if self.evaluates:
            self._window_moved = self.eval_window.add(eval_sums.tolist(), eval_counts.tolist())
        return stop, EpisodeStats.means(self.env.stats.keys, sums, counts)

    def _divergence(self, it: int, what: str) -> str:
        return divergence_message(it, what, self.last_checkpoint, self.learner.learning_rate_flag)

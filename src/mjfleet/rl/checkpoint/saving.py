"""What a :class:`~mjfleet.rl.runner.Runner` saves and loads: checkpoints with every rank's state (written through
:mod:`mjfleet.rl.checkpoint.files`, which holds the files' format), ONNX exports."""

from __future__ import annotations

import dataclasses
import errno
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.distributed as dist

from mjfleet.config_io import plain
from mjfleet.errors import FatalTrainingError, UsageError
from mjfleet.rl.checkpoint.files import checkpoint_learner, checkpoint_name, load_checkpoint, save_atomic
from mjfleet.rl.checkpoint.rank_state import capture_rank_state, restore_rank_state, restore_shared_state
from mjfleet.rl.learners.registry import learner_entry, learner_names

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.config import AgentConfig
    from mjfleet.rl.evaluation.policy_check import PolicyCheck
    from mjfleet.rl.evaluation.simulation import SeparateEvaluation
    from mjfleet.rl.evaluation.window import EvaluationWindow
    from mjfleet.rl.learners.base import ExportablePolicy, Learner
    from mjfleet.rl.reporting.report import IterationReporter
    from mjfleet.runtime.context import DistributedContext

logger = logging.getLogger("mjfleet.rl.runner")


class CheckpointWriteError(FatalTrainingError):
    """The run directory ran out of space (or quota) while writing a checkpoint."""

    repeats = False  # free space, and the run continues


class Saving:
    """The saving and loading half of the runner; the attributes below are the runner's (set in its ``__init__``)."""

    env: MjEnv
    agent_cfg: AgentConfig
    ctx: DistributedContext
    run_dir: Path | None
    evaluation: SeparateEvaluation | None
    learner: Learner
    reporter: IterationReporter
    export_info: dict[str, Any]
    current_learning_iteration: int
    last_checkpoint: Path | None
    previous_elapsed_s: float
    env_steps: int
    steps_per_iteration: int
    eval_window: EvaluationWindow
    restored_env_state: bool
    stop_progress: dict[str, Any]
    policy_check: PolicyCheck | None

    def save_checkpoint(self, elapsed_s: float | None = None) -> Path | None:
        """Rank 0 writes ``model_<iteration>.pt`` into the run directory; other ranks write nothing.

        The checkpoint holds the learner's name and state (:meth:`~mjfleet.rl.learners.base.Learner.state_dict`: models
        with their observation normalisers, optimizers), its learning rate, iteration, the run's training wall time
        (``elapsed_s``; default: that of the run before this start) and env-steps, the evaluation window, the stop
        condition's progress (its streak, the policy check's wait), and per rank the torch/NumPy/Python RNG states,
        the environment's generator, episode-length buffer and step counter, and the task's ``state_dict()``. Every
        rank must call this at the same iteration: the ranks' states are gathered first.
        """
        if self.run_dir is None:
            return None
        rank_states = [self.rank_state()]
        if self.ctx.is_distributed:
            gathered: list[dict[str, Any] | None] = [None] * self.ctx.world_size
            dist.all_gather_object(gathered, rank_states[0])
            rank_states = [s for s in gathered if s is not None]
        path = self.run_dir / checkpoint_name(self.current_learning_iteration)
        if self.ctx.is_main:
            payload = self.learner.state_dict()
            payload.update(
                {
                    "learner": self.learner.name,
                    "learner_settings": self._learner_settings(),
                    "iter": self.current_learning_iteration,
                    "infos": None,
                    "learning_rate": self.learner.learning_rate,
                    "world_size": self.ctx.world_size,
                    "rank_states": rank_states,
                    "elapsed_s": self.previous_elapsed_s if elapsed_s is None else elapsed_s,
                    "env_steps": self.env_steps,
                    "eval_window": self.eval_window.state_dict(),
                    "stop_progress": {
                        **self.stop_progress,
                        "next_check_steps": 0 if self.policy_check is None else self.policy_check.next_check_steps,
                    },
                }
            )
            try:
                save_atomic(payload, path)
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                kept = f"; {self.last_checkpoint} is intact" if self.last_checkpoint is not None else ""
                raise CheckpointWriteError(f"cannot write checkpoint {path}: {e.strerror}{kept}") from None
            uploads = [path]
            if self.agent_cfg.export_onnx:
                uploads += self.export_onnx(path.with_suffix(".onnx"))
            if self.reporter.writer is not None:
                self.reporter.writer.save_files(uploads)
        self.last_checkpoint = path
        return path if self.ctx.is_main else None

    def _learner_settings(self) -> dict[str, dict[str, Any]]:
        """The settings that build the learner's networks (``--agent.policy.*`` and its own group, e.g. SAC's action
        limit), by group: ``play`` of a checkpoint without its run's settings builds them from these."""
        group = learner_entry(self.learner.name).settings if self.learner.name in learner_names() else None
        groups = ["policy", *([group] if group else [])]
        return {name: plain(dataclasses.asdict(getattr(self.agent_cfg, name))) for name in groups}

    def export_onnx(self, path: Path) -> list[Path]:
        """Write the current policy as ONNX with its JSON description to ``path``, and in the layouts of other
        frameworks the task offers (:meth:`~mjfleet.envs.task.Task.foreign_exports`) beside it, and refresh
        ``policy.onnx``; returns the files written.

        The ``.pt`` checkpoint is the state training depends on: a failed export is logged, not fatal.
        """
        from mjfleet.rl.checkpoint.onnx import (
            LATEST_NAME,
            export_foreign,
            export_policy,
            metadata_path,
            policy_metadata,
            publish_latest,
        )

        policy = self.learner.policy()
        try:
            meta = {
                **self.export_info,
                "learner": self.learner.name,
                **policy_metadata(self.env, policy, self.current_learning_iteration),
            }
            export_policy(policy, path, meta, self.env.task.export_tables())
        except Exception as e:
            logger.warning("could not export %s: %s: %s", path, type(e).__name__, e)
            return []
        written, layouts = [path, metadata_path(path)], []
        for foreign in self.env.task.foreign_exports(self.env):
            try:  # mjfleet's own export stands without it
                written.append(export_foreign(policy, path, foreign))
                layouts.append(foreign.name)
            except Exception as e:
                logger.warning("could not export %s in %s's layout: %s: %s", path, foreign.name, type(e).__name__, e)
        try:
            publish_latest(path, tuple(layouts))
        except Exception as e:
            logger.warning("could not copy %s to %s: %s: %s", path, LATEST_NAME, type(e).__name__, e)
        return written

    def load(self, path: str | Path, *, evaluate: bool = False, another_run: bool = False) -> None:
        """Load a checkpoint on this rank (every rank calls this on resume).

        ``evaluate``: the environment takes only the step counter and task state (curriculum levels); its random
        streams stay those of this process's seed instead of continuing the training run's.
        ``another_run``: the checkpoint is another run's (:attr:`~mjfleet.runs.start.StartPoint.another_run`): the
        learning rates stay those of this run's settings, and its evaluation window and stop streak are not taken
        (that run's episodes, perhaps of other settings, would stop this one before it trained).
        """
        # Read to host memory: the models copy their tensors onto their own device, and Adam keeps its ``step``
        # counters where they were loaded; on a GPU they would cost a host sync per parameter tensor and step.
        data = load_checkpoint(Path(path), map_location="cpu")
        saved = checkpoint_learner(data)
        if saved != self.learner.name:
            raise UsageError(
                f"checkpoint {path} was trained by {saved}, this run's learner is {self.learner.name}"
                f" (--agent.learner {saved} takes it)"
            )
        configured = [[g["lr"] for g in o.param_groups] for o in self.learner.optimizers()]
        try:
            self.learner.load_state_dict(data)
        except RuntimeError as e:  # torch's "size mismatch for <tensor>: ..." lines: networks of another task
            lines = [line.strip() for line in str(e).splitlines()]
            mismatch = next((line for line in lines if "size mismatch" in line), None)
            if mismatch is not None:
                raise UsageError(
                    f"checkpoint {path}: its networks do not fit this task's observations and actions ({mismatch})"
                ) from None
            keys = next((line for line in lines if line.startswith(("Missing key(s)", "Unexpected key(s)"))), None)
            if keys is None:
                raise
            # Other layers than this run's networks have (an edited file, another network shape, another library).
            words = keys if len(keys) <= 200 else keys[:197] + "..."
            raise UsageError(f"checkpoint {path}: its networks are not this run's ({words})") from None
        if not evaluate and (notice := self.learner.continued_notice()):
            logger.info("%s", notice)
        if another_run and configured:
            saved_rate = self.learner.learning_rate
            self.learner.set_learning_rates(configured)
            if saved_rate != self.learner.learning_rate:
                logger.info(
                    "learning rate %.2e from %s: a new run from the checkpoint, whose rate was %.2e",
                    self.learner.learning_rate,
                    self.learner.learning_rate_flag,
                    saved_rate,
                )
        self.current_learning_iteration = int(data["iter"])
        self.previous_elapsed_s = float(data.get("elapsed_s", 0.0))
        # A checkpoint from before env-steps were saved: as many per iteration as this run takes.
        self.env_steps = int(data.get("env_steps", self.current_learning_iteration * self.steps_per_iteration))
        if not another_run:
            self.eval_window.load_state_dict(data.get("eval_window"))
        progress = None if another_run else data.get("stop_progress")
        if isinstance(progress, dict):
            met = progress.get("met")  # absent from checkpoints written before it was saved
            self.stop_progress = {
                "condition": str(progress.get("condition", "")),
                "streak": int(progress["streak"]),
                "met": None if met is None else bool(met),
                "near": bool(progress.get("near", False)),
            }
            if self.policy_check is not None:
                self.policy_check.next_check_steps = int(progress.get("next_check_steps", 0))
        if evaluate:
            restore_shared_state(self.env, data.get("rank_states"))
            self.restored_env_state = False
        else:
            states = data.get("rank_states")
            self.restored_env_state = restore_rank_state(
                self.env, states, self.ctx.rank, self.ctx.world_size, self._evaluation_env()
            )
        self.last_checkpoint = Path(path)

    def get_inference_policy(self, device: str | None = None) -> ExportablePolicy:
        """The actor in evaluation mode on ``device``; called with observations it returns deterministic actions."""
        self.learner.eval_mode()
        policy = self.learner.policy()
        policy.to(device)
        return policy

    def rank_state(self) -> dict[str, Any]:
        """This rank's RNG and episode state (see :mod:`mjfleet.rl.checkpoint.rank_state`)."""
        return capture_rank_state(self.env, self.ctx.rank, self._evaluation_env())

    def _evaluation_env(self) -> MjEnv | None:
        """The evaluation environments' own simulation, or None where they are part of :attr:`env` (or absent)."""
        return None if self.evaluation is None else self.evaluation.env

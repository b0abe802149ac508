"""What rank 0 says about each iteration: the progress line or block on the console, TensorBoard / W&B scalars and
the record appended to ``progress.jsonl``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from mjfleet.rl.evaluation.stop_condition import StopConditionTracker
from mjfleet.rl.reporting.metrics import MetricsWriter
from mjfleet.rl.reporting.progress import Progress, progress_block, progress_line
from mjfleet.rl.reporting.records import PROGRESS_FILE, IterationRecord, append_progress

logger = logging.getLogger("mjfleet.rl.runner")  # the loop's lines, under one name with its other messages


@dataclass
class LearnerState:
    """What the learner reports beside the record: its current learning rate and action spread."""

    learning_rate: float
    action_std: float


class IterationReporter:
    """Rank 0's reports of a run; ``writer`` is None on other ranks and in runs that write nothing."""

    def __init__(self, run_dir: Path | None, writer: MetricsWriter | None) -> None:
        self.run_dir = run_dir
        self.writer = writer
        """TensorBoard / W&B, or None."""
        self.writes_progress = run_dir is not None
        """Whether each record goes to ``<run_dir>/progress.jsonl``
        (:data:`~mjfleet.rl.reporting.records.PROGRESS_FILE`)."""
        self.block_interval = 25
        """The fuller progress block every this many iterations (and at the first and last)."""
        self._last_episode: dict[str, float] = {}

    def report(
        self,
        r: IterationRecord,
        learner: LearnerState,
        *,
        total: int,
        eta_s: float | None,
        tracker: StopConditionTracker | None,
        block: bool,
        resumed: bool,
        evaluation_window: int,
        ending: bool = False,
        task_scalars: dict[str, float] | None = None,
    ) -> None:
        """Say iteration ``r`` of ``total``: ``block`` asks for the fuller block, ``resumed`` for the run's whole
        elapsed time beside this start's, ``ending`` that it is this start's last iteration; ``task_scalars`` (the
        task's :meth:`~mjfleet.envs.task.Task.iteration_scalars`) go to the metrics as ``Task/<name>``."""
        self._write_progress(r)
        scalars = {f"Loss/{k}": v for k, v in r.losses.items()}
        scalars["Loss/learning_rate"] = learner.learning_rate
        scalars["Policy/mean_std"] = learner.action_std
        scalars.update(
            {
                "Perf/env_steps_per_s": r.env_steps_per_s,
                "Perf/collection_time": r.collect_s,
                "Perf/learning_time": r.learn_s,
                "Perf/gradient_sync_time": r.sync_s,
                "Perf/total_env_steps": float(r.env_steps),
                "Perf/run_elapsed_s": r.run_elapsed_s,
            }
        )
        scalars.update(r.episode)
        if "Episode/return" in r.episode:
            scalars["Train/mean_reward"] = r.episode["Episode/return"]
            scalars["Train/mean_episode_length"] = r.episode["Episode/length"]
        if r.evaluation:
            scalars.update(r.evaluation)
            scalars["Eval/episodes"] = float(r.evaluation_episodes)
        scalars.update({f"Task/{name}": value for name, value in (task_scalars or {}).items()})
        if self.writer is not None:
            self.writer.add_scalars(scalars, r.iteration)
        if r.episode:  # an iteration in which no episode ended shows the previous iteration's means, all of them
            self._last_episode = dict(r.episode)
        stop_when = None
        if tracker is not None:
            stop_when = f"{tracker.condition} ({tracker.iterations} iterations in a row)"
        progress = Progress(
            iteration=r.iteration,
            final=total,
            elapsed_s=r.elapsed_s,
            run_elapsed_s=r.run_elapsed_s if resumed else None,
            eta_s=eta_s,
            env_steps=r.env_steps,
            env_steps_per_s=r.env_steps_per_s,
            collect_s=r.collect_s,
            learn_s=r.learn_s,
            episode=self._last_episode,
            evaluation=r.evaluation,
            evaluation_episodes=r.evaluation_episodes,
            evaluation_restored=r.evaluation_restored,
            evaluation_window=evaluation_window,
            ending=ending,
            stop_when=stop_when,
            losses=r.losses,
            learning_rate=learner.learning_rate,
            action_std=learner.action_std,
        )
        if block or r.iteration % self.block_interval == 0:
            logger.info("%s", progress_block(progress))
        else:
            logger.info("%s", progress_line(progress))

    def start_at(self, iteration: int) -> None:
        """Training (re)starts at ``iteration``: what an earlier start of the run logged from there on is superseded."""
        if self.writer is not None:
            self.writer.start_at(iteration)

    def close(self, failed: bool = False) -> None:
        """Flush and close the metric sinks (``failed``: training ended with an error)."""
        if self.writer is not None:
            self.writer.close(failed)
            self.writer = None

    def _write_progress(self, record: IterationRecord) -> None:
        """Append ``record`` to ``progress.jsonl``; a file that cannot be written (a full disk) is said once and
        left: the checkpoints are what the run needs."""
        if not self.writes_progress or self.run_dir is None:
            return
        try:
            append_progress(self.run_dir, record)
        except OSError as e:
            self.writes_progress = False
            logger.warning(
                "could not write %s (%s); this start writes no more progress records",
                self.run_dir / PROGRESS_FILE,
                e.strerror or e,
            )

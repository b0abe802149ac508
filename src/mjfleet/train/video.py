"""Clips of the policy while it trains (``--video-interval N``): rank 0 renders environment 0 of its own rollout.

Rendering the training rollout rather than a separate evaluation environment costs nothing when no clip is due,
writes no simulation state and draws no random numbers, and shows the policy as it acts during training (sampled
actions).
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mjfleet.render.video import WorldVideo
    from mjfleet.rl.reporting.records import IterationRecord
    from mjfleet.rl.runner import Runner

logger = logging.getLogger(__name__)

TAG = "Video/train"
"""Tag of the clips in TensorBoard and W&B."""


def clip_path(run_dir: Path, iteration: int) -> Path:
    """Where the clip started in iteration ``iteration`` is written."""
    return run_dir / "videos" / f"iter_{iteration}.mp4"


class TrainingVideo:
    """Starts a clip at the first rollout step of every iteration divisible by ``interval`` and writes it once it
    holds ``length`` frames (or when the run's last iteration ends, whichever comes first: its count reached, a
    stop signal or the stop condition).

    Built before the runner, which is given :meth:`on_iteration` as an iteration hook; :meth:`attach` then makes the
    runner's environment call :meth:`on_step` in each of its steps before ended episodes reset, so a clip shows the
    state each episode ended in.
    """

    def __init__(
        self,
        run_dir: Path,
        interval: int,
        length: int,
        camera: str | None = None,
        width: int = 320,
        height: int = 240,
    ) -> None:
        self.run_dir = run_dir
        self.interval = interval
        """Iterations between clips; 0 once rendering failed (no more clips)."""
        self.length = length
        self.camera = camera
        self.width, self.height = width, height
        self.written: list[Path] = []
        """Clips written so far."""
        self._recorder: WorldVideo | None = None
        self._started_at = 0
        self._collecting = 0
        """The iteration of the last step seen: a clip opens only at the first step of its iteration."""

    def attach(self, runner: Runner) -> None:
        """Observe ``runner``'s environment (:attr:`~mjfleet.envs.env.MjEnv.observers`)."""
        runner.env.observers.append(partial(self.on_step, runner))

    def on_step(self, runner: Runner) -> None:
        """Capture a frame while a clip is open; open one at the first step of a due iteration."""
        iteration = runner.current_learning_iteration + 1  # the one being collected
        first_step, self._collecting = iteration != self._collecting, iteration
        if self._recorder is None:
            # A clip longer than a rollout that closed mid-iteration waits for the next due iteration's first step.
            if not first_step or self.interval == 0 or iteration % self.interval != 0:
                return
            try:
                from mjfleet.render.video import WorldVideo

                env = runner.env
                ghost = partial(env.task.ghost_qpos, env)
                markers = partial(env.task.video_markers, env)
                self._recorder = WorldVideo(
                    env.sim, 0, self.camera, self.height, self.width, ghost=ghost, markers=markers
                )
            except Exception as e:  # no OpenGL here (e.g. MUJOCO_GL unusable): train on without videos
                logger.warning("training videos disabled: cannot render (%s: %s)", type(e).__name__, e)
                self.interval = 0
                return
            self._started_at = iteration
        self._recorder.capture()
        if len(self._recorder.frames) >= self.length:
            self._finish(runner)

    def on_iteration(self, runner: Runner, record: IterationRecord) -> None:
        """Write an open clip at the end of the run, so it is not lost."""
        if self._recorder is not None and runner.ending:
            self._finish(runner)

    def _finish(self, runner: Runner) -> None:
        recorder, self._recorder = self._recorder, None
        assert recorder is not None
        fps = 1.0 / runner.env.step_dt
        try:
            path = recorder.write(clip_path(self.run_dir, self._started_at), fps=fps)
            if runner.writer is not None:
                runner.writer.add_video(TAG, path, recorder.frames, fps, self._started_at)
            self.written.append(path)
        except Exception as e:  # a clip is not worth a training run (e.g. a full disk): say so and go on
            logger.warning("could not write the clip of iteration %d: %s: %s", self._started_at, type(e).__name__, e)
        finally:
            recorder.close()

"""`--video-interval N`: rank 0 records clips of its rollout into the run directory and TensorBoard."""

from __future__ import annotations

from pathlib import Path

import imageio.v2 as imageio
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mjfleet.errors import UsageError
from mjfleet.runtime.context import DistributedContext
from mjfleet.train.config import validate
from mjfleet.train.video import TAG
from mjfleet.train.worker import WorkerResult, train_worker

from .helpers import make_run_dir, small_train_config


def _train_with_clips(tmp_path: Path, **overrides: object) -> tuple[Path, WorkerResult]:
    """A run of 8 environments x 8 steps recording 64x48 clips (``overrides``: iterations, clip settings, ...)."""
    cfg = small_train_config(num_envs=8, steps=8, log_root=tmp_path, video_width=64, video_height=48, **overrides)
    run_dir = make_run_dir(tmp_path, "video")
    return run_dir, train_worker(cfg, run_dir, DistributedContext(device="cpu"))


@pytest.mark.slow
def test_clips_every_n_iterations(tmp_path: Path) -> None:
    run_dir, result = _train_with_clips(tmp_path, iterations=3, video_interval=2, video_length=12)
    assert result.final_iteration == 3
    # Iteration 2 opens a clip; its 12 frames span the rollouts of iterations 2 and 3 (8 steps each).
    assert sorted(p.name for p in (run_dir / "videos").iterdir()) == ["iter_2.mp4"]
    frames = imageio.mimread(run_dir / "videos" / "iter_2.mp4")
    assert len(frames) == 12
    assert frames[0].shape == (48, 64, 3)
    events = EventAccumulator(str(run_dir), size_guidance={"images": 0})
    events.Reload()
    (image,) = events.Images(TAG)
    assert image.step == 2
    assert image.encoded_image_string.startswith(b"GIF8")


@pytest.mark.slow
def test_a_run_the_stop_condition_ends_writes_its_open_clip(tmp_path: Path) -> None:
    run_dir, result = _train_with_clips(
        tmp_path, iterations=5, video_interval=1, video_length=1000, stop_when="length>=0", stop_when_iterations=1
    )
    stopped = result.final_iteration
    assert stopped < 5 and result.condition_met_at == stopped  # before the run's count of iterations
    assert len(imageio.mimread(run_dir / "videos" / "iter_1.mp4")) == 8 * stopped  # every step since it opened


def test_video_settings_are_checked() -> None:
    with pytest.raises(UsageError, match="--video-interval"):
        validate(small_train_config(video_interval=-1))
    with pytest.raises(UsageError, match="--video-length"):
        validate(small_train_config(video_interval=5, video_length=0))
    with pytest.raises(UsageError, match="must be even"):
        validate(small_train_config(video_interval=5, video_width=321))


@pytest.mark.slow
def test_a_clip_opens_only_at_the_first_step_of_a_due_iteration(tmp_path: Path) -> None:
    # 12-frame clips of 8-step rollouts, every iteration: the first closes mid-iteration 2, and the next waits for
    # iteration 3's first step (it opened at step 5 of iteration 2).
    run_dir, _ = _train_with_clips(tmp_path, iterations=4, video_interval=1, video_length=12)
    assert sorted(p.name for p in (run_dir / "videos").iterdir()) == ["iter_1.mp4", "iter_3.mp4"]

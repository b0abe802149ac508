"""Video files: written whole or not at all (the encoder's output is read back before it replaces the file), and each
frame drawn with its world's own model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.render import video


def _recorder(frames: int) -> video.WorldVideo:
    recorder = video.WorldVideo.__new__(video.WorldVideo)  # frames only: no simulation, no GL context
    rng = np.random.default_rng(0)
    recorder.frames = [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(frames)]
    return recorder


def test_a_clip_is_written_and_read_back(tmp_path: Path) -> None:
    path = _recorder(30).write(tmp_path / "clip.mp4", fps=15.0)
    assert path == tmp_path / "clip.mp4" and path.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]


def test_a_file_the_encoder_left_unreadable_is_an_error_and_the_previous_one_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous = _recorder(10).write(tmp_path / "play.mp4", fps=15.0).read_bytes()

    encoder = video.imageio.get_writer

    def truncating(path: Path, **kwargs: object) -> object:  # as a full disk leaves the file: no index
        writer = encoder(path, **kwargs)
        close = writer.close

        def close_truncated() -> None:
            close()
            Path(path).write_bytes(Path(path).read_bytes()[: len(previous) // 2])

        writer.close = close_truncated
        return writer

    monkeypatch.setattr(video.imageio, "get_writer", truncating)
    with pytest.raises(OSError, match="could not be written whole"):
        _recorder(30).write(tmp_path / "play.mp4", fps=15.0)
    assert (tmp_path / "play.mp4").read_bytes() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["play.mp4"]


def world_one_randomized() -> MjEnv:
    """Two Go1 worlds, the second with every geom's friction at 0.123 (a batched field, as a randomization sets)."""
    from .test_locomotion import make_loco_env

    env = make_loco_env("go1-velocity-flat", num_envs=2)
    env.sim.model_field("geom_friction")[1] = 0.123
    env.sim.model_fields_changed(torch.tensor([1]))
    return env


def test_a_frame_draws_its_worlds_own_randomized_model() -> None:
    # The lift's cube size (and any batched field) differs per world: the renderer copies the world's values, and
    # the simulation's shared model is left as it was.
    env = world_one_randomized()
    shared = env.sim.mj_model.geom_friction.copy()
    recorder = video.WorldVideo(env.sim, 1, None, 48, 64)
    try:
        recorder.capture()
    finally:
        recorder.close()
    assert np.allclose(recorder._model.geom_friction, 0.123)
    assert np.array_equal(env.sim.mj_model.geom_friction, shared) and not np.allclose(shared, 0.123)
    assert len(recorder.frames) == 1


def test_a_streamed_video_holds_no_frames_and_is_put_in_place_when_finished(tmp_path: Path) -> None:
    # play --video encodes each frame as it comes: 20 episodes of 1,000 steps held in memory were gigabytes.
    from .test_locomotion import make_loco_env

    env = make_loco_env("go1-velocity-flat", num_envs=1)
    target = tmp_path / "videos" / "play.mp4"
    sink = video.VideoFile(target, fps=50.0)
    recorder = video.WorldVideo(env.sim, 0, None, 48, 64, sink=sink)
    try:
        for _ in range(25):
            env.step(torch.zeros(1, env.num_actions))
            recorder.capture()
    finally:
        recorder.close()
    assert recorder.frames == [] and sink.frames == 25 and not target.exists()  # in place only when finished
    assert sink.finish() == target and sorted(p.name for p in target.parent.iterdir()) == ["play.mp4"]
    dropped = video.VideoFile(tmp_path / "videos" / "dropped.mp4", fps=50.0)
    dropped.append(np.zeros((48, 64, 3), dtype=np.uint8))
    dropped.abort()  # the episodes did not finish: nothing of it stays
    assert sorted(p.name for p in target.parent.iterdir()) == ["play.mp4"]


def test_a_folder_that_cannot_be_written_is_an_error_before_any_frame(tmp_path: Path) -> None:
    """imageio starts ffmpeg, which opens the file, at the first frame: an unwritable folder (another user's run's
    ``videos/``) was a broken pipe's traceback in the middle of play's episodes."""
    taken = tmp_path / "videos"
    taken.mkdir()
    (taken / ".play.partial.mp4").mkdir()  # stands in for a file this user may not create (root writes anywhere)
    with pytest.raises(OSError):
        video.VideoFile(taken / "play.mp4", fps=50.0)


def test_an_encoder_that_fails_mid_way_drops_the_frames_and_finish_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = video.VideoFile(tmp_path / "play.mp4", fps=50.0)
    frame = np.zeros((48, 64, 3), dtype=np.uint8)
    sink.append(frame)

    def broken(_: np.ndarray) -> None:
        raise OSError(32, "Broken pipe")

    monkeypatch.setattr(sink._writer, "append_data", broken)
    sink.append(frame)  # no exception in the middle of the episodes
    sink.append(frame)
    assert sink.frames == 1
    with pytest.raises(OSError, match=r"could not be written whole.*Broken pipe"):
        sink.finish()
    assert sorted(p.name for p in tmp_path.iterdir()) == []

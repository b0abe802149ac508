"""Training on ``cuda:0``: in-process, one launched worker, two workers on one GPU; playing and rendering the result."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mjfleet.cli import play
from mjfleet.rl.checkpoint.files import list_checkpoints
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.train import run

from ..helpers import run_main, small_train_config
from ..instruments import instrument

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def _check_trained(results: list[WorkerResult], iterations: int) -> None:
    for r in results:
        assert r.device == "cuda:0", r.device
        assert r.final_iteration == iterations
        assert r.records and all(rec.env_steps_per_s > 0 for rec in r.records)
        assert all(math.isfinite(v) for rec in r.records for v in rec.losses.values()), r.records[-1].losses


@pytest.mark.parametrize("task_id", ["cartpole-balance", "go1-velocity-flat"])
def test_trains_in_process_on_cuda(task_id: str, tmp_path: Path) -> None:
    cfg = small_train_config(task_id, num_envs=512, iterations=3, steps=16, log_root=tmp_path, gpu_ids=(0,))
    results = run(cfg)
    assert len(results) == 1
    _check_trained(results, 3)
    assert results[0].last_checkpoint is not None and Path(results[0].last_checkpoint).is_file()


@pytest.fixture(scope="module")
def launched_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[WorkerResult]]:
    """One GPU worker started by torchrunx (``--launcher torchrunx --gpu-ids 0``); returns its run directory."""
    log_root = tmp_path_factory.mktemp("logs")
    cfg = small_train_config(
        num_envs=512, iterations=4, steps=16, log_root=log_root, gpu_ids=(0,), launcher="torchrunx"
    )
    results = run(cfg)
    runs = [p for p in log_root.glob("*/*") if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0], results


def test_one_launched_gpu_worker_trains_and_its_checkpoint_plays_on_the_cpu(
    launched_run: tuple[Path, list[WorkerResult]],
) -> None:
    run_dir, results = launched_run
    assert len(results) == 1
    _check_trained(results, 4)
    assert [i for i, _ in list_checkpoints(run_dir)] == [1, 2, 3, 4]
    argv = ["cartpole-balance", "--checkpoint", str(run_dir), "--gpu-ids", "None", "--num-episodes", "4"]
    code, out, err = run_main(play.main, [*argv, "--env.num-envs", "4"])
    assert code == 0, err
    summary = json.loads(out)
    assert summary["episodes"] >= 4 and summary["checkpoint"].endswith("model_4.pt"), summary


def test_play_video_renders_on_the_gpu_with_egl(launched_run: tuple[Path, list[WorkerResult]], tmp_path: Path) -> None:
    import imageio.v3 as iio

    run_dir, _ = launched_run
    video = tmp_path / "play.mp4"
    argv = ["cartpole-balance", "--checkpoint", str(run_dir), "--gpu-ids", "0", "--num-episodes", "2"]
    argv += ["--env.num-envs", "2", "--video", "--video-path", str(video)]
    env = {**os.environ, "MUJOCO_GL": "egl", "MUJOCO_EGL_DEVICE_ID": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "mjfleet.cli.play", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Frames, not bytes: a 4-iteration policy drops the pole in ~30 steps, which H.264 packs into ~8 kB.
    assert video.is_file() and sum(1 for _ in iio.imiter(video)) >= 10
    frame = iio.imread(video, index=0)
    assert frame.shape[:2] == (480, 640) and frame.std() > 1.0, "the first frame is blank"


def test_two_workers_on_one_gpu_train_and_stay_replicated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    instrument(monkeypatch, probes=True)  # digests in WorkerResult.extras
    cfg = small_train_config(num_envs=512, iterations=4, steps=16, log_root=tmp_path, gpu_ids=(0,), workers_per_gpu=2)
    cfg.replica_check_interval = 1  # the run itself stops on any divergence, every iteration
    results = run(cfg)
    assert [r.rank for r in results] == [0, 1]
    _check_trained(results, 4)
    probes = [r.extras for r in results]
    assert probes[0]["replica_digest"] == probes[1]["replica_digest"]  # parameters + optimizer, bit-identical
    assert probes[0]["first_rollout_digest"] != probes[1]["first_rollout_digest"]  # own seeds, own worlds

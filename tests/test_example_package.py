"""The example package's robot through the commands, like a built-in task: ``train`` and ``play`` in this process,
and ``train --cpu-workers 2``, whose worker processes find the robot through the package's entry point too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mjfleet.cli import play, train
from mjfleet.rl.checkpoint.files import list_checkpoints

from .helpers import run_main

pytestmark = pytest.mark.slow

TASK = "trotter-velocity-flat"
SHORT = ["--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8", "--agent.max-iterations", "2"]
"""Two iterations of 32 environments x 8 steps."""


def _only_run(log_root: Path) -> Path:
    (run_dir,) = (log_root / "trotter_velocity_flat").iterdir()  # the task's own experiment folder
    return run_dir


def test_train_then_play_the_example_robot(tmp_path: Path) -> None:
    code, _, err = run_main(train.main, [TASK, *SHORT, "--log-root", str(tmp_path)])
    assert code == 0, err
    run_dir = _only_run(tmp_path)
    assert [i for i, _ in list_checkpoints(run_dir)] == [2]
    # play finds the task's newest run by itself; 1 s episodes keep the evaluation short.
    argv = [
        TASK,
        "--gpu-ids",
        "None",
        "--num-episodes",
        "4",
        "--env.episode-length-s",
        "1",
        "--log-root",
        str(tmp_path),
    ]
    code, out, err = run_main(play.main, argv)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["task"] == TASK and Path(summary["checkpoint"]).parent == run_dir
    assert 0.0 <= summary["success_rate"] <= 1.0 and summary["mean_length"] > 0


def test_two_cpu_workers_train_the_example_robot(tmp_path: Path) -> None:
    code, _, err = run_main(train.main, [TASK, *SHORT, "--cpu-workers", "2", "--log-root", str(tmp_path)])
    assert code == 0, err
    run_dir = _only_run(tmp_path)
    assert [i for i, _ in list_checkpoints(run_dir)] == [2]
    logs = sorted(p.name for p in (run_dir / "torchrunx").rglob("*.log"))
    assert "localhost[0].log" in logs and "localhost[1].log" in logs

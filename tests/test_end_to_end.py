"""The README's promise, for real: default `train cartpole-balance`, then `play` balances the pole.

(Its wall time is a benchmark figure, recorded in docs/performance.md, not asserted here.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _cli(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MUJOCO_GL": "egl", "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, "-m", f"mjfleet.cli.{module}", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_default_training_balances_then_play_reports_success(tmp_path: Path) -> None:
    train = _cli("train", "cartpole-balance", "--gpu-ids", "None", cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-2000:]
    runs = list((tmp_path / "logs" / "rsl_rl" / "cartpole_balance").iterdir())
    assert len(runs) == 1

    play = _cli("play", "cartpole-balance", "--gpu-ids", "None", "--num-episodes", "100", "--video", cwd=tmp_path)
    assert play.returncode == 0, play.stderr[-2000:]
    summary = json.loads(play.stdout.strip().splitlines()[-1])
    assert summary["episodes"] == 100
    assert summary["success_rate"] >= 0.95, summary
    video = Path(tmp_path / summary["video"])
    assert video.is_file() and video.stat().st_size > 10_000

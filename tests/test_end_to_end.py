"""The README's promise, for real: `train cartpole-balance` at its defaults to the stop condition the docs show,
then `play` balances the pole.

Both commands run their console entry points in this process (a fresh interpreter would only add ~15 s of
imports here; tests/test_cli.py runs the installed console scripts). Its wall time is a benchmark figure,
recorded in docs/performance.md, not asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mjfleet.cli import play, train

from .helpers import run_main

pytestmark = pytest.mark.slow


def test_training_to_the_stop_then_play_reports_success(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default log root is ./logs
    monkeypatch.setenv("WANDB_MODE", "offline")
    # Every default, stopped by the deterministic policy's success as the what-to-expect table's command is: a third
    # of the 80 iterations, and the stop is checked on fresh episodes of the current policy before it is taken.
    code, _, err = run_main(train.main, ["cartpole-balance", "--gpu-ids", "None", "--stop-when", "success>=0.95"])
    assert code == 0, err[-2000:]
    assert "stop condition" in err, err[-2000:]
    runs = list((tmp_path / "logs" / "rsl_rl" / "cartpole_balance").iterdir())
    assert len(runs) == 1

    # A small video: world 0 is filmed through all 100 episodes, and the frames' size is not what is tested.
    argv = ["cartpole-balance", "--gpu-ids", "None", "--num-episodes", "100", "--video"]
    argv += ["--video-width", "160", "--video-height", "120"]
    code, out, err = run_main(play.main, argv)
    assert code == 0, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["episodes"] == 100
    assert summary["success_rate"] >= 0.95, summary
    video = Path(tmp_path / summary["video"])
    assert video.is_file() and video.stat().st_size > 5_000

"""The last lines of a run: how it ended, the wall time, what it trained, where it is, the ``play`` command that shows
it and, where it was stopped, the command that finishes it. Real ``train`` commands in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from mjfleet.cli import train
from mjfleet.train.ending import RunEnd, ending_lines

from .helpers import run_main
from .instruments import instrument

TINY = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8"]


def _train(argv: list[str], log_root: Path) -> tuple[int, str, Path]:
    code, _, err = run_main(train.main, [*TINY, *argv, "--log-root", str(log_root)])
    (run_dir,) = log_root.glob("*/*")
    return code, " ".join(err.split()), run_dir


def test_a_finished_run_says_where_it_is_and_how_to_watch_it(tmp_path: Path) -> None:
    code, said, run_dir = _train(["--agent.max-iterations", "2"], tmp_path)
    assert code == 0, said
    assert "finished at iteration 2 of 2 (2 iterations, 512 env-steps in " in said
    assert f"run directory: {run_dir}" in said
    assert f"checkpoint: {run_dir / 'model_2.pt'} (ONNX: {run_dir / 'model_2.onnx'})" in said
    assert f"watch it: play cartpole-balance --checkpoint {run_dir / 'model_2.pt'}" in said
    assert "finish it" not in said


def test_a_met_condition_says_so(tmp_path: Path) -> None:
    # Without evaluation environments the condition reads the training episodes, which end in every iteration.
    argv = ["--agent.max-iterations", "30", "--stop-when", "length>=1", "--stop-when-iterations", "2"]
    argv += ["--agent.eval-envs", "0"]
    code, said, run_dir = _train(argv, tmp_path)
    assert code == 0, said
    assert "finished at iteration 2 of 30: --stop-when Episode/length >= 1 held (2 iterations" in said
    assert f"watch it: play cartpole-balance --checkpoint {run_dir / 'model_2.pt'}" in said


def test_a_stopped_run_says_how_to_finish_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    instrument(monkeypatch, fault="sigterm@0:1")
    code, said, run_dir = _train(["--agent.max-iterations", "40", "--agent.save-interval", "100"], tmp_path)
    assert code == 143, said
    assert "stopped by SIGTERM at iteration 2 of 40" in said
    assert f"finish it: train cartpole-balance --finish {run_dir} (continues in place to iteration 40)" in said


def test_ending_lines_without_a_run_directory_or_checkpoint(tmp_path: Path) -> None:
    end = RunEnd("failed", "cartpole-balance", None, 0, 10, None, 256, 3.25, "boom")
    assert ending_lines(end) == ["failed: boom (0 iterations, 0 env-steps in 0:03 from the command)"]
    empty = RunEnd("interrupted", "cartpole-balance", tmp_path, 0, 10, None, 256, 75, "SIGINT", finishable=True)
    assert ending_lines(empty)[1:] == [
        f"run directory: {tmp_path}",
        "no checkpoint was written",
        f"finish it: train cartpole-balance --finish {tmp_path} (continues in place to iteration 10)",
    ]

"""The last lines of a run: how it ended, the wall time, what it trained, where it is, the ``play`` command that shows
it and, where it was stopped, the command that finishes it. Real ``train`` commands in this process."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mjfleet.cli import train
from mjfleet.runs.ending import RunEnd, ending_lines

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
    # 32 training environments and 2 evaluating, stepped 4 times (8 evaluation environments' worth), x 8 steps x 2
    assert "finished at iteration 2 of 2 (2 iterations, 640 env-steps in " in said
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
    # Stopped before its settings were written (params/, once the simulations are built): --finish could not read them.
    assert ending_lines(empty)[1:] == [f"run directory: {tmp_path}", "no checkpoint was written"]
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "run.yaml").write_text("task: cartpole-balance\n")
    assert ending_lines(empty)[1:] == [
        f"run directory: {tmp_path}",
        "no checkpoint was written",
        f"finish it: train cartpole-balance --finish {tmp_path} (continues in place to iteration 10)",
    ]


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
def test_commands_printed_under_uv_run_start_with_uv_run(tmp_path: Path) -> None:
    """A real ``uv run train`` (no sync: the environment is this one): the commands it prints work where it did."""
    repo = Path(__file__).resolve().parents[1]
    argv = ["uv", "run", "--no-sync", "train", *TINY, "--agent.max-iterations", "1", "--log-root", str(tmp_path)]
    done = subprocess.run(
        argv, cwd=repo, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "300"}
    )
    said = " ".join(done.stderr.split())
    assert done.returncode == 0, said
    (run_dir,) = tmp_path.glob("*/*")
    assert f"watch it: uv run play cartpole-balance --checkpoint {run_dir / 'model_1.pt'}" in said


def test_a_rank_of_another_launchers_job_is_told_to_rerun_the_jobs_command_with_finish(tmp_path: Path) -> None:
    """Without --finish, torchrun --standalone's next invocation draws another run id: a new run."""
    (tmp_path / "model_3.pt").write_bytes(b"")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "run.yaml").write_text("task: cartpole-balance\n")
    end = RunEnd("stopped", "cartpole-balance", tmp_path, 0, 10, 3, 256, 75, "SIGTERM", True, launcher="torchrun")
    lines = ending_lines(end)
    assert lines[-1] == (
        f"finish it: start the job's torchrun command again with --finish {tmp_path} added to train's options"
        " (it continues this run in place to iteration 10)"
    )
    assert f"watch it: play cartpole-balance --checkpoint {tmp_path / 'model_3.pt'}" in lines


def test_a_failed_rank_of_a_job_torchrun_restarts_is_not_told_to_restart_it(tmp_path: Path) -> None:
    """Under torchrun --max-restarts the job's ranks start again by themselves and continue the run: "start the job's
    torchrun command again" was wrong there."""
    (tmp_path / "model_3.pt").write_bytes(b"")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "run.yaml").write_text("task: cartpole-balance\n")
    failed = RunEnd("failed", "cartpole-balance", tmp_path, 0, 10, 3, 256, 75, "lost a rank", True, launcher="torchrun")
    restarting = dataclasses.replace(failed, restarts_left=2)
    assert ending_lines(restarting)[-1] == (
        "torchrun starts the job's ranks again (2 restarts left): they continue this run in place to iteration 10"
    )
    assert ending_lines(failed)[-1].startswith("finish it: start the job's torchrun command again with --finish")


def test_the_printed_commands_name_the_copy_of_menagerie_the_run_loaded(tmp_path: Path) -> None:
    """`MENAGERIE_ROOT=<dir> uv run train ...` set it for that command alone: the commands it printed looked for the
    robot in the package's cache (or downloaded it) instead."""
    from mjfleet.runs.ending import command_prefix

    root = tmp_path / "my menagerie"
    robot = root / "unitree_go1" / "scene.xml"
    env = {"MENAGERIE_ROOT": str(root), "UV_RUN_RECURSION_DEPTH": "1"}
    assert command_prefix(env, [robot]) == f"MENAGERIE_ROOT='{root}' uv run "
    assert command_prefix(env, [tmp_path / "own" / "go1.xml"]) == "uv run "  # a robot of its own: not needed
    assert command_prefix({"MENAGERIE_ROOT": str(root)}, []) == ""

"""The console's progress report: its formatting, its clock, the lines of real (small) training runs, and the same
records as data in the run directory's ``progress.jsonl``."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from mjfleet.rl.checkpoint.files import load_checkpoint
from mjfleet.rl.reporting.progress import (
    IterationClock,
    Progress,
    format_count,
    format_duration,
    progress_block,
    progress_line,
)
from mjfleet.rl.reporting.records import PROGRESS_FILE, IterationRecord, append_progress, read_progress
from mjfleet.runtime.context import DistributedContext
from mjfleet.train.worker import train_worker

from .helpers import make_run_dir, small_train_config

CPU = DistributedContext(device="cpu")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.4, "0:00"), (42.6, "0:43"), (725, "12:05"), (3723, "1:02:03"), (108000, "30:00:00"), (-3, "0:00")],
)
def test_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(950, "950"), (999.6, "1k"), (12_345, "12.3k"), (999_700, "1M"), (4_560_000, "4.56M"), (1.23e9, "1.23G")],
)
def test_counts(value: float, text: str) -> None:
    assert format_count(value) == text


def _progress(**changes: object) -> Progress:
    values: dict[str, object] = {
        "iteration": 50,
        "final": 300,
        "elapsed_s": 65.0,
        "run_elapsed_s": None,
        "eta_s": 325.0,
        "env_steps": 1_228_800,
        "env_steps_per_s": 18_900.0,
        "collect_s": 0.83,
        "learn_s": 0.47,
        "episode": {"Episode/return": 12.345, "Episode/length": 987.0, "Episode/success": 0.45},
        "evaluation": {"Eval/return": 14.0, "Eval/success": 0.6, "Eval_Metrics/lin_vel_error": 0.18},
        "evaluation_episodes": 52,
        "evaluation_window": 50,
        "losses": {"value": 0.0123, "surrogate": -0.0045},
        "learning_rate": 1e-3,
        "action_std": 0.52,
    }
    values.update(changes)
    return Progress(**values)  # type: ignore[arg-type]


def test_the_line_of_every_iteration() -> None:
    line = progress_line(_progress())
    expected = "it 50/300 | 1:05 ETA 5:25 | 1.23M steps 18.9k/s | collect 0.83 learn 0.47 s | success 0.45 eval 0.60"
    assert line == expected
    assert len(line) <= 100  # with the console's time and level prefix, within 120 columns


def test_the_line_says_what_a_continued_run_and_the_stop_condition_change() -> None:
    line = progress_line(_progress(run_elapsed_s=3725.0, stop_when="Eval/success >= 0.95 (10 iterations in a row)"))
    assert "| 1:05 (run 1:02:05) ETA <=5:25 |" in line  # the condition may end the run before the ETA
    assert len(line) <= 120


def test_the_line_before_the_eta_is_known_at_the_end_and_while_evaluation_fills() -> None:
    assert "| 0:03 ETA - |" in progress_line(_progress(iteration=1, elapsed_s=3.0, eta_s=None))
    assert "ETA" not in progress_line(_progress(iteration=300, eta_s=0.0))
    ending = _progress(iteration=19, eta_s=71.0, ending=True)  # stopped early, by the condition or a signal
    assert "ETA" not in progress_line(ending) and "ETA" not in progress_block(ending)
    assert progress_line(_progress(evaluation_episodes=12)).endswith("eval 0.60 (12/50 ep)")
    # A continued run reads the checkpoint's window until its own evaluation episodes end: said so, not as its own.
    assert progress_line(_progress(evaluation_restored=True)).endswith("eval 0.60 (checkpoint's)")
    filling = _progress(evaluation_episodes=12, evaluation_restored=True)
    assert progress_line(filling).endswith("(12/50 ep, checkpoint's)")
    assert progress_line(_progress(episode={"Episode/return": 3.21}, evaluation={})).endswith("| return 3.2")


def test_the_block_of_every_few_iterations() -> None:
    progress = _progress(run_elapsed_s=3725.0, stop_when="Eval/success >= 0.95 (10 iterations in a row)")
    lines = progress_block(progress).splitlines()
    assert lines[0] == progress_line(progress)  # the iteration's own line first, as on every other iteration
    assert lines[1] == "  time: 1:05 since this start (the run's total 1:02:05), ETA <=5:25"  # as its line says
    assert lines[2] == "  per iteration: 1.30 s, collecting 0.83 s and learning 0.47 s"
    assert lines[3] == "  env-steps: 1,228,800 so far, 18,900 per second"
    assert lines[4] == "  training episodes (stochastic policy): return 12.3, length 987, success 0.45"
    assert lines[5] == (
        "  evaluation episodes (deterministic policy), last 52: return 14.0, success 0.60, lin_vel_error 0.18"
    )
    assert lines[6] == "  losses: value 0.0123, surrogate -0.0045; learning rate 1.00e-03, action std 0.520"
    assert lines[7] == (
        "  --stop-when Eval/success >= 0.95 (10 iterations in a row) may end the run before iteration 300"
    )
    assert max(len(line) for line in lines) <= 120  # the first: a continued run with --stop-when, the longest


def test_the_eta_leaves_out_the_first_iteration_and_follows_recent_ones() -> None:
    clock = IterationClock(began=100.0, first=11, final=40, previous_s=500.0)
    clock.tick(11, 130.0)  # compilation and warm-up: 30 s
    assert clock.eta_s(11) is None
    clock.tick(12, 132.0)
    clock.tick(13, 136.0)
    assert clock.eta_s(13) == pytest.approx(27 * 3.0)  # 27 iterations left at the mean of 2 s and 4 s
    assert clock.elapsed_s(136.0) == 36.0 and clock.run_elapsed_s(136.0) == 536.0
    for it in range(14, 14 + 40):  # only the most recent iterations count
        clock.tick(it, 136.0 + (it - 13) * 1.0)
    assert clock.eta_s(39) == pytest.approx(1.0)


_LINE = re.compile(r"^it (\d+)/(\d+) \| (\d+:\d\d)(?: \(run (\d+:\d\d)\))? ETA (-|\d+:\d\d) \| ")


def test_a_run_and_its_continuation_log_elapsed_time_and_eta(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = small_train_config(iterations=4, log_root=tmp_path)
    cfg.agent.eval_envs = 16
    first_dir = make_run_dir(tmp_path, "progress", "first")
    with caplog.at_level(logging.INFO, logger="mjfleet.rl.runner"):
        train_worker(cfg, first_dir, CPU)
    first = [r.getMessage() for r in caplog.records if r.name == "mjfleet.rl.runner"]  # not the start-up line
    assert len(first) == 4 and all(m.startswith(f"it {i}/4 | ") for i, m in enumerate(first, 1))
    assert _LINE.match(first[0]) is not None and _LINE.match(first[0]).group(5) == "-"  # type: ignore[union-attr]
    assert "\n  time: " in first[0]  # the first iteration is followed by the block that names every number
    for middle in first[1:3]:
        match = _LINE.match(middle)
        assert match is not None and match.group(5) != "-" and "\n" not in middle  # an ETA, on one line
        assert "steps" in middle and "collect" in middle and "learn" in middle
    # 64 training environments and 4 evaluating (16 evaluation environments' worth, stepped 4 times) x 16 steps x 4
    assert "\n  env-steps: 5,120 so far" in first[-1]
    saved = load_checkpoint(first_dir / "model_4.pt")
    assert saved["elapsed_s"] > 0 and saved["env_steps"] == 4 * 80 * 16

    caplog.clear()
    continued = small_train_config(iterations=3, log_root=tmp_path, resume=first_dir)
    continued.agent.eval_envs = 16
    with caplog.at_level(logging.INFO, logger="mjfleet.rl.runner"):
        result = train_worker(continued, make_run_dir(tmp_path, "progress", "second"), CPU)
    resumed = next(m for m in caplog.messages if m.startswith("it 5/7 | "))  # other records may come first
    assert "the run's total" in resumed
    line = next(m for m in caplog.messages if m.startswith("it 6/7"))
    match = _LINE.match(line)
    assert match is not None and match.group(4) is not None  # the run's total beside this start's time
    assert result.records[-1].env_steps == 7 * 80 * 16
    assert result.records[-1].run_elapsed_s - result.records[-1].elapsed_s == pytest.approx(saved["elapsed_s"])


def test_a_run_writes_one_json_line_per_iteration(tmp_path: Path) -> None:
    cfg = small_train_config(num_envs=16, steps=8, iterations=3, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "progress", "jsonl")
    result = train_worker(cfg, run_dir, CPU)
    lines = (run_dir / PROGRESS_FILE).read_text().splitlines()
    assert len(lines) == 3
    records = [json.loads(line) for line in lines]
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert [r["env_steps"] for r in records] == [16 * 8, 2 * 16 * 8, 3 * 16 * 8]
    assert all(r["env_steps_per_s"] > 0 and r["elapsed_s"] > 0 for r in records)
    assert read_progress(run_dir) == result.records  # the numbers the worker returns and the console line says
    # Where it went on from, said apart: a rank of torchrun's job counted the iterations it trained from its first
    # record, and the result keeps the last 1,000 (a 3,000-iteration run "trained 1000 iterations").
    assert result.start_iteration == 0


def test_a_restarts_iterations_replace_the_lost_starts_in_the_runs_history(tmp_path: Path) -> None:
    """A start that failed after iteration 4 and was restarted from its checkpoint of iteration 2: iterations 3 and 4
    are trained again, and the history is the restart's from there on (as TensorBoard shows it)."""

    def record(iteration: int, start: str) -> IterationRecord:
        return IterationRecord(iteration, {}, {"start": float(start == "restart")}, 1.0, 0.1, 0.1, 0.0)

    for iteration in (1, 2, 3, 4):
        append_progress(tmp_path, record(iteration, "first"))
    with (tmp_path / PROGRESS_FILE).open("a") as f:
        f.write('{"iteration": 5, "losses"')  # the killed process's last line, cut short (no newline: the restart's
        # first record went onto it, and both were skipped)
    for iteration in (3, 4, 5):
        append_progress(tmp_path, record(iteration, "restart"))
    history = read_progress(tmp_path)
    assert [(r.iteration, r.episode["start"]) for r in history] == [(1, 0), (2, 0), (3, 1), (4, 1), (5, 1)]
    assert [r.iteration for r in read_progress(tmp_path, every_start=True)] == [1, 2, 3, 4, 3, 4, 5]


def test_the_last_lines_count_the_env_steps_of_the_iterations_this_command_trained(tmp_path: Path) -> None:
    """After an automatic restart the workers' result covers the last attempt only: the iterations the command
    trained (from its start) and the env-steps they took come from the run's records, whatever each one's pace."""
    from mjfleet.cli.train import _env_steps_since
    from mjfleet.rl.reporting.records import WorkerResult

    def record(iteration: int, env_steps: int) -> IterationRecord:
        return IterationRecord(iteration, {}, {}, 1.0, 0.1, 0.1, 0.0, env_steps=env_steps)

    # Iterations 1-4 of 100 env-steps, then (the evaluation sped up) 150 each; this command started at iteration 2
    # and was restarted after iteration 5 from the checkpoint of 4, so iteration 5 was trained twice.
    totals = {1: 100, 2: 200, 3: 300, 4: 400, 5: 550, 6: 700}
    for iteration in (1, 2, 3, 4, 5, 5, 6):
        append_progress(tmp_path, record(iteration, totals[iteration]))
    last_attempt = [WorkerResult(0, "cpu", 6, [record(5, 550), record(6, 700)])]
    assert _env_steps_since(tmp_path, 2, last_attempt) == 500  # iterations 3-6
    assert _env_steps_since(tmp_path, 0, last_attempt) == 700
    assert _env_steps_since(tmp_path, 9, last_attempt) is None  # no record of the start: the plan's count stands


def test_a_restart_from_scratch_replaces_the_first_starts_curves(tmp_path: Path) -> None:
    """A worker lost before the run's first checkpoint: the restart trains from iteration 1 in the same directory,
    and TensorBoard showed both starts' curves over each other (only a start from a checkpoint said where it began)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = make_run_dir(tmp_path, "progress", "restart")
    train_worker(small_train_config(num_envs=16, steps=8, iterations=3), run_dir, CPU)
    train_worker(small_train_config(num_envs=16, steps=8, iterations=2), run_dir, CPU)  # from scratch, as relaunched
    events = EventAccumulator(str(run_dir))
    events.Reload()
    key = next(tag for tag in events.Tags()["scalars"] if tag.startswith("Loss/"))
    assert [e.step for e in events.Scalars(key)] == [1, 2]


def test_the_line_shows_one_iterations_training_means_not_a_mix(caplog: pytest.LogCaptureFixture) -> None:
    """A statistic absent from an iteration whose episodes ended (no whole episode for `success`) kept an older
    iteration's value beside this one's others."""
    from mjfleet.rl.reporting.records import IterationRecord
    from mjfleet.rl.reporting.report import IterationReporter, LearnerState

    reporter = IterationReporter(None, None)
    state = LearnerState(learning_rate=1e-3, action_std=1.0)
    episodes = ({"Episode/return": 1.0, "Episode/length": 9.0, "Episode/success": 1.0}, {}, {"Episode/length": 3.0})
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        for it, episode in enumerate(episodes, start=1):
            record = IterationRecord(it, {}, episode, env_steps_per_s=1.0, collect_s=0.1, learn_s=0.1, sync_s=0.0)
            reporter.report(
                record, state, total=9, eta_s=None, tracker=None, block=False, resumed=False, evaluation_window=0
            )
    lines = [r.getMessage() for r in caplog.records]
    assert "success 1.00" in lines[0] and "success 1.00" in lines[1]  # no episode ended: the previous means
    assert "success" not in lines[2]


def test_a_tasks_own_scalars_are_logged_each_iteration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Task.iteration_scalars`` (a tracking sampler's state) reach TensorBoard as ``Task/<name>``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mjfleet.tasks.cartpole.cartpole import CartpoleTask

    monkeypatch.setattr(CartpoleTask, "iteration_scalars", lambda self, env: {"level": 3.0})
    run_dir = make_run_dir(tmp_path, "progress", "task")
    train_worker(small_train_config(num_envs=16, steps=8, iterations=2), run_dir, CPU)
    events = EventAccumulator(str(run_dir))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("Task/level")] == [(1, 3.0), (2, 3.0)]

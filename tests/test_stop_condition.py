"""``--stop-when``: the condition's grammar, its streak, and a real training run that ends on it (two workers
stopping together: ``tests/test_distributed_training.py``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint import list_checkpoints
from mjfleet.rl.stop_condition import StopCondition, StopConditionTracker
from mjfleet.runtime.context import DistributedContext
from mjfleet.train.worker import train_worker

from .helpers import make_run_dir, small_train_config


@pytest.mark.parametrize(
    ("text", "key", "op", "value"),
    [
        ("success>=0.9", "Episode/success", ">=", 0.9),
        (" return > 20 ", "Episode/return", ">", 20.0),
        ("length<=1e3", "Episode/length", "<=", 1000.0),
        ("Metrics/lin_vel_error<0.2", "Metrics/lin_vel_error", "<", 0.2),
        ("Episode_Termination/fall<-0.5", "Episode_Termination/fall", "<", -0.5),
    ],
)
def test_parse(text: str, key: str, op: str, value: float) -> None:
    assert StopCondition.parse(text) == StopCondition(key, op, value)


@pytest.mark.parametrize("text", ["success", "success==1", ">=0.9", "success>=", "success>=nan", "success>=inf"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--stop-when"):
        StopCondition.parse(text)


def test_streak_needs_consecutive_iterations_and_resets() -> None:
    tracker = StopConditionTracker(StopCondition.parse("success>=0.9"), 3)
    seen = [
        tracker.update(episode)
        for episode in (
            {"Episode/success": 0.95},
            {"Episode/success": 0.9},
            {},  # no episode ended: the condition does not hold
            {"Episode/success": 1.0},
            {"Episode/success": math.nan},
            {"Episode/success": 0.91},
            {"Episode/success": 0.92},
            {"Episode/success": 0.93},
        )
    ]
    assert seen == [False, False, False, False, False, False, False, True]


def test_key_must_be_one_the_task_logs() -> None:
    condition = StopCondition.parse("Metrics/speed>1")
    with pytest.raises(UsageError, match="Metrics/pole_up_fraction"):
        condition.check_key(["Episode/return", "Episode/length", "Episode/success", "Metrics/pole_up_fraction"])
    StopCondition.parse("Metrics/pole_up_fraction>1").check_key(["Metrics/pole_up_fraction"])


def test_training_ends_when_the_condition_holds(tmp_path: Path) -> None:
    # Every iteration ends some episodes (random episode starts), so "length >= 1" holds from iteration 1 on.
    cfg = small_train_config(
        iterations=40, init_at_random_ep_len=True, stop_when="length>=1", stop_when_iterations=3, log_root=tmp_path
    )
    cfg.agent.save_interval = 100
    run_dir = make_run_dir(tmp_path, "stop")
    result = train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    assert result.condition_met_at == result.final_iteration == 3
    assert [i for i, _ in list_checkpoints(run_dir)] == [3]  # the stopping iteration is saved
    assert all(r.episode["Episode/length"] >= 1 for r in result.records)

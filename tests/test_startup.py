"""The start-up line: where a worker's time before its first iteration goes."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from mjfleet.runtime.context import DistributedContext
from mjfleet.train.startup import StartupClock
from mjfleet.train.worker import train_worker

from .helpers import make_run_dir, small_train_config


def test_the_phases_add_up_from_the_process_start_to_the_first_iteration() -> None:
    clock = StartupClock(process_started=100.0, worker_started=103.5)
    clock.marks = [("simulation", 105.0), ("PPO", 105.25)]
    assert clock.phases(106.5) == [
        ("imports, plan and launch", 3.5),
        ("simulation", 1.5),
        ("PPO", 0.25),
        ("first iteration", 1.25),
    ]
    assert clock.describe(106.5) == (
        "start-up: first iteration done 6.5 s after the process started: imports, plan and launch 3.5 s, "
        "simulation 1.5 s, PPO 0.25 s, first iteration 1.2 s"
    )


def test_without_the_process_start_the_line_counts_from_the_worker() -> None:
    clock = StartupClock(process_started=None, worker_started=10.0)
    clock.marks = [("simulation", 12.0)]
    assert (
        clock.describe(13.0)
        == "start-up: first iteration done 3.0 s after the worker started: simulation 2.0 s, first iteration 1.0 s"
    )


_STARTUP = re.compile(
    r"^start-up: first iteration done ([\d.]+) s after the process started: imports, plan and launch ([\d.]+) s, "
    r"simulation ([\d.]+) s, PPO ([\d.]+) s, first iteration ([\d.]+) s$"
)


def test_a_run_logs_its_start_up_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = small_train_config(iterations=3, log_root=tmp_path)
    with caplog.at_level(logging.INFO, logger="mjfleet.train.startup"):
        train_worker(cfg, make_run_dir(tmp_path, "startup", "run"), DistributedContext(device="cpu"))
    lines = [r.getMessage() for r in caplog.records if r.name == "mjfleet.train.startup"]
    assert len(lines) == 1, lines
    match = _STARTUP.match(lines[0])
    assert match is not None, lines[0]
    total, *phases = (float(x) for x in match.groups())
    assert total > 0 and sum(phases) == pytest.approx(total, abs=0.3)  # each phase rounded to 0.1 s at most

"""The worker hook ($MJFLEET_WORKER_HOOK): called once per worker before training, its result returned as extras.

Launched workers use it through tests/instruments.py (test_distributed_training.py, test_reliability.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mjfleet.errors import UsageError, is_retryable
from mjfleet.rl.reporting.records import IterationRecord
from mjfleet.rl.runner import Runner
from mjfleet.runtime.context import DistributedContext
from mjfleet.train.worker import train_worker
from mjfleet.train.worker_hook import WORKER_HOOK_ENV, WorkerHookContext, load_worker_hook

from .helpers import make_run_dir, small_train_config

CALLS: list[tuple[Runner, WorkerHookContext]] = []
SEEN: list[int] = []


def recording_hook(runner: Runner, context: WorkerHookContext) -> Callable[[], dict[str, Any]]:
    """Records its call and every iteration; returns the iterations it saw."""
    CALLS.append((runner, context))

    def after_iteration(_: Runner, record: IterationRecord) -> None:
        SEEN.append(record.iteration)

    runner.hooks.append(after_iteration)
    return lambda: {"iterations": list(SEEN), "rank": runner.ctx.rank}


NOT_CALLABLE = 3


def test_the_named_hook_runs_in_the_worker_and_its_result_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    CALLS.clear()
    SEEN.clear()
    monkeypatch.setenv(WORKER_HOOK_ENV, f"{__name__}:recording_hook")
    cfg = small_train_config(iterations=2, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "hook")
    result = train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    ((runner, context),) = CALLS
    assert context.cfg is cfg and context.run_dir == run_dir
    assert context.start.checkpoint is None and context.start.final_iteration == 2
    assert runner.current_learning_iteration == 2
    assert result.extras == {"iterations": [1, 2], "rank": 0}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("tests.test_worker_hook", "expected package.module:function"),
        (":recording_hook", "expected package.module:function"),
        ("tests.no_such_module:hook", "no module named 'tests.no_such_module' here"),
        ("tests.test_worker_hook:no_such_hook", "has no 'no_such_hook'"),
        ("tests.test_worker_hook:NOT_CALLABLE", "'NOT_CALLABLE' is not callable"),
    ],
)
def test_a_bad_hook_is_one_usage_error_naming_the_variable(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=WORKER_HOOK_ENV) as info:
        load_worker_hook(value)
    assert message in str(info.value) and not is_retryable(info.value)


def test_unset_or_empty_names_no_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_HOOK_ENV, raising=False)
    assert load_worker_hook() is None and load_worker_hook("") is None
    assert load_worker_hook(f"{__name__}:recording_hook") is recording_hook

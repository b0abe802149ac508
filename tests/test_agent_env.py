"""What launched agents and workers are given besides torchrunx's copied variables, and what slows their start."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mjfleet.launch.launcher import (
    AGENT_TORCH_LOGS_FORMAT,
    TORCH_LOGS_FORMAT_ENV,
    LaunchPlan,
    _worker_env,
    bytecode_hint,
)

CPU_PLAN = LaunchPlan(device_kind="cpu", workers_per_host=2)

# What a torchrunx agent does when one of its workers fails: torch elastic logs the failure with its traceback.
AGENT_LOGS_A_FAILURE = textwrap.dedent(
    """
    import logging, sys
    import torch.distributed.elastic.multiprocessing.api
    try:
        raise ValueError("worker exploded")
    except ValueError:
        logging.getLogger("torch.distributed.elastic.multiprocessing.api").exception("failed (exitcode: 1)")
    print("torch._dynamo imported:", "torch._dynamo" in sys.modules)
    """
)


def test_agents_get_a_plain_torch_log_format_unless_the_user_chose_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TORCH_LOGS_FORMAT_ENV, raising=False)
    assert _worker_env(CPU_PLAN, tmp_path, None)[TORCH_LOGS_FORMAT_ENV] == AGENT_TORCH_LOGS_FORMAT
    monkeypatch.setenv(TORCH_LOGS_FORMAT_ENV, "short")  # torchrunx copies TORCH* itself
    assert TORCH_LOGS_FORMAT_ENV not in _worker_env(CPU_PLAN, tmp_path, None)


@pytest.mark.slow
def test_an_agent_reports_a_failed_worker_without_importing_torch_dynamo(tmp_path: Path) -> None:
    # torch's default formatter imports torch._dynamo to format an exception: seconds between a worker's death and
    # the launcher hearing of it, on every failure and restart.
    env = {**os.environ, TORCH_LOGS_FORMAT_ENV: AGENT_TORCH_LOGS_FORMAT}
    result = subprocess.run(
        [sys.executable, "-c", AGENT_LOGS_A_FAILURE], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "torch._dynamo imported: False" in result.stdout
    last = result.stderr.strip().splitlines()
    assert last[0].startswith("ERROR ") and "] failed (exitcode: 1)" in last[0]  # torch's fields are kept
    assert last[-1] == "ValueError: worker exploded"


def _package(root: Path, name: str, compiled: bool) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    if compiled:
        py_compile.compile(str(package / "__init__.py"), doraise=True)


def test_a_launch_says_when_every_process_would_compile_its_sources_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _package(tmp_path, "plain_install", compiled=False)
    _package(tmp_path, "compiled_install", compiled=True)
    hint = bytecode_hint("plain_install", dont_write_bytecode=True)
    assert hint is not None and "uv sync --compile-bytecode" in hint and hint.startswith("plain_install has no")
    assert bytecode_hint("plain_install", dont_write_bytecode=False) is None  # the first import writes it
    assert bytecode_hint("compiled_install", dont_write_bytecode=True) is None
    assert bytecode_hint("sys", dont_write_bytecode=True) is None  # built in: nothing to compile

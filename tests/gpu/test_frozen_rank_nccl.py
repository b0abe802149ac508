"""A rank frozen on NCCL is named, as on gloo (tests/test_external_launch.py): NCCL's watchdog may abort a process
before Python's ``except`` runs, so the naming must come from the per-rank watch, not from the failed collective."""

from __future__ import annotations

import random
import re
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
import torch

from ..helpers import assert_no_processes_left, launcher_free_env
from ..test_external_launch import _kill_tree, _read_until, _torchrun, _train_workers

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs: NCCL refuses two ranks on one GPU")
def test_a_rank_frozen_on_nccl_is_named_with_where_it_froze(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    command = [*_torchrun("--standalone", "--nproc_per_node=2"), "go1-velocity-flat", "--env.num-envs", "512"]
    command += ["--agent.max-iterations", "200", "--seed", "0", "--collective-timeout-s", "10"]
    command += ["--log-root", str(tmp_path / "logs")]
    launcher = subprocess.Popen(
        command, env=launcher_free_env(token), stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        said = _read_until(launcher, "it 3/200", 600)
        assert "it 3/200" in said, said[-3000:]
        time.sleep(random.uniform(0.0, 1.0))  # anywhere in the next iterations
        _train_workers(psutil.Process(launcher.pid))[1].suspend()
        started = time.monotonic()
        said += _read_until(launcher, "did not arrive", 120)
        waited = time.monotonic() - started
    finally:
        _kill_tree(launcher)
    flat = " ".join(said.split())
    assert re.search(
        r"rank 1 did not arrive within 10 s \(--collective-timeout-s\): rank 1: no sign of life for \d+ s \(stopped,"
        r" frozen or gone\), last at iteration \d+",
        flat,
    ), said[-3000:]
    assert waited < 60, waited
    assert_no_processes_left(token)

"""A rank frozen on NCCL is named, as on gloo (tests/test_external_launch.py): NCCL's watchdog may abort a process
before Python's ``except`` runs, so the naming must come from the per-rank watch, not from the failed collective."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import torch

from ..helpers import assert_no_processes_left, launcher_free_env
from ..test_external_launch import _torchrun, freeze_rank_1

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs: NCCL refuses two ranks on one GPU")
def test_a_rank_frozen_on_nccl_is_named_with_where_it_froze(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    command = [*_torchrun("--standalone", "--nproc_per_node=2"), "go1-velocity-flat", "--env.num-envs", "512"]
    command += ["--agent.max-iterations", "200", "--seed", "0", "--collective-timeout-s", "10"]
    command += ["--log-root", str(tmp_path / "logs")]
    said, waited = freeze_rank_1(command, launcher_free_env(token), after="it 3/200", startup_s=600)
    flat = " ".join(said.split())
    assert re.search(
        r"rank 1 did not arrive within 10 s \(--collective-timeout-s\): rank 1: no sign of life for \d+ s \(stopped,"
        r" frozen or gone\), last at iteration \d+",
        flat,
    ), said[-3000:]
    assert waited < 60, waited
    assert_no_processes_left(token)

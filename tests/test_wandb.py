"""`--agent.logger wandb` writes a W&B run beside TensorBoard and honours WANDB_MODE=offline (no network)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mjfleet.runtime.context import DistributedContext
from mjfleet.train.run_dir import make_run_dir
from mjfleet.train.worker import train_worker

from .helpers import small_train_config


@pytest.mark.slow
def test_wandb_offline_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = small_train_config(iterations=2, log_root=tmp_path)
    cfg.agent = dataclasses.replace(cfg.agent, logger="wandb", wandb_project="mjfleet-tests")
    run_dir = make_run_dir(tmp_path, "wandb")
    train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    offline_runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1
    assert list(offline_runs[0].glob("*.wandb"))
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1

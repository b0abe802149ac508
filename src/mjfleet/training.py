"""One worker's training: the picklable function run in-process or by every torchrunx worker."""

from __future__ import annotations

import dataclasses
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import warp as wp
import yaml

from mjfleet.config import TrainConfig
from mjfleet.envs.env import MjEnv
from mjfleet.launch.context import DistributedContext, init_process_group
from mjfleet.rl.checkpoint import resolve_checkpoint
from mjfleet.rl.faults import fault_injection_hook
from mjfleet.rl.runner import IterationRecord, Runner
from mjfleet.tasks.registry import get_task

logger = logging.getLogger(__name__)


@dataclass
class WorkerResult:
    """What each worker hands back to the launcher."""

    rank: int
    device: str
    final_iteration: int
    replica_digest: str
    first_rollout_digest: str
    records: list[IterationRecord]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def write_params(run_dir: Path, cfg: TrainConfig) -> None:
    """Write ``params/env.yaml`` and ``params/agent.yaml`` (rank 0 only)."""
    params = run_dir / "params"
    params.mkdir(parents=True, exist_ok=True)
    (params / "env.yaml").write_text(yaml.safe_dump(_plain(dataclasses.asdict(cfg.env)), sort_keys=False))
    (params / "agent.yaml").write_text(yaml.safe_dump(_plain(dataclasses.asdict(cfg.agent)), sort_keys=False))
    run = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("env", "agent")}
    (params / "run.yaml").write_text(yaml.safe_dump(_plain(run), sort_keys=False))


def _plain(value: Any) -> Any:
    """YAML-safe copy: tuples as lists, paths as strings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def train_worker(cfg: TrainConfig, run_dir: Path | None, ctx: DistributedContext | None = None) -> WorkerResult:
    """Build the environment and runner on this worker's device and train.

    Args:
        cfg: The full training configuration (identical on every worker).
        run_dir: The run directory the launcher created, or None to write nothing.
        ctx: This worker's place in the job; built from RANK/LOCAL_RANK/WORLD_SIZE when None.
    """
    if ctx is None:
        ctx = DistributedContext.from_env()
        # Launched workers have no console handlers (torchrunx forwards records to the launcher and the log
        # files); only the level needs setting so progress records are emitted at all.
        logging.getLogger("mjfleet").setLevel(logging.INFO)
    init_process_group(ctx, cfg.collective_timeout_s)
    seed_everything(ctx.seed(cfg.seed))
    spec = get_task(cfg.task)
    checkpoint = resolve_checkpoint(cfg.resume) if cfg.resume is not None else None
    with wp.ScopedDevice(ctx.device):
        env = MjEnv(spec.task_class(cfg.env), device=ctx.device, seed=ctx.seed(cfg.seed))
        if ctx.is_main and run_dir is not None:
            write_params(run_dir, cfg)
        runner = Runner(
            env,
            cfg.agent,
            ctx,
            run_dir,
            replica_check_interval=cfg.replica_check_interval,
            logged_config=_plain(dataclasses.asdict(cfg)),
        )
        if checkpoint is not None:
            runner.load(str(checkpoint))
            logger.info("resumed from %s at iteration %d", checkpoint, runner.current_learning_iteration)
        runner.hooks.append(fault_injection_hook)
        runner.learn(cfg.agent.max_iterations, init_at_random_ep_len=cfg.init_at_random_ep_len)
        return WorkerResult(
            rank=ctx.rank,
            device=ctx.device,
            final_iteration=runner.current_learning_iteration,
            replica_digest=runner.replica_digest(),
            first_rollout_digest=runner.history.first_rollout_digest,
            records=runner.history.records,
        )

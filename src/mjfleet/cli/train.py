"""``train <task> [overrides]``: parse, plan the launch, create the run directory, train."""

from __future__ import annotations

import logging
import os
import sys

import torch

from mjfleet.cli.args import parse
from mjfleet.config import TrainConfig
from mjfleet.console import configure_logging
from mjfleet.errors import UsageError, exits_on_usage_error
from mjfleet.launch.context import DistributedContext
from mjfleet.launch.devices import DeviceSelection, parse_gpu_ids, select_devices
from mjfleet.launch.launcher import WorkerFailure
from mjfleet.launch.run_dir import make_run_dir
from mjfleet.rl.checkpoint import load_checkpoint, resolve_checkpoint
from mjfleet.tasks.registry import get_task
from mjfleet.training import WorkerResult, train_worker

logger = logging.getLogger("mjfleet.train")


def parse_args(argv: list[str], prog: str = "train") -> TrainConfig:
    """``<task> [--field value ...]`` -> a complete :class:`TrainConfig` with the task's defaults."""
    if not argv or argv[0].startswith("-"):
        if argv and argv[0] in ("-h", "--help"):
            sys.stdout.write(f"usage: {prog} <task> [OPTIONS]\nrun list-tasks for task ids; {prog} <task> --help\n")
            raise SystemExit(0)
        raise UsageError(f"usage: {prog} <task> [OPTIONS]; run list-tasks to see the task ids")
    spec = get_task(argv[0])
    default = TrainConfig(env=spec.env_cfg(), agent=spec.agent_cfg(), task=spec.id)
    cfg = parse(TrainConfig, argv[1:], f"{prog} {spec.id}", default)
    cfg.task = spec.id
    validate(cfg)
    return cfg


def validate(cfg: TrainConfig) -> None:
    """Reject values that would fail later, with one line each."""
    positive = {
        "--env.num-envs": cfg.env.num_envs,
        "--env.sim.decimation": cfg.env.sim.decimation,
        "--agent.max-iterations": cfg.agent.max_iterations,
        "--agent.num-steps-per-env": cfg.agent.num_steps_per_env,
        "--agent.save-interval": cfg.agent.save_interval,
        "--agent.algorithm.num-learning-epochs": cfg.agent.algorithm.num_learning_epochs,
        "--agent.algorithm.num-mini-batches": cfg.agent.algorithm.num_mini_batches,
        "--cpu-workers": cfg.cpu_workers,
        "--replica-check-interval": cfg.replica_check_interval,
    }
    for flag, value in positive.items():
        if value < 1:
            raise UsageError(f"{flag} must be at least 1 (got {value})")
    if not 0 < cfg.env.episode_length_s < 1e6:
        raise UsageError(f"--env.episode-length-s must be positive and finite (got {cfg.env.episode_length_s})")
    if not cfg.agent.algorithm.learning_rate > 0:
        raise UsageError(f"--agent.algorithm.learning-rate must be positive (got {cfg.agent.algorithm.learning_rate})")
    if not cfg.collective_timeout_s > 0:
        raise UsageError(f"--collective-timeout-s must be positive (got {cfg.collective_timeout_s})")
    batch = cfg.env.num_envs * cfg.agent.num_steps_per_env
    if batch < cfg.agent.algorithm.num_mini_batches:
        raise UsageError(f"num_envs * num_steps_per_env ({batch}) is smaller than num_mini_batches")
    if cfg.workers_per_host is not None and cfg.workers_per_host < 1:
        raise UsageError(f"--workers-per-host must be at least 1 (got {cfg.workers_per_host})")


def select(cfg: TrainConfig) -> DeviceSelection:
    """Devices for this run; a CPU default says so once."""
    request = parse_gpu_ids(cfg.gpu_ids)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    selection = select_devices(request, device_count=count, env=os.environ)
    if selection.notice:
        logger.info(selection.notice)
    if selection.kind == "cuda" and cfg.cpu_workers != 1:
        raise UsageError("--cpu-workers applies to CPU training (--gpu-ids None); with GPUs there is one worker each")
    return selection


def run(cfg: TrainConfig) -> list[WorkerResult]:
    """Train according to ``cfg``; returns one result per worker."""
    selection = select(cfg)
    workers = selection.num_gpus or cfg.cpu_workers
    if cfg.resume is not None:
        load_checkpoint(resolve_checkpoint(cfg.resume))  # a bad checkpoint fails before anything is created
    multi = workers > 1 or cfg.launcher == "torchrunx" or bool(cfg.hostnames)
    run_dir = make_run_dir(cfg.log_root, cfg.agent.experiment_name, cfg.agent.run_name)
    logger.info("run directory: %s", run_dir)
    if multi:
        from mjfleet.launch.train_launch import launch_training

        return launch_training(cfg, run_dir, selection)
    ctx = DistributedContext(device=selection.devices[0])
    logger.info(
        "training %s on %s: %d envs x %d steps per iteration, %d iterations",
        cfg.task,
        ctx.device,
        cfg.env.num_envs,
        cfg.agent.num_steps_per_env,
        cfg.agent.max_iterations,
    )
    return [train_worker(cfg, run_dir, ctx)]


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``train``."""
    configure_logging()
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        results = run(cfg)
    except WorkerFailure as failure:
        logger.error("%s", failure)
        raise SystemExit(1) from None
    logger.info("finished at iteration %d", results[0].final_iteration)


if __name__ == "__main__":
    main()

"""``train <task> [overrides]``: parse, validate and plan everything, create the run directory, train.

Everything that can be wrong with the input (arguments, devices, the checkpoint to resume, the log root) is
checked before the run directory is created, so a rejected command leaves nothing behind; ``--dry-run`` stops
right there and prints the plan.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mjfleet.cli.args import parse
from mjfleet.console import configure_logging
from mjfleet.errors import FatalTrainingError, UsageError, exits_on_usage_error
from mjfleet.launch.diagnosis import WorkerFailure
from mjfleet.launch.launcher import LaunchPlan
from mjfleet.rl.checkpoint import list_checkpoints
from mjfleet.rl.records import WorkerResult
from mjfleet.runtime.devices import DeviceSelection, parse_gpu_ids, select_local_devices
from mjfleet.runtime.stop import StopRequest, exit_code, signal_name
from mjfleet.tasks.registry import get_task
from mjfleet.train.config import TrainConfig
from mjfleet.train.run_dir import check_log_root, discard_if_empty, make_run_dir, run_dir_name
from mjfleet.train.start import StartPoint, plan_start

# Nothing here imports torch, MuJoCo Warp or rsl_rl at module level: a mistyped command is answered in about a
# second, and a launcher process loads only torchrunx (workers import the simulator themselves).

logger = logging.getLogger("mjfleet.train")

MAX_CPU_WORKERS = 1024
MAX_RESTARTS = 1000
MAX_COLLECTIVE_TIMEOUT_S = 7 * 24 * 3600.0
MAX_INT = 2**31 - 1
"""Integer settings end up in int32 buffers, Warp launches and array shapes; larger values are typos."""
MAX_ROLLOUT = 2**31 - 1
"""Transitions one worker stores per iteration (num_envs * num_steps_per_env) must be indexable."""
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


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
    for flag, dims in (
        ("--agent.policy.actor-hidden-dims", cfg.agent.policy.actor_hidden_dims),
        ("--agent.policy.critic-hidden-dims", cfg.agent.policy.critic_hidden_dims),
    ):
        if any(d < 1 for d in dims):
            raise UsageError(f"{flag}: every layer needs at least 1 unit (got {' '.join(map(str, dims))})")
    if not 0 < cfg.env.episode_length_s < 1e6:
        raise UsageError(f"--env.episode-length-s must be positive and finite (got {cfg.env.episode_length_s})")
    if not cfg.env.clip_actions > 0:
        raise UsageError(f"--env.clip-actions must be positive (got {cfg.env.clip_actions})")
    a = cfg.agent.algorithm
    if not a.learning_rate > 0:
        raise UsageError(f"--agent.algorithm.learning-rate must be positive (got {a.learning_rate})")
    for flag, value in (("--agent.algorithm.gamma", a.gamma), ("--agent.algorithm.lam", a.lam)):
        if not 0 <= value <= 1:
            raise UsageError(f"{flag} must be between 0 and 1 (got {value})")
    for flag, value in (
        ("--agent.algorithm.clip-param", a.clip_param),
        ("--agent.algorithm.desired-kl", a.desired_kl),
        ("--agent.algorithm.max-grad-norm", a.max_grad_norm),
        ("--agent.policy.init-std", cfg.agent.policy.init_std),
    ):
        if not value > 0:
            raise UsageError(f"{flag} must be positive (got {value})")
    for flag, value in (
        ("--agent.algorithm.value-loss-coef", a.value_loss_coef),
        ("--agent.algorithm.entropy-coef", a.entropy_coef),
    ):
        if not value >= 0:
            raise UsageError(f"{flag} must not be negative (got {value})")
    if not 0 < cfg.collective_timeout_s <= MAX_COLLECTIVE_TIMEOUT_S:
        raise UsageError(
            f"--collective-timeout-s must be positive and at most {MAX_COLLECTIVE_TIMEOUT_S:.0f} s"
            f" (got {cfg.collective_timeout_s})"
        )
    if cfg.cpu_workers > MAX_CPU_WORKERS:
        raise UsageError(f"--cpu-workers must be at most {MAX_CPU_WORKERS} (got {cfg.cpu_workers})")
    if not 0 <= cfg.max_restarts <= MAX_RESTARTS:
        raise UsageError(f"--max-restarts must be between 0 and {MAX_RESTARTS} (got {cfg.max_restarts})")
    batch = cfg.env.num_envs * cfg.agent.num_steps_per_env
    if batch < cfg.agent.algorithm.num_mini_batches:
        raise UsageError(f"num_envs * num_steps_per_env ({batch}) is smaller than num_mini_batches")
    if batch > MAX_ROLLOUT:
        raise UsageError(f"num_envs * num_steps_per_env ({batch}) is too large for one worker's rollout")
    if cfg.workers_per_host is not None and cfg.workers_per_host < 1:
        raise UsageError(f"--workers-per-host must be at least 1 (got {cfg.workers_per_host})")
    # NumPy seeds must fit in 32 bits, and worker k uses seed + k.
    if not 0 <= cfg.seed <= 2**32 - 1 - MAX_CPU_WORKERS:
        raise UsageError(f"--seed must be between 0 and {2**32 - 1 - MAX_CPU_WORKERS} (got {cfg.seed})")
    _check_name("--agent.experiment-name", cfg.agent.experiment_name, required=True)
    _check_name("--agent.run-name", cfg.agent.run_name, required=False)
    for flag, path in (("--log-root", cfg.log_root), ("--resume", cfg.resume)):
        if path is not None and ("\x00" in str(path) or not str(path).strip()):
            raise UsageError(f"{flag} {str(path)!r} is not a usable path")
    if cfg.torchrunx_log_dir is not None and "\x00" in cfg.torchrunx_log_dir:
        raise UsageError("--torchrunx-log-dir contains a NUL character")
    if any(not h.strip() or "\x00" in h for h in cfg.hostnames):
        raise UsageError("--hostnames: host names must not be empty")
    _check_numbers(cfg)  # last: the specific checks above word their messages better


def _check_numbers(cfg: TrainConfig) -> None:
    """Every float setting must be finite and every integer fit in 32 bits (NaN compares false everywhere)."""
    for flag, value in _leaves(cfg, ""):
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number (got {value})")
        if isinstance(value, int) and flag != "--seed" and not -MAX_INT <= value <= MAX_INT:
            raise UsageError(f"{flag} is out of range (got {value})")


def _leaves(obj: Any, prefix: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        flag = f"{prefix}.{f.name}" if prefix else f"--{f.name}"
        flag = flag.replace("_", "-")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            found += _leaves(value, flag)
        elif isinstance(value, tuple):
            found += [(flag, v) for v in value]
        else:
            found.append((flag, value))
    return found


def _check_name(flag: str, name: str, required: bool) -> None:
    """Experiment and run names become directory names: no separators, no ``..``, nothing hidden."""
    if not name and not required:
        return
    if not _NAME_RE.fullmatch(name) or len(name) > 100:
        raise UsageError(
            f"{flag} {name!r} must be 1-100 characters of letters, digits, '.', '_', '+' or '-',"
            " starting with a letter or digit"
        )


def select(cfg: TrainConfig) -> DeviceSelection:
    """Devices for this run (a CPU fallback's notice is logged by :func:`execute`, once nothing can fail)."""
    selection = select_local_devices(parse_gpu_ids(cfg.gpu_ids))
    if selection.kind == "cuda" and cfg.cpu_workers != 1:
        raise UsageError("--cpu-workers applies to CPU training (--gpu-ids None); with GPUs there is one worker each")
    return selection


@dataclass(frozen=True)
class Prepared:
    """A validated run that has not created anything yet."""

    cfg: TrainConfig
    selection: DeviceSelection
    start: StartPoint
    plan: LaunchPlan | None
    """The launch plan for launched workers; None trains in this process."""


def prepare(cfg: TrainConfig) -> Prepared:
    """Check everything that can be checked without creating the run directory or starting workers."""
    selection = select(cfg)
    workers = selection.num_gpus or cfg.cpu_workers
    start = plan_start(cfg)  # a missing, truncated or foreign checkpoint fails here
    check_log_root(cfg.log_root / cfg.agent.experiment_name)
    # A restart must survive the death of the worker, so it cannot be this process.
    multi = workers > 1 or cfg.launcher == "torchrunx" or bool(cfg.hostnames) or cfg.max_restarts > 0
    plan = None
    if multi:
        from mjfleet.train.launched import make_plan

        plan = make_plan(cfg, _future_run_dir(cfg), selection)
    return Prepared(cfg, selection, start, plan)


def _future_run_dir(cfg: TrainConfig) -> Path:
    return cfg.log_root / cfg.agent.experiment_name / run_dir_name(cfg.agent.run_name)


def describe(prepared: Prepared) -> str:
    """The ``--dry-run`` report: what would run where, from which checkpoint, for how long."""
    cfg, start = prepared.cfg, prepared.start
    lines = [f"task: {cfg.task}"]
    if prepared.selection.notice:
        lines.append(prepared.selection.notice)
    if prepared.plan is not None:
        from mjfleet.train.launched import describe_plan

        lines.append(describe_plan(cfg, prepared.plan, prepared.selection))
    else:
        lines.append(f"in-process training on {prepared.selection.devices[0]}, {cfg.env.num_envs} envs")
    begin = f"from {start.checkpoint} (iteration {start.start_iteration})" if start.checkpoint else "from scratch"
    lines.append(f"iterations {start.start_iteration + 1}..{start.final_iteration}, {begin}")
    lines.append(f"run directory: {_future_run_dir(cfg)} (not created by --dry-run)")
    lines.append(f"collective timeout: {cfg.collective_timeout_s:g} s; automatic restarts: {cfg.max_restarts}")
    return "\n".join(lines) + "\n"


def execute(prepared: Prepared, run_dir: Path, stop: StopRequest | None = None) -> list[WorkerResult]:
    """Train a prepared run into ``run_dir``; returns one result per worker."""
    cfg = prepared.cfg
    if prepared.selection.notice:
        logger.info(prepared.selection.notice)
    if prepared.plan is not None:
        from mjfleet.train.supervisor import supervise

        return supervise(cfg, run_dir, prepared.selection, prepared.start, stop)
    from mjfleet.runtime.context import DistributedContext
    from mjfleet.train.worker import train_worker

    ctx = DistributedContext(device=prepared.selection.devices[0])
    logger.info(
        "training %s on %s: %d envs x %d steps per iteration, %d iterations",
        cfg.task,
        ctx.device,
        cfg.env.num_envs,
        cfg.agent.num_steps_per_env,
        prepared.start.final_iteration - prepared.start.start_iteration,
    )
    return [train_worker(cfg, run_dir, ctx, prepared.start, stop.poll if stop is not None else None)]


def create_run_dir(cfg: TrainConfig) -> Path:
    """Create the run directory (after :func:`prepare` succeeded)."""
    run_dir = make_run_dir(cfg.log_root, cfg.agent.experiment_name, cfg.agent.run_name)
    logger.info("run directory: %s", run_dir)
    return run_dir


def run(cfg: TrainConfig, stop: StopRequest | None = None) -> list[WorkerResult]:
    """Validate, create the run directory and train according to ``cfg``; returns one result per worker."""
    prepared = prepare(cfg)
    run_dir = create_run_dir(cfg)
    try:
        return execute(prepared, run_dir, stop)
    except UsageError:
        discard_if_empty(run_dir)
        raise


def _resume_hint(cfg: TrainConfig, run_dir: Path) -> str:
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        return f"no checkpoint was written to {run_dir}"
    return f"checkpoint {checkpoints[-1][1]}; resume with: train {cfg.task} --resume {run_dir}"


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``train``.

    Exit codes: 0 done, 1 training failed, 2 invalid input, 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM).
    """
    configure_logging()
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    prepared = prepare(cfg)
    if cfg.dry_run:
        sys.stdout.write(describe(prepared))
        return
    run_dir = create_run_dir(cfg)
    stop = StopRequest()
    with stop.install():
        try:
            results = execute(prepared, run_dir, stop)
        except UsageError:
            discard_if_empty(run_dir)
            raise
        except (WorkerFailure, FatalTrainingError) as failure:
            logger.error("%s", failure)
            raise SystemExit(1) from None
        except KeyboardInterrupt:
            signum = stop.signum or 2
            logger.warning("stopped immediately by %s; %s", signal_name(signum), _resume_hint(cfg, run_dir))
            raise SystemExit(exit_code(signum)) from None
    if stop.signum is not None:
        final = results[0].final_iteration
        if results[0].stop_signal is None:
            logger.warning("finished at iteration %d before the stop request took effect", final)
        logger.warning(
            "stopped by %s after iteration %d; %s", signal_name(stop.signum), final, _resume_hint(cfg, run_dir)
        )
        raise SystemExit(exit_code(stop.signum))
    logger.info("finished at iteration %d", results[0].final_iteration)


if __name__ == "__main__":
    main()

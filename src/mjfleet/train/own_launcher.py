"""Multi-worker training: turn a :class:`TrainConfig` into a launch plan and run ``train_worker`` on every worker."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from mjfleet.cluster.hosts import HostError, launcher_address, remote_hosts
from mjfleet.cluster.slurm import in_slurm_allocation
from mjfleet.errors import UsageError
from mjfleet.launch.launcher import (
    AgentsDidNotJoin,
    LaunchPlan,
    check_worker_log_dir,
    gpu_sharing_hosts,
    launch,
    resolve_worker_log_dir,
)
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.runs.start import StartPoint
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.runtime.stop import StopRequest
from mjfleet.train.config import TrainConfig


def slurm_gpus_per_node(cfg: TrainConfig, selection: DeviceSelection, env: Mapping[str, str]) -> int | None:
    """With ``--gpu-ids all`` and the hosts of a SLURM job: the GPUs SLURM gave each node (``SLURM_GPUS_ON_NODE``
    on the launcher's node, so nodes are assumed alike). None where the selection decides."""
    keyword = cfg.hostnames[0].lower() if len(cfg.hostnames) == 1 else ""
    uses_slurm_nodes = keyword == "slurm" or (keyword == "auto" and in_slurm_allocation(env))
    if selection.kind != "cuda" or not uses_slurm_nodes or cfg.gpu_ids != "all":
        return None
    value = env.get("SLURM_GPUS_ON_NODE", "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise UsageError(f"--gpu-ids all: SLURM_GPUS_ON_NODE={value!r} is not a number of GPUs")
    if int(value) == 0:
        raise UsageError(
            "--gpu-ids all: the SLURM job has no GPUs on this node (SLURM_GPUS_ON_NODE=0); request them with"
            " --gpus-per-node, or train with --gpu-ids None"
        )
    return int(value)


def make_plan(cfg: TrainConfig, run_dir: Path, selection: DeviceSelection, hosts: tuple[str, ...]) -> LaunchPlan:
    """The launch plan: ``hosts`` (``--hostnames`` resolved), workers per host, devices, worker logs, collective
    timeout."""
    plan = LaunchPlan.from_selection(
        selection,
        cpu_workers=cfg.cpu_workers,
        hostnames=hosts,
        log_dir=resolve_worker_log_dir(run_dir, cfg.torchrunx_log_dir, os.environ),
        worker_timeout_s=max(1, round(cfg.collective_timeout_s)),
        ssh_config=cfg.ssh_config.expanduser() if cfg.ssh_config is not None else None,
        launcher_address=cfg.launcher_address,
        agent_timeout_s=cfg.agent_timeout_s,
        workers_per_gpu=cfg.workers_per_gpu,
    )
    gpus = slurm_gpus_per_node(cfg, selection, os.environ)
    if gpus is not None:
        # The launcher's visible GPUs are exported to every node; with fewer than SLURM allocated per node,
        # each node's own numbering is left alone.
        visible = ",".join(selection.labels[:gpus]) if len(selection.labels) >= gpus else None
        plan = dataclasses.replace(plan, workers_per_host=gpus * plan.workers_per_device, cuda_visible_devices=visible)
    if cfg.workers_per_host is not None:
        plan = dataclasses.replace(plan, workers_per_host=cfg.workers_per_host)
    if plan.log_dir is not None and not plan.log_dir.absolute().is_relative_to(run_dir.absolute()):
        check_worker_log_dir(plan.log_dir)  # elsewhere than the run directory: found before that exists
    if shared := gpu_sharing_hosts(plan, remote_hosts(plan.hostnames)):  # every name must resolve
        raise UsageError(
            f"--hostnames: {', '.join(shared)} are all this machine, and with one worker per GPU their workers would"
            " share its GPUs, which NCCL refuses; list this machine once, or share each GPU explicitly with"
            " --workers-per-gpu 2 (gloo)"
        )
    # Unresolvable names and an unreachable launcher address are found before the run directory exists.
    address = launcher_address(plan.hostnames, cfg.launcher_address)
    if address is not None:
        plan = dataclasses.replace(plan, launcher_address=address)
    return plan


def describe_plan(cfg: TrainConfig, plan: LaunchPlan, selection: DeviceSelection) -> str:
    """One line: workers, devices, envs per worker, env-steps per iteration in total."""
    cpu = f"{plan.workers_per_host} CPU process{'es' if plan.workers_per_host > 1 else ''}"
    devices = selection.describe() if selection.kind == "cuda" else cpu
    if plan.workers_per_device > 1:
        devices += f"; {plan.workers_per_device} workers per GPU, gloo collectives"
    per_iteration = cfg.agent.env_steps_per_iteration(cfg.env.num_envs, selection.kind == "cuda", plan.world_size)
    hosts = f" on each of {len(plan.hostnames)} hosts ({', '.join(plan.hostnames)})" if len(plan.hostnames) > 1 else ""
    if plan.launcher_address is not None:
        hosts += f", launcher address {plan.launcher_address}"
    return (
        f"launch plan: {plan.world_size} worker{'s' if plan.world_size > 1 else ''} ({devices}{hosts}),"
        f" {cfg.env.num_envs} envs per worker,"
        f" {per_iteration:,} env-steps per iteration in total"
    )


def launch_training(
    cfg: TrainConfig, run_dir: Path, plan: LaunchPlan, start: StartPoint, stop: StopRequest | None = None
) -> list[WorkerResult]:
    """Run :func:`train_worker` on every worker of ``plan`` once; results are indexed by global rank.

    ``plan`` is the one :func:`mjfleet.train.prepare` made (and ``--dry-run`` printed); restarts reuse it.
    ``stop`` (installed by the caller) lets the first SIGINT/SIGTERM stop the workers cleanly after their current
    iteration.
    """
    # Rank 0's records arrive on the launcher as "torchrunx.<host>.0"; show its progress lines like in-process.
    logging.getLogger("torchrunx").setLevel(logging.INFO)
    try:
        return launch(run_train_worker, cfg, run_dir, None, start, plan=plan, stop=stop)
    except AgentsDidNotJoin as e:
        raise HostError(e.message(f"--agent-timeout-s {e.timeout_s}")) from None


def run_train_worker(
    cfg: TrainConfig, run_dir: Path | None, ctx: None, start: StartPoint | None, stop_check: None = None
) -> WorkerResult:
    """:func:`mjfleet.train.worker.train_worker`, imported in the worker: the launcher never loads the simulator."""
    from mjfleet.train.worker import train_worker

    return train_worker(cfg, run_dir, ctx, start, stop_check)

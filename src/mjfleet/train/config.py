"""The ``train`` command's full configuration: task configs plus how and where to run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mjfleet.envs.config import EnvConfig
from mjfleet.rl.config import AgentConfig


@dataclass
class TrainConfig:
    """Everything ``train <task>`` accepts."""

    env: EnvConfig
    """Environment settings of the task."""
    agent: AgentConfig
    """PPO and training-loop settings of the task."""
    task: str = ""
    """Task id (set from the first argument)."""
    seed: int = 42
    """Random seed; worker k uses seed + k (its global rank)."""
    gpu_ids: tuple[str, ...] = ("auto",)
    """GPUs to train on, as indices relative to CUDA_VISIBLE_DEVICES: ``0``, ``0 1``, ``[0,1]``, ``all``, or
    ``None`` for the CPU. ``auto``: GPU 0 if CUDA is available, else the CPU. Several GPUs = one worker each."""
    cpu_workers: int = 1
    """With ``--gpu-ids None``: number of CPU worker processes (gloo); each simulates ``env.num_envs`` worlds."""
    launcher: Literal["auto", "torchrunx"] = "auto"
    """``auto``: in-process for one worker, torchrunx for more. ``torchrunx``: always launch workers."""
    hostnames: tuple[str, ...] = ()
    """Hosts for multi-node training through torchrunx (SSH), or ``slurm`` for the nodes of the SLURM job."""
    workers_per_host: int | None = None
    """Workers per host in multi-node mode (default: the number of selected GPUs, or ``cpu_workers``)."""
    torchrunx_log_dir: str | None = None
    """Per-worker log files (default ``<run_dir>/torchrunx``; ``""`` disables them; TORCHRUNX_LOG_DIR wins)."""
    log_root: Path = Path("logs/rsl_rl")
    """Runs are written under ``<log_root>/<experiment_name>/<timestamp>[_<run_name>]``."""
    resume: Path | None = None
    """Continue from this checkpoint file, or from the newest checkpoint of this run directory."""
    init_at_random_ep_len: bool = True
    """Start episodes at random times so time-outs are spread over iterations."""
    replica_check_interval: int = 50
    """Multi-worker runs compare a digest of parameters and optimizer state across workers this often."""
    collective_timeout_s: float = 600.0
    """A collective operation that does not complete within this many seconds aborts the run, naming the ranks
    that stopped responding (a hung or stopped worker)."""
    max_restarts: int = 0
    """After a worker dies (crash, signal, OOM kill, hang), relaunch every worker from the newest checkpoint of
    the same run directory up to this many times, finishing at the originally requested iteration. Bad input
    and NaN training are never retried. With a value above 0 even a single worker runs as a launched process."""
    dry_run: bool = False
    """Validate everything (arguments, devices, checkpoint to resume, log root), print the launch plan and exit
    without creating a run directory or starting workers."""

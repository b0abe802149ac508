"""Train as one rank of a job that another launcher started: torchrun (torch elastic, also behind Kubernetes
PyTorchJob and most schedulers' torchrun integrations), a launcher that sets torchrun's variables itself, or srun
with several tasks.

Such a process is a worker already: it starts no workers and makes no run of its own. :func:`detect_external_job`
reads the launcher's variables once; :func:`check_external_options` refuses the settings that belong to mjfleet's
own launcher; :func:`external_device` picks this rank's device.
"""

from __future__ import annotations

import os
import re
import socket
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from mjfleet.errors import RanksMissing, UsageError
from mjfleet.runs.identity import slurm_job_key
from mjfleet.runtime.context import Ranks, check_ranks, env_int
from mjfleet.runtime.devices import DeviceSelection, GpuRequest, select_devices, trains_on_cpu, visible_gpus
from mjfleet.train.config import TrainConfig

Launcher = Literal["torchrun", "srun"]

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
"""Variables whose presence says a launcher made this process one rank of a job (torchrun sets all of them)."""
SLURM_PORT_BASE = 15000
SLURM_PORT_SPAN = 17000
"""Without ``MASTER_PORT``, an srun step's ranks meet at ``SLURM_PORT_BASE + crc32(job key) % SLURM_PORT_SPAN``: the
same number on every node, another one for another job or step, and below Linux's ephemeral ports (32768-60999),
which the kernel hands to outgoing connections."""


@dataclass(frozen=True)
class ExternalJob:
    """This process's place in a job another launcher started (read once from its environment)."""

    launcher: Launcher
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str | None
    """Where rank 0's rendezvous store listens (None only for a one-process job)."""
    master_port: int | None
    restart_count: int
    """torchrun's ``TORCHELASTIC_RESTART_COUNT`` (0 for the first start), SLURM's ``SLURM_RESTART_COUNT``."""
    agent_store: bool
    """torchrun's agent hosts the store (``TORCHELASTIC_USE_AGENT_STORE``): rank 0 connects to it like the others."""
    key: str = ""
    """The job as every rank of it can name it from its environment (the SLURM job and step, torchrun's run id, or
    where rank 0 listens): the rendezvous store's keys live under it, and a rank that reaches the store of a job with
    another key refuses to join."""
    static_rendezvous: bool = False
    """torchrun's static rendezvous (run id ``none``): one invocation is told from the next only by its store."""
    max_restarts: int = 0
    """torchrun's ``--max-restarts`` (``TORCHELASTIC_MAX_RESTARTS``): how often it starts the job's ranks again
    after one failed."""

    @property
    def restarts_left(self) -> int:
        """How many more times the launcher starts the job's ranks again after a failure (torchrun's own restarts)."""
        return max(0, self.max_restarts - self.restart_count)

    @property
    def hosts_store(self) -> bool:
        """Whether this process creates the rendezvous store the others connect to."""
        return self.rank == 0 and not self.agent_store

    def describe(self) -> str:
        """``rank 1 of 2 (torchrun; node 0, local rank 1 of 2)``."""
        return (
            f"rank {self.rank} of {self.world_size} ({self.launcher}; node {self.node_rank},"
            f" local rank {self.local_rank} of {self.local_world_size})"
        )

    def rendezvous_env(self) -> dict[str, str]:
        """``MASTER_ADDR``/``MASTER_PORT`` for torch's ``env://`` rendezvous (derived ones for srun)."""
        if self.master_addr is None or self.master_port is None:
            return {}
        return {"MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port)}


def detect_external_job(
    env: Mapping[str, str], expand_nodelist: Callable[[str, str], tuple[str, ...]] | None = None
) -> ExternalJob | None:
    """The job this process is one rank of, or None when nothing but the user started it.

    torchrun's variables (``RANK``, ``WORLD_SIZE``, ...) win over SLURM's, so torchrun started by srun (one per
    node) is recognised as torchrun. An srun step with several tasks counts (``SLURM_STEP_NUM_TASKS``, set only by
    srun, so an sbatch script that runs ``train`` once is not a rank). ``expand_nodelist`` turns the step's node
    list into host names (``scontrol show hostnames``) where ``MASTER_ADDR`` is unset.

    Raises :class:`UsageError` for variables that contradict each other.
    """
    if _torchrun_vars(env):
        return _torchrun_job(env)
    if _srun_step(env):
        return _srun_job(env, expand_nodelist)
    return None


def started_by_another_launcher(env: Mapping[str, str]) -> bool:
    """Whether torchrun or a multi-task srun step started this process (:func:`detect_external_job`'s test, without
    reading the job)."""
    return _torchrun_vars(env) or _srun_step(env)


def _torchrun_vars(env: Mapping[str, str]) -> bool:
    return any(env.get(name, "").strip() for name in TORCHRUN_VARS)


def _srun_step(env: Mapping[str, str]) -> bool:
    return bool(env.get("SLURM_STEP_NUM_TASKS", "").strip()) and env_int(env, "SLURM_STEP_NUM_TASKS") > 1


def _torchrun_job(env: Mapping[str, str]) -> ExternalJob:
    ranks = Ranks.from_torchrun_env(env)
    rank, world = ranks.rank, ranks.world_size
    addr = env.get("MASTER_ADDR", "").strip() or None
    port = _port(env) if env.get("MASTER_PORT", "").strip() else None
    if world > 1 and (addr is None or port is None):
        missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
        raise UsageError(
            f"RANK={rank} WORLD_SIZE={world}, but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'}"
            " not set: the ranks cannot find each other (torchrun sets them; a launcher of its own must too)"
        )
    run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
    static = run_id == "none"
    return ExternalJob(
        launcher="torchrun",
        rank=rank,
        local_rank=ranks.local_rank,
        world_size=world,
        local_world_size=ranks.local_world_size,
        node_rank=ranks.node_rank,
        master_addr=addr,
        master_port=port,
        restart_count=env_int(env, "TORCHELASTIC_RESTART_COUNT", 0),
        agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "").strip().lower() == "true",
        key=f"torchrun-{run_id}" if run_id and not static else (slurm_job_key(env) or f"job-{addr}:{port}"),
        static_rendezvous=static,
        max_restarts=env_int(env, "TORCHELASTIC_MAX_RESTARTS", 0),
    )


def _srun_job(env: Mapping[str, str], expand_nodelist: Callable[[str, str], tuple[str, ...]] | None) -> ExternalJob:
    world = env_int(env, "SLURM_STEP_NUM_TASKS")
    rank, local_rank = env_int(env, "SLURM_PROCID"), env_int(env, "SLURM_LOCALID", 0)
    node = env_int(env, "SLURM_NODEID", 0)
    local_world = tasks_on_node(env.get("SLURM_STEP_TASKS_PER_NODE", ""), node) or local_rank + 1
    check_ranks(
        rank,
        world,
        local_rank,
        local_world,
        ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "tasks per node"),
    )
    addr = env.get("MASTER_ADDR", "").strip() or None
    if addr is None:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        if not nodelist:
            raise UsageError("srun: neither MASTER_ADDR nor SLURM_STEP_NODELIST is set, so rank 0's host is unknown")
        if expand_nodelist is None:
            raise UsageError("srun: MASTER_ADDR is not set")
        addr = expand_nodelist(nodelist, "srun")[0]
    key = slurm_job_key(env) or "slurm"
    port = (
        _port(env)
        if env.get("MASTER_PORT", "").strip()
        else SLURM_PORT_BASE + zlib.crc32(key.encode()) % SLURM_PORT_SPAN
    )
    return ExternalJob(
        launcher="srun",
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=node,
        master_addr=addr,
        master_port=port,
        restart_count=env_int(env, "SLURM_RESTART_COUNT", 0),
        agent_store=False,
        key=key,
    )


def tasks_on_node(tasks_per_node: str, node: int) -> int | None:
    """Tasks on node ``node`` from SLURM's compressed count (``2(x3),1``: 2 on nodes 0-2, 1 on node 3)."""
    counts: list[int] = []
    for part in (p.strip() for p in tasks_per_node.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if m is None:
            return None
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts[node] if 0 <= node < len(counts) else None


def _port(env: Mapping[str, str]) -> int:
    port = env_int(env, "MASTER_PORT")
    if not 0 < port < 65536:
        raise UsageError(f"MASTER_PORT={port} is not a port number")
    return port


def launcher_hint(job: ExternalJob) -> tuple[str, str]:
    """How this launcher sets the number of processes per node and in all (for messages)."""
    if job.launcher == "srun":
        return "srun --ntasks-per-node", "srun --ntasks/--nodes"
    return "torchrun --nproc_per_node", "torchrun --nnodes/--nproc_per_node"


def external_device(job: ExternalJob, request: GpuRequest, gpu_count: int, env: Mapping[str, str]) -> DeviceSelection:
    """This rank's device: ``cuda:<LOCAL_RANK>`` (relative to ``CUDA_VISIBLE_DEVICES``), or the CPU.

    ``auto`` without a GPU trains on the CPU. A node whose ranks each see exactly one GPU (srun's
    ``--gpus-per-task``) uses ``cuda:0`` in every rank; that they are different GPUs is checked once the ranks
    meet (:func:`duplicate_gpus`).
    """
    per_node, _ = launcher_hint(job)
    if trains_on_cpu(request, gpu_count):
        return select_devices(request, device_count=0, env=env)  # the CPU (with a notice for auto)
    if request == "all" or (isinstance(request, tuple) and len(request) > 1):
        given = "all" if request == "all" else " ".join(map(str, request))
        raise UsageError(
            f"--gpu-ids {given}: under {job.launcher} every process is one rank with one GPU (cuda:<LOCAL_RANK>);"
            f" the launcher sets how many ({per_node}) and CUDA_VISIBLE_DEVICES which"
        )
    if isinstance(request, tuple):
        gpu = next(iter(request))
        if job.local_world_size > 1:
            raise UsageError(
                f"--gpu-ids {gpu}: {job.local_world_size} ranks run on this node and each uses"
                f" cuda:<LOCAL_RANK>; leave --gpu-ids out (or set CUDA_VISIBLE_DEVICES per node)"
            )
        if not 0 <= gpu < gpu_count:
            raise UsageError(f"--gpu-ids {gpu}: this node sees {gpu_count} GPU(s)")
        index = gpu
    elif job.local_world_size <= gpu_count:
        index = job.local_rank
    elif gpu_count == 1 and job.launcher == "srun":
        index = 0  # srun bound one GPU to each task
    else:
        raise UsageError(
            f"{job.local_world_size} ranks on this node but it sees {gpu_count} GPU(s): NCCL refuses two ranks on one"
            f" GPU ('Duplicate GPU detected'); start at most {gpu_count} per node ({per_node} {gpu_count}), or train"
            " on CPU processes with --gpu-ids None"
        )
    label = visible_gpus(env, gpu_count)[index]
    return DeviceSelection(
        kind="cuda",
        devices=(f"cuda:{index}",),
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES", ""),
        labels=(label,),
    )


def duplicate_gpus(placements: list[tuple[str, str]]) -> str | None:
    """Given each rank's ``(host, GPU UUID)``, a message naming two ranks that share a GPU, or None."""
    seen: dict[tuple[str, str], int] = {}
    for rank, placement in enumerate(placements):
        if placement[1] and placement in seen:
            return (
                f"ranks {seen[placement]} and {rank} share one GPU on {placement[0]}: NCCL refuses two ranks on one"
                " GPU ('Duplicate GPU detected'); give each task its own GPU (srun --gpus-per-task 1), start as many"
                " processes per node as it has GPUs, or train on CPU processes with --gpu-ids None"
            )
        seen[placement] = rank
    return None


def wait_for_rendezvous(job: ExternalJob, timeout_s: float) -> None:
    """Return once rank 0's rendezvous store accepts connections; a one-line :class:`UsageError` after
    ``timeout_s`` (a wrong ``MASTER_ADDR``/``MASTER_PORT``, or rank 0 never started).

    torch would otherwise retry for the whole collective timeout. The process that hosts the store does not wait.
    """
    if job.world_size == 1 or job.hosts_store or job.master_addr is None or job.master_port is None:
        return
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            with socket.create_connection((job.master_addr, job.master_port), timeout=min(5.0, timeout_s)):
                return
        except OSError as e:
            last = e.strerror or type(e).__name__
        if time.monotonic() >= deadline:
            raise RanksMissing(
                f"nobody answers at MASTER_ADDR={job.master_addr} MASTER_PORT={job.master_port} after"
                f" {timeout_s:g} s ({last}): is rank 0 running, and is that its address? (--rendezvous-timeout-s)"
            )
        time.sleep(0.5)


def this_host() -> str:
    """This machine's name, for the job's roll call."""
    return os.environ.get("HOSTNAME") or socket.gethostname()


OWN_LAUNCHER_FIELDS = (
    "cpu_workers",
    "workers_per_gpu",
    "hostnames",
    "workers_per_host",
    "max_restarts",
    "launcher",
    "launcher_address",
    "ssh_config",
    "torchrunx_log_dir",
    "agent_timeout_s",
)
"""The settings of mjfleet's own launcher (:func:`check_external_options` refuses them under another): a run they
started that is finished as a rank of another launcher's job does not take them from its record."""


def check_external_options(cfg: TrainConfig, job: ExternalJob) -> None:
    """Refuse the settings of mjfleet's own launcher: under another launcher, that launcher decides them."""
    per_node, in_all = launcher_hint(job)
    restarts = "torchrun --max-restarts" if job.launcher == "torchrun" else "sbatch --requeue"
    own = (
        ("--cpu-workers", cfg.cpu_workers != 1, f"{per_node} sets the processes, each one rank"),
        ("--workers-per-gpu", cfg.workers_per_gpu != 1, f"{per_node} sets the processes, each one rank"),
        ("--hostnames", bool(cfg.hostnames), f"{in_all} sets the nodes"),
        ("--workers-per-host", cfg.workers_per_host is not None, f"{per_node} sets the processes per node"),
        ("--max-restarts", cfg.max_restarts != 0, f"{restarts} restarts the job, which continues its run"),
        ("--launcher torchrunx", cfg.launcher == "torchrunx", "this process is already one of its workers"),
        ("--launcher-address", cfg.launcher_address is not None, "MASTER_ADDR says where the ranks meet"),
        ("--ssh-config", cfg.ssh_config is not None, f"{job.launcher} starts the processes on every node"),
        ("--torchrunx-log-dir", cfg.torchrunx_log_dir is not None, f"{job.launcher} keeps each process's output"),
        ("--agent-timeout-s", cfg.agent_timeout_s != 60, f"{job.launcher} starts every process"),
    )
    for flag, given, instead in own:
        if given:
            raise UsageError(
                f"{flag} is for mjfleet's own launcher, but {job.launcher} started this process: {instead}"
            )

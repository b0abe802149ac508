"""Run a function on many workers (GPUs, CPU processes, hosts) through torchrunx.

torchrunx 0.4.0 quirks handled here:

* ``backend=None``: workers initialise their own process group (see
  :func:`mjfleet.runtime.context.init_process_group`), exactly once.
* Explicit ``hostnames`` and ``workers_per_host`` counts: ``"auto"`` fans out to SLURM nodes and
  ``"gpu"`` counts GPUs ignoring the ``CUDA_VISIBLE_DEVICES`` we export.
* It never sets ``CUDA_VISIBLE_DEVICES`` per worker; we export the selected GPUs to every worker
  and worker ``LOCAL_RANK`` k uses ``cuda:k``.
* Our own log handlers (known log paths; agent records never reach the console, which keeps
  torchrunx's spurious post-success ``SignalException`` off it).
* Fast failure: :func:`mjfleet.launch.worker.run_worker` hard-exits failing workers, and the
  failure surfaces here as :class:`WorkerFailure` naming the rank and its log file.
* SIGTERM becomes KeyboardInterrupt during a launch and leftover processes are swept, so neither
  Ctrl-C nor ``kill`` leaves workers or torchrunx's log collector behind.

Log routing lives in :mod:`~mjfleet.launch.worker_logs`, failure diagnosis in :mod:`~mjfleet.launch.diagnosis` and
process hygiene in :mod:`~mjfleet.launch.processes`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from mjfleet.errors import UsageError
from mjfleet.launch.diagnosis import WorkerFailure, build_failure
from mjfleet.launch.processes import (
    SWEEP_GRACE_INTERRUPTED_S,
    SWEEP_GRACE_S,
    agents_in_own_session,
    children,
    is_local_host,
    process_table,
    sigterm_as_interrupt,
    sweep,
)
from mjfleet.launch.worker import REPORT_DIR_ENV, WorkerEntry, read_reports
from mjfleet.launch.worker_logs import LOG_DIR_ENV, make_log_handlers, make_log_run_dir, resolve_worker_log_dir
from mjfleet.runtime.context import DEVICE_KIND_ENV, PG_TIMEOUT_ENV
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.runtime.stop import StopRequest

__all__ = ["LOG_DIR_ENV", "LaunchPlan", "WorkerFailure", "launch", "resolve_worker_log_dir"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# torchrunx's own defaults (PATH, LD_LIBRARY*, PYTHON*, CUDA*, TORCH*, PYTORCH*, NCCL*) plus ours.
# These only matter on remote hosts: local agents inherit the launcher's whole environment.
DEFAULT_ENV_PATTERNS: tuple[str, ...] = (
    "PATH",
    "LD_LIBRARY*",
    "LIBRARY_PATH",
    "PYTHON*",
    "CUDA*",
    "PYTORCH*",
    "TORCH*",
    "NCCL*",
    "GLOO*",
    "OMP_NUM_THREADS",
    "MUJOCO*",
    "WANDB*",
    "MJFLEET*",
)


@dataclass(frozen=True)
class LaunchPlan:
    """How to launch workers: where, how many, on which devices, with which logs and env."""

    device_kind: Literal["cpu", "cuda"]
    workers_per_host: int
    hostnames: tuple[str, ...] = ("localhost",)
    cuda_visible_devices: str | None = None
    """Exported to every worker (overrides the inherited value); None leaves it alone."""
    log_dir: Path | None = None
    """Worker log files go to ``<log_dir>/<timestamp>/<host>[<local_rank>].log``; None = no files."""
    env_patterns: tuple[str, ...] = DEFAULT_ENV_PATTERNS
    extra_env: Mapping[str, str] = field(default_factory=dict)
    worker_timeout_s: int = 600
    """Process-group (collective) timeout handed to workers."""
    agent_timeout_s: int = 60
    echo_rank0: bool = True
    """Forward rank 0's log records (INFO and up) to the launcher's ``torchrunx.<host>.0`` logger."""
    file_log_level: int = logging.INFO

    def __post_init__(self) -> None:
        if self.workers_per_host < 1:
            raise UsageError(f"need at least one worker per host, got {self.workers_per_host}")
        if not self.hostnames:
            raise UsageError("no hosts to launch on")
        if len(set(self.hostnames)) != len(self.hostnames):
            raise UsageError(f"hosts listed more than once: {', '.join(self.hostnames)}")
        if self.device_kind == "cuda" and self.cuda_visible_devices is not None:
            listed = [e for e in self.cuda_visible_devices.split(",") if e.strip()]
            if len(listed) < self.workers_per_host:
                raise UsageError(
                    f"{self.workers_per_host} GPU workers per host but only {len(listed)} GPUs"
                    f" selected ({self.cuda_visible_devices!r})"
                )

    @classmethod
    def from_selection(
        cls,
        selection: DeviceSelection,
        *,
        cpu_workers: int = 1,
        hostnames: Sequence[str] | None = None,
        log_dir: Path | None = None,
        worker_timeout_s: int = 600,
        extra_env: Mapping[str, str] | None = None,
    ) -> LaunchPlan:
        """One worker per selected GPU, or ``cpu_workers`` CPU workers, on each host."""
        if cpu_workers < 1:
            raise UsageError(f"--cpu-workers must be at least 1, got {cpu_workers}")
        if selection.kind == "cuda":
            if cpu_workers != 1:
                raise UsageError(
                    f"--cpu-workers {cpu_workers} needs --gpu-ids None (GPUs selected: {selection.describe()})"
                )
            workers = selection.num_gpus
        else:
            workers = cpu_workers
        return cls(
            device_kind=selection.kind,
            workers_per_host=workers,
            hostnames=tuple(hostnames) if hostnames else ("localhost",),
            cuda_visible_devices=selection.cuda_visible_devices,
            log_dir=log_dir,
            worker_timeout_s=worker_timeout_s,
            extra_env=dict(extra_env or {}),
        )

    @property
    def world_size(self) -> int:
        """Total number of workers."""
        return self.workers_per_host * len(self.hostnames)

    def locate(self, rank: int) -> tuple[str, int]:
        """``(host, local_rank)`` of a global rank."""
        return self.hostnames[rank // self.workers_per_host], rank % self.workers_per_host


# --- launch ----------------------------------------------------------------------------------------


def _check_hosts(hostnames: Sequence[str]) -> None:
    for host in hostnames:
        try:
            socket.gethostbyname(host)
        except OSError as exc:
            raise UsageError(f"cannot resolve host {host!r}: {exc}") from exc


def _worker_env(plan: LaunchPlan, report_dir: Path) -> dict[str, str]:
    env = {
        REPORT_DIR_ENV: str(report_dir),
        DEVICE_KIND_ENV: plan.device_kind,
        PG_TIMEOUT_ENV: str(plan.worker_timeout_s),
    }
    if plan.cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible_devices
    if plan.device_kind == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # N CPU workers each spawning one thread per core would oversubscribe the machine.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        env["OMP_NUM_THREADS"] = str(max(1, (cores or 1) // plan.workers_per_host))
    env.update(plan.extra_env)
    return env


def launch(fn: Callable[..., T], *args: Any, plan: LaunchPlan, stop: StopRequest | None = None) -> list[T]:
    """Run ``fn(*args)`` on every worker of ``plan``; return the results indexed by global rank.

    ``fn`` and ``args`` must be picklable (cloudpickle; importable top-level functions are safest).
    Raises :class:`WorkerFailure` when any worker raises or dies, after every worker is stopped.

    Without ``stop``, SIGTERM becomes KeyboardInterrupt (every worker is stopped). With ``stop`` (installed by
    the caller), the first SIGINT/SIGTERM writes a stop request that rank 0 reads between iterations, so the
    workers finish their iteration, checkpoint and return normally; a second signal stops everything at once.
    A clean stop needs rank 0 on this machine (``hostnames[0]`` local); otherwise the first signal stops at once.
    """
    import torchrunx
    from torchrunx import AgentFailedError, WorkerFailedError

    _check_hosts(plan.hostnames)
    log_run_dir = make_log_run_dir(plan.log_dir) if plan.log_dir is not None else None
    report_dir = Path(tempfile.mkdtemp(prefix="mjfleet-launch-"))
    launcher = torchrunx.Launcher(
        hostnames=list(plan.hostnames),
        workers_per_host=[plan.workers_per_host] * len(plan.hostnames),
        backend=None,
        worker_timeout=plan.worker_timeout_s,
        agent_timeout=plan.agent_timeout_s,
        copy_env_vars=plan.env_patterns,
        extra_env_vars=_worker_env(plan, report_dir),
    )
    launcher.set_logging_handlers(
        functools.partial(
            make_log_handlers,
            plan.hostnames,
            plan.workers_per_host,
            log_run_dir,
            plan.file_log_level,
            report_dir,
            plan.echo_rank0,
            os.getpid(),
        )
    )
    name = getattr(fn, "__name__", type(fn).__name__)
    logger.info(
        "launching %s on %d %s worker(s) across %s%s",
        name,
        plan.world_size,
        plan.device_kind,
        ", ".join(plan.hostnames),
        f"; worker logs in {log_run_dir}" if log_run_dir else "",
    )
    graceful = True
    if stop is not None and not is_local_host(plan.hostnames[0]):
        graceful = False
        logger.warning(
            "rank 0 runs on %s, not on this machine: Ctrl-C/SIGTERM will stop the workers at once instead of"
            " after a final checkpoint",
            plan.hostnames[0],
        )
    children_before = children(os.getpid(), process_table())
    started = time.monotonic()
    grace_s = SWEEP_GRACE_S
    term_guard = sigterm_as_interrupt() if stop is None else contextlib.nullcontext(None)
    stop_channel = stop.attach(report_dir, graceful) if stop is not None else contextlib.nullcontext()
    with term_guard as guard, stop_channel, agents_in_own_session():
        try:
            result = launcher.run(WorkerEntry(fn, args))
        except (WorkerFailedError, AgentFailedError) as exc:
            raise build_failure(exc, plan, report_dir, log_run_dir) from exc
        except KeyboardInterrupt:
            grace_s = SWEEP_GRACE_INTERRUPTED_S
            logger.warning("interrupted; stopping all workers")
            raise
        except Exception as exc:
            if read_reports(report_dir, "failure"):
                raise build_failure(exc, plan, report_dir, log_run_dir) from exc
            raise
        finally:
            if guard is not None:
                guard.cleaning = True
            with stop.deferring() if stop is not None else contextlib.nullcontext():
                sweep(children_before, grace_s)
                shutil.rmtree(report_dir, ignore_errors=True)
        if guard is not None and guard.received:
            raise KeyboardInterrupt("received SIGTERM")
    logger.debug("%s finished on all workers in %.1fs", name, time.monotonic() - started)
    return [result.rank(i) for i in range(plan.world_size)]

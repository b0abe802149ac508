"""Run a function on many workers (GPUs, CPU processes, hosts) through torchrunx.

torchrunx 0.4.0 quirks handled here:

* ``backend=None``: workers initialise their own process group (see
  :func:`mjfleet.runtime.context.init_process_group`), exactly once.
* Explicit ``hostnames`` and ``workers_per_host`` counts: ``"auto"`` fans out to SLURM nodes and
  ``"gpu"`` counts GPUs ignoring the ``CUDA_VISIBLE_DEVICES`` we export.
* It never sets ``CUDA_VISIBLE_DEVICES`` per worker; we export the selected GPUs to every worker
  and worker ``LOCAL_RANK`` k uses ``cuda:k`` (``cuda:<k // N>`` with N workers per GPU).
* Our own log handlers (known log paths; agent records never reach the console, which keeps
  torchrunx's spurious post-success ``SignalException`` off it).
* Fast failure: :func:`mjfleet.launch.worker.run_worker` hard-exits failing workers, and the
  failure surfaces here as :class:`WorkerFailure` naming the rank and its log file.
* Local agents run in their own session, SIGINT/SIGTERM are the launcher's to handle (stop cleanly or at
  once), and leftover processes are swept, so neither Ctrl-C nor ``kill`` leaves workers or torchrunx's
  log collector behind.
* Remote hosts: torchrunx announces ``socket.getfqdn()`` (often ``localhost``) and workers meet at the agent's
  ``getfqdn()``; we announce a routable launcher address and give workers a routable ``MASTER_ADDR``, after a
  pre-flight check of every remote host (:mod:`~mjfleet.cluster.hosts`). Agents that do not join within
  ``agent_timeout_s`` fail the launch with one line, and agents left on remote hosts are stopped over SSH.

Log routing lives in :mod:`~mjfleet.launch.worker_logs`, failure diagnosis in :mod:`~mjfleet.launch.diagnosis` and
process hygiene in :mod:`~mjfleet.launch.processes`, every patch of torchrunx internals in
:mod:`~mjfleet.launch.torchrunx_patches`.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import functools
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mjfleet.cluster.hosts import (
    HostError,
    check_gloo_interface,
    is_local_host,
    launcher_address,
    master_address,
    preflight,
    remote_hosts,
)
from mjfleet.errors import UsageError
from mjfleet.launch.diagnosis import WorkerFailure as WorkerFailure  # What launch() raises; callers catch it here.
from mjfleet.launch.diagnosis import build_failure
from mjfleet.launch.processes import (
    SWEEP_GRACE_INTERRUPTED_S,
    SWEEP_GRACE_S,
    launch_children,
    sweep,
)
from mjfleet.launch.torchrunx_patches import patched_torchrunx, stop_remote_agents
from mjfleet.launch.worker import REPORT_DIR_ENV, WorkerEntry
from mjfleet.launch.worker_logs import make_log_handlers, read_reports, worker_log_path
from mjfleet.runtime.context import DEVICE_KIND_ENV, MASTER_ADDR_ENV, PG_TIMEOUT_ENV, WORKERS_PER_DEVICE_ENV
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.runtime.stop import StopRequest, signal_name

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOG_DIR_ENV = "TORCHRUNX_LOG_DIR"
# Copied to remote hosts on top of torchrunx's defaults (local agents inherit the launcher's whole environment).
_COPY_ENV_PATTERNS = ("GLOO*", "OMP_NUM_THREADS", "MUJOCO*", "WANDB*", "MJFLEET*")
TORCH_LOGS_FORMAT_ENV = "TORCH_LOGS_FORMAT"
# torch's default log formatter imports torch._dynamo (and sympy, triton) the first time it formats an exception.
# An agent does exactly that when one of its workers fails, so every failure and restart waited for that import
# (6-8 s on a 2-core machine) before the launcher heard of it. A plain format keeps torch's fields without it.
AGENT_TORCH_LOGS_FORMAT = "%(levelname)s %(asctime)s %(process)d %(pathname)s:%(lineno)d] %(message)s"


def agent_environment(copy_patterns: Sequence[str], extra: Mapping[str, str]) -> dict[str, str]:
    """The variables torchrunx exports to a remote agent (as torchrunx 0.4.0 chooses them: this machine's variables
    whose names match ``copy_patterns``, then ``extra``). The pre-flight check runs with the same ones."""
    env = {k: v for k, v in os.environ.items() if any(fnmatch.fnmatch(k, p) for p in copy_patterns)}
    return {**env, **extra}


@dataclass(frozen=True)
class LaunchPlan:
    """How to launch workers: where, how many, on which devices, with which logs."""

    device_kind: Literal["cpu", "cuda"]
    """What the workers train on; worker ``LOCAL_RANK`` k uses ``cuda:<k // workers_per_device>``."""
    workers_per_host: int
    """Workers started on every host."""
    hostnames: tuple[str, ...] = ("localhost",)
    """Hosts to launch on; rank 0 runs on the first."""
    cuda_visible_devices: str | None = None
    """Exported to every worker (overrides the inherited value); None leaves it alone."""
    log_dir: Path | None = None
    """Worker log files go to ``<log_dir>/<timestamp>/<host>[<local_rank>].log``; None = no files."""
    worker_timeout_s: int = 600
    """Process-group (collective) timeout handed to workers."""
    ssh_config: Path | None = None
    """OpenSSH client config for reaching remote hosts (torchrunx's default: ``~/.ssh/config``)."""
    launcher_address: str | None = None
    """Address remote hosts call back to; None: ``$MJFLEET_LAUNCHER_ADDRESS``, else the interface that routes to the
    first remote host."""
    agent_timeout_s: int = 60
    """Every host's agent must join the launch within this many seconds."""
    workers_per_device: int = 1
    """GPU workers sharing each GPU (consecutive local ranks); above 1 their collectives use gloo."""

    def __post_init__(self) -> None:
        if self.workers_per_host < 1:
            raise UsageError(f"need at least one worker per host, got {self.workers_per_host}")
        if not self.hostnames:
            raise UsageError("no hosts to launch on")
        if len(set(self.hostnames)) != len(self.hostnames):
            raise UsageError(f"hosts listed more than once: {', '.join(self.hostnames)}")
        if self.workers_per_device < 1 or (self.device_kind == "cpu" and self.workers_per_device != 1):
            raise UsageError(f"{self.workers_per_device} workers per device: only GPUs can be shared, by 1 or more")
        if self.device_kind == "cuda" and self.cuda_visible_devices is not None:
            listed = [e for e in self.cuda_visible_devices.split(",") if e.strip()]
            if len(listed) * self.workers_per_device < self.workers_per_host:
                shared = f" x {self.workers_per_device} workers each" if self.workers_per_device > 1 else ""
                raise UsageError(
                    f"{self.workers_per_host} GPU workers per host but only {len(listed)} GPUs{shared}"
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
        ssh_config: Path | None = None,
        launcher_address: str | None = None,
        agent_timeout_s: int = 60,
        workers_per_gpu: int = 1,
    ) -> LaunchPlan:
        """``workers_per_gpu`` workers per selected GPU, or ``cpu_workers`` CPU workers, on each host."""
        if cpu_workers < 1:
            raise UsageError(f"--cpu-workers must be at least 1, got {cpu_workers}")
        if workers_per_gpu < 1:
            raise UsageError(f"--workers-per-gpu must be at least 1, got {workers_per_gpu}")
        if selection.kind == "cpu" and workers_per_gpu != 1:
            raise UsageError(
                f"--workers-per-gpu {workers_per_gpu} needs GPUs (training on the CPU); use --cpu-workers instead"
            )
        if selection.kind == "cuda":
            if cpu_workers != 1:
                raise UsageError(
                    f"--cpu-workers {cpu_workers} needs --gpu-ids None (GPUs selected: {selection.describe()})"
                )
            workers = selection.num_gpus * workers_per_gpu
        else:
            workers = cpu_workers
        return cls(
            device_kind=selection.kind,
            workers_per_host=workers,
            hostnames=tuple(hostnames) if hostnames else ("localhost",),
            cuda_visible_devices=selection.cuda_visible_devices,
            log_dir=log_dir,
            worker_timeout_s=worker_timeout_s,
            ssh_config=ssh_config,
            launcher_address=launcher_address,
            agent_timeout_s=agent_timeout_s,
            workers_per_device=workers_per_gpu,
        )

    @property
    def world_size(self) -> int:
        """Total number of workers."""
        return self.workers_per_host * len(self.hostnames)

    def locate(self, rank: int) -> tuple[str, int]:
        """``(host, local_rank)`` of a global rank."""
        return self.hostnames[rank // self.workers_per_host], rank % self.workers_per_host


def resolve_worker_log_dir(run_dir: Path, flag: str | None, env: Mapping[str, str]) -> Path | None:
    """Where worker logs go: ``$TORCHRUNX_LOG_DIR`` beats ``flag``; None flag = ``<run_dir>/torchrunx``.

    An empty string from either source disables worker log files.
    """
    value = env.get(LOG_DIR_ENV, flag)
    if value is None:
        return run_dir / "torchrunx"
    if not value.strip():
        return None
    return Path(value).expanduser()


def _make_log_run_dir(log_dir: Path) -> Path:
    """Create a fresh ``<log_dir>/<timestamp>`` (suffixed if two launches share a second)."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    for n in range(1000):
        candidate = log_dir / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir(parents=True)
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create worker log directory {candidate}: {exc}") from exc
        return candidate.absolute()
    raise UsageError(f"cannot create a fresh worker log directory under {log_dir}")


def _worker_env(plan: LaunchPlan, report_dir: Path, master_addr: str | None) -> dict[str, str]:
    env = {
        REPORT_DIR_ENV: str(report_dir),
        DEVICE_KIND_ENV: plan.device_kind,
        PG_TIMEOUT_ENV: str(plan.worker_timeout_s),
    }
    if master_addr is not None:
        env[MASTER_ADDR_ENV] = master_addr
    if plan.cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible_devices
    if TORCH_LOGS_FORMAT_ENV not in os.environ:  # the user's own choice travels as TORCH*
        env[TORCH_LOGS_FORMAT_ENV] = AGENT_TORCH_LOGS_FORMAT
    if plan.device_kind == "cuda":  # always set: local agents inherit the launcher's environment
        env[WORKERS_PER_DEVICE_ENV] = str(plan.workers_per_device)
    if plan.device_kind == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # N CPU workers each spawning one thread per core would oversubscribe the machine.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        env["OMP_NUM_THREADS"] = str(max(1, (cores or 1) // plan.workers_per_host))
    return env


def bytecode_hint(module: str = "torch", dont_write_bytecode: bool | None = None) -> str | None:
    """Why every launched process would start slowly, if it would: writing bytecode is off (PYTHONDONTWRITEBYTECODE,
    ``-B``; agents and workers inherit it) and ``module`` was installed without any (``uv sync`` writes none)."""
    if not (sys.flags.dont_write_bytecode if dont_write_bytecode is None else dont_write_bytecode):
        return None
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    if Path(importlib.util.cache_from_source(spec.origin)).exists():
        return None
    return (
        f"{module} has no compiled bytecode and PYTHONDONTWRITEBYTECODE is set, so every agent and worker compiles"
        f" its sources again at start (seconds each); compile once with `uv sync --compile-bytecode`"
    )


@functools.cache  # Restarts relaunch: one warning per process is enough.
def _warn_if_bytecode_missing() -> None:
    if (hint := bytecode_hint()) is not None:
        logger.warning(hint)


def _agents_failed(exc: BaseException, plan: LaunchPlan, log_run_dir: Path | None) -> HostError:
    """One line for agents that did not start or join although every host passed its pre-flight check."""
    error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    logs = f" (agent logs: {log_run_dir}/<host>.log)" if log_run_dir is not None else ""
    return HostError(
        f"the torchrunx agents on {', '.join(plan.hostnames)} did not all start and join within"
        f" --agent-timeout-s {plan.agent_timeout_s} ({type(exc).__name__}: {error}); check that every host can"
        f" reach the launcher address and the others (firewalls, GLOO_SOCKET_IFNAME){logs}"
    )


def _check_local_gpu_sharing(plan: LaunchPlan, remote: list[str]) -> None:
    """Refuse two hosts that are both this machine with one GPU worker each: their workers get the same GPUs
    (the same ``CUDA_VISIBLE_DEVICES`` and local ranks), and NCCL fails on the second rank of a device ("Duplicate GPU
    detected") only once every agent has started."""
    local = [h for h in plan.hostnames if h not in remote]
    if plan.device_kind == "cuda" and plan.workers_per_device == 1 and len(local) > 1:
        raise UsageError(
            f"hosts {', '.join(local)} are all this machine, so their GPU workers would share its GPUs, which NCCL"
            " refuses; list this machine once, or share each GPU explicitly with --workers-per-gpu 2 (gloo)"
        )


def launch(fn: Callable[..., T], *args: Any, plan: LaunchPlan, stop: StopRequest | None = None) -> list[T]:
    """Run ``fn(*args)`` on every worker of ``plan``; return the results indexed by global rank.

    ``fn`` and ``args`` must be picklable (cloudpickle; importable top-level functions are safest).
    Raises :class:`WorkerFailure` when any worker raises or dies, after every worker is stopped.

    Without ``stop``, SIGINT and SIGTERM become KeyboardInterrupt (every worker is stopped). With ``stop`` (installed by
    the caller), the first SIGINT/SIGTERM writes a stop request that rank 0 reads between iterations, so the
    workers finish their iteration, checkpoint and return normally; a second signal stops everything at once.
    A clean stop needs rank 0 on this machine (``hostnames[0]`` local); otherwise the first signal stops at once.
    """
    import torchrunx
    from torchrunx import AgentFailedError, WorkerFailedError

    remote = remote_hosts(plan.hostnames)  # every name must resolve
    _check_local_gpu_sharing(plan, remote)
    address = launcher_address(plan.hostnames, plan.launcher_address) if remote else None
    if address is not None:
        check_gloo_interface(address)
    log_run_dir = _make_log_run_dir(plan.log_dir) if plan.log_dir is not None else None
    master_addr = master_address(plan.hostnames, address) if address is not None else None
    report_dir = Path(tempfile.mkdtemp(prefix="mjfleet-launch-"))
    copy_env = (*torchrunx.DEFAULT_ENV_VARS_FOR_COPY, *_COPY_ENV_PATTERNS)
    extra_env = _worker_env(plan, report_dir, master_addr)
    if address is not None:
        agent_log = None if log_run_dir is None else functools.partial(worker_log_path, log_run_dir, local_rank=None)
        try:
            preflight(remote, plan.ssh_config, address, agent_log, agent_environment(copy_env, extra_env))
        except BaseException:
            shutil.rmtree(report_dir, ignore_errors=True)
            raise
    ssh_config = str(plan.ssh_config) if plan.ssh_config is not None else None
    launcher = torchrunx.Launcher(
        hostnames=list(plan.hostnames),
        workers_per_host=[plan.workers_per_host] * len(plan.hostnames),
        ssh_config_file=ssh_config,
        backend=None,
        worker_timeout=plan.worker_timeout_s,
        agent_timeout=plan.agent_timeout_s,
        copy_env_vars=copy_env,
        extra_env_vars=extra_env,
    )
    launcher.set_logging_handlers(functools.partial(make_log_handlers, plan, log_run_dir, report_dir, os.getpid()))
    name = getattr(fn, "__name__", type(fn).__name__)
    logger.info(
        "launching %s on %d %s worker(s) across %s%s",
        name,
        plan.world_size,
        plan.device_kind,
        ", ".join(plan.hostnames),
        f"; worker logs in {log_run_dir}" if log_run_dir else "",
    )
    if address is not None:
        logger.info("launcher address for remote hosts: %s; workers meet at %s", address, master_addr)
    _warn_if_bytecode_missing()
    own_stop = None
    if stop is None:  # Our own handler: SIGINT/SIGTERM stop every worker at once (KeyboardInterrupt).
        stop = own_stop = StopRequest()
        graceful = False
    elif not (graceful := is_local_host(plan.hostnames[0])):
        logger.warning(
            "rank 0 runs on %s, not on this machine: Ctrl-C/SIGTERM will stop the workers at once instead of"
            " after a final checkpoint",
            plan.hostnames[0],
        )
    children_before = launch_children()
    started = time.monotonic()
    grace_s = SWEEP_GRACE_S
    handling = own_stop.install() if own_stop is not None else contextlib.nullcontext()
    succeeded = False
    with handling, stop.attach(report_dir, graceful), patched_torchrunx(address) as record:
        try:
            result = launcher.run(WorkerEntry(fn, args))
            succeeded = True
        except (WorkerFailedError, AgentFailedError) as exc:
            raise build_failure(exc, plan, report_dir, log_run_dir) from exc
        except KeyboardInterrupt:
            grace_s = SWEEP_GRACE_INTERRUPTED_S
            logger.warning("interrupted; stopping all workers")
            raise
        except Exception as exc:
            if read_reports(report_dir, "failure"):
                raise build_failure(exc, plan, report_dir, log_run_dir) from exc
            if remote and not read_reports(report_dir, "started"):
                raise _agents_failed(exc, plan, log_run_dir) from exc
            raise
        finally:
            with stop.deferring():  # Every process must be stopped before a signal may interrupt us.
                if not succeeded and record.remote_agents:
                    stop_remote_agents(record, ssh_config)
                sweep(children_before, grace_s)
                shutil.rmtree(report_dir, ignore_errors=True)
    if own_stop is not None and own_stop.signum is not None:
        raise KeyboardInterrupt(f"received {signal_name(own_stop.signum)}")
    logger.debug("%s finished on all workers in %.1fs", name, time.monotonic() - started)
    return [result.rank(i) for i in range(plan.world_size)]

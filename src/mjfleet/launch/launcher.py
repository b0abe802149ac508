"""Run a function on many workers (GPUs, CPU processes, hosts) through torchrunx's public ``Launcher``.

Workers make their own process group (``backend=None``); hosts and worker counts are explicit; worker ``LOCAL_RANK`` k
uses ``cuda:<k // workers_per_device>``. A failing worker hard-exits (:mod:`~mjfleet.launch.worker_entry`), so the
failure surfaces in seconds as :class:`WorkerFailure`; leftover processes are swept. Remote hosts pass a pre-flight
check first (:mod:`~mjfleet.cluster.hosts`) and are told a routable launcher address and ``MASTER_ADDR``.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import functools
import glob
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import psutil

from mjfleet.cluster.hosts import (
    HostError,
    check_gloo_interface,
    is_local_host,
    launcher_address,
    master_address,
    preflight,
    remote_hosts,
)
from mjfleet.errors import UsageError, exception_line
from mjfleet.launch.diagnosis import WorkerFailure as WorkerFailure  # What launch() raises; callers catch it here.
from mjfleet.launch.diagnosis import build_failure
from mjfleet.launch.torchrunx_patches import patched_torchrunx, stop_remote_agents
from mjfleet.launch.worker_entry import REPORT_DIR_ENV, WorkerEntry
from mjfleet.launch.worker_logs import make_log_handlers, read_reports, worker_log_path
from mjfleet.runtime.context import DEVICE_KIND_ENV, MASTER_ADDR_ENV, PG_TIMEOUT_ENV, WORKERS_PER_DEVICE_ENV
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.runtime.processes import SWEEP_GRACE_INTERRUPTED_S, SWEEP_GRACE_S, kill_stopped, sweep
from mjfleet.runtime.stop import StopRequest, signal_name

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOG_DIR_ENV = "TORCHRUNX_LOG_DIR"
# Copied to remote hosts on top of torchrunx's defaults (local agents inherit the launcher's whole environment).
# The OpenMP wait settings travel too, so a remote worker waits as the local ones do: importing mjfleet here set
# them (or the user did, e.g. GOMP_SPINCOUNT=0 on a shared machine), and a remote mjfleet leaves set values alone.
REMOTE_ENV_PATTERNS = ("GLOO*", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MUJOCO*", "MJFLEET*")
SECRET_ENV_PATTERNS = ("WANDB*", "*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*CREDENTIAL*")
"""Variables that never go on a command line: torchrunx exports copied variables inside the agent's ``sh -c``
command, which every user of a host can read (``ps``). These travel inside the launched function's payload and are
set in each worker before it runs (W&B's key, a copied ``*_TOKEN``); names match case-insensitively."""
TORCH_LOGS_FORMAT_ENV = "TORCH_LOGS_FORMAT"
# torch's default log formatter imports torch._dynamo (and sympy, triton) the first time it formats an exception.
# An agent does exactly that when one of its workers fails, so every failure and restart waited for that import
# (6-8 s on a 2-core machine) before the launcher heard of it. A plain format keeps torch's fields without it.
AGENT_TORCH_LOGS_FORMAT = "%(levelname)s %(asctime)s %(process)d %(pathname)s:%(lineno)d] %(message)s"


def split_environment(
    patterns: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The variables of ``env`` (default: this process's) that ``patterns`` copy to the workers, split into the names
    torchrunx may export (each as an exact pattern) and the secrets (:data:`SECRET_ENV_PATTERNS`) with their values."""
    env = os.environ if env is None else env
    names: list[str] = []
    secrets: dict[str, str] = {}
    for name, value in env.items():
        if any(fnmatch.fnmatchcase(name.upper(), p) for p in SECRET_ENV_PATTERNS):
            if name.upper().startswith("WANDB") or any(fnmatch.fnmatch(name, p) for p in patterns):
                secrets[name] = value
        elif any(fnmatch.fnmatch(name, p) for p in patterns):
            names.append(glob.escape(name))
    return tuple(names), secrets


def agent_environment(copy_patterns: Sequence[str], extra: Mapping[str, str]) -> dict[str, str]:
    """The variables torchrunx exports to a remote agent (as torchrunx 0.4.0 chooses them: this machine's variables
    whose names match ``copy_patterns``, then ``extra``). The pre-flight check runs with the same ones."""
    env = {k: v for k, v in os.environ.items() if any(fnmatch.fnmatch(k, p) for p in copy_patterns)}
    return {**env, **extra}


@dataclass(frozen=True)
class LaunchPlan:
    """How to launch workers: where, how many, on which devices, with which logs."""

    device_kind: Literal["cpu", "cuda"]
    """What the workers run on; worker ``LOCAL_RANK`` k uses ``cuda:<k // workers_per_device>``."""
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
        # The plan's invariants, in its own terms: what a command asked for wrongly is said in its flags upstream.
        if self.workers_per_host < 1 or self.workers_per_device < 1:
            raise UsageError(
                f"workers per host ({self.workers_per_host}) and per device ({self.workers_per_device}) must be at"
                " least 1"
            )
        if not self.hostnames or len(set(self.hostnames)) != len(self.hostnames):
            raise UsageError(f"no hosts, or hosts listed more than once: {', '.join(self.hostnames)}")
        if self.device_kind == "cpu" and self.workers_per_device != 1:
            raise UsageError(f"{self.workers_per_device} workers per device needs GPUs: a CPU is not shared")
        gpus = len([e for e in (self.cuda_visible_devices or "").split(",") if e.strip()])
        too_few = gpus * self.workers_per_device < self.workers_per_host
        if self.device_kind == "cuda" and self.cuda_visible_devices is not None and too_few:
            shared = f" x {self.workers_per_device} workers each" if self.workers_per_device > 1 else ""
            raise UsageError(
                f"{self.workers_per_host} GPU workers per host but only {gpus} GPUs{shared}"
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
        if selection.kind == "cuda" and cpu_workers != 1:
            raise UsageError(f"{cpu_workers} CPU workers per host, but GPUs are selected ({selection.describe()})")
        return cls(
            device_kind=selection.kind,
            workers_per_host=selection.num_gpus * workers_per_gpu if selection.kind == "cuda" else cpu_workers,
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


def gpu_sharing_hosts(plan: LaunchPlan, remote: Sequence[str]) -> list[str]:
    """The names of this machine in ``plan`` when there are several and each would take its GPUs, one worker per GPU
    (NCCL fails on the second rank of a device, "Duplicate GPU detected", but only once every agent started)."""
    local = [h for h in plan.hostnames if h not in remote]
    return local if plan.device_kind == "cuda" and plan.workers_per_device == 1 and len(local) > 1 else []


def resolve_worker_log_dir(run_dir: Path, configured: str | None, env: Mapping[str, str]) -> Path | None:
    """Where worker logs go: ``$TORCHRUNX_LOG_DIR``, else ``configured``, else ``<run_dir>/torchrunx``; an empty
    string from either source disables worker log files."""
    value = env.get(LOG_DIR_ENV, configured)
    if value is None:
        return run_dir / "torchrunx"
    if not value.strip():
        return None
    return Path(value).expanduser()


def check_worker_log_dir(log_dir: Path) -> None:
    """:class:`UsageError` unless worker logs can be written under ``log_dir`` (``--torchrunx-log-dir`` or
    ``TORCHRUNX_LOG_DIR``): a folder is made and removed in its nearest existing ancestor, nothing stays."""
    existing = log_dir
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".mjfleet-probe-", dir=existing))
    except OSError as e:
        raise UsageError(
            f"cannot create worker log directory {log_dir}: {e.strerror or e} (--torchrunx-log-dir or {LOG_DIR_ENV})"
        ) from None


def _make_log_run_dir(log_dir: Path) -> Path:
    """Create a fresh ``<log_dir>/<timestamp>`` (suffixed if two launches share a second)."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    for candidate in (log_dir / (f"{stamp}-{n}" if n else stamp) for n in range(1000)):
        try:
            candidate.mkdir(parents=True)
            return candidate.absolute()
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create worker log directory {candidate}: {exc}") from exc
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


class AgentsDidNotJoin(HostError):
    """The agents did not all start and join within ``timeout_s`` (the plan's ``agent_timeout_s``), though every
    host passed its pre-flight check."""

    def __init__(self, exc: BaseException, plan: LaunchPlan, log_run_dir: Path | None) -> None:
        self.timeout_s, self.hosts, self.error = plan.agent_timeout_s, plan.hostnames, exception_line(exc)
        self.logs = f" (agent logs: {log_run_dir}/<host>.log)" if log_run_dir is not None else ""
        super().__init__(self.message(f"{self.timeout_s} s"))

    def message(self, limit: str) -> str:
        """The one-line message; ``limit`` says how long the agents had (a caller may name its setting)."""
        if not remote_hosts(self.hosts):  # nothing between them to block: they started too slowly
            return (
                f"the torchrunx agents on this machine did not all start and join within {limit} ({self.error}); a"
                f" loaded machine or a slow file system starts them slower: allow them longer{self.logs}"
            )
        return (
            f"the torchrunx agents on {', '.join(self.hosts)} did not all start and join within {limit}"
            f" ({self.error}); check that every host can reach the launcher address and the others"
            f" (firewalls, GLOO_SOCKET_IFNAME){self.logs}"
        )


@contextlib.contextmanager
def _stopped_workers_killed_on_failure(report_dir: Path, period_s: float = 1.0) -> Iterator[None]:
    """While the block runs: once a worker has reported a failure, the launch's stopped processes on this machine are
    SIGKILLed (a frozen rank was otherwise reported 30 s after its peers timed out waiting for it)."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(period_s):
            if read_reports(report_dir, "failure") and (
                killed := kill_stopped(psutil.Process().children(recursive=True))
            ):
                logger.warning(
                    "killing stopped launch process(es) %s after a worker failed", ", ".join(map(str, killed))
                )

    watcher = threading.Thread(target=watch, name="mjfleet-stopped-workers", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def launch(fn: Callable[..., T], *args: Any, plan: LaunchPlan, stop: StopRequest | None = None) -> list[T]:
    """Run ``fn(*args)`` (picklable; importable top-level functions are safest) on every worker of ``plan``; return
    the results by global rank. Raises :class:`WorkerFailure` when a worker raises or dies, once all are stopped.

    Without ``stop``, SIGINT and SIGTERM become KeyboardInterrupt (every worker is stopped). With ``stop`` (installed by
    the caller), the first one writes a stop request for ``fn`` to read on rank 0 and return normally, if rank 0 runs
    on this machine; a second signal stops everything at once.
    """
    import torchrunx
    from torchrunx import AgentFailedError, WorkerFailedError

    remote = remote_hosts(plan.hostnames)  # every name must resolve
    if shared := gpu_sharing_hosts(plan, remote):
        raise UsageError(f"hosts {', '.join(shared)} are all this machine: their GPU workers would share its GPUs")
    address = launcher_address(plan.hostnames, plan.launcher_address) if remote else None
    if address is not None:
        check_gloo_interface(address)
    log_run_dir = _make_log_run_dir(plan.log_dir) if plan.log_dir is not None else None
    master_addr = master_address(plan.hostnames, address) if address is not None else None
    report_dir = Path(tempfile.mkdtemp(prefix="mjfleet-launch-"))
    copy_env, secrets = split_environment((*torchrunx.DEFAULT_ENV_VARS_FOR_COPY, *REMOTE_ENV_PATTERNS))
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
    logs = f"; worker logs in {log_run_dir}" if log_run_dir else ""
    where = ", ".join(plan.hostnames)
    logger.info("launching %s on %d %s worker(s) across %s%s", name, plan.world_size, plan.device_kind, where, logs)
    if address is not None:
        logger.info("launcher address for remote hosts: %s; workers meet at %s", address, master_addr)
    _warn_if_bytecode_missing()
    own_stop = None
    if stop is None:  # Our own handler: SIGINT/SIGTERM stop every worker at once (KeyboardInterrupt).
        stop = own_stop = StopRequest()
        graceful = False
    elif not (graceful := is_local_host(plan.hostnames[0])):
        logger.warning(
            "rank 0 runs on %s, not on this machine: Ctrl-C/SIGTERM will stop the workers at once, not cleanly",
            plan.hostnames[0],
        )
    children_before = set(psutil.Process().children())
    started = time.monotonic()
    grace_s = SWEEP_GRACE_S
    handling = own_stop.install() if own_stop is not None else contextlib.nullcontext()
    succeeded = False
    with (
        handling,
        stop.attach(report_dir, graceful),
        patched_torchrunx(address),
        _stopped_workers_killed_on_failure(report_dir),
    ):
        try:
            result = launcher.run(WorkerEntry(fn, args, secrets))
            succeeded = True
        except (WorkerFailedError, AgentFailedError) as exc:
            grace_s = SWEEP_GRACE_INTERRUPTED_S  # the others wait in a collective for the failed rank: nothing to await
            if isinstance(exc, AgentFailedError) and not read_reports(report_dir, "started"):
                raise AgentsDidNotJoin(exc, plan, log_run_dir) from exc  # no worker ever ran
            raise build_failure(exc, plan, report_dir, log_run_dir) from exc
        except KeyboardInterrupt:
            grace_s = SWEEP_GRACE_INTERRUPTED_S
            logger.warning("interrupted; stopping all workers")
            raise
        except Exception as exc:
            if read_reports(report_dir, "failure"):
                raise build_failure(exc, plan, report_dir, log_run_dir) from exc
            if remote and not read_reports(report_dir, "started"):
                raise AgentsDidNotJoin(exc, plan, log_run_dir) from exc
            raise
        finally:
            with stop.deferring():  # Every process must be stopped before a signal may interrupt us.
                if not succeeded and remote:
                    stop_remote_agents(remote, f"{REPORT_DIR_ENV}={report_dir}", ssh_config)
                sweep(children_before, grace_s)
                shutil.rmtree(report_dir, ignore_errors=True)
    if own_stop is not None and own_stop.signum is not None:
        raise KeyboardInterrupt(f"received {signal_name(own_stop.signum)}")
    logger.debug("%s finished on all workers in %.1fs", name, time.monotonic() - started)
    return [result.rank(i) for i in range(plan.world_size)]

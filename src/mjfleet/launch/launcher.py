"""Run a function on many workers (GPUs, CPU processes, hosts) through torchrunx.

torchrunx 0.4.0 quirks handled here:

* ``backend=None``: workers initialise their own process group (see
  :func:`mjfleet.launch.context.init_process_group`), exactly once.
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
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import ipaddress
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal, TypeVar

from mjfleet.errors import UsageError
from mjfleet.launch.context import DEVICE_KIND_ENV
from mjfleet.launch.devices import DeviceSelection
from mjfleet.launch.worker import (
    PG_TIMEOUT_ENV,
    REPORT_ATTR,
    REPORT_DIR_ENV,
    WorkerEntry,
    read_reports,
    set_parent_death_signal,
    write_report,
)
from mjfleet.rl.stop import StopRequest

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOG_DIR_ENV = "TORCHRUNX_LOG_DIR"

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

_SWEEP_GRACE_S = 10.0
# After an interrupt torchrunx has already asked its agents to stop; an agent blocked in its gloo
# sync with the launcher ignores SIGTERM until that sync times out, so waiting longer is pointless.
_SWEEP_GRACE_INTERRUPTED_S = 2.0
_FILE_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class WorkerFailure(RuntimeError):
    """A launched worker raised or died; the message names the rank, the error and its log."""

    def __init__(
        self,
        message: str,
        *,
        rank: int | None,
        error: str,
        details: Sequence[str] = (),
        log_path: Path | None = None,
        other_ranks: Sequence[int] = (),
        retryable: bool = True,
        unresponsive_ranks: Sequence[int] = (),
    ) -> None:
        super().__init__(message)
        self.rank = rank
        self.error = error
        self.details = tuple(details)
        self.log_path = log_path
        self.other_ranks = tuple(other_ranks)
        self.retryable = retryable
        """False when a restart would fail the same way (bad input, NaN training, unimportable code)."""
        self.unresponsive_ranks = tuple(unresponsive_ranks)
        """Ranks that stopped participating while others timed out waiting for them in a collective."""


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


def worker_log_path(log_run_dir: Path, host: str, local_rank: int | None) -> Path:
    """Log file of a worker (or of the host's agent when ``local_rank`` is None)."""
    suffix = "" if local_rank is None else f"[{local_rank}]"
    return log_run_dir / f"{host}{suffix}.log"


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


# --- log server side (runs in torchrunx's forked log-collector process) --------------------------


class _ReportHandler(logging.Handler):
    """Stores reports that workers attach to log records (reaches us from remote hosts too)."""

    def __init__(self, report_dir: Path) -> None:
        super().__init__(logging.NOTSET)
        self.report_dir = report_dir

    def emit(self, record: logging.LogRecord) -> None:
        report = getattr(record, REPORT_ATTR, None)
        if not isinstance(report, dict):
            return
        try:
            write_report(self.report_dir, report)
        except Exception:
            self.handleError(record)


def _record_filter(
    host: str, local_rank: int | None, level: int, *, skip_reports: bool = False
) -> Callable[[Any], bool]:
    # torchrunx tags every record with the launcher's name for the host and the local rank
    # (None for the agent).
    def keep(record: Any) -> bool:
        return (
            getattr(record, "hostname", None) == host
            and getattr(record, "local_rank", "?") == local_rank
            and record.levelno >= level
            and not (skip_reports and hasattr(record, REPORT_ATTR))
        )

    return keep


def _agent_errors_path(report_dir: Path, host_index: int) -> Path:
    return report_dir / f"agent{host_index}.err"


def _make_log_handlers(
    hostnames: tuple[str, ...],
    workers_per_host: int,
    log_run_dir: Path | None,
    file_level: int,
    report_dir: Path,
    echo_rank0: bool,
    launcher_pid: int,
) -> list[logging.Handler]:
    """torchrunx handler factory; called once inside the log collector process."""
    # The collector is a forked daemon that SIGTERM/SIGKILL of the launcher would orphan.
    set_parent_death_signal()
    if os.getppid() != launcher_pid:
        os._exit(0)
    # It shares the launcher's process group (a terminal Ctrl-C reaches it) and inherited the launcher's signal
    # handlers; it must keep forwarding logs while the launcher stops the run cleanly, and is SIGKILLed after.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)

    from torchrunx.utils.log_handling import RedirectHandler

    handlers: list[logging.Handler] = [_ReportHandler(report_dir)]
    for i, host in enumerate(hostnames):
        # Agent errors (e.g. a function workers cannot unpickle) explain failures with no report.
        agent_errors = logging.FileHandler(_agent_errors_path(report_dir, i), delay=True)
        agent_errors.addFilter(_record_filter(host, None, logging.ERROR))
        agent_errors.setFormatter(logging.Formatter("%(message)s"))
        handlers.append(agent_errors)
    if echo_rank0:
        # Failure reports are left out: launch() raises a WorkerFailure that names the root cause.
        echo = RedirectHandler()
        echo.addFilter(_record_filter(hostnames[0], 0, logging.INFO, skip_reports=True))
        handlers.append(echo)
    if log_run_dir is not None:
        formatter = logging.Formatter(_FILE_FORMAT)
        for host in hostnames:
            for local_rank in [None, *range(workers_per_host)]:
                handler = logging.FileHandler(worker_log_path(log_run_dir, host, local_rank))
                handler.addFilter(_record_filter(host, local_rank, file_level))
                handler.setFormatter(formatter)
                handlers.append(handler)
    return handlers


# --- process hygiene -------------------------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, int, str]]:
    """``pid -> (ppid, start time, state)`` from /proc; empty where /proc is unavailable."""
    table: dict[int, tuple[int, int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses; fields follow the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0])
    return table


def _children(pid: int, table: Mapping[int, tuple[int, int, str]]) -> set[int]:
    return {p for p, (ppid, _, _) in table.items() if ppid == pid}


def _descendants(roots: set[int], table: Mapping[int, tuple[int, int, str]]) -> set[int]:
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        found |= frontier
        frontier = {p for p, (ppid, _, _) in table.items() if ppid in frontier} - found
    return found


def _alive(procs: Mapping[int, int]) -> dict[int, int]:
    """Subset of ``pid -> start time`` still running (same start time, not a zombie)."""
    table = _process_table()
    return {
        pid: start
        for pid, start in procs.items()
        if pid in table and table[pid][1] == start and table[pid][2] not in ("Z", "X")
    }


def _sweep(children_before: set[int], grace_s: float = _SWEEP_GRACE_S) -> None:
    """Wait for, then kill, every process the launch started (agents, workers, log collector)."""
    table = _process_table()
    new = _children(os.getpid(), table) - children_before
    procs = {pid: table[pid][1] for pid in _descendants(new, table)}
    deadline = time.monotonic() + grace_s
    while (left := _alive(procs)) and time.monotonic() < deadline:
        _kill_stopped(left)
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = _alive(procs)
        if not left:
            return
        logger.warning("stopping %d leftover launch process(es) with %s", len(left), sig.name)

        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3.0
        while _alive(left) and time.monotonic() < deadline:
            time.sleep(0.1)


def _kill_stopped(procs: Mapping[int, int]) -> None:
    """SIGKILL processes that are stopped (SIGSTOP, a debugger): they cannot exit or handle SIGTERM."""
    table = _process_table()
    for pid, start in procs.items():
        if pid in table and table[pid][1] == start and table[pid][2] in ("T", "t"):
            logger.warning("killing stopped launch process %d", pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class _TermGuard:
    """SIGTERM handler: the first one becomes KeyboardInterrupt, unless cleanup is running."""

    def __init__(self) -> None:
        self.received = False
        self.cleaning = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.received:
            return
        self.received = True
        if not self.cleaning:  # During cleanup it is raised once cleanup is done.
            raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[_TermGuard]:
    """Turn SIGTERM into KeyboardInterrupt so torchrunx's and our cleanup run."""
    guard = _TermGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = signal.signal(signal.SIGTERM, guard)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- failure reporting ------------------------------------------------------------------------------


def _tail(path: Path | None, lines: int) -> list[str]:
    if path is None:
        return []
    try:
        return path.read_text(errors="replace").rstrip().splitlines()[-lines:]
    except OSError:
        return []


def _head(path: Path, lines: int) -> list[str]:
    try:
        return [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()][:lines]
    except OSError:
        return []


@dataclass
class _Diagnosis:
    rank: int | None
    error: str
    details: list[str]
    note: str = ""
    retryable: bool = True
    unresponsive: list[int] = field(default_factory=list)
    user_facing: bool = False
    """The error line says it all: no traceback or log tail is added."""


_TIMEOUT_RE = re.compile(r"timed?\s*out|timeout", re.IGNORECASE)


def _diagnose(exc: BaseException, plan: LaunchPlan, report_dir: Path) -> tuple[_Diagnosis, list[int]]:
    """Find the root-cause rank and error from the workers' reports and what torchrunx raised.

    In order: the earliest report that is not fallout from a lost peer (gloo/NCCL errors in healthy
    ranks usually, but not always, come after the real failure); a native crash that faulthandler
    recorded; ranks that went silent while the others timed out in a collective (a hang); a signal
    death whose PID torch names; the earliest peer-loss report; nothing known.
    """
    failures = sorted(read_reports(report_dir, "failure"), key=lambda r: float(r.get("time", 0.0)))
    failed_ranks = sorted({int(r["rank"]) for r in failures})
    primary = [r for r in failures if not r.get("peer_failure")]
    if primary:
        first = primary[0]
        rank = int(first["rank"])
        # Errors whose message says it all (bad input, NaN training) are shown without their traceback.
        details = [] if first.get("user_facing") else [str(x) for x in first.get("traceback", [])]
        diagnosis = _Diagnosis(
            rank,
            str(first.get("error")),
            details,
            retryable=bool(first.get("retryable", True)),
            user_facing=bool(first.get("user_facing")),
        )
        return diagnosis, [r for r in failed_ranks if r != rank]

    started = sorted(read_reports(report_dir, "started"), key=lambda r: int(r["rank"]))
    for report in started:
        rank = int(report["rank"])
        fault = _head(report_dir / f"fault-rank{rank}.txt", 20)
        if fault:
            diagnosis = _Diagnosis(rank, f"worker process crashed: {fault[0]}", fault)
            return diagnosis, [r for r in failed_ranks if r != rank]

    hang = _diagnose_hang(failures, plan, report_dir)
    if hang is not None:
        return hang, []  # The message already says which ranks timed out waiting.

    raw = str(exc).strip()
    # torch describes signal deaths as "Signal N (SIGX) received by PID p".
    match = re.search(r"PID (\d+)", raw)
    if match and raw.startswith("Signal"):
        for report in started:
            if int(report.get("pid", -1)) == int(match.group(1)):
                rank = int(report["rank"])
                diagnosis = _Diagnosis(rank, f"worker process died: {raw}", [])
                return diagnosis, [r for r in failed_ranks if r != rank]

    # Every report is a lost-peer error: the rank that reported nothing is the one that vanished.
    silent = [int(r["rank"]) for r in started if int(r["rank"]) not in failed_ranks]
    if failures and silent:
        lost = ", ".join(str(r) for r in failed_ranks)
        error = (
            "worker process died without a Python error (killed by a signal such as SIGKILL or the OOM killer,"
            f" or a native crash); rank {lost} lost the connection to it"
        )
        return _Diagnosis(silent[0], error, []), []

    if failures:
        first = failures[0]
        rank = int(first["rank"])
        note = "\n  this looks like fallout from another worker failing; check every rank's log"
        diagnosis = _Diagnosis(rank, str(first.get("error")), [str(x) for x in first.get("traceback", [])], note)
        return diagnosis, [r for r in failed_ranks if r != rank]

    from torchrunx import AgentFailedError

    if isinstance(exc, AgentFailedError):
        error = "a torchrunx agent failed or lost contact (killed, unreachable, or timed out)"
    elif raw.startswith("Signal"):
        error = f"worker process died: {raw}"
    else:
        error = f"worker process died without a Python traceback ({type(exc).__name__})"
    details: list[str] = []
    for i in range(len(plan.hostnames)):
        # Agent errors explain deaths before run_worker ran (e.g. a function that cannot unpickle).
        details = _tail(_agent_errors_path(report_dir, i), 15)
        if details:
            break
    note = ""
    retryable = True
    if any("ModuleNotFoundError" in line for line in details):
        note = "\n  the launched function and its arguments must be importable on every worker"
        retryable = False
    return _Diagnosis(None, error, details, note, retryable=retryable), []


def _diagnose_hang(failures: list[dict[str, Any]], plan: LaunchPlan, report_dir: Path) -> _Diagnosis | None:
    """Name the ranks that stopped participating when the others timed out waiting for them.

    A hung or stopped (SIGSTOP) rank reports nothing, while its peers' collectives time out and they report
    lost-peer errors. The silent ranks are the suspects; if every rank timed out, the ones whose heartbeat
    (last completed iteration) is behind are.
    """
    timeouts = [r for r in failures if _TIMEOUT_RE.search(" ".join([str(r.get("error")), *r.get("traceback", [])]))]
    if not timeouts:
        return None
    failed = {int(r["rank"]) for r in failures}
    beats = {int(b["rank"]): b for b in read_reports(report_dir, "heartbeat")}
    silent = [r for r in range(plan.world_size) if r not in failed]
    if not silent and beats:
        last = {r: int(b.get("iteration", -1)) for r, b in beats.items()}
        if len(set(last.values())) > 1:
            silent = sorted(r for r, it in last.items() if it == min(last.values()))
    if not silent:
        return None
    gave_up = min(float(r.get("time", 0.0)) for r in timeouts)
    rank = silent[0]
    waiting = ", ".join(str(r) for r in sorted({int(r["rank"]) for r in timeouts}))
    error = (
        f"stopped responding ({_progress(beats.get(rank), gave_up)}); rank {waiting} timed out after"
        f" {plan.worker_timeout_s} s waiting for it in a collective (--collective-timeout-s)"
    )
    if len(silent) > 1:
        error += f"; ranks {', '.join(map(str, silent[1:]))} stopped responding too"
    return _Diagnosis(rank, error, [], retryable=True, unresponsive=silent)


def _progress(beat: dict[str, Any] | None, gave_up: float) -> str:
    if beat is None:
        return "no heartbeat recorded: it never finished setting up, or runs on another machine"
    age = max(0.0, gave_up - float(beat.get("time", gave_up)))
    if beat.get("phase") == "ready":
        it = beat.get("iteration")
        return f"set up at iteration {it} but completed no iteration; last heartbeat {age:.0f} s earlier"
    return f"last completed iteration {beat.get('iteration')}, {age:.0f} s before the others gave up"


def _build_failure(exc: BaseException, plan: LaunchPlan, report_dir: Path, log_run_dir: Path | None) -> WorkerFailure:
    """Turn what torchrunx raised plus the workers' reports into one readable error."""
    if not read_reports(report_dir, "failure"):
        # The collector may still be writing a report that a dying worker sent moments ago.
        time.sleep(0.5)
    diagnosis, other_ranks = _diagnose(exc, plan, report_dir)
    rank = diagnosis.rank
    details = diagnosis.details
    log_path = None
    if rank is None:
        where = "launch"
    else:
        host, local_rank = plan.locate(rank)
        where = f"worker rank {rank} ({host}, local rank {local_rank})"
        if log_run_dir is not None:
            log_path = worker_log_path(log_run_dir, host, local_rank)
            if not diagnosis.user_facing:
                details = details or _tail(log_path, 10)
    message = f"{where} failed: {diagnosis.error}"
    if log_path is not None:
        message += f" (log: {log_path})"
    elif log_run_dir is not None:
        message += f" (logs: {log_run_dir})"
    if details:
        message += "\n" + "\n".join(f"    {line}" for line in details)
    if other_ranks:
        message += f"\n  ranks {', '.join(map(str, other_ranks))} failed too"
    message += diagnosis.note
    return WorkerFailure(
        message,
        rank=rank,
        error=diagnosis.error,
        details=details,
        log_path=log_path,
        other_ranks=other_ranks,
        retryable=diagnosis.retryable,
        unresponsive_ranks=diagnosis.unresponsive,
    )


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


def _is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine (torchrunx's own test: loopback, or an address shared with it)."""
    try:
        ip = ipaddress.ip_address(socket.gethostbyname(host))
        if ip.is_loopback:
            return True
        host_addrs = {a[4][0] for a in socket.getaddrinfo(str(ip), None)}
        local_addrs = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except (OSError, ValueError):
        return False
    return bool(host_addrs & local_addrs)


@contextlib.contextmanager
def _agents_in_own_session() -> Iterator[None]:
    """Start local torchrunx agents (and so their workers) in a new session while the block runs.

    torchrunx 0.4.0 starts local agents with ``Popen(shell=True)`` in the launcher's process group, so a
    terminal Ctrl-C would reach every agent and worker at once and kill them mid-iteration. In their own session
    only the launcher sees it and decides: stop cleanly after the iteration, or stop everything. Remote agents
    (SSH) are not affected by a local terminal and are started by torchrunx as usual.
    """
    import torchrunx.launcher as torchrunx_launcher

    original = torchrunx_launcher.execute_command  # pyright: ignore[reportPrivateImportUsage]

    def execute_command(
        command: str,
        hostname: str,
        *,
        ssh_config_file: str | os.PathLike[str] | None = None,
        return_stdout_stderr: bool = False,
    ) -> tuple[str, str]:
        if return_stdout_stderr or not _is_local_host(hostname):
            return original(
                command, hostname, ssh_config_file=ssh_config_file, return_stdout_stderr=return_stdout_stderr
            )
        subprocess.Popen(command, shell=True, text=True, start_new_session=True)
        return ("", "")

    torchrunx_launcher.execute_command = execute_command  # pyright: ignore[reportPrivateImportUsage]
    try:
        yield
    finally:
        torchrunx_launcher.execute_command = original  # pyright: ignore[reportPrivateImportUsage]


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
    log_run_dir = _make_log_run_dir(plan.log_dir) if plan.log_dir is not None else None
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
            _make_log_handlers,
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
    if stop is not None and not _is_local_host(plan.hostnames[0]):
        graceful = False
        logger.warning(
            "rank 0 runs on %s, not on this machine: Ctrl-C/SIGTERM will stop the workers at once instead of"
            " after a final checkpoint",
            plan.hostnames[0],
        )
    children_before = _children(os.getpid(), _process_table())
    started = time.monotonic()
    grace_s = _SWEEP_GRACE_S
    term_guard = _sigterm_as_interrupt() if stop is None else contextlib.nullcontext(None)
    stop_channel = stop.attach(report_dir, graceful) if stop is not None else contextlib.nullcontext()
    with term_guard as guard, stop_channel, _agents_in_own_session():
        try:
            result = launcher.run(WorkerEntry(fn, args))
        except (WorkerFailedError, AgentFailedError) as exc:
            raise _build_failure(exc, plan, report_dir, log_run_dir) from exc
        except KeyboardInterrupt:
            grace_s = _SWEEP_GRACE_INTERRUPTED_S
            logger.warning("interrupted; stopping all workers")
            raise
        except Exception as exc:
            if read_reports(report_dir, "failure"):
                raise _build_failure(exc, plan, report_dir, log_run_dir) from exc
            raise
        finally:
            if guard is not None:
                guard.cleaning = True
            with stop.deferring() if stop is not None else contextlib.nullcontext():
                _sweep(children_before, grace_s)
                shutil.rmtree(report_dir, ignore_errors=True)
        if guard is not None and guard.received:
            raise KeyboardInterrupt("received SIGTERM")
    logger.debug("%s finished on all workers in %.1fs", name, time.monotonic() - started)
    return [result.rank(i) for i in range(plan.world_size)]

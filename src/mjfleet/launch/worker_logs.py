"""Where launched workers' log records go: per-worker files, the launcher console, failure reports.

The handlers run in torchrunx's log-collector process, which the launcher forks; every record a worker or agent
emits reaches it over the network, so this works for remote hosts too.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mjfleet.errors import UsageError
from mjfleet.launch.worker import REPORT_ATTR, set_parent_death_signal, write_report

LOG_DIR_ENV = "TORCHRUNX_LOG_DIR"
FILE_FORMAT = "%(asctime)s %(levelname)s %(message)s"


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


def make_log_run_dir(log_dir: Path) -> Path:
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


def agent_errors_path(report_dir: Path, host_index: int) -> Path:
    return report_dir / f"agent{host_index}.err"


def make_log_handlers(
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
        agent_errors = logging.FileHandler(agent_errors_path(report_dir, i), delay=True)
        agent_errors.addFilter(_record_filter(host, None, logging.ERROR))
        agent_errors.setFormatter(logging.Formatter("%(message)s"))
        handlers.append(agent_errors)
    if echo_rank0:
        # Failure reports are left out: launch() raises a WorkerFailure that names the root cause.
        echo = RedirectHandler()
        echo.addFilter(_record_filter(hostnames[0], 0, logging.INFO, skip_reports=True))
        handlers.append(echo)
    if log_run_dir is not None:
        formatter = logging.Formatter(FILE_FORMAT)
        for host in hostnames:
            for local_rank in [None, *range(workers_per_host)]:
                handler = logging.FileHandler(worker_log_path(log_run_dir, host, local_rank))
                handler.addFilter(_record_filter(host, local_rank, file_level))
                handler.setFormatter(formatter)
                handlers.append(handler)
    return handlers

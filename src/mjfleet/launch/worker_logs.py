"""The launcher's side of what workers log: per-worker log files, rank 0's records on the console, and the reports
workers attach to log records, stored in the launch report directory for :mod:`~mjfleet.launch.diagnosis`.

The handlers run in torchrunx's log collector, which the launcher forks; every record a worker or agent emits reaches
it over the network, remote hosts included.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mjfleet.files import write_text_atomic
from mjfleet.launch.worker_entry import REPORT_ATTR, set_parent_death_signal

if TYPE_CHECKING:
    from mjfleet.launch.launcher import LaunchPlan

logger = logging.getLogger(__name__)


def worker_log_path(log_run_dir: Path, host: str, local_rank: int | None) -> Path:
    """Log file of a worker (or of the host's agent when ``local_rank`` is None)."""
    suffix = "" if local_rank is None else f"[{local_rank}]"
    return log_run_dir / f"{host}{suffix}.log"


def agent_errors_path(report_dir: Path, host_index: int) -> Path:
    return report_dir / f"agent{host_index}.err"


def write_report(report_dir: Path, report: dict[str, Any]) -> None:
    """Store ``report``, replacing the rank's previous one of its kind (rename: readers never see half a file)."""
    write_text_atomic(report_dir / f"{report['kind']}-rank{report['rank']}.json", json.dumps(report))


def read_reports(report_dir: Path, kind: str) -> list[dict[str, Any]]:
    """All stored reports of ``kind`` (``"started"``, ``"heartbeat"``, ``"failure"``); unreadable ones are skipped."""
    reports = []
    for path in sorted(report_dir.glob(f"{kind}-rank*.json")):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            logger.debug("skipping unreadable report %s", path, exc_info=True)
    return reports


class _ReportHandler(logging.Handler):
    def __init__(self, report_dir: Path) -> None:
        super().__init__(logging.NOTSET)
        self.report_dir = report_dir

    def emit(self, record: logging.LogRecord) -> None:
        report = getattr(record, REPORT_ATTR, None)
        if isinstance(report, dict):
            try:
                write_report(self.report_dir, report)
            except Exception:
                self.handleError(record)


_LOGGER_PREFIX = re.compile(r"([A-Za-z_][\w.]*):")
"""torchrunx puts the worker's logger name in front of a forwarded record's message (``mjfleet.rl.runner:it 1/2``)."""


class _Echo(logging.Handler):
    """Hands a record to the logger of its name: the forked collector inherited the launcher's (console) handlers.

    A worker's mjfleet record goes to its own logger, as an in-process run's would (the same lines, under the same
    levels: ``bench`` keeps its workers' progress off the console); another library's below a warning stays in the
    worker's log file (OpenGL's notes on its accelerator module)."""

    def emit(self, record: logging.LogRecord) -> None:
        prefix = _LOGGER_PREFIX.match(record.msg) if isinstance(record.msg, str) else None
        if prefix is not None:
            name = prefix.group(1)
            if name != "mjfleet" and not name.startswith("mjfleet."):
                if record.levelno < logging.WARNING:
                    return
            else:
                record = logging.makeLogRecord({**record.__dict__, "name": name, "msg": record.msg[prefix.end() :]})
        named = logging.getLogger(record.name)
        if named.isEnabledFor(record.levelno):
            named.handle(record)


def _only(handler: logging.Handler, host: str, local_rank: int | None, level: int, fmt: str = "") -> logging.Handler:
    """``handler`` for the records of one agent (``local_rank`` None) or worker at ``level`` and above."""

    # torchrunx tags every record with the launcher's name for the host and the local rank (None for the agent).
    def keep(record: Any) -> bool:
        ours = getattr(record, "hostname", None) == host and getattr(record, "local_rank", "?") == local_rank
        return ours and record.levelno >= level

    handler.addFilter(keep)
    handler.setFormatter(logging.Formatter(fmt or None))
    return handler


def make_log_handlers(
    plan: LaunchPlan, log_run_dir: Path | None, report_dir: Path, launcher_pid: int
) -> list[logging.Handler]:
    """torchrunx handler factory, called once in the log collector. Started and heartbeat reports are DEBUG records,
    below the INFO that files and the console show; a failure report is an ERROR record with the traceback, for the
    rank's log file but not the console, where ``launch()`` raises a ``WorkerFailure`` naming the root cause."""
    # The collector is a forked daemon that SIGTERM/SIGKILL of the launcher would orphan.
    set_parent_death_signal()
    if os.getppid() != launcher_pid:
        os._exit(0)
    # It shares the launcher's process group (a terminal Ctrl-C reaches it) and inherited the launcher's signal
    # handlers; it must keep forwarding logs while the launcher stops the run cleanly, and is SIGKILLed after.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)

    # Agent errors (e.g. a function workers cannot unpickle) explain failures with no report.
    handlers: list[logging.Handler] = [_ReportHandler(report_dir)]
    for i, host in enumerate(plan.hostnames):
        errors = logging.FileHandler(agent_errors_path(report_dir, i), delay=True)
        handlers.append(_only(errors, host, None, logging.ERROR, "%(message)s"))
    # Rank 0's records go to the launcher's "torchrunx.<host>.0" logger, reports aside; no agent's record does, which
    # keeps torchrunx's spurious SignalException after a success off the console.
    echo = _only(_Echo(), plan.hostnames[0], 0, logging.INFO)
    echo.addFilter(lambda record: not hasattr(record, REPORT_ATTR))
    handlers.append(echo)
    if log_run_dir is not None:
        for host in plan.hostnames:
            for local_rank in [None, *range(plan.workers_per_host)]:
                file = logging.FileHandler(worker_log_path(log_run_dir, host, local_rank))
                handlers.append(_only(file, host, local_rank, logging.INFO, "%(asctime)s %(levelname)s %(message)s"))
    return handlers

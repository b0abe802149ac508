"""Turn a failed launch into one readable error: which rank failed, why, and where its log is, from the workers'
reports (started, heartbeat, failure) that the log collector stored and faulthandler's file of a native crash."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mjfleet.launch.worker_logs import agent_errors_path, read_reports, worker_log_path
from mjfleet.runtime.nccl import nccl_hint

if TYPE_CHECKING:
    from mjfleet.launch.launcher import LaunchPlan


@dataclass(eq=False)
class WorkerFailure(RuntimeError):
    """A launched worker raised or died; the message names the rank, the error and its log."""

    message: str
    _: KW_ONLY
    rank: int | None
    error: str
    details: Sequence[str] = ()
    log_path: Path | None = None
    retryable: bool = True
    """False when a restart would fail the same way (bad input, unimportable code, a non-retryable error)."""
    usage_error: bool = False
    """The worker found bad input (a :class:`~mjfleet.errors.UsageError`): exit code 2, as in one process."""
    finishable: bool = True
    """Whether ``--finish`` may take the run on once the cause is mended (:func:`mjfleet.errors.is_finishable`)."""
    user_message: str = ""
    """A usage error's own message, whole and without its type (what one process prints)."""
    unresponsive_ranks: Sequence[int] = ()
    """Ranks that stopped participating while others timed out waiting for them in a collective."""

    def __post_init__(self) -> None:
        super().__init__(self.message)
        self.details, self.unresponsive_ranks = tuple(self.details), tuple(self.unresponsive_ranks)


def _lines(path: Path) -> list[str]:
    """The non-blank lines of a file; none if it is missing or unreadable."""
    try:
        return [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
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
    usage_error: bool = False
    finishable: bool = True
    user_message: str = ""
    others_named: bool = False
    """The error already names the other ranks that failed."""


_TIMEOUT_RE = re.compile(r"timed?\s*out|timeout", re.IGNORECASE)


def _diagnose(exc: BaseException, plan: LaunchPlan, report_dir: Path, failures: list[dict[str, Any]]) -> _Diagnosis:
    """The root-cause rank and error, from the workers' reports and what torchrunx raised. In order: the earliest
    report that is not fallout from a lost peer (which usually, not always, comes after the real failure); a native
    crash that faulthandler recorded; ranks silent while the others timed out in a collective (a hang); a signal
    death whose PID torch names; the earliest peer-loss report; nothing known."""
    failed_ranks = sorted({int(r["rank"]) for r in failures})
    if primary := [r for r in failures if not r.get("peer_failure")]:
        first, rank = primary[0], int(primary[0]["rank"])
        # Errors whose message says it all (bad input) are shown without their traceback.
        user_facing = bool(first.get("user_facing"))
        details = [] if user_facing else [str(x) for x in first.get("traceback", [])]
        retryable = bool(first.get("retryable", True))
        usage = bool(first.get("usage_error"))
        return _Diagnosis(
            rank,
            str(first.get("error")),
            details,
            retryable=retryable,
            user_facing=user_facing,
            usage_error=usage,
            finishable=bool(first.get("finishable", retryable)),  # a report without it: as its exit code said
            user_message=str(first.get("message", "")),
        )

    started = sorted(read_reports(report_dir, "started"), key=lambda r: int(r["rank"]))
    for report in started:
        rank = int(report["rank"])
        fault_path = report_dir / f"fault-rank{rank}.txt"
        fault = _lines(fault_path)[:20]
        if fault:
            note = _watchdog_note(rank, fault[0], fault_path, plan, report_dir)
            return _Diagnosis(rank, f"worker process crashed: {fault[0]}", fault, note)

    hang = _diagnose_hang(failures, plan, report_dir)
    if hang is not None:
        return hang

    raw = str(exc).strip()
    # torch describes signal deaths as "Signal N (SIGX) received by PID p".
    match = re.search(r"PID (\d+)", raw)
    if match and raw.startswith("Signal"):
        for report in started:
            if int(report.get("pid", -1)) == int(match.group(1)):
                return _Diagnosis(int(report["rank"]), f"worker process died: {raw}", [])

    # Every report is a lost-peer error: the rank that reported nothing is the one that vanished.
    silent = [int(r["rank"]) for r in started if int(r["rank"]) not in failed_ranks]
    if failures and silent:
        lost = ", ".join(str(r) for r in failed_ranks)
        error = (
            "worker process died without a Python error (killed by a signal such as SIGKILL or the OOM killer,"
            f" or a native crash); rank {lost} lost the connection to it"
        )
        return _Diagnosis(silent[0], error, [], others_named=True)

    if failures:
        first = failures[0]
        note = "\n  this looks like fallout from another worker failing; check every rank's log"
        traceback = [str(x) for x in first.get("traceback", [])]
        return _Diagnosis(int(first["rank"]), str(first.get("error")), traceback, note)

    from torchrunx import AgentFailedError

    if isinstance(exc, AgentFailedError):
        error = "a torchrunx agent failed or lost contact (killed, unreachable, or timed out)"
    elif raw.startswith("Signal"):
        error = f"worker process died: {raw}"
    else:
        error = f"worker process died without a Python traceback ({type(exc).__name__})"
    # Agent errors explain deaths before WorkerEntry ran (e.g. a function that cannot unpickle).
    logged = (_lines(agent_errors_path(report_dir, i))[-15:] for i in range(len(plan.hostnames)))
    details = next((lines for lines in logged if lines), [])
    if any("ModuleNotFoundError" in line for line in details):
        note = "\n  the launched function and its arguments must be importable on every worker"
        return _Diagnosis(None, error, details, note, retryable=False)
    return _Diagnosis(None, error, details)


def _watchdog_note(rank: int, first_line: str, fault_path: Path, plan: LaunchPlan, report_dir: Path) -> str:
    """A hint when an abort looks like NCCL's watchdog ending a rank that waited for a hung peer: NCCL aborts the
    waiting rank (SIGABRT) on a collective timeout, so the crashed rank may be the victim (or not: only a hint)."""
    if "Aborted" not in first_line or plan.device_kind != "cuda" or plan.workers_per_device != 1:
        return ""  # only NCCL (one worker per GPU) has the watchdog; gloo raises a Python error
    beat = {int(b["rank"]): b for b in read_reports(report_dir, "heartbeat")}.get(rank)
    if beat is None:
        return ""
    try:
        aborted_at = fault_path.stat().st_mtime  # faulthandler writes the file as the rank dies
    except OSError:
        return ""
    quiet_s = aborted_at - float(beat.get("time", aborted_at))
    # The watchdog fires one timeout after the collective began, which is at most an iteration after the heartbeat.
    if not 0.9 * plan.worker_timeout_s <= quiet_s <= 1.5 * plan.worker_timeout_s + 60:
        return ""
    return (
        f"\n  it aborted {quiet_s:.0f} s after its last heartbeat, about the collective timeout"
        f" ({plan.worker_timeout_s} s): this is how NCCL's watchdog ends a rank that waited in a collective for a"
        " peer that stopped responding, so the rank at fault may be another one; check every rank's log"
    )


def _diagnose_hang(failures: list[dict[str, Any]], plan: LaunchPlan, report_dir: Path) -> _Diagnosis | None:
    """The ranks that stopped participating while the others timed out waiting for them: a hung or stopped (SIGSTOP)
    rank reports nothing while its peers report lost-peer errors. If every rank timed out, those whose heartbeat (last
    completed iteration) is behind are the suspects."""
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
        f" {plan.worker_timeout_s} s waiting for it in a collective"
    )
    if len(silent) > 1:
        error += f"; ranks {', '.join(map(str, silent[1:]))} stopped responding too"
    return _Diagnosis(rank, error, [], unresponsive=silent, others_named=True)


def _progress(beat: dict[str, Any] | None, gave_up: float) -> str:
    if beat is None:
        return "no heartbeat recorded: it never finished setting up"
    age = max(0.0, gave_up - float(beat.get("time", gave_up)))
    if beat.get("phase") == "ready":
        it = beat.get("iteration")
        return f"set up at iteration {it} but completed no iteration; last heartbeat {age:.0f} s earlier"
    return f"last completed iteration {beat.get('iteration')}, {age:.0f} s before the others gave up"


def build_failure(exc: BaseException, plan: LaunchPlan, report_dir: Path, log_run_dir: Path | None) -> WorkerFailure:
    """Turn what torchrunx raised plus the workers' reports into one readable error."""
    failures = sorted(read_reports(report_dir, "failure"), key=lambda r: float(r.get("time", 0.0)))
    diagnosis = _diagnose(exc, plan, report_dir, failures)
    rank = diagnosis.rank
    other_ranks = [] if diagnosis.others_named else sorted({int(r["rank"]) for r in failures} - {rank})
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
                details = details or _lines(log_path)[-10:]
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
    if hint := nccl_hint("\n".join([diagnosis.error, *details])):
        message += f"\n  hint: {hint}"
    return WorkerFailure(
        message,
        rank=rank,
        error=diagnosis.error,
        details=details,
        log_path=log_path,
        retryable=diagnosis.retryable,
        usage_error=diagnosis.usage_error,
        finishable=diagnosis.finishable,
        user_message=diagnosis.user_message,
        unresponsive_ranks=diagnosis.unresponsive,
    )

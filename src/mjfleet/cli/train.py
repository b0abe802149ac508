"""``train <task> [overrides]``: parse, then :func:`mjfleet.train.run`, then an exit code.

Checks and planning live in :mod:`mjfleet.train` (the same for every entry point): a rejected command leaves
nothing behind, and ``--dry-run`` prints the plan that would run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import psutil

# Before mujoco is imported (it picks its GL platform then): training videos render headless, as play's do; launched
# workers inherit it.
os.environ.setdefault("MUJOCO_GL", "egl")

from mjfleet.cli.args import parse, parse_known, print_help, wants_help, write_out
from mjfleet.config_io import load_yaml, settings_by_name, update_dataclass
from mjfleet.console import UNWRAPPED, configure_logging
from mjfleet.envs.config import EnvConfig
from mjfleet.errors import (
    FAILED_EXIT_CODE,
    FATAL_EXIT_CODE,
    PEER_LOST_EXIT_CODE,
    USAGE_EXIT_CODE,
    FatalTrainingError,
    PeerFailed,
    RanksMissing,
    UsageError,
    exception_line,
    exits_on_usage_error,
    is_finishable,
    usage_line,
)
from mjfleet.launch.diagnosis import WorkerFailure
from mjfleet.rl.config import DEFAULT_LEARNER, AgentConfig
from mjfleet.rl.evaluation.stop_condition import StopCondition
from mjfleet.rl.learners.registry import learner_entry, learner_names
from mjfleet.rl.reporting.records import PROGRESS_FILE, WorkerResult, read_progress
from mjfleet.runs.ending import Ending, RunEnd, command_prefix, ending_lines, known_model_files
from mjfleet.runs.fingerprint import recorded_values
from mjfleet.runs.record import RunRecord
from mjfleet.runtime.devices import trains_on_cpu
from mjfleet.runtime.nccl import nccl_hint
from mjfleet.runtime.peers import is_peer_failure
from mjfleet.runtime.processes import hard_exit
from mjfleet.runtime.stop import StopRequest, exit_code, signal_name
from mjfleet.tasks.registry import get_task
from mjfleet.tasks.spec import TaskSpec
from mjfleet.train import Prepared, TrainConfig, describe, prepare, run
from mjfleet.train.external import OWN_LAUNCHER_FIELDS, started_by_another_launcher

logger = logging.getLogger("mjfleet.train")


def parse_args(argv: list[str], prog: str = "train") -> TrainConfig:
    """``<task> [--field value ...]`` -> a complete :class:`TrainConfig` with the task's defaults (not yet checked:
    :func:`mjfleet.train.prepare` does that). With ``--finish <run_dir>`` the defaults are the settings that run
    was started with."""
    if not argv or argv[0].startswith("-"):
        if wants_help(argv):
            generic = TrainConfig(env=EnvConfig(), agent=AgentConfig())
            print_help(TrainConfig, generic, prog, "Train a task. Defaults below are generic; each task sets its own.")
        raise UsageError(f"usage: {prog} <task> [OPTIONS]; run list-tasks to see the task ids")
    spec = get_task(argv[0])
    command = f"{prog} {spec.id}"
    if any(a == "--finish" or a.startswith("--finish=") for a in argv[1:]):
        source, rest = parse_known(FinishSource, argv[1:], command)
        try:
            recorded = None if source.finish is None else recorded_config(spec, source.finish)
        except UsageError:
            if not wants_help(rest):
                raise
            recorded = None  # --help with a run that cannot be read: the task's defaults
        if source.finish is not None and recorded is not None:
            cfg = parse(TrainConfig, rest, command, recorded)
            cfg.task = spec.id
            # Where a new run would go and which job it belongs to: the run continues in its own directory.
            for flag, name in (("--log-root", "log_root"), ("--run-id", "run_id")):
                if getattr(cfg, name) != getattr(recorded, name):
                    logger.warning("%s has no effect with --finish: the run continues in %s", flag, source.finish)
            return cfg
    on_cpu, learner = _device_and_learner(spec, argv[1:], command)
    env, agent = spec.defaults(on_cpu, learner)
    default = TrainConfig(env=env, agent=agent, task=spec.id)
    differences = [d for d in spec.cpu_differences() if _learner_reads(learner, d.partition(" ")[0])]
    notes = [f"{CPU_DEFAULTS_NOTE} {'; '.join(differences)}."] if on_cpu and differences else []
    if success := spec.success_doc():
        notes.insert(0, f"{spec.description} Success (`success` of --stop-when, play's success_rate): {success}")
    if learner_entry(learner).off_policy:
        note = OFF_POLICY_NOTE if spec.has_off_policy_recipe(on_cpu) else NO_OFF_POLICY_NOTE
        notes.append(note.format(learner=learner))
    description = "\n\n".join([*notes, TrainConfig.__doc__ or ""]) if notes else None
    cfg = parse(TrainConfig, argv[1:], command, default, description)
    cfg.task = spec.id
    warn_unread_settings(cfg.agent, default.agent)
    return cfg


def warn_unread_settings(agent: AgentConfig, default: AgentConfig) -> None:
    """Warn about each ``--agent.<group>.*`` setting changed from ``default`` in a group the learner does not read
    (``--agent.sac.batch-size`` with PPO): it would be taken without effect."""
    if agent.learner not in learner_names():
        return  # refused with the registered names when the run is checked
    reads = learner_entry(agent.learner).settings
    for group in dataclasses.fields(agent):
        values, defaults = getattr(agent, group.name), getattr(default, group.name)
        if group.name in ("policy", reads) or not dataclasses.is_dataclass(values):
            continue
        changed = [
            f"--agent.{group.name}.{f.name.replace('_', '-')}"
            for f in dataclasses.fields(values)
            if getattr(values, f.name) != getattr(defaults, f.name)
        ]
        if changed:
            logger.warning(
                "%s %s no effect with --agent.learner %s, which reads %s",
                ", ".join(changed),
                "has" if len(changed) == 1 else "have",
                agent.learner,
                f"--agent.{reads}.* and --agent.policy.*" if reads else "--agent.policy.*",
            )


@dataclass
class FinishSource:
    """The option ``train`` reads first: the run whose settings become the defaults of every other option."""

    finish: Path | None = None
    """``--finish``."""


def recorded_config(spec: TaskSpec, run_dir: Path) -> TrainConfig:
    """The :class:`TrainConfig` a run was started with, read back from its ``params/`` (``--finish``)."""
    params = run_dir / "params"
    if not run_dir.exists():
        raise UsageError(f"--finish {run_dir}: no such directory")
    if run_dir.is_file():
        raise UsageError(f"--finish {run_dir}: a file; --finish takes the run's directory ({run_dir.parent})")
    if not (params / "run.yaml").is_file():
        raise UsageError(
            f"--finish {run_dir}: not a run directory (no {params / 'run.yaml'}); --resume starts a new run from a"
            " checkpoint"
        )
    # A setting the run predates takes the value it trained with where that is not today's default (ADDED).
    env_yaml, agent_yaml, run_yaml = params / "env.yaml", params / "agent.yaml", params / "run.yaml"
    env = update_dataclass(spec.env_cfg(), recorded_values(load_yaml(env_yaml), "env"), env_yaml)
    agent = update_dataclass(spec.agent_cfg(), recorded_values(load_yaml(agent_yaml), "agent"), agent_yaml)
    values = load_yaml(run_yaml)
    if started_by_another_launcher(os.environ):
        # Finished as a rank of torchrun's or srun's job: that launcher decides what mjfleet's own decided at the
        # run's start (refused there as if typed: "--hostnames is for mjfleet's own launcher").
        for name in OWN_LAUNCHER_FIELDS:
            values.pop(name, None)
    stop_when = values.pop("stop_when", None)
    cfg = update_dataclass(TrainConfig(env=env, agent=agent, task=spec.id), values, run_yaml)
    cfg.stop_when = None
    if isinstance(stop_when, dict):
        try:
            cfg.stop_when = StopCondition(**stop_when)
        except TypeError:
            raise UsageError(f"{run_yaml}: stop_when is {stop_when!r}, not a key, an op and a value") from None
    record = RunRecord.read(run_dir)
    if record is not None:  # its end as job.json has it: an earlier --finish may have extended it
        cfg.agent.max_iterations = record.final_iteration - record.start_iteration
    cfg.finish, cfg.dry_run = run_dir, False
    return cfg


CPU_DEFAULTS_NOTE = "Defaults below: this task's for training on the CPU, where they differ from the GPU's:"


OFF_POLICY_NOTE = "Defaults below: this task's recipe for an off-policy learner ({learner})."
NO_OFF_POLICY_NOTE = (
    "This task has no recipe for an off-policy learner: {learner} takes its generic settings on the task's"
    " environment counts and iterations (docs/learners.md)."
)


def _learner_reads(learner: str, setting: str) -> bool:
    """Whether ``learner`` reads the dotted ``setting`` (``agent.algorithm.*`` is PPO's alone)."""
    parts = setting.split(".")
    if parts[0] != "agent" or len(parts) < 3:
        return True
    return parts[1] == "policy" or parts[1] == learner_entry(learner).settings


def _device_and_learner(spec: TaskSpec, args: list[str], command: str) -> tuple[bool, str]:
    """Whether the command trains on the CPU, for a task with defaults of its own there, and with which learner (a
    task may have an off-policy recipe; help names what the learner reads): read before the defaults are chosen
    (without ``--help``, so help shows the ones that apply). Only ``--agent.learner`` is read for the learner; the
    device needs a first parse of every flag."""
    chosen = parse_known(LearnerSource, args, command)[0].agent.learner
    learner = chosen if chosen in learner_names() else DEFAULT_LEARNER  # validate() says which are known
    if not spec.has_cpu_defaults:
        return False, learner
    probe = TrainConfig(env=spec.env_cfg(), agent=spec.agent_cfg(), task=spec.id)
    try:
        parsed = parse(TrainConfig, [a for a in args if a not in ("-h", "--help")], command, probe)
    except UsageError:
        if not wants_help(args):
            raise
        return False, learner  # help for a command with other errors: the GPU's defaults
    return trains_on_cpu(parsed.gpu_ids), learner


@dataclass
class _LearnerName:
    learner: str = DEFAULT_LEARNER
    """``--agent.learner``."""


@dataclass
class LearnerSource:
    """The option ``train`` reads first for a task with an off-policy recipe: the learner, whose defaults differ."""

    agent: _LearnerName = field(default_factory=_LearnerName)
    """``--agent.*``."""


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``train``.

    Exit codes: 0 done (or nothing left to train), 1 training failed, 2 invalid input, 3 training cannot go on
    (diverged; a restart would fail the same way), 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM), 138 one
    rank of another launcher's job lost another rank or node. docs/guides/runs.md says which a launcher should retry.
    """
    began = _process_start()
    configure_logging()
    try:
        cfg = parse_args(sys.argv[1:] if argv is None else argv)
        prepared = prepare(cfg)
    except FatalTrainingError as e:  # the run it would continue failed for good
        logger.error("%s", e)
        raise SystemExit(FATAL_EXIT_CODE) from None
    except KeyboardInterrupt:  # before anything was created: no traceback, and the code of a Ctrl-C
        raise SystemExit(exit_code(2)) from None  # SIGINT
    external = prepared.external
    if external is not None and external.rank != 0:
        logging.getLogger("mjfleet").setLevel(logging.WARNING)  # rank 0 speaks for the job
    spec = get_task(cfg.task)
    if prepared.selection.kind == "cpu" and spec.has_cpu_defaults and cfg.finish is None:
        differences = spec.cpu_differences(settings_by_name(cfg.env, cfg.agent))  # those no flag overrode
        contacts = spec.env_defaults(on_cpu=True).sim.training_contacts
        if contacts.active(on_gpu=False) and not contacts.active(on_gpu=True):  # the same setting, another physics
            differences.append(f"training contacts: {contacts.describe()} (GPU: the robot file's)")
        if differences:
            logger.info(
                "defaults of %s on the CPU, where they differ from the GPU's: %s", cfg.task, "; ".join(differences)
            )
    if cfg.dry_run:
        write_out(describe(prepared))
        return
    run_dirs: list[Path] = [] if prepared.run is None else [prepared.run.run_dir]
    end = _Closing(prepared, began, run_dirs)
    stop = StopRequest()
    with stop.install():
        try:
            results = run(prepared, stop, started=run_dirs.append)
        except UsageError as e:
            if external is None:
                raise
            # One rank of another launcher's job (rank 0's refusal shared with every rank, a checkpoint that does not
            # fit): its one line, and this rank exits now, as on any failure: NCCL or gloo teardown at exit can hang.
            sys.stderr.write(f"error: {usage_line(e)}\n")
            sys.stderr.flush()
            end.exit(USAGE_EXIT_CODE)
        except RanksMissing as missing:  # a rank late, rescheduled or failed first: the launcher's to retry
            logger.error("%s", missing)
            raise SystemExit(PEER_LOST_EXIT_CODE) from None  # before any process group: nothing to tear down
        except (WorkerFailure, FatalTrainingError, PeerFailed) as failure:
            code = _exit_code(failure)
            finishable = failure.finishable if isinstance(failure, WorkerFailure) else is_finishable(failure)
            end.close("failed", str(failure) or type(failure).__name__, code, finishable=finishable)
        except KeyboardInterrupt:
            end.close("interrupted", signal_name(stop.signum or 2), exit_code(stop.signum or 2))
        except Exception as e:
            if external is None:
                raise
            # One rank of another launcher's job: a lost peer is the launcher's to retry; anything else is reported
            # with its traceback. Either way this rank exits now: NCCL or gloo teardown at exit can hang.
            if is_peer_failure(e):
                end.close("failed", f"lost another rank of the job: {exception_line(e)}", PEER_LOST_EXIT_CODE)
            logger.exception("rank %d failed", external.rank)
            hint = nccl_hint("".join(traceback.format_exception(e)))
            if hint is not None:
                logger.error("hint: %s", hint)
            end.exit(FAILED_EXIT_CODE)
    if not results:
        end.close("nothing", "the run had already ended", 0)
    first = results[0]
    # Another rank's signal stops this one too (a scheduler may signal only some ranks): exit as stopped, so the
    # launcher restarts or requeues the job rather than taking it as done.
    if first.stop_signal is not None:
        signum = stop.signum or first.stop_signal
        end.close("stopped", signal_name(signum), exit_code(signum), results)
    if stop.signum is not None:  # the run ended (its last iteration, its condition) before the request took effect
        ended = "met its stop condition" if first.condition_met_at is not None else "finished"
        logger.warning(
            "%s at iteration %d before %s took effect: the run is over",
            ended,
            first.final_iteration,
            signal_name(stop.signum),
        )
    if first.condition_met_at is not None:
        end.close("condition", first.met_condition or str(cfg.stop_when), 0, results)
    end.close("finished", "", 0, results)


class _Closing:
    """Writes a run's last lines and exits (see :mod:`mjfleet.runs.ending`)."""

    def __init__(self, prepared: Prepared, began: float, run_dirs: list[Path]) -> None:
        self.prepared, self.began, self.run_dirs = prepared, began, run_dirs

    def close(
        self,
        how: Ending,
        detail: str,
        code: int,
        results: list[WorkerResult] | None = None,
        finishable: bool | None = None,
    ) -> NoReturn:
        """Log the last lines (``detail``: its first line goes into the first; a failure's further lines, such as a
        worker's last error lines and hints, follow it) and exit with ``code``; ``finishable``: whether they offer
        ``--finish`` (by default as ``code`` says)."""
        detail, *more = detail.splitlines() or [""]
        cfg, run, external = self.prepared.cfg, self.prepared.run, self.prepared.external
        run_dir = self.run_dirs[-1] if self.run_dirs else None
        record = RunRecord.read(run_dir) if run_dir is not None else None  # the run's own account of its end
        if external is not None:
            workers = external.world_size
        elif results:
            workers = len(results)
        else:
            workers = self.prepared.launch_plan.world_size if self.prepared.launch_plan is not None else 1
        started_at = run.start.start_iteration if run is not None else None
        if started_at is None and results:  # a rank of another launcher's job: rank 0 planned the start
            started_at = results[0].start_iteration
        if started_at is None and results and results[0].records:  # a result from before it was said
            started_at = results[0].records[0].iteration - 1
        final = record.final_iteration if record is not None else (run.start.final_iteration if run else None)
        end = RunEnd(
            how=how,
            task=cfg.task,
            run_dir=run_dir,
            started_at=started_at,
            final_iteration=final,
            last_iteration=results[0].final_iteration if results else _logged_since(run_dir, self.began),
            env_steps_per_iteration=cfg.agent.env_steps_per_iteration(
                cfg.env.num_envs, self.prepared.selection.kind != "cpu", workers
            ),
            wall_s=time.time() - self.began,
            detail=detail,
            finishable=_finishable(how, code) if finishable is None else finishable,
            prefix=command_prefix(os.environ, known_model_files(cfg.env)),
            launcher=None if external is None else external.launcher,
            restarts_left=0 if external is None else external.restarts_left,
            env_steps=_env_steps_since(run_dir, started_at, results or []),
        )
        level = {"failed": logging.ERROR, "stopped": logging.WARNING, "interrupted": logging.WARNING}.get(how)
        if external is not None and external.rank != 0 and how != "failed":
            level = logging.DEBUG  # the job's rank 0 says how it ended; every rank saying it buries it
        first, *rest = ending_lines(end)
        for line in [first, *more, *rest]:
            logger.log(level or logging.INFO, "%s", line, extra=UNWRAPPED)  # commands and paths to copy
        self.exit(code)

    def exit(self, code: int) -> NoReturn:
        if self.prepared.external is not None and code != 0:
            hard_exit(code)
        raise SystemExit(code)


def _finishable(how: Ending, code: int) -> bool:
    """Whether a later start could finish the run in place: it was stopped, or failed in a way a restart may get past
    (not bad input, 2, nor a run that cannot go on, 3; a lost peer, 138, can)."""
    return how in ("stopped", "interrupted") or (how == "failed" and code not in (USAGE_EXIT_CODE, FATAL_EXIT_CODE))


def _logged_since(run_dir: Path | None, began: float) -> int | None:
    """The last iteration the run logged, where this command logged it (a failure's results are unknown: its newest
    checkpoint may be iterations older); None where this command logged none."""
    if run_dir is None:
        return None
    try:
        if (run_dir / PROGRESS_FILE).stat().st_mtime < began:
            return None
    except OSError:
        return None
    records = read_progress(run_dir, every_start=True)
    return records[-1].iteration if records else None


def _env_steps_since(run_dir: Path | None, started_at: int | None, results: list[WorkerResult]) -> int | None:
    """The env-steps of the iterations after ``started_at``, from the run's records (restarts included: the records
    count the run's steps); None where they do not tell."""
    if run_dir is None or started_at is None or not results or not results[0].records:
        return None
    if started_at == 0:
        return results[0].records[-1].env_steps
    before = next((r.env_steps for r in read_progress(run_dir) if r.iteration == started_at), None)
    return None if before is None else results[0].records[-1].env_steps - before


def _exit_code(failure: BaseException) -> int:
    """2 for bad input a launched worker found (as in one process; :func:`mjfleet.train.api.run` raises it as a
    :class:`~mjfleet.errors.UsageError`), 3 where a restart would fail the same way, else 1 (docs/guides/runs.md's
    table)."""
    if isinstance(failure, WorkerFailure):
        return USAGE_EXIT_CODE if failure.usage_error else FAILED_EXIT_CODE if failure.retryable else FATAL_EXIT_CODE
    return FATAL_EXIT_CODE if isinstance(failure, FatalTrainingError) else FAILED_EXIT_CODE


def _process_start() -> float:
    """When this process started (the command's start, as the user counts it)."""
    try:
        return psutil.Process().create_time()
    except psutil.Error:
        return time.time()


if __name__ == "__main__":
    from mjfleet.runtime.process_end import run_as_process

    run_as_process(main)

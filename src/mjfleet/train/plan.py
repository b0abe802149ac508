"""The plan of a start: every input checked and resolved once, read by everything downstream (the launcher, the
workers, ``--dry-run``), never derived again.

The words, one each:

- the **start point** (:class:`~mjfleet.runs.start.StartPoint`): the checkpoint training begins from (or none) and
  the iteration it trains to; :func:`plan_start` makes a new run's from ``--resume`` and ``--agent.max-iterations``;
- the **run start** (:class:`RunStart`): the run this start trains and its start point. The planner decides it:
  **continue** a run (the one ``--finish`` names, or the run of this job with the same settings: from its newest
  checkpoint), begin a **new** run (a directory not created yet), or **refuse** (a checkpoint that cannot be
  resumed, a ``--run-id`` or ``--finish`` run with other settings, a run whose training diverged);
- **prepared** (:class:`Prepared`): the run start with the devices and the launch plan, what
  :func:`mjfleet.train.prepare` returns.

A start is planned once, by one process: the ``train`` command itself, or rank 0 of another launcher's job after the
ranks met (it shares the result). That is the only place that resolves ``--resume`` (a ``wandb:`` reference is
downloaded here), looks for the run an identity continues, and refuses what cannot be continued.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mjfleet.config_io import load_yaml, plain
from mjfleet.envs.config import EnvConfig
from mjfleet.errors import FatalTrainingError, UsageError
from mjfleet.launch.launcher import LaunchPlan
from mjfleet.rl.checkpoint.files import (
    checkpoint_learner,
    hidden_dims,
    is_onnx,
    load_checkpoint,
    network_state,
    normalises_observations,
    resolve_checkpoint,
)
from mjfleet.rl.config import FastTd3Config
from mjfleet.rl.learners.registry import learner_entry
from mjfleet.runs.directory import check_log_root, create_run_dir, next_run_dir, remove_stale_temporaries
from mjfleet.runs.ending import command_prefix, known_model_files
from mjfleet.runs.fingerprint import (
    DIGEST,
    content_digests,
    differences,
    differing,
    fingerprint,
    same_training,
    training_settings,
)
from mjfleet.runs.identity import RunIdentity, run_identity
from mjfleet.runs.lock import hold_run
from mjfleet.runs.record import RunRecord, runs_of
from mjfleet.runs.source import DOWNLOAD_DIR, fetch, is_wandb_ref
from mjfleet.runs.start import StartPoint, continue_point
from mjfleet.runtime.devices import DeviceSelection
from mjfleet.train.config import TrainConfig
from mjfleet.train.external import ExternalJob

logger = logging.getLogger("mjfleet.train")


class RunFailedBefore(FatalTrainingError):
    """The run this start would continue failed in a way that a restart repeats (its training diverged)."""


@dataclass(frozen=True)
class RunStart:
    """The run a start trains and where it begins; the same for every worker of the start."""

    run_dir: Path
    """A new run directory (not created yet), or the existing one this start continues."""
    start: StartPoint
    """Where training begins (the checkpoint every worker loads first) and the iteration it trains to."""
    record: RunRecord
    """The run's ``job.json``: as it will be written for a new run, as read for a continued one."""
    continues: bool = False
    """:attr:`run_dir` exists: training continues there from its newest checkpoint."""
    extended_from: int | None = None
    """``--finish`` with a larger ``--agent.max-iterations``: the iteration the run was to end at, before this start
    moved its end to :attr:`record`'s (written to ``job.json`` when the run directory is reopened)."""
    by_finish: bool = False
    """``--finish`` named the run: its job's run id is the one it began under, not this start's."""

    @property
    def identity(self) -> RunIdentity | None:
        """The job the run belongs to, or None."""
        return self.record.identity

    @property
    def nothing_left(self) -> bool:
        """The continued run already ended (trained to its end, or its stop condition held)."""
        return self.continues and (self.record.over or self.start.start_iteration >= self.start.final_iteration)


@dataclass(frozen=True)
class Prepared:
    """A checked and planned start that has not created anything yet."""

    cfg: TrainConfig
    """The checked configuration."""
    selection: DeviceSelection
    """The devices the workers train on (under another launcher: this rank's)."""
    run: RunStart | None
    """The run this start trains and where it begins; None where rank 0 of another launcher's job decides it once
    the ranks have met (:attr:`external`)."""
    launch_plan: LaunchPlan | None
    """How mjfleet's own launcher starts the workers (restarts reuse it); None: this process trains."""
    external: ExternalJob | None = None
    """The job another launcher (torchrun, srun) made this process a rank of; None when it started no one."""


def plan_this_start(cfg: TrainConfig, job: ExternalJob | None, invocation: str | None = None) -> RunStart:
    """What the one planner of a start does: bring and check the task's files (e.g. Menagerie's: missing ones fail
    here, once, not in every worker), then :func:`plan_run`."""
    cfg.env.prepare_assets()
    return plan_run(cfg, os.environ, job, invocation)


def plan_run(
    cfg: TrainConfig, env: Mapping[str, str], job: ExternalJob | None, invocation: str | None = None
) -> RunStart:
    """The run start of ``cfg``: continue a run, begin a new one, or refuse (see the module docstring).

    Raises :class:`UsageError` for a checkpoint that cannot be resumed, a ``--run-id`` or ``--finish`` whose run was
    made with other settings, and :class:`RunFailedBefore` for a run whose training diverged.
    """
    experiment_dir = cfg.log_root / cfg.agent.experiment_name
    # --finish writes into the run it names, wherever it now is (copied from another machine, say), not under the
    # log root it recorded.
    check_log_root(experiment_dir if cfg.finish is None else cfg.finish.parent)
    if cfg.finish is not None and cfg.finish.is_dir() and not os.access(cfg.finish, os.W_OK | os.X_OK):
        # Its parent was writable: the write of the run's record failed with PermissionError's traceback.
        raise UsageError(f"--finish {cfg.finish}: the run directory is not writable (the run goes on writing there)")
    settings = training_settings(plain(dataclasses.asdict(cfg))) | content_digests(cfg.env.content_files())
    if cfg.finish is not None:
        return _finish(cfg, settings, default_settings(cfg))
    identity = run_identity(cfg.run_id, env, None if job is None else job.launcher, invocation)
    if identity is not None:
        runs = runs_of(experiment_dir, identity)
        defaults = default_settings(cfg) if runs else []
        same = [(run_dir, record) for run_dir, record in runs if same_training(record.settings, settings, defaults)]
        if same:
            return _continue(cfg, *same[0])
        if runs:
            run_dir, record = runs[0]
            if identity.chosen:
                raise UsageError(
                    f"--run-id {identity.value} names run {run_dir}, which trains other settings:"
                    f" {differences(record.settings, settings, defaults=defaults)}; give the same settings to continue"
                    " it, or another --run-id for a new run"
                )
            # Right for a sweep in one allocation, a surprise after an edited batch script: said either way.
            others = f" (and {len(runs) - 1} older)" if len(runs) > 1 else ""
            logger.info(
                "a new run: this job (%s %s) already has run %s%s, which trains other settings: %s; this start"
                " trains them as a run of its own (the same settings again would continue that run)",
                identity.source,
                identity.value,
                run_dir,
                others,
                differences(record.settings, settings, defaults=defaults),
            )
    return _new(cfg, settings, identity)


def default_settings(cfg: TrainConfig) -> list[dict[str, Any]]:
    """The training settings of ``cfg``'s task at its defaults with ``cfg``'s learner, on the CPU and on GPUs: what a
    run that predates a setting trained with, where ``cfg`` leaves it at one of them (:func:`same_training`)."""
    from mjfleet.tasks.registry import get_task

    spec = get_task(cfg.task)
    found = []
    for on_cpu in (True, False):
        env, agent = spec.defaults(on_cpu, cfg.agent.learner)
        default = TrainConfig(env=env, agent=dataclasses.replace(agent, learner=cfg.agent.learner), task=cfg.task)
        found.append(training_settings(plain(dataclasses.asdict(default))))
    return found


def _finish(cfg: TrainConfig, settings: dict[str, Any], defaults: list[dict[str, Any]]) -> RunStart:
    """``--finish``: continue the run it names in place (extended to a larger ``--agent.max-iterations``)."""
    assert cfg.finish is not None
    run_dir = cfg.finish
    record = RunRecord.read(run_dir)
    if record is None:
        why = "is not a directory" if not run_dir.is_dir() else f"has no {run_dir / 'job.json'} with its settings"
        raise UsageError(
            f"--finish {run_dir}: {why}; only a run this version of mjfleet made can be finished in place"
            f" (--resume {run_dir} starts a new run from its newest checkpoint)"
        )
    if record.task != cfg.task:
        command = f"{command_prefix(os.environ)}train {record.task} --finish {shlex.quote(str(run_dir))}"
        raise UsageError(f"--finish {run_dir} is a run of {record.task}, not {cfg.task}: {command}")
    if not same_training(record.settings, settings, defaults):
        differ = differences(record.settings, settings, defaults=defaults)
        files = [key.endswith(DIGEST) for key in differing(record.settings, settings, defaults)]
        # A flag given is left out; a file whose content changed since is put back as it was.
        remedy = " and ".join(
            ([] if all(files) else ["leave the flags out"]) + (["the files as they were"] if any(files) else [])
        )
        raise UsageError(
            f"--finish {run_dir}: these settings differ from the run's: {differ};"
            f" finishing trains the run as it began ({remedy}), --resume starts a new run from it"
        )
    end = record.start_iteration + cfg.agent.max_iterations
    if end == record.final_iteration:
        return dataclasses.replace(_continue(cfg, run_dir, record), by_finish=True)
    if end < record.final_iteration:
        raise UsageError(
            f"--finish {run_dir}: --agent.max-iterations {cfg.agent.max_iterations} would end the run at iteration"
            f" {end}, before the end it trains to ({record.final_iteration}); --finish extends a run, it does not"
            " shorten it"
        )
    # Extended in place: a run that had trained to its end (or met its condition) goes on to the new end.
    reopened = None if record.over else record.ended
    extended = dataclasses.replace(record, final_iteration=end, ended=reopened)
    return dataclasses.replace(_continue(cfg, run_dir, extended), extended_from=record.final_iteration, by_finish=True)


def _new(cfg: TrainConfig, settings: dict[str, Any], identity: RunIdentity | None) -> RunStart:
    """A new run: its start point (``--resume`` resolved: a missing, truncated or foreign checkpoint fails here), its
    record and the name of its directory."""
    start = plan_start(cfg)
    if start.checkpoint is not None:
        _say_other_environment(start.checkpoint, settings, default_settings(cfg))
    record = RunRecord(
        fingerprint=fingerprint(settings),
        settings=settings,
        task=cfg.task,
        final_iteration=start.final_iteration,
        start_iteration=start.start_iteration,
        checkpoint=None if start.checkpoint is None else str(start.checkpoint),
        run_id=None if identity is None else identity.value,
        source=None if identity is None else identity.source,
    )
    run_dir = next_run_dir(cfg.log_root, cfg.agent.experiment_name, cfg.agent.run_name)
    return RunStart(run_dir, start, record)


RESUMED_WHEREVER = ("env.num_envs", "env.sim.backend")
"""Environment settings a checkpoint resumes under without a word: the device's count and engine."""


def _say_other_environment(checkpoint: Path, settings: dict[str, Any], defaults: list[dict[str, Any]]) -> None:
    """``--resume``: warn where this run's environment differs from the one the checkpoint's run trained in (a
    checkpoint moved to a GPU trains at the GPU's defaults where the command gives no flag, e.g. another action
    scale); a run without a record (a lone checkpoint) says nothing."""
    record = RunRecord.read(checkpoint.parent)
    if record is None or not record.settings or record.task != settings.get("task"):
        return  # another task's checkpoint: said apart (its networks must take this task's observations)

    def environment(flat: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in flat.items() if k.startswith("env.") and k not in RESUMED_WHEREVER}

    trained, current = environment(record.settings), environment(settings)
    envs = [environment(d) for d in defaults]
    if not same_training(trained, current, envs):
        logger.warning(
            "--resume %s: its run trained in another environment: %s; give its values as flags to train as it did",
            checkpoint,
            differences(trained, current, limit=6, defaults=envs),
        )


def _continue(cfg: TrainConfig, run_dir: Path, record: RunRecord) -> RunStart:
    """Continue the run in ``run_dir`` from its newest checkpoint, unless its training diverged."""
    if record.failed:
        raise RunFailedBefore(
            f"run {run_dir} {record.describe_end()}: continuing it would fail the same way; change the settings"
            f" for a new run, or start one from its last checkpoint with --resume {run_dir}"
        )
    if cfg.resume is not None and cfg.finish is None:
        logger.info(
            "--resume %s is where run %s began; it continues from its own newest checkpoint", cfg.resume, run_dir
        )
    return RunStart(run_dir, continue_point(run_dir, record.first_start), record, continues=True)


def plan_start(cfg: TrainConfig) -> StartPoint:
    """The start point of a new run: ``--resume`` resolved to one validated checkpoint, then ``max_iterations``
    more.

    A ``wandb:`` reference is downloaded here, once, under ``<log_root>/.wandb_downloads``; every worker then loads
    that file.

    Raises :class:`~mjfleet.errors.UsageError` for a missing, truncated or foreign checkpoint.
    """
    if cfg.resume is None:
        return StartPoint(checkpoint=None, final_iteration=cfg.agent.max_iterations)
    resume = cfg.resume
    if is_wandb_ref(resume):
        resume = fetch(str(resume), cfg.log_root / DOWNLOAD_DIR)
        if is_onnx(resume):
            raise UsageError(f"--resume {cfg.resume}: an ONNX export holds no training state; name a model_<it>.pt")
    checkpoint = resolve_checkpoint(resume)
    data = load_checkpoint(checkpoint)
    _check_networks(cfg, checkpoint, data)
    start_iteration = int(data["iter"])
    return StartPoint(
        checkpoint=checkpoint,
        final_iteration=start_iteration + cfg.agent.max_iterations,
        start_iteration=start_iteration,
        another_run=True,
    )


def _check_networks(cfg: TrainConfig, checkpoint: Path, data: dict[str, Any]) -> None:
    """The learner and the networks this run builds must take the checkpoint's state (otherwise every worker would fail
    to load it after the run directory exists)."""
    recorded = checkpoint.parent / "params" / "run.yaml"
    task = load_yaml(recorded).get("task") if recorded.is_file() else None
    if task and task != cfg.task:
        logger.info(
            "--resume %s: a checkpoint of %s, resumed as %s (its networks must take %s's observations and actions)",
            checkpoint,
            task,
            cfg.task,
            cfg.task,
        )
    learner = checkpoint_learner(data)
    if learner != cfg.agent.learner:
        raise UsageError(
            f"--resume {checkpoint}: it was trained by {learner}, this run's learner is {cfg.agent.learner};"
            f" pass --agent.learner {learner} to continue it"
        )
    normalised, wanted_normalised = normalises_observations(data), cfg.agent.policy.obs_normalization
    if normalised is not None and normalised != wanted_normalised:
        flag = "--agent.policy.obs-normalization" if normalised else "--agent.policy.no-obs-normalization"
        raise UsageError(
            f"--resume {checkpoint}: its networks {'' if normalised else 'do not '}normalise their observations,"
            f" this run's {'would' if wanted_normalised else 'would not'}; pass {flag} to continue it"
        )
    for role in ("actor", "critic"):
        saved = hidden_dims(network_state(data, role))
        wanted = getattr(cfg.agent.policy, f"{role}_hidden_dims")
        if saved is not None and saved != tuple(wanted):
            flag = f"--agent.policy.{role}-hidden-dims"
            raise UsageError(
                f"--resume {checkpoint}: its {role} has hidden layers {' '.join(map(str, saved))}, this run's"
                f" {' '.join(map(str, wanted))}; pass {flag} {' '.join(map(str, saved))} to continue it"
            )
    _check_network_functions(cfg, checkpoint)


def _check_network_functions(cfg: TrainConfig, checkpoint: Path) -> None:
    """The settings that shape what the networks compute without changing their layers (the activation, an
    off-policy actor's action limit) must be the checkpoint's run's where its settings are beside it: its weights
    loaded into another function would go on training a damaged policy without a word."""
    recorded = load_yaml(checkpoint.parent / "params" / "agent.yaml")
    settings = [("policy", "activation")]
    group = learner_entry(cfg.agent.learner).settings
    if group is not None and hasattr(getattr(cfg.agent, group, None), "action_limit"):
        settings.append((group, "action_limit"))
    for section, name in settings:
        saved = (recorded.get(section) or {}).get(name) if isinstance(recorded.get(section), dict) else None
        wanted = getattr(getattr(cfg.agent, section), name)
        if saved is not None and saved != wanted:
            flag = f"--agent.{section.replace('_', '-')}.{name.replace('_', '-')}"
            raise UsageError(
                f"--resume {checkpoint}: its run trained with {flag} {saved}, this run's is {wanted}; pass"
                f" {flag} {saved} to continue it"
            )
    # A distributional critic's values: the same number of them over another range (another --agent.fast-td3.gamma
    # moves the default range) would be read as the values the critic learnt.
    own = getattr(cfg.agent, group, None) if group is not None else None
    saved_group = recorded.get(group) if group is not None else None
    if group is not None and isinstance(own, FastTd3Config) and isinstance(saved_group, dict):
        known = {k: saved_group[k] for k in ("value_limit", "gamma") if k in saved_group}
        saved_limit = dataclasses.replace(own, **known).support_limit()
        if not math.isclose(saved_limit, own.support_limit(), rel_tol=1e-9):
            flag = f"--agent.{group.replace('_', '-')}.value-limit"
            raise UsageError(
                f"--resume {checkpoint}: its critics learnt returns over [-{saved_limit:g}, {saved_limit:g}], this"
                f" run's span [-{own.support_limit():g}, {own.support_limit():g}]; pass {flag} {saved_limit:g} to"
                " continue it"
            )


def open_run_dir(run: RunStart, movable: bool = False) -> Path:
    """Create the planned run directory with its ``job.json`` (``movable``: nothing refers to its planned path yet,
    so the next free name where another run took it meanwhile), or reopen the one this start continues. This process
    holds the directory's lock from here until :func:`~mjfleet.runs.lock.release_run`: :class:`UsageError` where
    another process trains the run."""
    if run.continues:
        hold_run(run.run_dir)
        identity = run.identity
        if run.by_finish:
            given = " (--finish" + (f"; it began as run id {identity.value})" if identity is not None else ")")
        else:
            given = f" (run id {identity.value} from {identity.source})" if identity is not None else ""
        remove_stale_temporaries(run.run_dir)
        if run.extended_from is not None:
            run.record.write(run.run_dir)
            logger.info(
                "extending run %s from iteration %d to %d (--agent.max-iterations)",
                run.run_dir,
                run.extended_from,
                run.record.final_iteration,
            )
        logger.info(
            "continuing run %s%s at iteration %d, to iteration %d",
            run.run_dir,
            given,
            run.start.start_iteration + 1,
            run.start.final_iteration,
        )
        return run.run_dir
    run_dir = create_run_dir(run.run_dir, movable)
    hold_run(run_dir)
    run.record.write(run_dir)
    logger.info("run directory: %s", run_dir)
    return run_dir


def report_nothing_left(run: RunStart, env: EnvConfig) -> None:
    """One line for a start whose run had already ended (a requeue, or ``--finish`` after its end); its commands as
    they run where the user's did (``env``: the run's environment settings, for the robot files' place)."""
    record = run.record
    how = record.describe_end() if record.over else f"trained to iteration {run.start.final_iteration}"
    planned = record.final_iteration - record.start_iteration
    command = f"{command_prefix(os.environ, known_model_files(env))}train {record.task}"
    path = shlex.quote(str(run.run_dir))
    logger.info(
        "nothing to train: run %s %s; %s --finish %s --agent.max-iterations <more than %d> trains it further in"
        " place, %s --resume %s starts a new run from it",
        run.run_dir,
        how,
        command,
        path,
        planned,
        command,
        path,
    )

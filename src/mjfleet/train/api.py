"""Train from Python: :func:`prepare` checks and plans a run, :func:`run` trains it.

Every entry point goes through here (the ``train`` and ``bench`` commands, ``examples/``, a user's script), so all
get the same checks. Everything that can be wrong with the input (values, devices, the checkpoint to resume, the log
root) is found by :func:`prepare` before anything is created; ``--dry-run`` prints :func:`describe` of the same
:class:`Prepared` run that :func:`run` would train.

Nothing here imports torch, MuJoCo Warp or rsl_rl at module level: a mistyped command is answered in about a
second, and a launcher process loads only torchrunx (workers import the simulator themselves).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mjfleet.cluster.hosts import is_own_address, resolve
from mjfleet.cluster.slurm import expand_nodelist, resolve_hostnames
from mjfleet.errors import UsageError
from mjfleet.launch.diagnosis import WorkerFailure
from mjfleet.launch.launcher import LaunchPlan
from mjfleet.rl.checkpoint.files import list_checkpoints
from mjfleet.rl.evaluation.stop_condition import StopCondition
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.runs.lock import release_run
from mjfleet.runtime.devices import DeviceSelection, describe_gpu_request, local_gpu_count, select_devices
from mjfleet.runtime.stop import StopRequest
from mjfleet.sim.config import resolve_backend
from mjfleet.train.config import TrainConfig, validate
from mjfleet.train.external import check_external_options, detect_external_job, external_device
from mjfleet.train.own_launcher import describe_plan, make_plan
from mjfleet.train.plan import Prepared, open_run_dir, plan_this_start, report_nothing_left

logger = logging.getLogger("mjfleet.train")


def prepare(cfg: TrainConfig) -> Prepared:
    """Check everything that can be checked without creating the run directory or starting workers, and plan.

    Raises :class:`~mjfleet.errors.UsageError` (one line, naming the flag) for anything wrong with ``cfg``.
    """
    cfg = _built_right(cfg)
    validate(cfg)
    external = detect_external_job(os.environ, expand_nodelist)
    if external is not None:
        check_external_options(cfg, external)
    elif cfg.distributed:
        logger.info("--distributed is ignored: no launcher started this process as one rank of a job")
    from mjfleet.tasks.registry import BUILTIN_PACKAGE, get_task, package_of

    if package_of(cfg.task) != BUILTIN_PACKAGE:
        get_task(cfg.task).load_task_class()  # a package's misspelt task class: one line, before anything is created
    if cfg.stop_when is None and cfg.stop_when_iterations is not None:
        logger.warning("--stop-when-iterations %d has no effect without --stop-when", cfg.stop_when_iterations)
    if cfg.stop_when is not None:
        from mjfleet.envs.task import declared_stat_keys, evaluated_stat_keys  # torch: only with --stop-when

        task_class = get_task(cfg.task).load_task_class()
        cfg.stop_when.check_key(declared_stat_keys(task_class, cfg.env))
        if cfg.agent.eval_envs > 0:
            cfg.stop_when.check_evaluated(evaluated_stat_keys(task_class, cfg.env))
    hosts = ("localhost",) if external is not None else resolve_hostnames(cfg.hostnames)  # once: may ask scontrol
    if external is not None:
        request = cfg.gpu_ids
        selection = external_device(external, request, 0 if request is None else local_gpu_count(), os.environ)
    else:
        selection = _select_devices(cfg, hosts)
    if selection.kind == "cuda" and cfg.cpu_workers != 1:
        raise UsageError(
            "--cpu-workers applies to CPU training (--gpu-ids None); with GPUs there is one worker each"
            " (or --workers-per-gpu)"
        )
    gpu_workers = selection.num_gpus * cfg.workers_per_gpu
    if selection.kind == "cuda" and hosts == ("localhost",) and (cfg.workers_per_host or gpu_workers) < gpu_workers:
        raise UsageError(
            f"--workers-per-host {cfg.workers_per_host} would leave GPUs idle: --gpu-ids selects"
            f" {selection.num_gpus} GPUs with {cfg.workers_per_gpu} worker{'s' if cfg.workers_per_gpu > 1 else ''}"
            f" each ({gpu_workers}); select fewer GPUs or leave --workers-per-host out"
        )
    per_host = cfg.workers_per_host
    one_host = hosts == ("localhost",)  # (across hosts --workers-per-host wins: the count for every node)
    if one_host and selection.kind == "cpu" and per_host is not None and cfg.cpu_workers not in (1, per_host):
        raise UsageError(
            f"--workers-per-host {per_host} and --cpu-workers {cfg.cpu_workers} disagree: on one machine both say how"
            " many CPU workers it runs; give one"
        )
    if selection.kind == "cpu" and cfg.workers_per_gpu != 1:
        why = "--gpu-ids None trains on the CPU" if cfg.gpu_ids is None else "this run trains on the CPU"
        reason = f" ({selection.notice})" if selection.notice else ""
        raise UsageError(
            f"--workers-per-gpu {cfg.workers_per_gpu} needs GPUs, but {why}{reason};"
            " use --cpu-workers for several CPU workers"
        )
    if external is not None:
        # One planner per job: rank 0 decides the run once the ranks have met (as_rank.py); --dry-run plans here,
        # alone, and creates nothing.
        return Prepared(cfg, selection, plan_this_start(cfg, external) if cfg.dry_run else None, None, external)
    run = plan_this_start(cfg, None)
    workers = cfg.workers_per_host or selection.num_gpus * cfg.workers_per_gpu or cfg.cpu_workers
    # A restart must survive the death of the worker, so it cannot be this process.
    # ``--hostnames auto`` outside a SLURM job means this machine only, like no --hostnames.
    many_hosts = hosts != ("localhost",)
    launched = workers > 1 or cfg.launcher == "torchrunx" or many_hosts or cfg.max_restarts > 0
    launch_plan = make_plan(cfg, run.run_dir, selection, hosts) if launched else None
    return Prepared(cfg, selection, run, launch_plan)


def _select_devices(cfg: TrainConfig, hosts: tuple[str, ...]) -> DeviceSelection:
    """The GPUs (or CPU) every host trains on, chosen from this machine's GPUs.

    A launcher that is none of the hosts (a login node, a ``salloc`` shell) and sees no GPU cannot choose theirs:
    rather than training GPU hosts on their CPUs (``auto``) or blaming this machine's missing GPUs, say where to run
    ``train``.
    """
    request = cfg.gpu_ids
    count = 0 if request is None else local_gpu_count()
    # resolve(): an unknown name is its own error (every name is resolved before the message below).
    if request is not None and count == 0 and cfg.hostnames and not any(is_own_address(resolve(h)) for h in hosts):
        raise UsageError(
            f"--gpu-ids {describe_gpu_request(request)}: this machine sees no CUDA GPU and is none of the hosts"
            f" ({', '.join(hosts)}), but the launcher chooses every host's GPUs from its own: run train on"
            f" {hosts[0]} (rank 0's host), or train on the hosts' CPUs with --gpu-ids None"
        )
    return select_devices(request, device_count=count, env=os.environ)


def describe(prepared: Prepared) -> str:
    """The ``--dry-run`` report: what would run where, from which checkpoint, for how long."""
    cfg, run = prepared.cfg, prepared.run
    assert run is not None, "--dry-run plans the start in prepare()"
    start = run.start
    lines = [f"task: {cfg.task}"]
    if prepared.selection.notice:
        lines.append(prepared.selection.notice)
    lines.append(_describe_workers(prepared))
    begin = f"from {start.checkpoint} (iteration {start.start_iteration})" if start.checkpoint else "from scratch"
    if run.nothing_left:
        lines.append(f"nothing to train: the run {run.record.describe_end() if run.record.over else 'is complete'}")
    else:
        extended = f" (extended from {run.extended_from})" if run.extended_from is not None else ""
        lines.append(f"iterations {start.start_iteration + 1}..{start.final_iteration}{extended}, {begin}")
        if isinstance(condition := cfg.stop_when, StopCondition):
            streak = cfg.stop_when_iterations or condition.default_streak
            held = f" for {streak} iterations in a row" if streak > 1 else ""
            lines.append(f"stops sooner once --stop-when {condition} holds{held}")
    identity = "--finish" if run.by_finish or run.identity is None else f"run id {run.identity.value}"
    if run.continues:
        lines.append(f"run directory: {run.run_dir} (continued: {identity})")
    else:
        lines.append(
            f"run directory: {run.run_dir} ({'not created by --dry-run' if cfg.dry_run else 'not created yet'})"
        )
    lines.append(f"collective timeout: {cfg.collective_timeout_s:g} s; automatic restarts: {cfg.max_restarts}")
    return "\n".join(lines) + "\n"


def _describe_workers(prepared: Prepared) -> str:
    if prepared.external is not None:
        return (
            f"{prepared.external.describe()} on {prepared.selection.devices[0]}, {prepared.cfg.env.num_envs} envs;"
            " rank 0 chooses the run directory"
        )
    if prepared.launch_plan is None:
        cfg, on_gpu = prepared.cfg, prepared.selection.kind == "cuda"
        evaluating = cfg.agent.evaluation_envs(cfg.env.num_envs)
        beside = f" and {evaluating} evaluation environments" if evaluating else ""
        per_iteration = cfg.agent.env_steps_per_iteration(cfg.env.num_envs, on_gpu)
        return (
            f"in-process training on {prepared.selection.devices[0]}, {cfg.env.num_envs} envs{beside},"
            f" {per_iteration:,} env-steps per iteration"
        )
    return describe_plan(prepared.cfg, prepared.launch_plan, prepared.selection)


def _built_right(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` as built in Python checked against what the command line would build: a task that exists, its own
    settings classes, values of the fields' types (strings become paths, lists tuples)."""
    from mjfleet.config_io import conformed
    from mjfleet.rl.evaluation.stop_condition import as_condition
    from mjfleet.tasks.registry import get_task

    spec = get_task(cfg.task)
    expected = type(spec.env_cfg())
    if not isinstance(cfg.env, expected):
        raise UsageError(
            f"TrainConfig.env is {type(cfg.env).__name__}; {cfg.task} takes {expected.__name__}"
            f" (get_task({cfg.task!r}).defaults() gives the task's settings)"
        )
    if isinstance(cfg.stop_when, str):
        cfg = dataclasses.replace(cfg, stop_when=as_condition(cfg.stop_when))
    return conformed(cfg, "TrainConfig")


def run(
    cfg_or_prepared: TrainConfig | Prepared,
    stop: StopRequest | None = None,
    started: Callable[[Path], object] | None = None,
) -> list[WorkerResult]:
    """Create the run directory and train; returns one result per worker, indexed by global rank (none when the
    run this start continues had already ended).

    A :class:`TrainConfig` is prepared first. ``stop`` (installed by the caller) lets the first SIGINT/SIGTERM stop
    training cleanly after the current iteration. ``started`` is told the run directory once it exists (under
    another launcher rank 0 chooses it after the ranks met). Raises :class:`~mjfleet.errors.UsageError` for
    invalid input (found in this process or by a launched worker; a run directory this start created is removed while
    it holds no checkpoint),
    :class:`~mjfleet.launch.diagnosis.WorkerFailure` when a launched worker failed and
    :class:`~mjfleet.errors.FatalTrainingError` when training in this process cannot go on.
    """
    prepared = cfg_or_prepared if isinstance(cfg_or_prepared, Prepared) else prepare(cfg_or_prepared)
    cfg = prepared.cfg
    if cfg.dry_run:
        raise UsageError("dry_run is set: describe(prepare(cfg)) shows the plan; run() would train")
    if prepared.external is not None:
        from mjfleet.train.as_rank import train_as_rank

        result = train_as_rank(prepared, stop, started)
        return [] if result is None else [result]
    assert prepared.run is not None
    if prepared.run.nothing_left:
        report_nothing_left(prepared.run, prepared.cfg.env)
        return []
    existing = next(p for p in prepared.run.run_dir.parents if p.exists())  # what was there before this start
    # Another run named in the same second (a sweep's members, a job array) may have taken the planned name: the next
    # free one, and the worker logs that a launch plan put under the planned path go under it too.
    planned = prepared.run
    run_dir = open_run_dir(planned, movable=True)
    if prepared.launch_plan is not None and run_dir != planned.run_dir:
        prepared = dataclasses.replace(prepared, launch_plan=_moved(prepared.launch_plan, planned.run_dir, run_dir))
    if started is not None:
        started(run_dir)
    try:
        if prepared.selection.notice:
            logger.info(prepared.selection.notice)
        if prepared.launch_plan is not None:
            from mjfleet.train.supervisor import supervise

            logger.info(_describe_workers(prepared))
            return supervise(cfg, run_dir, prepared.launch_plan, planned.start, stop)
        return [_train_in_process(prepared, run_dir, stop)]
    except UsageError:
        # Bad input found by the worker in this process (a checkpoint whose networks do not fit the task). A launch's
        # keeps the logs its error names (a host that cannot take part).
        if prepared.launch_plan is None:
            _remove_unborn_run(prepared, run_dir, existing)
        raise
    except WorkerFailure as failure:
        if not failure.usage_error:
            raise
        # Bad input a launched worker found: as in one process, its one line and no run left behind (the line
        # says it all; the worker logs under the run directory go with it).
        _remove_unborn_run(prepared, run_dir, existing)
        plan = prepared.launch_plan
        assert plan is not None
        where = f"{plan.locate(failure.rank)[0]}: " if failure.rank is not None and len(plan.hostnames) > 1 else ""
        raise UsageError(f"{where}{failure.user_message or failure.error}") from failure
    finally:
        release_run(run_dir)


def _moved(plan: LaunchPlan, planned: Path, run_dir: Path) -> LaunchPlan:
    """``plan`` with its worker log folder under ``run_dir`` where it was under the ``planned`` run directory."""
    if plan.log_dir is None or not plan.log_dir.is_relative_to(planned):
        return plan
    return dataclasses.replace(plan, log_dir=run_dir / plan.log_dir.relative_to(planned))


def _remove_unborn_run(prepared: Prepared, run_dir: Path, existing: Path) -> None:
    """Remove a run directory this start created while it holds no checkpoint (no run until the first one) nor the
    record of an earlier attempt's failure (``restarts.log``), and the folders made for it (the experiment's, the log
    root) where nothing else went into them."""
    from mjfleet.train.supervisor import RESTART_LOG

    assert prepared.run is not None
    if prepared.run.continues or list_checkpoints(run_dir) or (run_dir / RESTART_LOG).exists():
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        for folder in run_dir.parents:
            if folder == existing:
                break
            folder.rmdir()


PHYSICS_NAMES = {"mujoco": "MuJoCo C", "warp": "MuJoCo Warp"}
"""The physics a resolved ``--env.sim.backend`` runs, as a start line names it."""


def _evaluation_words(cfg: TrainConfig, on_gpu: bool) -> str:
    """`` + 32 evaluation envs of their own``: the deterministic policy's environments beside the ``num_envs`` PPO
    trains on (their steps are counted in the run's env-steps); nothing without them."""
    own = cfg.agent.separate_evaluation_envs(cfg.env.num_envs, on_gpu)
    if own:
        return f" + {own} evaluation env{'s' if own > 1 else ''} of their own (counted in the env-steps)"
    shared = cfg.agent.evaluation_envs(cfg.env.num_envs)
    envs = f"evaluation env{'s' if shared > 1 else ''}"
    return f" + {shared} {envs} in the same simulation (counted in the env-steps)" if shared else ""


def _train_in_process(prepared: Prepared, run_dir: Path, stop: StopRequest | None) -> WorkerResult:
    from mjfleet.runtime.context import DistributedContext
    from mjfleet.train.worker import train_worker

    assert prepared.run is not None
    cfg, start = prepared.cfg, prepared.run.start
    device = prepared.selection.devices[0]
    logger.info(
        "training %s with %s on %s (%s): %d envs x %d steps per iteration%s, %d iteration%s",
        cfg.task,
        cfg.agent.learner,
        device,
        PHYSICS_NAMES[resolve_backend(cfg.env.sim, device)],
        cfg.env.num_envs,
        cfg.agent.num_steps_per_env,
        _evaluation_words(cfg, device != "cpu"),
        start.final_iteration - start.start_iteration,
        "" if start.final_iteration - start.start_iteration == 1 else "s",
    )
    ctx = DistributedContext(device=prepared.selection.devices[0])
    return train_worker(cfg, run_dir, ctx, start, stop.poll if stop is not None else None)

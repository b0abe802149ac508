"""One worker's training: the picklable function run in-process or by every torchrunx worker."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import yaml

from mjfleet.config_io import plain
from mjfleet.envs.config import EnvConfig
from mjfleet.envs.env import MjEnv
from mjfleet.errors import PEER_LOST_EXIT_CODE, FatalTrainingError
from mjfleet.launch.worker_entry import local_report_dir, report_failure, write_heartbeat
from mjfleet.rl.evaluation.simulation import SeparateEvaluation
from mjfleet.rl.evaluation.stop_condition import as_condition
from mjfleet.rl.learners.registry import learner_entry
from mjfleet.rl.reporting.records import KEPT_RECORDS, IterationRecord, WorkerResult
from mjfleet.rl.runner import IterationHook, Runner, StopCheck
from mjfleet.runs import model_files
from mjfleet.runs.ending import Ending
from mjfleet.runs.record import record_end
from mjfleet.runs.start import StartPoint
from mjfleet.runtime.context import DistributedContext, default_store, process_group
from mjfleet.runtime.processes import hard_exit
from mjfleet.runtime.stop import file_stop_check
from mjfleet.runtime.watch import RankWatch, Store, group_timeout
from mjfleet.sim.warp_runtime import scoped_device
from mjfleet.tasks.registry import get_task
from mjfleet.train.config import TrainConfig
from mjfleet.train.plan import plan_start
from mjfleet.train.startup import StartupClock
from mjfleet.train.worker_hook import WorkerHookContext, load_worker_hook

__all__ = ["WorkerResult", "seed_everything", "train_worker", "write_params"]

logger = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA). NumPy takes the seed modulo 2**32 (its limit): a job of more
    ranks than ``--seed``'s range allows for still starts."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def write_params(run_dir: Path, cfg: TrainConfig) -> None:
    """Write ``params/env.yaml``, ``params/agent.yaml`` and ``params/run.yaml`` (rank 0, at the run's first start:
    they describe the run's checkpoints, so a continuation leaves them as they are)."""
    params = run_dir / "params"
    if (params / "env.yaml").is_file():
        return
    params.mkdir(parents=True, exist_ok=True)
    (params / "env.yaml").write_text(yaml.safe_dump(plain(dataclasses.asdict(cfg.env)), sort_keys=False))
    (params / "agent.yaml").write_text(yaml.safe_dump(plain(dataclasses.asdict(cfg.agent)), sort_keys=False))
    run = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("env", "agent")}
    (params / "run.yaml").write_text(yaml.safe_dump(plain(run), sort_keys=False))


def train_worker(
    cfg: TrainConfig,
    run_dir: Path | None,
    ctx: DistributedContext | None = None,
    start: StartPoint | None = None,
    stop_check: StopCheck | None = None,
    store: Store | None = None,
) -> WorkerResult:
    """Build the environment and runner on this worker's device and train.

    Args:
        cfg: The full training configuration (identical on every worker).
        run_dir: The run directory the launcher created, or None to write nothing.
        ctx: This worker's place in the job; built from RANK/LOCAL_RANK/WORLD_SIZE when None (launched workers).
        start: Checkpoint to load and final iteration; planned from ``cfg`` when None.
        stop_check: Asked on rank 0 after every iteration whether to stop early. Launched workers default to the
            launcher's stop-request file.
        store: The job's store, where each rank's watch keeps its place (default: the process group's).
    """
    launched = ctx is None
    if ctx is None:
        ctx = DistributedContext.from_env()
        # Launched workers have no console handlers (torchrunx forwards records to the launcher and the log
        # files); only the level needs setting so progress records are emitted at all.
        logging.getLogger("mjfleet").setLevel(logging.INFO)
    # Destroyed on a normal return: NCCL communicators left for the interpreter's exit can hang it.
    with process_group(ctx, group_timeout(cfg.collective_timeout_s)):
        return _train(cfg, run_dir, ctx, launched, start, stop_check, store)


def _train(
    cfg: TrainConfig,
    run_dir: Path | None,
    ctx: DistributedContext,
    launched: bool,
    start: StartPoint | None,
    stop_check: StopCheck | None,
    store: Store | None,
) -> WorkerResult:
    startup = StartupClock()
    seed_everything(ctx.seed(cfg.seed))
    spec = get_task(cfg.task)
    hook = load_worker_hook()  # before the environment is built: a bad value fails in a moment
    if start is None:
        start = plan_start(cfg)
    report_dir = local_report_dir() if launched else None
    if stop_check is None and report_dir is not None and ctx.is_main:
        stop_check = file_stop_check(report_dir)
    # The evaluation environments come on top of --env.num-envs on every device (the learner trains on the batch the
    # settings name) and the job's --agent.eval-envs are split across its workers (the evaluation does not grow with
    # them).
    n, workers, on_gpu = cfg.env.num_envs, ctx.world_size, str(ctx.device).startswith("cuda")
    eval_envs = cfg.agent.evaluation_envs(n, workers)
    separate = cfg.agent.separate_evaluation_envs(n, on_gpu, workers)
    simulated = cfg.agent.training_simulation_envs(n, on_gpu, workers)
    with scoped_device(ctx.device):
        evaluation = None
        if separate:
            # The evaluation's own simulation draws from a stream apart from every rank's training environments.
            eval_env = MjEnv(
                spec.load_task_class()(evaluation_config(cfg.env, separate)),
                device=ctx.device,
                seed=ctx.seed(cfg.seed) + 2**20,
            )
            steps = cfg.agent.evaluation_steps(on_gpu)
            evaluation = SeparateEvaluation(
                eval_env,
                steps,
                ctx.device,
                cfg.agent.first_evaluation_steps(on_gpu),
                cfg.agent.first_evaluation_interval(),
            )
        judge: Callable[[], SeparateEvaluation] | None = None
        if eval_envs and not on_gpu and cfg.agent.eval_confirm and cfg.stop_when is not None:
            # Built when the stop condition first holds, with this worker's share of the check's episodes, played in
            # one round: on the CPU a step's cost is mostly per call below a few hundred worlds (Menagerie Go1: one
            # round of 100 worlds cost 0.40 of four rounds of 32), and the evaluation's own simulation keeps its
            # staggered episodes.
            def build_judge() -> SeparateEvaluation:
                worlds = cfg.agent.confirm_envs(workers)
                task = spec.load_task_class()(evaluation_config(cfg.env, worlds))
                judge_env = MjEnv(task, device=ctx.device, seed=ctx.seed(cfg.seed) + 2**21)
                return SeparateEvaluation(judge_env, 1, ctx.device)

            judge = build_judge
        trained = dataclasses.replace(cfg.env, num_envs=simulated)
        env = MjEnv(spec.load_task_class()(trained), device=ctx.device, seed=ctx.seed(cfg.seed))
        startup.mark("simulation")
        if ctx.is_main:
            _say_physics(cfg, on_gpu, judged_apart=evaluation is not None)
            _say_model_files(cfg, run_dir)
        if ctx.is_main and run_dir is not None:
            write_params(run_dir, cfg)
        hooks: list[IterationHook] = []
        video = None
        if cfg.video_interval > 0 and ctx.is_main and run_dir is not None:
            from mjfleet.train.video import TrainingVideo

            video = TrainingVideo(
                run_dir,
                cfg.video_interval,
                cfg.video_length,
                spec.load_task_class().video_camera,
                cfg.video_width,
                cfg.video_height,
            )
            hooks.append(video.on_iteration)
        if ctx.is_main:
            hooks.append(startup.hook)
        records: deque[IterationRecord] = deque(maxlen=KEPT_RECORDS)
        hooks.append(lambda _, record: records.append(record))
        if launched:
            hooks.append(_heartbeat_hook)
        runner = Runner(
            env,
            cfg.agent,
            ctx,
            run_dir,
            replica_check_interval=cfg.replica_check_interval,
            logged_config=plain(dataclasses.asdict(cfg)),
            eval_envs=0 if evaluation else eval_envs,
            evaluation=evaluation,
            judge=judge,
            hooks=hooks,
            stop_check=stop_check,
            stop_condition=None if cfg.stop_when is None else as_condition(cfg.stop_when),  # parsed already
            stop_when_iterations=cfg.stop_when_iterations,
            export_info={"task": cfg.task},
        )
        if video is not None:
            video.attach(runner)
        if start.checkpoint is not None:
            runner.load(str(start.checkpoint), another_run=start.another_run)
            logger.info("resumed from %s at iteration %d", start.checkpoint, runner.current_learning_iteration)
        startup.mark(learner_entry(cfg.agent.learner).label)  # the algorithm: PPO, SAC, TD3
        if launched:
            write_heartbeat(ctx.rank, runner.current_learning_iteration, phase="ready")
        # Installed last, so its iteration hooks see what the built-in ones did.
        finish = None if hook is None else hook(runner, WorkerHookContext(cfg, run_dir, start))
        remaining = start.final_iteration - runner.current_learning_iteration
        try:
            with _watch(cfg, ctx, runner, store, launched):
                # A restart resumes with the saved episode counters; re-randomising them would desynchronise nothing
                # but makes the continuation differ from the interrupted run for no reason.
                runner.learn(
                    max(0, remaining),
                    init_at_random_ep_len=cfg.init_at_random_ep_len and not runner.restored_env_state,
                )
        except FatalTrainingError as e:
            if ctx.is_main and run_dir is not None and e.repeats:
                record_end(run_dir, "failed", runner.current_learning_iteration, str(e).splitlines()[0])
            raise
        if ctx.is_main and run_dir is not None:
            record_end(run_dir, _ending(runner, start), runner.current_learning_iteration)
        return WorkerResult(
            rank=ctx.rank,
            device=ctx.device,
            final_iteration=runner.current_learning_iteration,
            records=list(records),
            start_iteration=start.start_iteration,
            stop_signal=runner.stop_signal,
            condition_met_at=runner.condition_met_at,
            met_condition=None if runner.met_condition is None else str(runner.met_condition),
            last_checkpoint=None if runner.last_checkpoint is None else str(runner.last_checkpoint),
            run_dir=None if run_dir is None else str(run_dir),
            extras={} if finish is None else finish(),
        )


def _watch(
    cfg: TrainConfig, ctx: DistributedContext, runner: Runner, store: Store | None, launched: bool
) -> contextlib.AbstractContextManager[object]:
    """A rank's watch over the training loop (several ranks only): it ends the job, naming the rank it waits for,
    when this rank stood still for ``--collective-timeout-s``."""
    store = store or default_store()  # type: ignore[assignment]
    if not ctx.is_distributed or store is None:
        return contextlib.nullcontext()
    end = _end_launched_worker if launched else _end_rank
    return RankWatch(store, ctx.rank, ctx.world_size, cfg.collective_timeout_s, runner.position, end)


def _end_rank(line: str) -> None:
    """The watch found the job stuck: say who it waits for, then exit as a rank that lost a peer (its launcher's to
    retry), at once (a process stuck in a collective cannot unwind)."""
    logger.error("%s", line)
    hard_exit(PEER_LOST_EXIT_CODE)


def _end_launched_worker(line: str) -> None:
    """:func:`_end_rank` for a worker of mjfleet's own launcher: the line travels as the worker's failure (a
    collective that will not complete), which the launcher's diagnosis reads with every rank's heartbeat."""
    import torch.distributed as dist

    report_failure(dist.DistBackendError(line))
    hard_exit(PEER_LOST_EXIT_CODE)


def evaluation_config(env: EnvConfig, num_envs: int) -> EnvConfig:
    """The settings of the evaluation's own simulation: ``num_envs`` environments as a policy is judged (the robot
    file as shipped, whatever contact model the training simulation runs; the full command ranges)."""
    return dataclasses.replace(env.as_judged(), num_envs=num_envs)


def _say_physics(cfg: TrainConfig, on_gpu: bool, judged_apart: bool) -> None:
    """One line where the training simulation's physics is not the robot file's: what it changes, and what the
    evaluation that ``--stop-when`` reads runs on."""
    contacts = cfg.env.sim.training_contacts
    if not contacts.active(on_gpu):
        defaults = get_task(cfg.task).env_defaults(on_cpu=not on_gpu).sim.training_contacts
        if dataclasses.replace(contacts, applies=defaults.applies) != defaults:
            logger.warning(
                "physics: the training contact model given (%s) does not apply here (--env.sim.training-contacts."
                "applies %s, training on the %s): the training simulation runs the robot file as shipped",
                contacts.describe(),
                contacts.applies,
                "GPU" if on_gpu else "CPU",
            )
        return
    judged = "on the file as shipped" if judged_apart else "on the same model (it steps in the training simulation)"
    logger.info(
        "physics: training on cheaper physics than the robot file's (%s); the evaluation runs %s, play on the"
        " file as shipped",
        contacts.describe(),
        judged,
    )


def _say_model_files(cfg: TrainConfig, run_dir: Path | None) -> None:
    """The robot files this start loads, recorded with the run's settings at its first start; a continuation whose
    files have another text than the run's first start is warned (its checkpoints trained on those)."""
    paths = cfg.env.model_files()
    files = model_files.fingerprint(paths, cfg.env.model_records())
    for i, file in enumerate(files):
        logger.info("model file: %s" if i < len(paths) else "model from %s", file)
    if run_dir is None:
        return
    trained = model_files.recorded(run_dir)
    if trained is not None:
        for line in model_files.differences(trained, files):
            logger.warning(line)
    elif not (run_dir / "params" / "env.yaml").is_file():  # the first start (an older run's record stays absent)
        model_files.record(run_dir, files)


def _ending(runner: Runner, start: StartPoint) -> Ending:
    if runner.stop_signal is not None:
        return "stopped"
    if runner.condition_met_at is not None:
        return "condition"
    return "finished" if runner.current_learning_iteration >= start.final_iteration else "stopped"


def _heartbeat_hook(runner: Runner, record: IterationRecord) -> None:
    write_heartbeat(runner.ctx.rank, record.iteration)

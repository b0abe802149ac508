"""``bench <task>``: tables of env-steps/s for physics, the full env step and PPO training."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rich.console import Console
from rich.table import Table

from mjfleet.cli.args import parse, print_help, reader_may_leave, wants_help
from mjfleet.console import configure_logging
from mjfleet.errors import UsageError, exception_line, exits_on_usage_error
from mjfleet.files import write_text_atomic
from mjfleet.runtime.devices import GpuIds, select_local_devices
from mjfleet.sim.config import Backend
from mjfleet.tasks.registry import get_task
from mjfleet.train.config import TrainConfig, validate

if TYPE_CHECKING:
    from mjfleet.benchmark import TrainRow

logger = logging.getLogger("mjfleet.bench")


@dataclass
class BenchConfig:
    """Everything `bench <task>` accepts."""

    num_envs: tuple[int, ...] = (256, 1024, 4096)
    """Numbers of parallel environments to measure."""
    gpu_ids: GpuIds = "auto"
    """One GPU index, `None` for the CPU, or `auto`."""
    steps: int = 100
    """Timed env steps per measurement (after 3 warm-up steps)."""
    train_iterations: int = 11
    """PPO iterations per training measurement (the first is excluded: it compiles and captures)."""
    train_num_envs: int | None = None
    """Environments per worker for the training measurements (default: the task's)."""
    workers: tuple[int, ...] = (1,)
    """Worker counts for the training scaling table, e.g. `1 2` (CPU: gloo workers; GPU: one per GPU). Its "sync
    share" is the time spent in the per-mini-batch all-reduce (gradients and KL), waiting for the slowest rank
    included."""
    launcher_overhead: bool = False
    """Also train one worker through torchrunx (`--launcher torchrunx`): its "wall s" minus the in-process one is
    what starting a run through the launcher adds (the agent, and a fresh worker's imports, CUDA context and kernel
    loading, which the bench process already has), and its env-steps/s shows any per-iteration cost."""
    skip_steps: bool = False
    """Skip the physics / env-step table."""
    workers_per_gpu: int = 1
    """GPU: training rows with several workers put up to this many on each GPU (`--workers 1 2 --workers-per-gpu 2`:
    one worker, then two sharing GPU 0)."""
    json: Path | None = None
    """Also write the measurements to this JSON file (task, device, machine, both tables), rewritten after every
    table and training row, so that a later failure keeps what was measured."""
    contact_costs: bool = False
    """Instead of the throughput tables, show where the physics time goes on the CPU: per physics step of one world
    on one thread, its cost, contacts, constraint rows and solver iterations, with the robot file's contact model
    and with each of its features changed on its own (cones, impratio, condim, joint friction, self-collisions), on
    standing robots and on an untrained policy's states (`--num-envs`' first value worlds, `--steps` steps)."""
    profile: bool = False
    """Instead of the throughput tables, train one worker in-process for `--train-iterations` at the task's
    defaults (`--train-num-envs` where given) and show where an iteration's time goes, part by part: the policy,
    the environment step's task work, the physics, storage, the update, for the training and the evaluation
    environments (the first iteration excluded). On a GPU each part waits for the device, which costs a little."""
    eval_speedup: Literal["near-stop", "always"] = "near-stop"
    """The training measurements' `--agent.eval-speedup`: `near-stop` measures an iteration as a run's are until
    it nears its `--stop-when` condition (the evaluation's own simulation stepped on every training step, or every
    `--agent.eval-step-interval`-th, as the task's defaults say), `always` as they are near it (stepped
    `--agent.eval-steps-per-step` times on every one)."""
    backends: tuple[Literal["warp", "mujoco"], ...] = ("warp", "mujoco")
    """Physics backends to measure side by side, in every table (`mujoco` runs on the CPU only and is skipped on
    a GPU)."""


def run(task_id: str, cfg: BenchConfig, console: Console) -> None:
    """Measure and print the tables."""
    from mjfleet.benchmark import free_device_memory, machine_description, measure_steps, measure_training

    spec = get_task(task_id)
    if cfg.contact_costs:
        _contact_costs(task_id, cfg, console)
        return
    spec.env_cfg().prepare_assets()  # the robot's files: one line when they are missing, whichever table comes first
    selection = select_local_devices(cfg.gpu_ids)
    if selection.num_gpus > 1:
        raise UsageError(
            f"--gpu-ids: bench measures on one GPU (got {selection.num_gpus}); for several, use --workers with the"
            " first GPU, e.g. --gpu-ids 0 --workers 1 2 (GPUs 0 and 1)"
        )
    device = selection.devices[0]
    first_gpu = int(device.split(":")[1]) if selection.kind == "cuda" else 0
    if selection.kind == "cpu" and cfg.workers_per_gpu != 1:
        raise UsageError(f"--workers-per-gpu {cfg.workers_per_gpu} needs a GPU (this bench runs on the CPU)")
    if cfg.profile:
        _profile(task_id, cfg, console, selection.kind, device)
        return
    shared = selection.kind == "cuda" and cfg.workers_per_gpu > 1
    runs = [(f"{w} ({min(w, cfg.workers_per_gpu)}/GPU)" if shared and w > 1 else str(w), w, w > 1) for w in cfg.workers]
    backends = backends_for(selection.kind, cfg.backends)
    if cfg.launcher_overhead:
        runs.insert(1 if runs and runs[0][1] == 1 else 0, ("1 (torchrunx)", 1, True))
    trainings = [
        (label, launched, _train_config(task_id, cfg, selection.kind, w, launched, backend, first_gpu))
        for backend in backends
        for label, w, launched in runs
    ]
    for _, _, train_cfg in trainings:
        validate(train_cfg)  # the same checks as ``train``, before minutes of step measurements
    machine = machine_description(device)
    _show(console, f"[bold]{task_id}[/] on {device}: {machine}")
    step_rows: list[dict[str, object]] = []
    training: list[dict[str, object]] = []

    def save() -> None:
        if cfg.json is not None:
            report = {"task": task_id, "device": device, "machine": machine, "steps": step_rows, "training": training}
            cfg.json.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(cfg.json, json.dumps(report, indent=1) + "\n")

    if not cfg.skip_steps:
        table = Table(title=f"env-steps/s, decimation {spec.env_cfg().sim.decimation} ({cfg.steps} timed steps)")
        for col in ("num_envs", "backend", "raw physics", "env step", "env/raw", "env vs warp graph"):
            table.add_column(col, justify="right")
        for n in cfg.num_envs:
            measured = [r for backend in backends for r in measure_steps(spec, n, device, cfg.steps, backend)]
            step_rows += [dataclasses.asdict(r) for r in measured]
            warp = next((r.env for r in measured if r.backend == "warp graph"), None)
            for r in measured:
                versus = f"{r.env / warp:.2f}x" if warp else "-"
                table.add_row(str(n), r.backend, f"{r.raw:,.0f}", f"{r.env:,.0f}", f"{r.ratio:.0%}", versus)
            save()
        _show(console, table)
    rows: list[tuple[str, TrainRow]] = []
    for label, launched, train_cfg in trainings:
        free_device_memory(device)
        try:
            row = _measure_launched(train_cfg) if launched else measure_training(train_cfg)
        except Exception as e:  # one failing row (a launch, a backend) must not cost the others' figures
            error = exception_line(e)
            logger.error("training row %s failed: %s", label, error, exc_info=not isinstance(e, UsageError))
            training.append({"label": label, "backend": train_cfg.env.sim.backend, "error": error})
        else:
            rows.append((label, row))
            training.append({"label": label, **dataclasses.asdict(row)})
        save()
    timed = cfg.train_iterations - 1
    table = Table(
        title=f"PPO training ({timed} timed iteration{'' if timed == 1 else 's'}, env-steps/s over all workers)"
    )
    columns = ("workers", "backend", "envs/worker", "env-steps/s", "speed-up", "iteration s", "collect share")
    columns = (*columns, "sync share")
    for col in (*columns, "wall s"):
        table.add_column(col, justify="right")
    # Each backend's rows against its own first (one worker): the column is the workers' scaling.
    bases: dict[str, float] = {}
    for _, r in rows:
        bases.setdefault(r.backend, r.env_steps_per_s)
    for label, r in rows:
        base = bases[r.backend]
        table.add_row(
            label,
            r.backend,
            str(r.num_envs),
            f"{r.env_steps_per_s:,.0f}",
            f"{r.env_steps_per_s / base:.2f}x",
            f"{r.iteration_s:.3f}",
            f"{r.collect_share:.0%}",
            f"{r.sync_share:.1%}",
            f"{r.wall_s:.1f}",
        )
    for t in training:
        if "error" in t:
            table.add_row(str(t["label"]), str(t["backend"]), "-", "failed", *["-"] * 5)
    _show(console, table)
    _show(
        console,
        "wall s: from the start of the measurement to the results, including launch, environment setup, kernel"
        " loading and all iterations",
    )
    save()
    failed = [str(t["label"]) for t in training if "error" in t]
    if failed:
        raise BenchFailed(f"training row{'s' if len(failed) > 1 else ''} {', '.join(failed)} failed (see above)")


def _contact_costs(task_id: str, cfg: BenchConfig, console: Console) -> None:
    from mjfleet.benchmark import machine_description
    from mjfleet.contact_costs import contact_costs

    spec = get_task(task_id)
    spec.env_cfg().prepare_assets()
    rows = contact_costs(spec, cfg.num_envs[0], cfg.steps)
    _show(console, f"[bold]{task_id}[/] on cpu: {machine_description('cpu')}")
    table = Table(title=f"one physics step of one world on one thread ({cfg.num_envs[0]} worlds, {cfg.steps} steps)")
    for col in ("states", "contact model", "us/step", "vs file", "contacts", "rows", "solver its"):
        table.add_column(col, justify="left" if col in ("states", "contact model") else "right")
    file_cost: dict[str, float] = {}
    for r in rows:
        file_cost.setdefault(r.states, r.us_per_step)
        table.add_row(
            r.states,
            r.model,
            f"{r.us_per_step:.1f}",
            f"{file_cost[r.states] / r.us_per_step:.2f}x",
            f"{r.contacts:.1f}",
            f"{r.rows:.1f}",
            f"{r.iterations:.2f}",
        )
    _show(console, table)
    if cfg.json is not None:
        report = {"task": task_id, "machine": machine_description("cpu"), "contact_costs": [vars(r) for r in rows]}
        cfg.json.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cfg.json, json.dumps(report, indent=1) + "\n")


def backends_for(kind: str, requested: tuple[Backend, ...]) -> list[Backend]:
    """The backends of ``requested`` that run on a device of ``kind`` (MuJoCo C on the CPU only), each once; none is
    one line (``--backends mujoco`` on a GPU measured nothing and exited 0)."""
    backends: list[Backend] = [b for b in dict.fromkeys(requested) if b == "warp" or kind == "cpu"]
    if not backends:
        raise UsageError("--backends mujoco: MuJoCo C runs on the CPU; measure it with --gpu-ids None")
    return backends


def _profile(task_id: str, cfg: BenchConfig, console: Console, kind: str, device: str) -> None:
    """Train one worker in-process and show each part's share of an iteration (the first one excluded)."""
    from mjfleet.benchmark import machine_description, measure_training
    from mjfleet.profiling import PROFILE

    named = backends_for(kind, cfg.backends)
    if len(named) > 1 and named != ["warp", "mujoco"]:
        raise UsageError("--profile measures one backend: name one with --backends (or leave it out: the device's)")
    backend: Backend = named[0] if len(named) == 1 else ("mujoco" if kind == "cpu" else "warp")
    train_cfg = _train_config(task_id, cfg, kind, 1, False, backend)
    validate(train_cfg)
    _show(console, f"[bold]{task_id}[/] on {device}: {machine_description(device)}")
    PROFILE.start(device)
    try:
        row = measure_training(train_cfg)
    finally:
        PROFILE.stop()
    timed = PROFILE.iterations[1:] or PROFILE.iterations
    names = list(dict.fromkeys(name for parts in timed for name in parts))
    mean = {name: sum(parts.get(name, 0.0) for parts in timed) / len(timed) for name in names}
    total = sum(mean.values())
    agent, num_envs = train_cfg.agent, train_cfg.env.num_envs
    envs = f"{num_envs} environments x {agent.num_steps_per_env} steps"
    shared = agent.training_simulation_envs(num_envs, kind == "cuda") - num_envs
    if shared:  # the evaluation steps with the training: its policy calls and physics count in the training's parts
        envs += f", {shared} evaluation environments in the training's parts"
    table = Table(
        title=f"one PPO iteration by part ({envs}, {len(timed)} timed iteration{'' if len(timed) == 1 else 's'},"
        f" {backend})"
    )
    for col in ("part", "ms per iteration", "share"):
        table.add_column(col, justify="left" if col == "part" else "right")
    for name in sorted(names, key=lambda n: -mean[n]):
        table.add_row(name, f"{mean[name] * 1000:,.1f}", f"{mean[name] / total:.1%}")
    table.add_row("iteration", f"{total * 1000:,.1f}", "100%")
    _show(console, table)
    if cfg.json is not None:
        report = {
            "task": task_id,
            "device": device,
            "machine": machine_description(device),
            "num_envs": train_cfg.env.num_envs,
            "steps_per_env": train_cfg.agent.num_steps_per_env,
            "env_steps_per_s": row.env_steps_per_s,
            "parts_s": mean,
        }
        cfg.json.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(cfg.json, json.dumps(report, indent=1) + "\n")


class BenchFailed(RuntimeError):
    """Some measurements failed; the others were printed (and written to ``--json``)."""


def _show(console: Console, renderable: object) -> None:
    with reader_may_leave():
        console.print(renderable)


def _train_config(
    task_id: str, cfg: BenchConfig, kind: str, workers: int, launched: bool, backend: Backend, first_gpu: int = 0
) -> TrainConfig:
    """The training run one row of the scaling table measures."""
    spec = get_task(task_id)
    on_cpu = kind == "cpu"  # what train would use on this device
    env, agent = spec.env_defaults(on_cpu), spec.agent_defaults(on_cpu)
    train_cfg = TrainConfig(env=env, agent=agent, task=task_id, gpu_ids=cfg.gpu_ids)
    train_cfg.env.sim = dataclasses.replace(train_cfg.env.sim, backend=backend)
    train_cfg.agent = dataclasses.replace(
        train_cfg.agent, max_iterations=cfg.train_iterations, eval_speedup=cfg.eval_speedup
    )
    if cfg.train_num_envs:
        train_cfg.env.num_envs = cfg.train_num_envs
    if not launched:
        return train_cfg
    if kind == "cpu":
        train_cfg.gpu_ids, train_cfg.cpu_workers = None, workers
    else:
        per_gpu = min(workers, cfg.workers_per_gpu)
        if workers % per_gpu:
            raise UsageError(f"--workers {workers} is not a multiple of --workers-per-gpu {per_gpu}")
        gpus = tuple(first_gpu + i for i in range(workers // per_gpu))  # the measured GPU, then the next ones
        train_cfg.gpu_ids, train_cfg.workers_per_gpu = gpus, per_gpu
    if workers == 1:
        train_cfg.launcher = "torchrunx"
    return train_cfg


def _measure_launched(cfg: TrainConfig) -> TrainRow:
    from mjfleet.benchmark import summarize_training
    from mjfleet.train import run as train

    # Launched workers write a run directory: a temporary one, gone with the measurement (it was left under the
    # folder bench ran in, unannounced).
    with tempfile.TemporaryDirectory(prefix="mjfleet-bench-") as root:
        start = time.perf_counter()
        results = train(dataclasses.replace(cfg, log_root=Path(root)))
        wall_s = time.perf_counter() - start
    return summarize_training(results, cfg.env.num_envs, wall_s=wall_s, backend=cfg.env.sim.backend)


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``bench``."""
    configure_logging(logging.WARNING)
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        if wants_help(args):
            print_help(BenchConfig, BenchConfig(), "bench", "Measure env-steps/s: physics, env step, PPO training.")
        raise UsageError("usage: bench <task> [OPTIONS]; run list-tasks to see the task ids")
    task_id = get_task(args[0]).id
    cfg = parse(BenchConfig, args[1:], f"bench {task_id}")
    if not cfg.backends:
        raise UsageError("--backends needs at least one of warp, mujoco")
    if not cfg.num_envs or not cfg.workers:
        raise UsageError("--num-envs and --workers need at least one value each")
    if any(n < 1 for n in cfg.num_envs) or cfg.steps < 1 or cfg.train_iterations < 2 or any(w < 1 for w in cfg.workers):
        raise UsageError("--num-envs, --steps and --workers must be positive and --train-iterations at least 2")
    if cfg.workers_per_gpu < 1:
        raise UsageError(f"--workers-per-gpu must be at least 1 (got {cfg.workers_per_gpu})")
    if cfg.train_num_envs is not None and cfg.train_num_envs < 1:
        raise UsageError(f"--train-num-envs must be at least 1 (got {cfg.train_num_envs})")
    if cfg.json is not None and cfg.json.is_dir():
        raise UsageError(f"--json {cfg.json} is a directory; name a file to write the results to")
    if cfg.json is not None:
        try:  # found before minutes of measurements, not after them
            cfg.json.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise UsageError(f"--json {cfg.json}: cannot create its folder ({why})") from None
        if not os.access(cfg.json.parent, os.W_OK):
            raise UsageError(f"--json {cfg.json}: its folder {cfg.json.parent} cannot be written")
    try:
        run(task_id, cfg, Console(width=max(Console().width, 120)))
    except BenchFailed as e:
        logger.error("%s", e)
        raise SystemExit(1) from None


if __name__ == "__main__":
    from mjfleet.runtime.process_end import run_as_process

    run_as_process(main)

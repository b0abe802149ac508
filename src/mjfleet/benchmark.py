"""Throughput measurements per physics backend: raw stepping, the full environment step, PPO training."""

from __future__ import annotations

import dataclasses
import gc
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from mjfleet.envs.env import MjEnv
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.runtime.context import DistributedContext
from mjfleet.sim.config import Backend, resolve_backend
from mjfleet.sim.mujoco_backend import MujocoSimulation
from mjfleet.sim.warp_runtime import scoped_device
from mjfleet.tasks.registry import TaskSpec
from mjfleet.train.api import prepare
from mjfleet.train.config import TrainConfig
from mjfleet.train.worker import train_worker


@dataclass
class StepRow:
    """Env-steps per second of one backend and ``num_envs`` (one env step = ``decimation`` physics steps)."""

    num_envs: int
    backend: str
    """``warp eager``, ``warp graph`` or ``mujoco (N threads)``."""
    raw: float
    env: float

    @property
    def ratio(self) -> float:
        """Full env step over raw physics."""
        return self.env / self.raw


@dataclass
class TrainRow:
    """Training throughput of one launch configuration."""

    workers: int
    num_envs: int
    env_steps_per_s: float
    collect_share: float
    sync_share: float
    iteration_s: float
    wall_s: float = float("nan")
    """Seconds from the start of the measurement to the results (launch, setup, every iteration)."""
    backend: str = ""
    """The physics backend trained on."""


def machine_description(device: str) -> str:
    """CPU model and core count, or the GPU name, plus library versions."""
    if device.startswith("cuda"):
        where = torch.cuda.get_device_name(torch.device(device))
    else:
        where = f"{_cpu_model()} ({torch.multiprocessing.cpu_count()} cores)"
    return (
        f"{where}; torch {torch.__version__}, warp {wp.__version__}, mujoco {mujoco.__version__},"
        f" mujoco-warp {mjw.__version__}; Python {platform.python_version()}"
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def device_sync(device: str) -> Callable[[], None]:
    """Waits for the device's queued work (a no-op on the CPU, whose work is done when a call returns)."""
    return (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)


def threads_text(threads: int) -> str:
    """``1 thread``, ``2 threads``: the MuJoCo C backend's label."""
    return f"{threads} thread{'s' if threads > 1 else ''}"


def best_rate(fn: Callable[[], None], calls: int, items: int, sync: Callable[[], None], repeats: int = 3) -> float:
    """Items per second of the fastest of ``repeats`` timed runs (the least disturbed by other load)."""
    for _ in range(3):  # warm-up: compile, load modules, capture graphs
        fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return calls * items / best


def measure_steps(spec: TaskSpec, num_envs: int, device: str, steps: int, backend: Backend = "warp") -> list[StepRow]:
    """Raw physics and full env step throughput of one backend (Warp: with graphs off and on)."""
    sync = device_sync(device)
    rows = []
    for use_graph in (False, True) if backend == "warp" else (True,):
        cfg = dataclasses.replace(spec.env_cfg(), num_envs=num_envs)
        cfg.sim = dataclasses.replace(cfg.sim, use_graph=use_graph, backend=backend)
        with scoped_device(device):
            env = MjEnv(spec.load_task_class()(cfg), device=device, seed=0)
            actions = torch.zeros(num_envs, env.num_actions, device=device)

            def env_step(env: MjEnv = env, actions: torch.Tensor = actions) -> None:
                env.step(actions)

            env_rate = best_rate(env_step, steps, num_envs, sync)
            # Raw physics: the same decimated physics call (Warp: graph or eager) the env makes, nothing else, from
            # fresh states like the env step's (without resets, fallen robots would pile up contacts).
            env.reset_all()
            raw_rate = best_rate(env.sim.step, steps, num_envs, sync)
        if isinstance(env.sim, MujocoSimulation):
            label = f"mujoco ({threads_text(env.sim.threads)})"
        else:
            label = f"warp {'graph' if use_graph else 'eager'}"
            if use_graph and device.startswith("cuda") and not env.sim.graph_active:
                label += " (not captured)"  # capture fell back to eager launches: not a graph's speed
        rows.append(StepRow(num_envs, label, raw_rate, env_rate))
    return rows


def free_device_memory(device: str) -> None:
    """Free what earlier measurements in this process left cached on a GPU (torch's caching allocator), so that
    launched workers sharing the GPU find the memory free."""
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def summarize_training(
    results: list[WorkerResult], num_envs: int, skip: int = 1, wall_s: float = float("nan"), backend: str = ""
) -> TrainRow:
    """Throughput over the iterations after the first ``skip`` (which include compilation and capture)."""
    records = results[0].records[skip:] or results[0].records
    total_s = sum(r.collect_s + r.learn_s for r in records)
    steps = sum(r.env_steps_per_s * (r.collect_s + r.learn_s) for r in records)
    return TrainRow(
        backend=backend,
        workers=len(results),
        num_envs=num_envs,
        env_steps_per_s=steps / total_s,
        collect_share=sum(r.collect_s for r in records) / total_s,
        sync_share=sum(r.sync_s for r in records) / total_s,
        iteration_s=total_s / len(records),
        wall_s=wall_s,
    )


def measure_training(cfg: TrainConfig) -> TrainRow:
    """PPO iterations of one worker in this process, nothing written to disk; ``cfg`` is checked like any run's."""
    prepared = prepare(cfg)
    if prepared.launch_plan is not None or prepared.run is None:
        raise ValueError("measure_training trains one worker in this process; launched runs go through train.run")
    start = time.perf_counter()
    device = prepared.selection.devices[0]
    results = [train_worker(cfg, None, DistributedContext(device=device), prepared.run.start)]
    backend = resolve_backend(cfg.env.sim, device)
    return summarize_training(results, cfg.env.num_envs, wall_s=time.perf_counter() - start, backend=backend)

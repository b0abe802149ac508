"""Physics settings (importable without MuJoCo Warp, so command-line parsing stays fast)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Backend = Literal["auto", "warp", "mujoco"]


@dataclass
class SimConfig:
    """Physics settings shared by every task."""

    backend: Backend = "auto"
    """Physics engine: ``warp`` (MuJoCo Warp, N worlds as one batch of kernels) or ``mujoco`` (MuJoCo C, the
    worlds stepped on a thread pool by ``mujoco.batch``). ``auto``: ``warp`` on CUDA; ``mujoco`` on the CPU, where
    it measured faster for every built-in task (docs/performance.md: 4.2x the env step of go1 on 2 cores)."""
    threads: int | None = None
    """Threads of the ``mujoco`` backend's pool, the calling thread included (None: ``OMP_NUM_THREADS`` if set,
    which launched CPU workers get as cores // workers, else the cores this process may run on)."""

    decimation: int = 2
    """Physics steps per environment step."""
    sensors_every_substep: bool = False
    """Compute sensors on every physics substep, as a plain ``mj_step`` loop does. Off: only on the last substep of
    each env step, whose values are the ones read (bit-identical results, fewer touch-sensor evaluations); sensors
    with history buffers or plugins are always computed on every substep."""
    use_graph: bool = True
    """Warp backend: capture the decimated physics step as a Warp graph and replay it (CPU and CUDA); falls back to
    eager launches if capture fails."""
    divergence_speed: float | None = 1000.0
    """A world with a generalized velocity beyond this magnitude (m/s, rad/s) has diverged as surely as one with a
    NaN: it is reset, earns nothing for that step and counts as ``Episode_Termination/nonfinite``. A contact that
    explodes can spin a body at 1e5 rad/s while every number stays finite, and one such step's penalties (-7e7 in
    a real run) poison the value function. None: only NaN/Inf count."""
    nconmax: int | None = None
    """Warp backend: contacts to allocate per world (None: MuJoCo Warp's default for the model)."""
    njmax: int | None = None
    """Warp backend: constraint rows to allocate per world (None: MuJoCo Warp's default for the model)."""
    solver_notices: bool = False
    """Warp backend: print MuJoCo Warp's "(linesearch) iterations limit reached" notices from inside the kernels.
    Off by default: after falls and hard impacts the solver regularly stops at its iteration limit (the step is
    still valid, it uses the best iterate), and the notices would flood the console and worker logs.
    Buffer-overflow warnings (contacts, constraint rows) always print."""


def resolve_backend(cfg: SimConfig, device: str) -> Literal["warp", "mujoco"]:
    """The backend ``cfg.backend`` selects on ``device`` (``auto``: Warp on CUDA, MuJoCo C on the CPU)."""
    if cfg.backend != "auto":
        return cfg.backend
    return "warp" if device.startswith("cuda") else "mujoco"


def resolve_threads(cfg: SimConfig) -> int:
    """Threads for the MuJoCo C backend: ``cfg.threads``, else this worker's share of the cores."""
    if cfg.threads is not None:
        return max(1, cfg.threads)
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if omp.isdigit() and int(omp) > 0:
        return int(omp)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)

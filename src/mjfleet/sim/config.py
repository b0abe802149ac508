"""Physics settings (importable without MuJoCo Warp, so command-line parsing stays fast)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal

Backend = Literal["auto", "warp", "mujoco"]


@dataclass
class ContactModel:
    """Cheaper physics for the training simulation than the robot file's own: its contact model, and optionally
    longer physics steps. A policy trained on it counts by how it plays on the file as shipped: `play` and the
    evaluation that `--stop-when` reads (when it has a simulation of its own, as on the CPU by default) run the
    file's contacts and timestep."""

    applies: Literal["never", "cpu", "always"] = "never"
    """Where the training simulation uses the changes below: `cpu` (training on the CPU, whichever backend: there
    every constraint row costs time), `always` (GPUs too), `never` (the file as shipped everywhere)."""
    cone: Literal["file", "pyramidal", "elliptic"] = "file"
    """Friction cone: pyramidal cones need fewer solver iterations than elliptic ones."""
    impratio: float | None = None
    """Ratio of frictional to normal constraint impedance (None: the file's; elliptic cones with a large value
    resist slip harder and converge more slowly)."""
    max_condim: Literal[1, 3, 4, 6] | None = None
    """Cap on every geom's contact dimensionality (3: sliding friction only, no torsional or rolling friction rows)."""
    joint_friction: bool = True
    """Keep the joints' dry friction (`frictionloss`: one constraint row per joint and step). Off, the joints move
    without it and the policy meets it only where it is judged."""
    self_collisions: bool = True
    """Keep contacts between bodies of one kinematic tree (a robot's legs with each other and its trunk). Off, a
    robot's geoms still touch the ground and every other body."""
    timestep_scale: int = 1
    """Physics steps this many times the model's `timestep` (the robot file's, or the one its robot record sets),
    and `--env.sim.decimation` divided by it: an environment step lasts as long and takes that many times fewer
    physics steps (it must divide the decimation). 1: the model's timestep."""

    def active(self, on_gpu: bool) -> bool:
        """Whether the training simulation on a GPU (``on_gpu``) or the CPU uses these changes."""
        return self.applies == "always" or (self.applies == "cpu" and not on_gpu)

    def describe(self) -> str:
        """The changes in words, e.g. ``pyramidal cones, condim <= 3, impratio 1, no self-collisions``."""
        parts = [f"{self.cone} cones"] if self.cone != "file" else []
        if self.max_condim is not None:
            parts.append(f"condim <= {self.max_condim}")
        if self.impratio is not None:
            parts.append(f"impratio {self.impratio:g}")
        if not self.joint_friction:
            parts.append("no joint friction")
        if not self.self_collisions:
            parts.append("no self-collisions")
        if self.timestep_scale != 1:
            parts.append(f"{self.timestep_scale}x the model's timestep")
        return ", ".join(parts) or "the file's"


@dataclass
class SimConfig:
    """Physics settings shared by every task."""

    backend: Backend = "auto"
    """Physics engine: `warp` (MuJoCo Warp, N worlds as one batch of kernels) or `mujoco` (MuJoCo C, the
    worlds stepped on a thread pool by `mujoco.batch`). `auto`: `warp` on CUDA; `mujoco` on the CPU, where
    it measured faster for every built-in task (docs/performance.md: 4.2x the env step of go1 on 2 cores)."""
    threads: int | None = None
    """Threads of the `mujoco` backend's pool, the calling thread included (None: `OMP_NUM_THREADS` if set,
    which launched CPU workers get as cores // workers, else the cores this process may run on)."""

    decimation: int = 2
    """Physics steps per environment step."""
    sensors_every_substep: bool = False
    """Compute sensors on every physics substep, as a plain `mj_step` loop does. Off: only on the last substep of
    each env step, whose values are the ones read (bit-identical results, fewer touch-sensor evaluations); sensors
    with history buffers or plugins are always computed on every substep."""
    use_graph: bool = True
    """Warp backend: capture the decimated physics step as a Warp graph and replay it (CPU and CUDA); falls back to
    eager launches if capture fails."""
    divergence_speed: float | None = 1000.0
    """A world with a generalized velocity beyond this magnitude (m/s, rad/s) has diverged as surely as one with a
    NaN: it is reset, earns nothing for that step and counts as `Episode_Termination/nonfinite`. A contact that
    explodes can spin a body at 1e5 rad/s while every number stays finite, and one such step's penalties (-7e7 in
    a real run) poison the value function. None: only NaN/Inf count."""
    nconmax: int | None = None
    """Warp backend: contacts to allocate per world (None: MuJoCo Warp's default for the model)."""
    njmax: int | None = None
    """Warp backend: constraint rows to allocate per world (None: MuJoCo Warp's default for the model)."""
    training_contacts: ContactModel = field(default_factory=ContactModel)
    """The contact model the training simulation runs, where it differs from the file's."""
    solver_notices: bool = False
    """Warp backend: print MuJoCo Warp's "(linesearch) iterations limit reached" notices from inside the kernels.
    Off by default: after falls and hard impacts the solver regularly stops at its iteration limit (the step is
    still valid, it uses the best iterate), and the notices would flood the console and worker logs.
    Buffer-overflow warnings (contacts, constraint rows) always print."""


def as_shipped(cfg: SimConfig) -> SimConfig:
    """``cfg`` with the robot file's own contact model wherever it runs (what ``play`` and the evaluation judge on);
    the training contact model's settings stay, applied nowhere."""
    return dataclasses.replace(cfg, training_contacts=dataclasses.replace(cfg.training_contacts, applies="never"))


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

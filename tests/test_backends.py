"""The two physics backends agree: same trajectories for a fixed action sequence on every built-in task, training
runs on both."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.runtime.context import DistributedContext
from mjfleet.sim.config import Backend, SimConfig
from mjfleet.sim.simulation import sensors_last_substep_only
from mjfleet.tasks.locomotion.config import LocomotionConfig
from mjfleet.tasks.manipulation.config import LiftConfig
from mjfleet.tasks.registry import get_task
from mjfleet.train.worker import train_worker

from .helpers import every_task, small_train_config

SMALL_TERRAIN = {"num_levels": 2, "types": ("bumps", "stairs_up"), "tile_size": 4.0, "border": 2.0}
"""A 2 x 2-tile terrain for the rough tasks (the full one takes seconds to build)."""

HORIZON = {"cartpole": 50, "flat": 20, "rough": 10, "reach": 20, "cube": 20, "tracking": 20}
"""Control steps compared. Warp steps in float32 and MuJoCo C in float64; on flat ground (a plane) both collide
and solve alike and stay within ~3e-5 over 20 steps (0.4 s of walking with contacts). On the rough terrain the
heightfield colliders differ (MuJoCo C's prisms against MuJoCo Warp's own), so the trajectories separate at the
first foot contact: there each world is compared up to the step before either backend's contact sensors first
read a contact."""

TOLERANCE = {"cartpole": 1e-4, "flat": 1e-3, "rough": 1e-4, "reach": 1e-3, "cube": 1e-2, "tracking": 1e-3}
"""Largest absolute difference of any ``qpos``/``qvel`` entry over the horizon (radians, metres, per second):
about 30x the largest difference measured, so float32 rounding passes and a wrong model field, control or
reset fails. The exception is the lifting task's cube, a box resting on the table's box: on its first steps the two
solvers (elliptic cones, 10 iterations) settle its contact apart by up to 3.4e-3 m/s, a difference that halves every
step (4e-6 after 20), while the arm's joints agree to float32 rounding."""


def _env(task_id: str, backend: Backend, num_envs: int, **sim: object) -> MjEnv:
    spec = get_task(task_id)
    cfg = spec.env_cfg()
    overrides: dict[str, object] = {"num_envs": num_envs, "sim": dataclasses.replace(cfg.sim, backend=backend, **sim)}
    if isinstance(cfg, LocomotionConfig) and cfg.terrain.kind == "rough":
        overrides["terrain"] = dataclasses.replace(cfg.terrain, **SMALL_TERRAIN)
    if isinstance(cfg, LiftConfig):
        # A cube held under random actions slips chaotically (float32 against float64); the grasp on both backends
        # has its own test (tests/test_manipulation.py). Here every cube starts on the table.
        overrides["start_in_hand"], overrides["start_at_cube"] = 0.0, 0.0
    return MjEnv(spec.load_task_class()(dataclasses.replace(cfg, **overrides)), device="cpu", seed=0)


def _trajectory(task_id: str, backend: Backend, steps: int, num_envs: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """The state after each step, and whether any contact sensor of the world read a contact by then."""
    env = _env(task_id, backend, num_envs)
    gen = torch.Generator().manual_seed(1)
    states, touched = [], torch.zeros(num_envs, dtype=torch.bool)
    touches = []
    for _ in range(steps):
        env.step(torch.randn(num_envs, env.num_actions, generator=gen) * 0.5)
        states.append(torch.cat((env.sim.qpos, env.sim.qvel), dim=-1).clone())
        if env.sim.sensordata.shape[1]:
            touched = touched | (env.sim.sensordata != 0).any(dim=1)  # touch forces and found contacts
        touches.append(touched.clone())
    return torch.stack(states), torch.stack(touches)


@pytest.mark.parametrize("task_id", every_task())
def test_backends_give_the_same_trajectory(task_id: str) -> None:
    family = "cartpole" if task_id.startswith("cartpole") else task_id.rsplit("-", 1)[-1]
    steps = HORIZON[family]
    (warp, warp_touched), (c, c_touched) = _trajectory(task_id, "warp", steps), _trajectory(task_id, "mujoco", steps)
    assert torch.isfinite(c).all()
    difference = (warp - c).abs().amax(dim=2)  # (step, world)
    if family == "rough":
        compared = ~(warp_touched | c_touched)
        assert compared.any(), "every world touched the terrain at once: the comparison would prove nothing"
        difference = difference * compared
    error = difference.amax(dim=1)
    assert float(error.max()) <= TOLERANCE[family], f"{task_id}: per-step max |warp - mujoco| {error.tolist()}"


@pytest.mark.parametrize("backend", ["warp", "mujoco"])
@pytest.mark.parametrize("task_id", every_task())
def test_every_task_trains_with_both_backends(task_id: str, backend: Backend) -> None:
    """Two tiny PPO iterations in this process: rollouts, resets, the update, on each backend."""
    cfg = small_train_config(task_id, num_envs=8, iterations=2, steps=4)
    overrides: dict[str, object] = {"sim": dataclasses.replace(cfg.env.sim, backend=backend)}
    if isinstance(cfg.env, LocomotionConfig) and cfg.env.terrain.kind == "rough":
        overrides["terrain"] = dataclasses.replace(cfg.env.terrain, **SMALL_TERRAIN)
    cfg.env = dataclasses.replace(cfg.env, **overrides)
    result = train_worker(cfg, run_dir=None, ctx=DistributedContext(device="cpu"))
    assert len(result.records) == 2
    assert all(r.env_steps_per_s > 0 for r in result.records)


@pytest.mark.parametrize("backend", ["warp", "mujoco"])
def test_sensors_on_the_last_substep_only_change_nothing(backend: Backend) -> None:
    """The go1's contact sensors are skipped on the first 3 of 4 substeps by default; state, sensors and every other
    derived field read by tasks are bit-identical to computing them on every substep."""
    runs = []
    for every_substep in (True, False):
        env = _env("go1-velocity-flat", backend, num_envs=8, sensors_every_substep=every_substep)
        assert sensors_last_substep_only(env.sim.mj_model, env.sim.cfg) is not every_substep
        gen = torch.Generator().manual_seed(3)
        fields = ("qpos", "qvel", "sensordata", "qacc", "actuator_force", "xpos")
        seen = []
        for _ in range(12):
            env.step(torch.randn(8, env.num_actions, generator=gen) * 0.5)
            seen.append(torch.cat([env.sim.view(f).reshape(8, -1) for f in fields], dim=-1).clone())
        runs.append(torch.stack(seen))
    sensors = env.sim.view("sensordata")
    assert float(sensors.abs().sum()) > 0, "no contact sensor fired: the comparison would prove nothing"
    assert torch.equal(runs[0], runs[1]), f"max difference {(runs[0] - runs[1]).abs().max()}"


def test_sensors_nobody_reads_are_not_computed_and_change_nothing() -> None:
    """On MuJoCo C, a simulation whose sensors no task reads computes none (one call into the thread pool per
    step); the state is bit-identical to computing them, and once ``sensordata`` is read, the next step's readings
    equal those of the simulation that computed them all along."""
    from mjfleet.sim.factory import create_simulation
    from mjfleet.sim.mujoco_backend import MujocoSimulation

    spec = get_task("go1-velocity-flat")
    model = spec.load_task_class()(spec.env_cfg()).build_model()
    sims = [
        create_simulation(model, 4, "cpu", dataclasses.replace(SimConfig(decimation=4), backend="mujoco", **every))
        for every in ({"sensors_every_substep": True}, {})
    ]
    assert isinstance(sims[1], MujocoSimulation)
    model_sensor_rows = sims[1]._batch.bind("sensordata")  # the physics' own rows, not a view that binds them
    gen = torch.Generator().manual_seed(5)
    for _ in range(40):
        ctrl = torch.randn(4, model.nu, generator=gen) * 0.5
        for sim in sims:
            sim.ctrl[:] = ctrl
            sim.step()
        assert torch.equal(sims[0].qpos, sims[1].qpos) and torch.equal(sims[0].qvel, sims[1].qvel)
    assert not model_sensor_rows.any(), "sensors were computed although nothing read them"
    # Binding a view runs a forward pass on both; from here the skipping one computes them on the last substep.
    every, read = sims[0].sensordata, sims[1].sensordata
    for _ in range(10):
        ctrl = torch.randn(4, model.nu, generator=gen) * 0.5
        for sim in sims:
            sim.ctrl[:] = ctrl
            sim.step()
        assert torch.equal(every, read)
    assert float(read.abs().sum()) > 0, "no contact sensor fired: the comparison would prove nothing"

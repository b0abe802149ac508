# pyright: reportAttributeAccessIssue=false
"""Velocity tracking for legged robots: follow (forward, sideways, yaw-rate) commands on flat or rough ground."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import mujoco
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import Task
from mjfleet.errors import UsageError
from mjfleet.tasks.joint_limits import joint_ranges, soft_ranges
from mjfleet.tasks.locomotion.actions import action_scales
from mjfleet.tasks.locomotion.check import say_control_rate
from mjfleet.tasks.locomotion.columns import Index, columns, concat_columns, first_column
from mjfleet.tasks.locomotion.commands import CommandCurriculum, VelocityCommands
from mjfleet.tasks.locomotion.config import LocomotionConfig
from mjfleet.tasks.locomotion.contacts import ZoneContacts
from mjfleet.tasks.locomotion.curriculum import TerrainCurriculum
from mjfleet.tasks.locomotion.model import build_model, spawn_height
from mjfleet.tasks.locomotion.randomization import BATCHED_FIELDS, DomainRandomizer, Pushes, movable_centre_of_mass
from mjfleet.tasks.locomotion.rewards import MOVING_SPEED, LocomotionRewards
from mjfleet.tasks.locomotion.robots import RobotSpec
from mjfleet.tasks.locomotion.rotations import heading, projected_gravity, quat_mul, rotate_inverse, yaw_quat
from mjfleet.tasks.locomotion.sources import resolve_robot
from mjfleet.tasks.locomotion.terms import noise_amplitude, policy_terms
from mjfleet.tasks.locomotion.terrain import HeightLookup, TerrainMap, generate

SUCCESS_LIN_VEL_ERROR = 0.25
"""An episode succeeds when it times out with a mean linear-velocity tracking error below this (m/s)."""

COMMAND_NAMES = ("lin_vel_x", "lin_vel_y", "yaw_rate")
"""Names of the command columns, as the viewer's sliders show them."""

SPAWN_CLEARANCE = 0.02
"""Robots spawn this far above their standing height, so no foot starts inside the ground (metres)."""


class LocomotionTask(LocomotionRewards, Task[LocomotionConfig]):
    """Track base-velocity commands with a quadruped or a humanoid; see ``docs/tasks.md`` for the full MDP."""

    batched_model_fields: ClassVar[tuple[str, ...]] = BATCHED_FIELDS
    video_camera: ClassVar[str | None] = None  # a camera tracking the base

    def __init__(self, cfg: LocomotionConfig) -> None:
        super().__init__(cfg)
        self.robot: RobotSpec = resolve_robot(cfg.robot)
        self.terrain: TerrainMap | None = generate(cfg.terrain) if cfg.terrain.kind == "rough" else None
        self._model = build_model(self.robot, self.terrain)
        movable_centre_of_mass(self._model, self.robot.base_body, cfg.randomization)
        self._model.opt.iterations = cfg.solver_iterations
        self._model.opt.ls_iterations = cfg.linesearch_iterations

    def build_model(self) -> mujoco.MjModel:
        return self._model

    @property
    def num_actions(self) -> int:
        return int(self._model.nu)

    # --- setup -------------------------------------------------------------------------------------------------
    def setup(self, env: MjEnv) -> None:
        cfg, n, dev, g = self.cfg, env.num_envs, env.device, env.generator
        self.dt = env.step_dt
        say_control_rate(self.robot, float(self._model.opt.timestep), self.dt)
        self._lookup_model(env.sim.mj_model, dev)
        self.heights = HeightLookup(self.terrain, dev) if self.terrain is not None else None
        self.curriculum = TerrainCurriculum(cfg.terrain, self.terrain, n, dev, g) if self.terrain is not None else None
        self.commands = VelocityCommands(cfg.commands, n, self.dt, dev, g)
        ramp = cfg.commands.curriculum
        self.command_curriculum = (
            CommandCurriculum(ramp, n, int(env.max_episode_length), dev) if ramp.start != 1.0 else None
        )
        self.randomizer = DomainRandomizer(cfg.randomization, env.sim, self.base_body, g, self.num_actions)
        self.pushes = Pushes(cfg.randomization, n, self.dt, dev, g)
        self.randomizer.apply(torch.arange(n, device=dev))
        self._scan_points = self._make_scan_points(dev)
        self._terms = policy_terms(self.num_actions)
        self._noise_amplitude = noise_amplitude(self.cfg.noise, self._terms, dev)
        # Each gait clock runs only when its reward term is computed.
        self._air_time_clock = "feet_air_time" in env.reward_weights
        self._stance_swing_clocks = "biped_air_time" in env.reward_weights
        self._allocate(n, dev)
        self.ang_vel = env.sim.qvel[:, 3:6]
        """Base-frame angular velocity: a view of the free joint's velocity, current at every moment."""

    def _lookup_model(self, m: mujoco.MjModel, dev: torch.device) -> None:
        """Joint, sensor, site and body indices, default pose and joint limits, from the compiled model."""
        key = m.key("home")

        def tensor(values: object) -> torch.Tensor:
            return torch.as_tensor(values, dtype=torch.float32, device=dev)

        joints = m.actuator_trnid[:, 0]
        self._qpos_idx = columns([int(i) for i in m.jnt_qposadr[joints]], dev)
        self._qvel_idx = columns([int(i) for i in m.jnt_dofadr[joints]], dev)
        self.default_joint_pos = tensor(key.ctrl)
        """Servo targets of the ``home`` pose; actions and joint observations are relative to them."""
        self._home_joint_pos = tensor(key.qpos[m.jnt_qposadr[joints]])
        self.action_scale = tensor(action_scales(m, self.cfg.action_scale, self.cfg.action_scale_of_force))
        """Radians of joint target per unit of action, in actuator order."""
        self._home_base = tensor(key.qpos[:7])
        self._home_qpos = tensor(key.qpos)
        """The whole home pose: joints without an actuator start where the keyframe puts them."""
        self.spawn_base_height = spawn_height(m, self.robot)
        """Base height of a reset over its ground, less ``SPAWN_CLEARANCE``: the feet at the home pose on it."""
        if self.cfg.termination_height >= self.spawn_base_height:  # every episode would end as a fall at once
            raise UsageError(
                f"--env.termination-height {self.cfg.termination_height:g} is not below the base height of robot"
                f" {self.robot.name!r} standing in its home pose ({self.spawn_base_height:.3g} m): every episode would"
                " end as a fall at its first step; give a height it reaches only by falling"
            )
        low, high = joint_ranges(m, joints)
        self._joint_low, self._joint_high = tensor(low), tensor(high)
        soft_low, soft_high = soft_ranges(low, high, self.cfg.soft_joint_limit)
        self._soft_low, self._soft_high = tensor(soft_low), tensor(soft_high)
        names = [m.joint(int(j)).name for j in joints]
        deviation = [names.index(j) for j in self.robot.deviation_joints]
        self._deviation_idx = torch.as_tensor(deviation, dtype=torch.long, device=dev)  # () allowed
        self.base_body = int(m.body(self.robot.base_body).id)
        self._zone_contacts = ZoneContacts(m, self.robot, self.cfg.contact_force, dev)
        self._feet_touch = self._zone_contacts.index(self.robot.feet, dev)
        self._undesired_touch = self._zone_contacts.index(self.robot.undesired_contacts, dev)
        self._terminal_touch = self._zone_contacts.index(self.robot.terminal_contacts, dev)
        self._foot_sites = torch.as_tensor([int(m.site(f"{x}_site").id) for x in self.robot.feet], device=dev)
        self.target_height = self.cfg.target_base_height or float(key.qpos[2])
        """Base height of the ``base_height`` reward and the height scan's zero (default: standing height)."""

    def _allocate(self, n: int, dev: torch.device) -> None:
        """Per-environment state: refreshed in after_step (and for reset rows in reset), read by terminations,
        rewards and observations."""
        nf = len(self.robot.feet)

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=dev)

        self.lin_vel, self.gravity, self.base_height = zeros(n, 3), zeros(n, 3), zeros(n)
        self.feet_contact = zeros(n, nf, dtype=torch.bool)
        self.undesired_count = zeros(n)
        self.terminal_contact = zeros(n, dtype=torch.bool)
        self._lin_err_sq, self._yaw_err_sq = zeros(n), zeros(n)
        self._moving = zeros(n, dtype=torch.bool)
        # Gait clocks.
        self._air_time = zeros(n, nf)
        self._last_contact = zeros(n, nf, dtype=torch.bool)
        self._touchdown_reward = zeros(n)
        self._stance_time, self._swing_time = zeros(n, nf), zeros(n, nf)
        # Episode statistics and curriculum progress.
        self._lin_err_sum, self._yaw_err_sum, self._steps = zeros(n), zeros(n), zeros(n)
        self._spawn_xy, self._last_xy = zeros(n, 2), zeros(n, 2)
        # How far the robot got from its spawn point, the length of the path it covered (a robot that follows a
        # turning command walks an arc, ending nearer than the path is long) and of the path its commands asked for.
        self._walked, self._covered, self._commanded = zeros(n), zeros(n), zeros(n)

    def _make_scan_points(self, dev: torch.device) -> torch.Tensor:
        """Height-scan points in the heading frame, ``(points, 2)``, x-major."""
        nx, ny = self.cfg.height_scan
        if nx <= 0 or ny <= 0 or self.heights is None:
            return torch.zeros(0, 2, device=dev)
        s = self.cfg.height_scan_spacing
        xs = (torch.arange(nx, device=dev) - (nx - 1) / 2) * s
        ys = (torch.arange(ny, device=dev) - (ny - 1) / 2) * s
        gx, gy = torch.meshgrid(xs, ys, indexing="ij")
        return torch.stack((gx.flatten(), gy.flatten()), dim=-1)

    # --- state helpers -----------------------------------------------------------------------------------------
    def ground_height(self, xy: torch.Tensor) -> torch.Tensor:
        """Ground height under world points ``xy`` (..., 2)."""
        if self.heights is None:
            return torch.zeros(xy.shape[:-1], device=xy.device)
        return self.heights(xy)

    def _base_state(
        self, env: MjEnv, rows: Index = slice(None)
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Base-frame linear and angular velocity, projected gravity, and height above the ground, of ``rows``.

        Read from the free joint (exact after the step, also right after a reset, with no forward pass): its
        linear velocity is in the world frame, its angular velocity already in the body frame.
        """
        qpos, qvel = env.sim.qpos[rows], env.sim.qvel[rows]
        quat = qpos[:, 3:7]
        lin_vel = rotate_inverse(quat, qvel[:, 0:3])
        height = qpos[:, 2] - self.ground_height(qpos[:, :2])
        return lin_vel, qvel[:, 3:6], projected_gravity(quat), height

    # --- MDP ---------------------------------------------------------------------------------------------------
    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        cfg, sim, dev, g = self.cfg, env.sim, env.device, env.generator
        n = env_ids.numel()
        if n == 0:
            return
        xy = torch.zeros(n, 2, device=dev)
        ground = torch.zeros(n, device=dev)
        if self.command_curriculum is not None:
            # Training episodes that ran from a reset to their end only (not evaluation rows, not the first reset of
            # an environment, not an episode begun part-way, whose tracking over a whole episode length would read
            # low however well it tracked).
            counted = (env_ids < env.first_eval_env) & (self._steps[env_ids] > 0) & env.episodes_ended
            counted &= env.from_reset[env_ids]
            self.command_curriculum.episodes_ended(env_ids, counted)
            self.commands.set_level(self.command_curriculum.level, env.first_eval_env)
        if self.curriculum is not None:
            # A fall is judged on the distance its commands asked for over a whole episode: one that fell early,
            # having kept up until then, is demoted too (legged_gym's rule, with the episode's mean command
            # speed). A time-out on what it was asked over the steps it lasted: an episode begun part-way (a
            # random start) that kept up is not.
            fell = env.terminated[env_ids]
            steps = self._steps[env_ids].clamp(min=1.0)
            asked = self._commanded[env_ids] * torch.where(fell, env.max_episode_length / steps, 1.0)
            if env.episodes_ended:  # a restart mid-way (a check of the policy from fresh starts) judges nothing
                # A diverged world walked nowhere (MuJoCo C puts it back at the grid's origin, metres away, which
                # read as a walk up a level): it fell.
                diverged = env.diverged[env_ids]
                walked = torch.where(diverged, 0.0, self._walked[env_ids])
                covered = torch.where(diverged, 0.0, self._covered[env_ids])
                self.curriculum.update(env_ids, walked, covered, asked)
            xy, ground = self.curriculum.spawn(env_ids)
            xy = xy + (torch.rand(n, 2, device=dev, generator=g) * 2 - 1) * cfg.terrain.spawn_jitter

        yaw = (torch.rand(n, device=dev, generator=g) * 2 - 1) * math.pi
        qpos = self._home_qpos.expand(n, -1).clone()
        qpos[:, :2] = xy
        qpos[:, 2] = ground + self.spawn_base_height + SPAWN_CLEARANCE
        qpos[:, 3:7] = quat_mul(yaw_quat(yaw), self._home_base[3:7].expand(n, 4))
        noise = (torch.rand(n, self.num_actions, device=dev, generator=g) * 2 - 1) * cfg.init_joint_noise
        qpos[:, self._qpos_idx] = torch.clamp(self._home_joint_pos + noise, self._joint_low, self._joint_high)
        qvel = torch.zeros(n, sim.qvel.shape[1], device=dev)
        qvel[:, :6] = (torch.rand(n, 6, device=dev, generator=g) * 2 - 1) * cfg.init_base_velocity
        sim.qpos[env_ids] = qpos
        sim.qvel[env_ids] = qvel
        sim.ctrl[env_ids] = self.default_joint_pos
        # Touch readings are those of the previous episode until the next step recomputes them.
        sim.sensordata[env_ids] = 0.0

        self.commands.reset(env_ids)
        self.pushes.reset(env_ids)
        if cfg.randomization.on_reset:
            self.randomizer.apply(env_ids)
        for buf in (
            self.feet_contact,
            self._last_contact,
            self._air_time,
            self._stance_time,
            self._swing_time,
            self._lin_err_sum,
            self._yaw_err_sum,
            self._steps,
            self._walked,
            self._covered,
            self._commanded,
        ):
            buf[env_ids] = 0
        self._spawn_xy[env_ids] = xy
        self._last_xy[env_ids] = qpos[:, :2]
        # Observations follow the resets: refresh the base state of the reset rows only.
        lin_vel, _, gravity, height = self._base_state(env, env_ids)
        self.lin_vel[env_ids], self.gravity[env_ids], self.base_height[env_ids] = lin_vel, gravity, height

    def apply_actions(self, env: MjEnv, actions: torch.Tensor) -> None:
        # Position servos: ctrl is the joint target; MuJoCo clamps it to the joint range (ctrlrange).
        torch.addcmul(self.default_joint_pos, actions, self.action_scale, out=env.sim.ctrl)
        self.randomizer.aim_servos(env.sim.ctrl)

    def after_step(self, env: MjEnv) -> None:
        sim, dt = env.sim, self.dt
        self.lin_vel, _, self.gravity, self.base_height = self._base_state(env)
        touch = self._zone_contacts(sim.sensordata)
        contact = touch[:, self._feet_touch]
        self.undesired_count = touch[:, self._undesired_touch].sum(dim=-1).float()
        self.terminal_contact = touch[:, self._terminal_touch].any(dim=-1)

        command = self.commands.command
        self._lin_err_sq = torch.sum(torch.square(command[:, :2] - self.lin_vel[:, :2]), dim=-1)
        self._yaw_err_sq = torch.square(command[:, 2] - self.ang_vel[:, 2])
        self._moving = torch.linalg.vector_norm(command[:, :2], dim=-1) > MOVING_SPEED
        self._lin_err_sum += torch.sqrt(self._lin_err_sq)
        self._yaw_err_sum += torch.sqrt(self._yaw_err_sq)
        self._steps += 1.0
        if self.curriculum is not None:  # what the terrain curriculum judges; flat ground has none
            xy = sim.qpos[:, :2]
            self._walked = torch.linalg.vector_norm(xy - self._spawn_xy, dim=-1)
            self._covered += torch.linalg.vector_norm(xy - self._last_xy, dim=-1)
            self._last_xy.copy_(xy)
            self._commanded += torch.linalg.vector_norm(command[:, :2], dim=-1) * dt
        if self.command_curriculum is not None:
            self.command_curriculum.step(torch.exp(-self._lin_err_sq / self.cfg.tracking_std**2))
            self.commands.set_level(self.command_curriculum.level, env.first_eval_env)

        if self._air_time_clock:
            # Quadruped air time (legged_gym): a touchdown pays the swing time minus the threshold. Contacts are
            # or-ed with the previous step's, because a contact sensor reads only the last substep.
            filtered = contact | self._last_contact
            touchdown = (self._air_time > 0.0) & filtered
            self._air_time += dt
            self._touchdown_reward = torch.sum((self._air_time - self.cfg.air_time_threshold) * touchdown, dim=-1)
            self._air_time *= ~filtered
            self._last_contact = contact
        if self._stance_swing_clocks:
            self._stance_time = torch.where(contact, self._stance_time + dt, 0.0)
            self._swing_time = torch.where(contact, 0.0, self._swing_time + dt)
        self.feet_contact = contact

        # Commands and pushes change the next step, after this step's errors were taken (rewards read the base
        # state from before the push; the critic's linear velocity is re-read after it in observations).
        self.commands.step()
        self.pushes.step(sim.qvel)

    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        lin_vel = self.lin_vel
        joint_pos = self.joint_pos(env) - self.default_joint_pos
        if self.pushes.enabled:  # pushes changed the velocity after after_step read it
            lin_vel = rotate_inverse(env.sim.qpos[:, 3:7], env.sim.qvel[:, 0:3])
        policy_parts = (
            self.ang_vel,
            self.gravity,
            self.commands.command,
            joint_pos,
            self.joint_vel(env),
            env.actions,
        )
        privileged = [
            lin_vel,
            self.base_height.unsqueeze(-1),
            self.feet_contact,
            self.randomizer.friction.unsqueeze(-1),
            self.randomizer.added_mass.unsqueeze(-1),
        ]
        if self._scan_points.shape[0]:
            privileged.append(self._height_scan(env))
        # The critic sees the clean policy terms first, then privileged state; the policy is a view of its start.
        critic = concat_columns((*policy_parts, *privileged), env.num_envs, env.device)
        policy = critic[:, : self._noise_amplitude.shape[0]]
        if self.randomizer.biased:  # the policy reads the encoders (their bias); the critic, the joints
            start = first_column(self._terms, "joint_pos")
            policy = policy.clone()
            policy[:, start : start + joint_pos.shape[-1]] = self.randomizer.encoder_readings(joint_pos)
        if self.cfg.noise.scale > 0.0:
            unit = torch.rand(policy.shape, device=env.device, generator=env.generator) * 2 - 1
            policy = policy + unit * self._noise_amplitude
        return {"policy": policy, "critic": critic}

    def export_metadata(self) -> dict[str, Any]:
        """How actions become servo targets, the policy observation's terms in order, and the commands' ranges
        trained on (a command outside them asks the policy for what it never learnt)."""
        return {
            "joint_targets": "default_joint_pos + action_scale * clip(action)",
            "observation_terms": {
                "policy": [{"name": name, "size": size, "what": what} for name, size, what in self._terms]
            },
            "command_ranges": {name: [float(lo), float(hi)] for name, (lo, hi) in self.command_ranges().items()},
        }

    def _height_scan(self, env: MjEnv) -> torch.Tensor:
        """Base height above the ground at points around the base (heading frame), minus the standing height."""
        qpos = env.sim.qpos
        yaw = heading(qpos[:, 3:7])
        c, s = torch.cos(yaw).unsqueeze(-1), torch.sin(yaw).unsqueeze(-1)
        px, py = self._scan_points[:, 0], self._scan_points[:, 1]
        xy = torch.stack((c * px - s * py, s * px + c * py), dim=-1) + qpos[:, None, :2]
        return torch.clamp(qpos[:, 2:3] - self.ground_height(xy) - self.target_height, -1.0, 1.0)

    def termination_names(self) -> tuple[str, ...]:
        return ("base_contact", "fall")

    def time_out_names(self) -> tuple[str, ...]:
        # Leaving the heightfield is not the policy's failure: a robot that walks well for long enough reaches it.
        return ("out_of_terrain",) if self.cfg.terrain.kind == "rough" else ()

    def time_outs(self, env: MjEnv) -> dict[str, torch.Tensor]:
        if self.heights is None:
            return {}
        return {"out_of_terrain": self.heights.near_edge(env.sim.qpos[:, :2], self.cfg.terrain.edge_margin)}

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        fallen = (self.base_height < self.cfg.termination_height) | (
            self.gravity[:, 2] > -math.cos(self.cfg.termination_tilt)
        )
        return {"base_contact": self.terminal_contact, "fall": fallen}

    # --- live commands (viewer) --------------------------------------------------------------------------------
    def command_ranges(self) -> dict[str, tuple[float, float]]:
        """Forward and sideways velocity (m/s) and yaw rate (rad/s), within the ranges trained on."""
        c = self.cfg.commands
        return dict(zip(COMMAND_NAMES, (c.lin_vel_x, c.lin_vel_y, c.yaw_rate), strict=True))

    def hold_commands(self, env: MjEnv, values: dict[str, float] | None) -> None:
        self.commands.hold(None if values is None else {COMMAND_NAMES.index(k): v for k, v in values.items()})

    # --- statistics --------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Task state a restarted or resumed run needs: the terrain curriculum levels and the command curriculum's
        level (saved in checkpoints)."""
        state: dict[str, Any] = {}
        if self.curriculum is not None:
            state["terrain_levels"] = self.curriculum.levels.detach().cpu().clone()
        if self.command_curriculum is not None:
            state["command_level"] = self.command_curriculum.level.detach().cpu().clone()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (terrain levels: ignored when the number of environments changed)."""
        levels = state.get("terrain_levels")
        if self.curriculum is not None and levels is not None and levels.shape == self.curriculum.levels.shape:
            self.curriculum.levels.copy_(levels.to(self.curriculum.levels.device))
        level = state.get("command_level")
        if self.command_curriculum is not None and level is not None:
            self.command_curriculum.level = level.to(self.command_curriculum.level.device)

    def metric_names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = ("lin_vel_error", "yaw_rate_error")
        if self.cfg.terrain.kind == "rough":
            names = (*names, "terrain_level")
        return (*names, "command_level") if self.cfg.commands.curriculum.start != 1.0 else names

    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        steps = self._steps[env_ids].clamp(min=1.0)
        metrics = {
            "lin_vel_error": self._lin_err_sum[env_ids] / steps,
            "yaw_rate_error": self._yaw_err_sum[env_ids] / steps,
        }
        if self.curriculum is not None:
            metrics["terrain_level"] = self.curriculum.levels[env_ids].float()
        if self.command_curriculum is not None:
            metrics["command_level"] = self.commands.scale[env_ids]
        return metrics

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """Timed out (no fall) with a mean planar-velocity error below 0.25 m/s."""
        mean_error = self._lin_err_sum[env_ids] / self._steps[env_ids].clamp(min=1.0)
        return time_outs & (mean_error < SUCCESS_LIN_VEL_ERROR)

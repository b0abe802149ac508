# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Lift a cube: grasp a randomized cube on the table and hold it at a goal position in the air."""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

import mujoco
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import VideoMarker
from mjfleet.errors import UsageError
from mjfleet.tasks.manipulation.config import LiftConfig
from mjfleet.tasks.manipulation.model import CUBE, GRASP_SENSOR_PREFIX, build_model, zone_geoms
from mjfleet.tasks.manipulation.poses import hand_at_cube_poses
from mjfleet.tasks.manipulation.task import ArmTask, uniform_in

logger = logging.getLogger(__name__)

LIFT_CLEARANCE = 0.02
"""The cube counts as off the table when its lowest possible point is this high above it (metres)."""
OPEN_MARGIN = 0.008
"""A start with the hand around the cube opens each finger this much wider than the cube's face (metres)."""
GRIP_DEPTH = 0.0004
"""A cube that starts in the hand has the fingertips this far inside its faces (metres): in contact from the first
step, so the closing servos hold it rather than let it drop before they touch."""


def _uniform(bounds: tuple[float, float], n: int, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    low, high = bounds
    return low + (high - low) * torch.rand(n, device=device, generator=gen)


class LiftCubeTask(ArmTask[LiftConfig]):
    """Grasp the cube, lift it to the goal and hold it there; see docs/manipulation.md for the MDP."""

    batched_model_fields: ClassVar[tuple[str, ...]] = (
        "geom_friction",
        "geom_size",
        "body_mass",
        "body_subtreemass",
        "body_inertia",
    )

    def _build(self) -> mujoco.MjModel:
        return build_model(self.arm, self.cfg, cube=self.cfg.cube)

    def setup(self, env: MjEnv) -> None:
        super().setup(env)
        if not self.arm.grasp_pose and (self.cfg.start_in_hand > 0 or self.cfg.start_at_cube > 0):
            logger.info(
                "arm %s has no grasp_pose in its record: every episode starts with the cube on the table"
                " (--env.start-in-hand and --env.start-at-cube need one)",
                self.arm.name,
            )
            self.cfg = dataclasses.replace(self.cfg, start_in_hand=0.0, start_at_cube=0.0)
        m, n, dev = env.sim.mj_model, env.num_envs, env.device
        self._cube_body = int(m.body(CUBE).id)
        self._cube_geom = int(m.geom(CUBE).id)
        self._cube_qpos = int(m.jnt_qposadr[m.joint(CUBE).id])
        self._cube_dof = int(m.jnt_dofadr[m.joint(CUBE).id])
        tips = [g for zone in self.arm.fingertips for g in zone_geoms(m, zone)]
        self._fingertip_geoms = torch.as_tensor(tips, dtype=torch.long, device=dev)
        grasp = [int(m.sensor(GRASP_SENSOR_PREFIX + zone.name).adr[0]) for zone in self.arm.fingertips]
        self._grasp_adr = torch.as_tensor(grasp, dtype=torch.long, device=dev)
        # Finger joint positions per metre of the half edge of a cube held (the arm record's grasp_pose).
        fingers = [(int(m.jnt_qposadr[m.joint(name).id]), per_metre) for name, per_metre in self.arm.grasp_pose]
        self._finger_qpos = torch.as_tensor([adr for adr, _ in fingers], dtype=torch.long, device=dev)
        self._finger_per_metre = torch.as_tensor([k for _, k in fingers], dtype=torch.float32, device=dev)
        self._pinch_tolerance = self.cfg.pinch_tolerance if fingers else None
        if self.cfg.pinch_tolerance is not None and self.cfg.pinch_tolerance <= 0:
            raise UsageError(f"--env.pinch-tolerance must be positive (got {self.cfg.pinch_tolerance})")
        if self.cfg.start_in_hand > 0:
            self._setup_in_hand(env)
        shares = (self.cfg.start_in_hand, self.cfg.start_at_cube)
        if min(shares) < 0 or sum(shares) > 1:
            raise UsageError(
                "--env.start-in-hand and --env.start-at-cube are shares of the training episodes, together at most 1"
                f" (got {self.cfg.start_in_hand} and {self.cfg.start_at_cube})"
            )
        if self.cfg.start_at_cube > 0:
            self._setup_at_cube(env, tips)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, device=dev)

        self.goal = zeros(n, 3)
        """Goal position of the cube in each environment (base frame)."""
        self.cube_half_size, self.cube_mass, self.cube_friction = zeros(n), zeros(n), zeros(n)
        self._reach, self._goal_err, self._bring = zeros(n), zeros(n), zeros(n)
        self._lifted = torch.zeros(n, dtype=torch.bool, device=dev)
        self._grasped = torch.zeros(n, dtype=torch.bool, device=dev)
        self._in_hand = torch.zeros(n, dtype=torch.bool, device=dev)
        """Whether each episode started with the cube in the hand (``--env.start-in-hand``)."""
        self._at_cube = torch.zeros(n, dtype=torch.bool, device=dev)
        """Whether each episode started with the hand around the cube (``--env.start-at-cube``)."""
        self._held_steps, self._lifted_steps, self._grasped_steps, self._steps = zeros(n), zeros(n), zeros(n), zeros(n)

    def _setup_in_hand(self, env: MjEnv) -> None:
        """Where a cube held in the home pose sits: at the end-effector site, turned like the hand, the fingers at
        the arm record's ``grasp_pose``."""
        m, dev = env.sim.mj_model, env.device
        data = mujoco.MjData(m)
        data.qpos[:] = self.home_qpos.cpu().numpy()
        mujoco.mj_kinematics(m, data)
        hand = int(m.body(self.arm.hand_body).id)
        pose = [*data.site_xpos[int(m.site(self.arm.ee_site).id)], *data.xquat[hand]]
        self._in_hand_pose = torch.as_tensor(pose, dtype=torch.float32, device=dev)
        self._gripper_closed = float(m.actuator_ctrlrange[self._gripper_id, 0])

    def _start_in_hand(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        """The arm at home, at rest, the cube between the fingers and the gripper commanded closed."""
        sim, n = env.sim, env_ids.numel()
        rows = env_ids.unsqueeze(-1)
        sim.qpos[rows, self._arm_qpos] = self.home_qpos[self._arm_qpos]
        sim.qpos[env_ids, self._cube_qpos : self._cube_qpos + 7] = self._in_hand_pose.expand(n, -1)
        opening = (self.cube_half_size[env_ids] - GRIP_DEPTH).unsqueeze(-1)
        sim.qpos[rows, self._finger_qpos] = opening * self._finger_per_metre
        sim.qvel[env_ids] = 0.0
        sim.ctrl[env_ids] = self.default_joint_pos
        sim.ctrl[env_ids, self._gripper_id] = self._gripper_closed
        self.targets[env_ids, self._gripper_id] = self._gripper_closed

    def _setup_at_cube(self, env: MjEnv, tips: list[int]) -> None:
        """The poses with the hand around a cube on the table, over the cube's start area."""
        m, dev = env.sim.mj_model, env.device
        cube = self.cfg.cube
        poses = hand_at_cube_poses(m, self.arm, self.home_qpos.cpu().numpy(), cube.x, cube.y, tips)
        if len(poses.xy) == 0:
            raise UsageError(
                f"--env.start-at-cube: arm {self.arm.name!r} reaches no cube position within --env.cube.x {cube.x}"
                f" and --env.cube.y {cube.y} with its hand turned as at home (--env.start-at-cube 0 trains without"
                " these starts)"
            )
        self._at_cube_xy = torch.as_tensor(poses.xy, dtype=torch.float32, device=dev)
        self._at_cube_qpos = torch.as_tensor(poses.qpos, dtype=torch.float32, device=dev)
        self._at_cube_yaw = torch.as_tensor(poses.yaw, dtype=torch.float32, device=dev)
        self._gripper_open = float(m.actuator_ctrlrange[self._gripper_id, 1])

    def _start_at_cube(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        """The arm at rest in a pose drawn from the solved ones, the cube on the table under the end-effector, turned
        to the fingers, the fingers open wide of it and commanded open; the arm's servo targets hold the pose."""
        sim, n, g = env.sim, env_ids.numel(), env.generator
        rows = env_ids.unsqueeze(-1)
        pick = torch.randint(0, len(self._at_cube_xy), (n,), device=env.device, generator=g)
        qpos = self._at_cube_qpos[pick]
        sim.qpos[rows, self._arm_qpos] = qpos[:, self._arm_qpos]
        opening = (self.cube_half_size[env_ids] + OPEN_MARGIN).unsqueeze(-1)
        sim.qpos[rows, self._finger_qpos] = opening * self._finger_per_metre
        yaw = self._at_cube_yaw[pick]
        zero = torch.zeros(n, device=env.device)
        pose = (self._at_cube_xy[pick, 0], self._at_cube_xy[pick, 1], self.cube_half_size[env_ids])
        quat = (torch.cos(yaw / 2), zero, zero, torch.sin(yaw / 2))
        sim.qpos[env_ids, self._cube_qpos : self._cube_qpos + 7] = torch.stack((*pose, *quat), dim=-1)
        sim.qvel[env_ids] = 0.0
        targets = qpos[:, self._qpos_idx]
        targets[:, self._gripper_id] = self._gripper_open
        self.targets[env_ids] = targets
        sim.ctrl[env_ids] = targets

    def training_start(self, env: MjEnv) -> torch.Tensor | None:
        return self._in_hand | self._at_cube if self.has_training_starts() else None

    def has_training_starts(self) -> bool:
        # An arm without a grasp pose starts every episode on the table (setup says so), whatever the shares say.
        return bool(self.arm.grasp_pose) and (self.cfg.start_in_hand > 0 or self.cfg.start_at_cube > 0)

    # --- state helpers -----------------------------------------------------------------------------------------
    def cube_pos(self, env: MjEnv) -> torch.Tensor:
        """Cube centre, ``(num_envs, 3)``."""
        return env.sim.qpos[:, self._cube_qpos : self._cube_qpos + 3]

    def cube_quat(self, env: MjEnv) -> torch.Tensor:
        """Cube orientation (w, x, y, z), ``(num_envs, 4)``."""
        return env.sim.qpos[:, self._cube_qpos + 3 : self._cube_qpos + 7]

    def lifted(self, env: MjEnv) -> torch.Tensor:
        """Whether each cube is clear of the table (its centre above a corner's reach, plus the clearance)."""
        return self.cube_pos(env)[:, 2] > self.cube_half_size * 3**0.5 + LIFT_CLEARANCE

    def grasped(self, env: MjEnv) -> torch.Tensor:
        """Whether every fingertip zone touches the cube (read from the physics step's contact sensors) with the
        fingers' half opening the cube's half edge (``pinch_tolerance``)."""
        touch = torch.all(env.sim.sensordata[:, self._grasp_adr] > 0, dim=-1)
        if self._pinch_tolerance is None:
            return touch
        half_opening = torch.mean(env.sim.qpos[:, self._finger_qpos] / self._finger_per_metre, dim=-1)
        return touch & (torch.abs(half_opening - self.cube_half_size) < self._pinch_tolerance)

    # --- MDP ---------------------------------------------------------------------------------------------------
    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        n, dev, g, cfg = env_ids.numel(), env.device, env.generator, self.cfg
        if n == 0:
            return
        self.reset_arm(env, env_ids)
        self._randomize(env, env_ids)
        cube = cfg.cube
        yaw = _uniform(cube.yaw, n, dev, g)
        pose = torch.stack(
            (
                _uniform(cube.x, n, dev, g),
                _uniform(cube.y, n, dev, g),
                self.cube_half_size[env_ids],  # resting on the table: no drop, the same contact on every backend
                torch.cos(yaw / 2),
                torch.zeros(n, device=dev),
                torch.zeros(n, device=dev),
                torch.sin(yaw / 2),
            ),
            dim=-1,
        )
        env.sim.qpos[env_ids, self._cube_qpos : self._cube_qpos + 7] = pose
        if cfg.start_in_hand > 0 or cfg.start_at_cube > 0:
            # Training rows only: the evaluation judges the start every user's episode has.
            draw = torch.rand(n, device=dev, generator=g)
            training = env_ids < env.first_eval_env
            in_hand = (draw < cfg.start_in_hand) & training
            at_cube = (draw >= cfg.start_in_hand) & (draw < cfg.start_in_hand + cfg.start_at_cube) & training
            self._in_hand[env_ids], self._at_cube[env_ids] = in_hand, at_cube
            if bool(in_hand.any()):
                self._start_in_hand(env, env_ids[in_hand])
            if bool(at_cube.any()):
                self._start_at_cube(env, env_ids[at_cube])
        self.goal[env_ids] = uniform_in(cfg.goal, n, dev, g)
        for buf in (self._held_steps, self._lifted_steps, self._grasped_steps, self._steps):
            buf[env_ids] = 0.0

    def _randomize(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        """Draw each reset world's cube size, mass and friction and its fingertips' friction."""
        n, dev, g, cfg, sim = env_ids.numel(), env.device, env.generator, self.cfg, env.sim
        half = _uniform(cfg.cube.half_size, n, dev, g)
        mass = _uniform(cfg.cube.mass, n, dev, g)
        friction = _uniform(cfg.cube.friction, n, dev, g)
        self.cube_half_size[env_ids], self.cube_mass[env_ids], self.cube_friction[env_ids] = half, mass, friction
        sim.model_field("geom_size")[env_ids, self._cube_geom] = half.unsqueeze(-1).expand(n, 3)
        sim.model_field("body_mass")[env_ids, self._cube_body] = mass
        sim.model_field("body_subtreemass")[env_ids, self._cube_body] = mass
        # `body_invweight0`/`dof_invweight0` keep the compiled cube's (as `mj_setConst` would not): they scale the
        # contacts' regularisation, whose impedance then reads 0.925-0.977 over the mass range instead of 0.95.
        # A solid cube of edge 2h: I = m (2h)^2 / 6 about every axis through its centre.
        inertia = (mass * (2 * half) ** 2 / 6).unsqueeze(-1).expand(n, 3)
        sim.model_field("body_inertia")[env_ids, self._cube_body] = inertia
        frictions = sim.model_field("geom_friction")
        frictions[env_ids, self._cube_geom, 0] = friction
        tips = _uniform(cfg.fingertip_friction, n, dev, g).unsqueeze(-1).expand(n, len(self._fingertip_geoms))
        frictions[env_ids.unsqueeze(-1), self._fingertip_geoms, 0] = tips
        sim.model_fields_changed(env_ids)

    def _measure(self, env: MjEnv) -> None:
        """Reach and bring kernels and goal distance the rewards, success and statistics read, from the current
        state."""
        cube = self.cube_pos(env)
        reach_err_sq = torch.sum(torch.square(self.ee_pos(env) - cube), dim=-1)
        self._reach = torch.exp(-reach_err_sq / self.cfg.reach_std**2)
        self._goal_err = torch.linalg.vector_norm(self.goal - cube, dim=-1)
        self._bring = torch.exp(-torch.square(self._goal_err / self.cfg.bring_std))

    def after_step(self, env: MjEnv) -> None:
        self._measure(env)
        lifted = self._lifted = self.lifted(env)
        self._grasped = self.grasped(env)
        self._grasped_steps += self._grasped.float()
        at_goal = lifted & (self._goal_err < self.cfg.success_distance)
        self._held_steps = torch.where(at_goal, self._held_steps + 1.0, 0.0)
        self._lifted_steps += lifted.float()
        self._steps += 1.0

    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        cube = self.cube_pos(env)
        w, x, y, z = self.cube_quat(env).unbind(-1)
        # The cube's x and y axes in the base frame: its orientation without a quaternion's sign ambiguity.
        axes = torch.stack(
            (1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y), 2 * (x * y - w * z),
             1 - 2 * (x * x + z * z), 2 * (y * z + w * x)),
            dim=-1,
        )  # fmt: skip
        policy = torch.cat([*self.arm_observations(env), cube - self.ee_pos(env), self.goal - cube, axes], dim=-1)
        cube_vel = env.sim.qvel[:, self._cube_dof : self._cube_dof + 6]
        properties = torch.stack((self.cube_half_size, self.cube_mass, self.cube_friction), dim=-1)
        return {"policy": policy, "critic": torch.cat((policy, cube_vel, properties), dim=-1)}

    def policy_terms(self) -> list[tuple[str, int, str]]:
        return [
            *super().policy_terms(),
            ("cube_minus_gripper", 3, "the cube's centre minus gripper_point, world frame (m)"),
            ("goal_minus_cube", 3, "the goal minus the cube's centre, world frame (m)"),
            ("cube_axes", 6, "the cube's x then y axis as unit vectors in the world frame"),
        ]

    def video_markers(self, env: MjEnv, world: int) -> list[VideoMarker]:
        """The goal, as the sphere the cube's centre must be held in to count as a success (green)."""
        pos = tuple(float(v) for v in self.goal[world].tolist())
        return [VideoMarker((pos[0], pos[1], pos[2]), self.cfg.success_distance, (0.2, 0.9, 0.3, 0.4))]

    def termination_names(self) -> tuple[str, ...]:
        return ("cube_dropped", "hand_on_table")

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {
            "cube_dropped": self.cube_pos(env)[:, 2] < self.cfg.drop_height,
            "hand_on_table": self.hand_on_table(env),
        }

    # --- reward terms ------------------------------------------------------------------------------------------
    def reward_lift(self, env: MjEnv) -> torch.Tensor:
        """reach * (1 + bring): reaching the cube, then bringing it to the goal."""
        return self._reach * (1.0 + self._bring)

    def reward_carry(self, env: MjEnv) -> torch.Tensor:
        """reach * bring while the cube is off the table: towards the goal, once lifted."""
        return self._reach * self._bring * self._lifted

    def reward_lifted(self, env: MjEnv) -> torch.Tensor:
        """reach while the cube is off the table: a lift pays only with the hand at the cube (not a flung cube)."""
        return self._reach * self._lifted

    def reward_grasp(self, env: MjEnv) -> torch.Tensor:
        """reach while every fingertip touches the cube: closing the hand on it (a prerequisite of lifting)."""
        return self._reach * self._grasped

    def reward_height(self, env: MjEnv) -> torch.Tensor:
        """min(rise / rise_span, 1) while every fingertip touches the cube."""
        rise = self.cube_pos(env)[:, 2] - self.cube_half_size
        return torch.clamp(rise / self.cfg.rise_span, 0.0, 1.0) * self._grasped

    def reward_lift_precise(self, env: MjEnv) -> torch.Tensor:
        """exp(-|cube - goal|^2 / precise_std^2)."""
        return torch.exp(-torch.square(self._goal_err / self.cfg.precise_std))

    # --- statistics --------------------------------------------------------------------------------------------
    def metric_names(self) -> tuple[str, ...]:
        return ("final_distance", "lifted_fraction", "grasped_fraction")

    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            "final_distance": self._goal_err[env_ids],
            "lifted_fraction": self._lifted_steps[env_ids] / self._steps[env_ids].clamp(min=1.0),
            "grasped_fraction": self._grasped_steps[env_ids] / self._steps[env_ids].clamp(min=1.0),
        }

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """Timed out with the cube off the table, within ``success_distance`` of the goal, for the last ``hold_s`` (and
        at least the last step)."""
        held = self._held_steps[env_ids]
        return time_outs & (held >= 1) & (held * self.dt >= self.cfg.hold_s - 1e-6)  # hold_s 0: its last step

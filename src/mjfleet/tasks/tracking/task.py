# pyright: reportAttributeAccessIssue=false
"""Whole-body motion tracking: a humanoid follows a reference motion frame by frame (BeyondMimic's MDP, as mjlab's
tracking task has it; docs/tracking.md says where this one differs).

The motion is read once, resampled to the control rate and completed with every body's pose and velocity by MuJoCo's
kinematics (:mod:`mjfleet.tasks.tracking.motion`); its frames are one tensor per quantity on the simulation's device,
shared by all environments, which hold only their frame index.
"""

from __future__ import annotations

from typing import Any, ClassVar

import mujoco
import numpy as np
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import ExportedTables, ForeignExport, Task
from mjfleet.tasks.joint_limits import joint_ranges, soft_ranges
from mjfleet.tasks.locomotion.actions import action_scales
from mjfleet.tasks.locomotion.columns import Term, first_column
from mjfleet.tasks.locomotion.model import SELF_CONTACT_SENSOR, build_model
from mjfleet.tasks.locomotion.randomization import BATCHED_FIELDS, DomainRandomizer, Pushes, movable_centre_of_mass
from mjfleet.tasks.locomotion.rotations import (
    conjugate,
    euler_quat,
    heading,
    projected_gravity,
    quat_mul,
    rotate,
    rotate_inverse,
    rotation_angle,
    two_columns,
    yaw_quat,
)
from mjfleet.tasks.locomotion.sources import resolve_robot
from mjfleet.tasks.tracking.config import TrackingConfig
from mjfleet.tasks.tracking.motion import kinematics, read_motion, resample
from mjfleet.tasks.tracking.motion_checks import check_on_robot
from mjfleet.tasks.tracking.reference import Reference
from mjfleet.tasks.tracking.sampling import StartSampler
from mjfleet.tasks.tracking.terms import noise_amplitude, observation_terms, policy_terms

MOTION_END = "motion_end"
"""The time-out of an episode that reached the motion's last frame."""


class TrackingTask(Task[TrackingConfig]):
    """Follow a reference motion with a humanoid; see ``docs/tracking.md`` for the full MDP."""

    forward_after_reset: ClassVar[bool] = True  # observations read body poses right after a reset
    batched_model_fields: ClassVar[tuple[str, ...]] = BATCHED_FIELDS  # --env.randomization

    def __init__(self, cfg: TrackingConfig) -> None:
        super().__init__(cfg)
        self.robot = resolve_robot(cfg.robot)
        self._model = build_model(self.robot, None, self_contacts=cfg.rewards.self_collisions != 0.0)
        movable_centre_of_mass(self._model, self.robot.base_body, cfg.randomization)
        self._joints = [j for j in range(self._model.njnt) if self._model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        self.motion = read_motion(cfg.motion_file(), len(self._joints), cfg.motion_fps)
        # Also here, not only in prepare_assets: play and the viewer build the task without train's checks.
        check_on_robot(self._model, self.motion)

    def build_model(self) -> mujoco.MjModel:
        return self._model

    @property
    def num_actions(self) -> int:
        return int(self._model.nu)

    def termination_names(self) -> tuple[str, ...]:
        return ("anchor_height", "anchor_tilt", "end_effector_height")

    def time_out_names(self) -> tuple[str, ...]:
        return (MOTION_END,)

    def metric_names(self) -> tuple[str, ...]:
        return ("body_pos_error", "body_ori_error", "joint_pos_error", "anchor_pos_error", "anchor_ori_error")

    # --- setup -------------------------------------------------------------------------------------------------
    def setup(self, env: MjEnv) -> None:
        m, cfg, n, dev = env.sim.mj_model, self.cfg, env.num_envs, env.device
        self.dt = env.step_dt
        names = [m.body(b).name for b in range(m.nbody)]
        bodies = [names.index(b) for b in cfg.bodies]
        self._bodies = torch.as_tensor(bodies, device=dev)
        self._anchor = cfg.bodies.index(cfg.anchor_body)
        self._anchor_body = names.index(cfg.anchor_body)
        ends = [cfg.bodies.index(b) for b in cfg.end_effectors]
        self._end_effectors = torch.as_tensor(ends, dtype=torch.long, device=dev)  # none: that termination is off
        self._root_body = int(m.jnt_bodyid[0])
        self._self_contact = int(m.sensor(SELF_CONTACT_SENSOR).adr[0]) if cfg.rewards.self_collisions else -1
        """Where the self-contact sensor's readings start in ``sensordata`` (found, then the strongest's force)."""
        self._body_roots = torch.as_tensor(m.body_rootid[bodies], device=dev)
        self.reference = Reference(kinematics(m, resample(self.motion, 1.0 / self.dt)), bodies, dev)
        joints = m.actuator_trnid[:, 0]
        hinge_order = {j: i for i, j in enumerate(self._joints)}
        self._actuated = torch.as_tensor([hinge_order[int(j)] for j in joints], device=dev)
        """Per actuator, its joint's column in the motion (the model's hinge-joint order)."""
        self._qpos_idx = torch.as_tensor(m.jnt_qposadr[joints], device=dev)
        self._qvel_idx = torch.as_tensor(m.jnt_dofadr[joints], device=dev)
        key = m.key("home")
        self.default_joint_pos = torch.as_tensor(key.ctrl, dtype=torch.float32, device=dev)
        scales = action_scales(m, cfg.action_scale, cfg.action_scale_of_force)
        self.action_scale = torch.as_tensor(scales, dtype=torch.float32, device=dev)
        soft = soft_ranges(*joint_ranges(m, joints), cfg.soft_joint_limit)
        self._soft_low, self._soft_high = (torch.as_tensor(v, dtype=torch.float32, device=dev) for v in soft)
        self.frame = torch.zeros(n, dtype=torch.long, device=dev)
        """Each environment's frame of the motion."""
        self._start_frame = torch.zeros(n, dtype=torch.long, device=dev)
        """The frame each environment's episode began at."""
        self._gathered: dict[str, torch.Tensor] = {}
        """What :meth:`_ref` and :meth:`robot_bodies` gathered for the current frames and state."""
        self.starts = StartSampler(
            cfg.sampling, self.reference.frames, self.dt, cfg.adaptive_uniform, cfg.adaptive_decay, dev, env.generator
        )
        """Where training episodes start, and the adaptive sampling's failure tally."""
        self._errors = {k: torch.zeros(n, device=dev) for k in self.metric_names()}
        self._steps = torch.zeros(n, device=dev)
        self.randomizer = DomainRandomizer(cfg.randomization, env.sim, self._root_body, env.generator, m.nu)
        # Without pushes, none draws its timers: the random stream stays that of the measured defaults.
        self.pushes = (
            Pushes(cfg.randomization, n, self.dt, dev, env.generator) if cfg.randomization.push_velocity else None
        )
        self.randomizer.apply(torch.arange(n, device=dev))
        self._noise_amplitude = noise_amplitude(cfg, self.policy_terms(), dev)
        self._joint_pos_column = first_column(self.policy_terms(), "joint_pos")
        names = [name for name, _, _ in observation_terms(len(self._actuated))]
        read = {name for name, _, _ in self.policy_terms()}
        self._policy_reads = None if len(read) == len(names) else [i for i, n in enumerate(names) if n in read]
        """Which of :meth:`observations`' terms the policy reads (None: every one)."""

    def policy_terms(self) -> list[Term]:
        """The policy observation's terms in :meth:`observations`' order (the sidecar's ``observation_terms``)."""
        return policy_terms(len(self._actuated), self.cfg.state_estimation)

    # --- actions -----------------------------------------------------------------------------------------------
    def joint_targets_at_zero(self) -> torch.Tensor:
        """Each environment's servo targets for an action of zero (``action_offset``), (num_envs, num_actions)."""
        return self._zero_targets(self.frame)

    def _zero_targets(self, frames: torch.Tensor) -> torch.Tensor:
        """Servo targets of an action of zero in the step that starts at each of ``frames``: the standing pose, or
        the reference's joint angles at the frame the step ends in."""
        if self.cfg.action_offset == "home":
            return self.default_joint_pos.expand(frames.numel(), -1)
        upcoming = torch.clamp(frames + 1, max=self.reference.frames - 1)
        return self.reference.joint_pos[upcoming][:, self._actuated]

    def apply_actions(self, env: MjEnv, actions: torch.Tensor) -> None:
        env.sim.ctrl[:] = self.joint_targets_at_zero() + actions * self.action_scale
        self.randomizer.aim_servos(env.sim.ctrl)

    # --- the reference at each environment's frame ---------------------------------------------------------------
    def _ref(self, name: str) -> torch.Tensor:
        """The reference's ``name`` at each environment's frame, gathered once between changes of the frames or of the
        simulation's state (:meth:`after_step`, :meth:`reset`)."""
        if name not in self._gathered:
            self._gathered[name] = getattr(self.reference, name)[self.frame]
        return self._gathered[name]

    def robot_bodies(self, env: MjEnv) -> tuple[torch.Tensor, torch.Tensor]:
        if "robot_bodies" not in self._gathered:
            self._gathered["robot_pos"] = env.sim.xpos[:, self._bodies]
            self._gathered["robot_bodies"] = env.sim.xquat[:, self._bodies]
        return self._gathered["robot_pos"], self._gathered["robot_bodies"]

    def robot_body_velocities(self, env: MjEnv) -> tuple[torch.Tensor, torch.Tensor]:
        """World-frame linear (at the body origins) and angular velocities of the tracked bodies."""
        cvel = env.sim.view("cvel")[:, self._bodies]
        offset = env.sim.xpos[:, self._bodies] - env.sim.view("subtree_com")[:, self._body_roots]
        return cvel[..., 3:] + torch.cross(cvel[..., :3], offset, dim=-1), cvel[..., :3]

    def anchored_reference(self, env: MjEnv) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference bodies moved under the robot's anchor: its heading and horizontal place, the reference's
        height; what the body pose terms compare the robot's bodies with."""
        ref_pos, ref_quat = self._ref("body_pos"), self._ref("body_quat")
        anchor_pos, anchor_quat = ref_pos[:, self._anchor], ref_quat[:, self._anchor]
        robot_pos = env.sim.xpos[:, self._anchor_body]
        robot_quat = env.sim.xquat[:, self._anchor_body]
        turn = yaw_quat(heading(quat_mul(robot_quat, conjugate(anchor_quat))))
        place = torch.cat((robot_pos[:, :2], anchor_pos[:, 2:]), dim=-1)
        k = ref_pos.shape[1]
        offset = rotate(turn[:, None].expand(-1, k, -1), ref_pos - anchor_pos[:, None])
        return place[:, None] + offset, quat_mul(turn[:, None].expand(-1, k, -1), ref_quat)

    # --- MDP ---------------------------------------------------------------------------------------------------
    def after_step(self, env: MjEnv) -> None:
        self.frame = torch.clamp(self.frame + 1, max=self.reference.frames - 1)
        self._gathered.clear()
        pos, quat = self.robot_bodies(env)
        # What several reward terms read, once per step (terminations and rewards see this state, resets come after).
        self._anchored = ref_pos, ref_quat = self.anchored_reference(env)
        self._velocities = self.robot_body_velocities(env)
        self._errors["body_pos_error"] += torch.linalg.vector_norm(ref_pos - pos, dim=-1).mean(-1)
        self._errors["body_ori_error"] += rotation_angle(ref_quat, quat).mean(-1)
        joints = env.sim.qpos[:, self._qpos_idx]
        self._errors["joint_pos_error"] += torch.linalg.vector_norm(
            joints - self._ref("joint_pos")[:, self._actuated], dim=-1
        )
        # In the world: the drift from the motion's path that the anchored body errors leave out.
        anchor_pos, anchor_quat = env.sim.xpos[:, self._anchor_body], env.sim.xquat[:, self._anchor_body]
        self._errors["anchor_pos_error"] += torch.linalg.vector_norm(
            anchor_pos - self._ref("body_pos")[:, self._anchor], dim=-1
        )
        self._errors["anchor_ori_error"] += rotation_angle(anchor_quat, self._ref("body_quat")[:, self._anchor])
        self._steps += 1
        if self.pushes is not None:  # after this step's errors; the observations read the pushed velocity
            self.pushes.step(env.sim.qvel)

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        pos, quat = self.robot_bodies(env)
        ref_pos, ref_quat = self._ref("body_pos"), self._ref("body_quat")
        a = self._anchor
        tilt = projected_gravity(quat[:, a])[:, 2] - projected_gravity(ref_quat[:, a])[:, 2]
        ends = (pos[:, self._end_effectors, 2] - ref_pos[:, self._end_effectors, 2]).abs()
        return {
            "anchor_height": (pos[:, a, 2] - ref_pos[:, a, 2]).abs() > cfg.anchor_height_limit,
            "anchor_tilt": tilt.abs() > cfg.anchor_tilt_limit,
            "end_effector_height": (ends > cfg.end_effector_height_limit).any(dim=-1),
        }

    def time_outs(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {MOTION_END: self.frame >= self.reference.frames - 1}

    def longest_episode_steps(self) -> int | None:
        return self.reference.frames - 1  # from the first frame to the last, one frame a step

    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        n, cfg, dev, g = env_ids.numel(), self.cfg, env.device, env.generator
        if n == 0:
            return
        self._gathered.clear()  # new frames, and the observations after a reset read the bodies after its forward
        # Evaluation rows of the training simulation (a GPU's) start as play's episodes do (``as_judged``): from the
        # first frame on the reference's root; their failures say nothing of where training fails.
        training = env_ids < env.first_eval_env if env.first_eval_env < env.num_envs else None
        if env.episodes_ended:  # not a restart mid-way: an episode cut short did not fail there
            counted = env_ids if training is None else env_ids[training]
            self.starts.count(self.frame[counted], env.terminated[counted])
        frame = self.starts.draw(n)
        if training is not None:
            frame = torch.where(training, frame, 0)
        self.frame[env_ids] = frame
        self._start_frame[env_ids] = frame
        ref = self.reference

        def noise(scale: float, *shape: int) -> torch.Tensor:
            return (torch.rand(*shape, device=dev, generator=g) * 2 - 1) * scale

        def start_noise(scale: float, *shape: int) -> torch.Tensor:
            """The root's start noise: training rows only (``as_judged`` has none)."""
            drawn = noise(scale, *shape)
            return drawn if training is None else drawn * training.view(-1, *([1] * (drawn.dim() - 1)))

        root_pos = ref.root_pos[frame].clone()
        root_pos[:, :2] += start_noise(cfg.start_pos_noise, n, 2)
        root_pos[:, 2] += start_noise(cfg.start_pos_noise / 5, n)
        roll_pitch_yaw = torch.stack(
            (
                start_noise(cfg.start_yaw_noise / 2, n),
                start_noise(cfg.start_yaw_noise / 2, n),
                start_noise(cfg.start_yaw_noise, n),
            ),
            -1,
        )
        root_quat = quat_mul(euler_quat(roll_pitch_yaw), ref.root_quat[frame])
        joints = ref.joint_pos[frame][:, self._actuated] + noise(cfg.start_joint_noise, n, len(self._actuated))
        joints = torch.minimum(torch.maximum(joints, self._soft_low), self._soft_high)
        sim = env.sim
        sim.qpos[env_ids, 0:3], sim.qpos[env_ids, 3:7] = root_pos, root_quat
        sim.qpos[env_ids[:, None], self._qpos_idx] = joints
        lin = ref.root_lin_vel[frame] + start_noise(cfg.start_velocity_noise, n, 3)
        ang = ref.root_ang_vel[frame] + start_noise(cfg.start_velocity_noise, n, 3)
        sim.qvel[env_ids, 0:3] = lin
        sim.qvel[env_ids, 3:6] = rotate_inverse(root_quat, ang)  # a free joint's angular velocity is local
        sim.qvel[env_ids[:, None], self._qvel_idx] = ref.joint_vel[frame][:, self._actuated]
        sim.ctrl[env_ids] = joints
        for buf in (*self._errors.values(), self._steps):
            buf[env_ids] = 0.0
        if self.pushes is not None:
            self.pushes.reset(env_ids)
        if cfg.randomization.on_reset:
            self.randomizer.apply(env_ids)

    def training_start(self, env: MjEnv) -> torch.Tensor | None:
        """Episodes that began after the motion's first frame: finishing the rest of a motion is not ``play``'s
        success (which follows it from its start), so their successes are reported apart."""
        return self._start_frame > 0 if self.has_training_starts() else None

    def has_training_starts(self) -> bool:
        return self.cfg.sampling != "start"

    # --- rewards -----------------------------------------------------------------------------------------------
    def reward_anchor_pos(self, env: MjEnv) -> torch.Tensor:
        error = env.sim.xpos[:, self._anchor_body] - self._ref("body_pos")[:, self._anchor]
        return torch.exp(-torch.sum(error**2, dim=-1) / self.cfg.anchor_pos_std**2)

    def reward_anchor_ori(self, env: MjEnv) -> torch.Tensor:
        angle = rotation_angle(env.sim.xquat[:, self._anchor_body], self._ref("body_quat")[:, self._anchor])
        return torch.exp(-(angle**2) / self.cfg.anchor_ori_std**2)

    def reward_body_pos(self, env: MjEnv) -> torch.Tensor:
        ref, _ = self._anchored
        error = torch.sum((ref - env.sim.xpos[:, self._bodies]) ** 2, dim=-1).mean(-1)
        return torch.exp(-error / self.cfg.body_pos_std**2)

    def reward_body_ori(self, env: MjEnv) -> torch.Tensor:
        _, ref = self._anchored
        error = (rotation_angle(ref, env.sim.xquat[:, self._bodies]) ** 2).mean(-1)
        return torch.exp(-error / self.cfg.body_ori_std**2)

    def reward_body_lin_vel(self, env: MjEnv) -> torch.Tensor:
        lin, _ = self._velocities
        error = torch.sum((lin - self._ref("body_lin_vel")) ** 2, dim=-1).mean(-1)
        return torch.exp(-error / self.cfg.lin_vel_std**2)

    def reward_body_ang_vel(self, env: MjEnv) -> torch.Tensor:
        _, ang = self._velocities
        error = torch.sum((ang - self._ref("body_ang_vel")) ** 2, dim=-1).mean(-1)
        return torch.exp(-error / self.cfg.ang_vel_std**2)

    def reward_action_rate(self, env: MjEnv) -> torch.Tensor:
        return torch.sum((env.actions - env.last_actions) ** 2, dim=-1)

    def reward_self_collisions(self, env: MjEnv) -> torch.Tensor:
        # The sensor reads the last physics step of the control step (mjlab counts each of them that saw one).
        reading = env.sim.sensordata[:, self._self_contact : self._self_contact + 4]
        force = torch.linalg.vector_norm(reading[:, 1:4], dim=-1)
        return ((reading[:, 0] > 0) & (force > self.cfg.self_collision_force)).float()

    def reward_joint_limits(self, env: MjEnv) -> torch.Tensor:
        q = env.sim.qpos[:, self._qpos_idx]
        return torch.sum((self._soft_low - q).clamp(min=0.0) + (q - self._soft_high).clamp(min=0.0), dim=-1)

    # --- observations --------------------------------------------------------------------------------------------
    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        sim = env.sim
        robot_anchor_pos, robot_anchor_quat = sim.xpos[:, self._anchor_body], sim.xquat[:, self._anchor_body]
        ref_anchor_pos = self._ref("body_pos")[:, self._anchor]
        ref_anchor_quat = self._ref("body_quat")[:, self._anchor]
        root_quat = sim.qpos[:, 3:7]
        joint_pos = sim.qpos[:, self._qpos_idx] - self.default_joint_pos
        terms = (
            self._ref("joint_pos")[:, self._actuated],
            self._ref("joint_vel")[:, self._actuated],
            rotate_inverse(robot_anchor_quat, ref_anchor_pos - robot_anchor_pos),
            two_columns(quat_mul(conjugate(robot_anchor_quat), ref_anchor_quat)),
            rotate_inverse(root_quat, sim.qvel[:, 0:3]),
            sim.qvel[:, 3:6],
            joint_pos,
            sim.qvel[:, self._qvel_idx],
            env.actions,
        )
        everything = torch.cat(terms, dim=-1)
        policy = everything if self._policy_reads is None else torch.cat([terms[i] for i in self._policy_reads], -1)
        k = self._bodies.numel()
        pos, quat = self.robot_bodies(env)
        inverse = conjugate(robot_anchor_quat)[:, None].expand(-1, k, -1)
        body_pos = rotate_inverse(robot_anchor_quat[:, None].expand(-1, k, -1), pos - robot_anchor_pos[:, None])
        body_ori = two_columns(quat_mul(inverse, quat))
        critic = torch.cat((everything, body_pos.flatten(1), body_ori.flatten(1)), dim=-1)
        if self.randomizer.biased:  # the policy reads the encoders (their bias); the critic, the joints
            start = self._joint_pos_column
            policy = policy.clone()
            policy[:, start : start + joint_pos.shape[-1]] = self.randomizer.encoder_readings(joint_pos)
        if self._noise_amplitude is not None:
            unit = torch.rand(policy.shape, device=env.device, generator=env.generator) * 2 - 1
            policy = policy + unit * self._noise_amplitude
        return {"policy": policy, "critic": critic}

    def ghost_qpos(self, env: MjEnv, world: int) -> np.ndarray | None:
        """The reference's pose at world ``world``'s frame: videos draw it over the robot."""
        frame = int(self.frame[world])
        ref, m = self.reference, env.sim.mj_model
        qpos = m.qpos0.copy()
        qpos[0:3], qpos[3:7] = ref.root_pos[frame].cpu().numpy(), ref.root_quat[frame].cpu().numpy()
        qpos[m.jnt_qposadr[self._joints]] = ref.joint_pos[frame].cpu().numpy()
        return qpos

    def iteration_scalars(self, env: MjEnv) -> dict[str, float]:
        """The adaptive sampling's state (:meth:`StartSampler.summary`): where in the motion training now starts."""
        return self.starts.summary()

    def export_metadata(self) -> dict[str, Any]:
        """What a control loop needs besides the graph (:func:`~mjfleet.tasks.tracking.exports.sidecar_metadata`)."""
        from mjfleet.tasks.tracking.exports import sidecar_metadata

        return sidecar_metadata(self)

    def export_tables(self) -> ExportedTables:
        """The motion the graph carries (:func:`~mjfleet.tasks.tracking.exports.motion_tables`)."""
        from mjfleet.tasks.tracking.exports import motion_tables

        return motion_tables(self)

    def state_dict(self) -> dict[str, Any]:
        """The adaptive sampling's failure tally: a continued run starts its episodes where this one failed, not
        evenly over the motion (saved in checkpoints; another motion's tally has other bins and is not loaded); the
        motion's digest and file, which ``play`` compares with its own."""
        return {
            **self.starts.state_dict(),
            "motion_sha256": self.motion.sha256,
            "motion_file": str(self.motion.path),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("motion_sha256", self.motion.sha256) == self.motion.sha256:
            self.starts.load_state_dict(state)

    def export_index(self, env: MjEnv) -> torch.Tensor:
        return self.frame

    def foreign_exports(self, env: MjEnv) -> list[ForeignExport]:
        """The policy in the layout of mjlab's tracking exports (``model_<iteration>.mjlab.onnx``)."""
        from mjfleet.tasks.tracking.mjlab_layout import mjlab_export

        return [mjlab_export(self, env)]

    # --- statistics ----------------------------------------------------------------------------------------------
    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        steps = self._steps[env_ids].clamp(min=1.0)
        return {name: buf[env_ids] / steps for name, buf in self._errors.items()}

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """Timed out (the motion's end, or the episode's length) without a termination."""
        return time_outs

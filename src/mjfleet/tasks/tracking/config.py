# pyright: reportAttributeAccessIssue=false
"""Motion-tracking settings (no simulator imports: parsed before anything loads)."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Self

from mjfleet.envs.config import EnvConfig, check_at_least
from mjfleet.paths import absolute_path
from mjfleet.tasks.locomotion.config import RandomizationConfig
from mjfleet.tasks.locomotion.robots import absolute_robot_path

SHIPPED_MOTION = Path(__file__).with_name("motions") / "g1_wave_squat.csv"
"""The motion shipped with mjfleet (made here: scripts/make_g1_motion.py)."""


@dataclass
class TrackingRewards:
    """Per-term weights (0 disables a term); each term is integrated over time (multiplied by the control step)."""

    anchor_pos: float = 0.5
    """exp(-|anchor position error|^2 / anchor_pos_std^2), in the world."""
    anchor_ori: float = 0.5
    """exp(-anchor orientation error^2 / anchor_ori_std^2) (the error is the rotation angle between the two)."""
    body_pos: float = 1.0
    """exp(-mean squared error of the tracked bodies' positions / body_pos_std^2), the reference moved under the
    robot's anchor (its height and heading kept)."""
    body_ori: float = 1.0
    """exp(-mean squared orientation error of the tracked bodies / body_ori_std^2), re-anchored likewise."""
    body_lin_vel: float = 1.0
    """exp(-mean squared linear-velocity error of the tracked bodies / lin_vel_std^2), in the world."""
    body_ang_vel: float = 1.0
    """exp(-mean squared angular-velocity error of the tracked bodies / ang_vel_std^2), in the world."""
    action_rate: float = -0.1
    """Squared change of the actions between steps."""
    joint_limits: float = -10.0
    """How far joints are beyond their soft limits (radians, summed)."""
    self_collisions: float = 0.0
    """1 while the robot presses on itself harder than `self_collision_force` at the end of a step (mjlab's weight:
    -10). 0, off: the defaults were trained and measured without it, and the contact sensor it reads costs the
    physics a second call per step on the CPU. It needs the robot's self-collisions (not with
    `--env.sim.training-contacts.no-self-collisions`)."""


@dataclass
class TrackingNoise:
    """Uniform noise added to the policy's observations (the critic reads clean values), per term as mjlab's
    tracking task adds it; the reference terms and the last actions stay exact."""

    scale: float = 0.0
    """Multiplies every amplitude below: 1 is mjlab's noise. 0, off: the defaults were trained and measured without
    it."""
    anchor_pos: float = 0.25
    """The anchor's reference position in its own frame (metres)."""
    anchor_ori: float = 0.05
    """The anchor's reference orientation in its own frame (the rotation matrix's first two columns)."""
    lin_vel: float = 0.5
    """The root's linear velocity in its own frame (m/s)."""
    ang_vel: float = 0.2
    """The root's angular velocity (rad/s)."""
    joint_pos: float = 0.01
    """Joint angles (rad)."""
    joint_vel: float = 0.5
    """Joint velocities (rad/s)."""


@dataclass
class TrackingConfig(EnvConfig):
    """A humanoid follows a reference motion (docs/tracking.md)."""

    robot: str = "unitree_g1"
    """The robot record (its servos, collision geoms and home pose); the motion's joint angles are in the order of
    its model's hinge joints."""
    motion: str = ""
    """The reference motion: a `.csv` in the retargeted-G1 layout (30 fps; root x y z, quaternion x y z w, joint
    angles) or mjlab's `.npz`; empty: the motion shipped with mjfleet (a G1 waving and squatting)."""
    motion_fps: float = 30.0
    """Frames per second of a `.csv` motion (the retargeted LAFAN1 files have 30; other retargeting tools may
    write 50 or 120); an `.npz` says its own (another value given with one has no effect: `train` warns)."""
    state_estimation: bool = True
    """The policy reads where the anchor is against the reference's and the base's linear velocity, which a robot
    knows from motion capture or a state estimator. Off (`--env.no-state-estimation`), the policy reads neither (the
    critic still does), as mjlab's `No-State-Estimation` task: a policy for a robot with its IMU and joint encoders
    alone."""
    anchor_body: str = "torso_link"
    """The tracked body (among `bodies`) whose pose anchors the reference: its height and orientation errors end an
    episode."""
    bodies: tuple[str, ...] = ()
    """The bodies whose poses and velocities are tracked (the anchor among them)."""
    end_effectors: tuple[str, ...] = ()
    """Tracked bodies (among `bodies`) whose height leaves the reference's by `end_effector_height_limit` end an
    episode; none: that termination is off."""
    action_offset: Literal["reference", "home"] = "reference"
    """What an action of zero holds each joint at: `reference`, the reference's joint angle at the frame the step
    ends in (the policy learns corrections to the motion); `home`, the robot's standing pose (mjlab's choice: the
    policy learns the whole pose)."""
    action_scale: float = 0.25
    """Radians of joint target per unit of action (where `action_scale_of_force` is 0)."""
    action_scale_of_force: float = 0.25
    """With a value above 0, each joint's action scale is this fraction of its servo's torque limit over its gain
    (instead of `action_scale`)."""
    self_collision_force: float = 10.0
    """Newtons above which a contact of the robot with itself counts (`rewards.self_collisions`)."""
    soft_joint_limit: float = 0.9
    """Share of each joint's range inside which `joint_limits` costs nothing."""
    sampling: Literal["adaptive", "uniform", "start"] = "adaptive"
    """Where training episodes start in the motion: `adaptive` favours where episodes fail (BeyondMimic's
    sampling), `uniform` anywhere, `start` at its first frame (as `play` does)."""
    adaptive_uniform: float = 0.1
    """Share of the adaptive sampling's starts spread evenly over the motion; the rest go to each of its bins (of
    equal length, each under a second: ceil(frames x control step) of them) in proportion to how many episodes
    failed there."""
    adaptive_decay: float = 0.001
    """Weight of each batch of ended episodes in the running average of failures per bin of the motion (mjlab's
    `adaptive_alpha`)."""
    start_pos_noise: float = 0.05
    """Uniform noise of the start's horizontal position (metres; a fifth of it vertically)."""
    start_yaw_noise: float = 0.2
    """Uniform noise of the start's heading (radians; half of it in roll and pitch)."""
    start_joint_noise: float = 0.1
    """Uniform noise of the start's joint angles (radians)."""
    start_velocity_noise: float = 0.3
    """Uniform noise of the start's root velocity (m/s and rad/s)."""
    anchor_pos_std: float = 0.3
    """Scale of `anchor_pos` (metres)."""
    anchor_ori_std: float = 0.4
    """Scale of `anchor_ori` (radians)."""
    body_pos_std: float = 0.3
    """Scale of `body_pos` (metres)."""
    body_ori_std: float = 0.4
    """Scale of `body_ori` (radians)."""
    lin_vel_std: float = 1.0
    """Scale of `body_lin_vel` (m/s)."""
    ang_vel_std: float = 3.14
    """Scale of `body_ang_vel` (rad/s)."""
    anchor_height_limit: float = 0.25
    """An episode ends when the anchor's height is this far from the reference's (metres)."""
    anchor_tilt_limit: float = 0.8
    """An episode ends when the anchor's projected gravity differs from the reference's by this much in z."""
    end_effector_height_limit: float = 0.25
    """An episode ends when an end effector's height is this far from the reference's (metres)."""
    rewards: TrackingRewards = field(default_factory=TrackingRewards)
    """Reward term weights."""
    noise: TrackingNoise = field(default_factory=TrackingNoise)
    """Observation noise of the policy (off by default; `--env.noise.scale 1` is mjlab's)."""
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    """Domain randomization, as the velocity tasks have it: friction, mass added to the pelvis, servo gains, and
    horizontal pushes of the pelvis. Off by default (the defaults were trained and measured without it); training
    for a real robot turns it on: docs/tracking.md gives the flags nearest to mjlab's ranges (whose pushes also move
    the pelvis vertically and turn it, which these do not)."""

    def __post_init__(self) -> None:
        # A relative path is the folder's the command ran in: stored as it was typed, play of the run from
        # elsewhere would look for another file.
        if self.motion:
            self.motion = str(absolute_path(self.motion, "--env.motion"))
            if Path(self.motion) == SHIPPED_MOTION.absolute():  # named by its path: the same run as the default's
                self.motion = ""
        self.robot = absolute_robot_path(self.robot)

    def motion_file(self) -> Path:
        """The reference motion's file (``motion``, or the shipped one)."""
        return Path(self.motion) if self.motion else SHIPPED_MOTION

    def content_files(self) -> dict[str, Path]:
        """The motion: the same file name with other frames is another run."""
        return {"motion": self.motion_file()}

    def model_records(self) -> dict[str, str]:
        """The robot's record (its servos, home pose and zones make the model of the file)."""
        from mjfleet.runs.model_files import record_entry
        from mjfleet.tasks.locomotion.sources import resolve_robot

        return record_entry("robot", resolve_robot(self.robot))

    def model_files(self) -> list[Path]:
        """The robot's MJCF and the motion: a run records both texts' digests, ``play`` says when either differs."""
        from mjfleet.tasks.locomotion.sources import resolve_robot, robot_file

        return [robot_file(resolve_robot(self.robot)), self.motion_file()]

    def prepare_assets(self) -> None:
        """Bring the robot's MJCF onto the disk and read the motion once: a bad file is one line before anything is
        created."""
        from mjfleet.errors import UsageError
        from mjfleet.tasks.locomotion.sources import resolve_robot, robot_file
        from mjfleet.tasks.tracking.motion import CSV_FPS, read_motion
        from mjfleet.tasks.tracking.motion_checks import check_on_robot, implausible

        if not 0.0 <= self.adaptive_uniform <= 1.0:
            raise UsageError(f"--env.adaptive-uniform must be between 0 and 1 (got {self.adaptive_uniform})")
        if not 0.0 < self.adaptive_decay <= 1.0:
            raise UsageError(f"--env.adaptive-decay must be above 0 and at most 1 (got {self.adaptive_decay})")
        self.randomization.check()
        scales = ("anchor_pos_std", "anchor_ori_std", "body_pos_std", "body_ori_std", "lin_vel_std", "ang_vel_std")
        limits = ("anchor_height_limit", "anchor_tilt_limit", "end_effector_height_limit")
        noises = ("start_pos_noise", "start_yaw_noise", "start_joint_noise", "start_velocity_noise")
        check_at_least(
            {
                **{_flag(name): (getattr(self, name), 0.0, True) for name in (*scales, *limits)},
                **{_flag(name): (getattr(self, name), 0.0, False) for name in noises},
                "--env.noise.scale": (self.noise.scale, 0.0, False),
            }
        )
        contacts = self.sim.training_contacts
        if self.rewards.self_collisions != 0.0 and contacts.applies != "never" and not contacts.self_collisions:
            # The cost reads contacts of the robot with itself, which that contact model no longer makes.
            raise UsageError(
                "--env.rewards.self-collisions needs the robot's self-collisions, which"
                " --env.sim.training-contacts.no-self-collisions takes out of the training contact model"
            )
        robot = resolve_robot(self.robot)
        import mujoco

        model = mujoco.MjModel.from_xml_path(str(robot_file(robot)))
        self._check_bodies({model.body(b).name for b in range(model.nbody)}, robot_file(robot))
        joints = sum(1 for kind in model.jnt_type if kind == mujoco.mjtJoint.mjJNT_HINGE)
        motion = read_motion(self.motion_file(), joints, self.motion_fps)
        check_on_robot(model, motion)
        log = logging.getLogger(__name__)
        name, frames, fps, seconds = motion.path.name, motion.frames, motion.fps, motion.duration_s
        log.info("motion %s: %d frames at %g fps, %.1f s", name, frames, fps, seconds)
        for problem in implausible(model, motion):
            log.warning("motion file %s: %s", motion.path, problem)
        if self.motion_file().suffix.lower() == ".npz" and self.motion_fps != CSV_FPS:
            # Set for a run, it is still a setting of the run: the same motion with it is another run.
            logging.getLogger(__name__).warning(
                "--env.motion-fps %g has no effect with an .npz motion (its fps, %g, is its frame rate)",
                self.motion_fps,
                motion.fps,
            )
        if motion.duration_s > self.episode_length_s:
            logging.getLogger(__name__).info(
                "the motion lasts %.0f s and episodes %g s: a success is following its first %g s from its start,"
                " as play judges it (--env.episode-length-s %.0f to judge it whole)",
                motion.duration_s,
                self.episode_length_s,
                self.episode_length_s,
                math.ceil(motion.duration_s - 1e-6),
            )

    def _check_bodies(self, names: set[str], robot: Path) -> None:
        """The tracked bodies, the anchor and the end effectors are bodies of the robot, the last two tracked."""
        from mjfleet.errors import UsageError

        if not self.bodies:
            raise UsageError("--env.bodies names no body: the task tracks the poses of the bodies it lists")
        for flag, listed in (
            ("--env.bodies", self.bodies),
            ("--env.anchor-body", (self.anchor_body,)),
            ("--env.end-effectors", self.end_effectors),
        ):
            if unknown := [b for b in listed if b not in names]:
                raise UsageError(f"{flag}: {robot} has no body named {', '.join(unknown)}")
        for flag, listed in (("--env.anchor-body", (self.anchor_body,)), ("--env.end-effectors", self.end_effectors)):
            if untracked := [b for b in listed if b not in self.bodies]:
                raise UsageError(f"{flag} {' '.join(untracked)}: not among --env.bodies, whose poses the task tracks")

    def as_judged(self) -> Self:
        """Episodes as ``play`` runs them: from the motion's first frame on the reference's root pose and velocity,
        the joints within ``start_joint_noise`` of the reference's (each episode from a slightly different pose, as
        mjlab's play starts them)."""
        return dataclasses.replace(
            super().as_judged(), sampling="start", start_pos_noise=0.0, start_yaw_noise=0.0, start_velocity_noise=0.0
        )


def _flag(name: str) -> str:
    """The command-line flag of the environment setting ``name``."""
    return f"--env.{name.replace('_', '-')}"

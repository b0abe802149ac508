"""Settings of the manipulation tasks (every field is a ``--env.<...>`` flag; no simulator imports)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Self

from mjfleet.envs.config import EnvConfig, check_ranges

Range = tuple[float, float]


@dataclass
class Box3:
    """An axis-aligned box of positions in the arm's base frame (metres; the base is at the origin, the table top is
    z = 0)."""

    x: Range = (0.25, 0.4)
    """Forward range."""
    y: Range = (-0.15, 0.15)
    """Sideways range."""
    z: Range = (0.15, 0.35)
    """Height range above the table."""


@dataclass
class TableConfig:
    """The table the arm stands on (metres, in the arm's base frame; the table's top is the plane z = 0)."""

    front: float = 0.7
    """How far in front of the base the table reaches."""
    back: float = 0.2
    """How far behind the base it reaches."""
    half_width: float = 0.5
    """Half its width, sideways of the base."""
    floor_depth: float = 0.75
    """How far below the table's top the floor lies (where a cube pushed off the table lands)."""


@dataclass
class ManipulationConfig(EnvConfig):
    """Settings every manipulation task has: the arm, its actions and the solver."""

    arm: str = "yam"
    """The arm record's name (`yam`: MuJoCo Menagerie's I2RT YAM)."""
    action_scale: float = 0.5
    """Arm joint target = home angle + action * action_scale (radians). The gripper's action spans its control range:
    -1 closed, +1 open, 0 its home opening."""
    action_filter: float = 1.0
    """Each control step, the arm joints' servo targets move this fraction of the way from where they were to home +
    action * `action_scale` (an exponential filter; 1: straight there). Below 1, the policy's action noise shakes
    the hand, and a cube held in it, much less; the policy then observes the targets. The gripper follows its action
    unfiltered."""
    init_joint_noise: float = 0.1
    """Arm joint angles start uniformly within +-this (radians) around home, inside the joint limits."""
    soft_joint_limit: float = 0.9
    """Fraction of each joint's range inside which the `joint_limits` term pays nothing."""
    table: TableConfig = field(default_factory=TableConfig)
    """The table: its extent around the base (size it to your arm's reach) and the floor's depth."""
    hand_table_force: float = 10.0
    """The episode terminates when the hand (the arm record's `hand_body` and what hangs from it) presses on the
    table with more than this net contact force (newtons, mjlab's threshold); 0: never."""
    contact_cone: Literal["file", "pyramidal", "elliptic"] = "file"
    """Friction cone of the physics (`file`: the arm file's)."""
    impratio: float | None = None
    """Ratio of frictional to normal constraint impedance (None: the file's)."""
    solver_iterations: int = 10
    """Constraint-solver iteration cap (replaces the MJCF's)."""
    linesearch_iterations: int = 16
    """Line-search iteration cap of the constraint solver (replaces the MJCF's)."""

    def model_files(self) -> list[Path]:
        """The arm's MJCF (on disk after :meth:`prepare_assets`)."""
        from mjfleet.tasks.manipulation.sources import arm_file, resolve_arm

        return [Path(arm_file(resolve_arm(self.arm)))]

    def model_records(self) -> dict[str, str]:
        """The arm's record (its home pose, end-effector site, gripper and fingertips make the scene of the file)."""
        from mjfleet.runs.model_files import record_entry
        from mjfleet.tasks.manipulation.sources import resolve_arm

        return record_entry("arm", resolve_arm(self.arm))

    def prepare_assets(self) -> None:
        """Resolve ``arm``, bring its MJCF onto the disk (Menagerie models: download into the cache) and build the
        scene once: what the file or the settings lack is one line before anything is created."""
        from mjfleet.tasks.manipulation.model import build_model
        from mjfleet.tasks.manipulation.sources import resolve_arm

        self.model_files()
        build_model(resolve_arm(self.arm), self)

    def check_over_table(self, flag: str, x: Range, y: Range, z: Range | None = None) -> None:
        """Positions drawn from ``x``, ``y`` (and heights ``z``) are over the table and above its top: one line
        naming ``flag`` (``--env.target``: ``--env.target.x``...) where they are not (a target inside the table, a
        cube started past its edge: unreachable, or dropped at once, and trained on silently)."""
        from mjfleet.errors import UsageError

        table = self.table
        check_ranges({f"{flag}.x": (x, None), f"{flag}.y": (y, None), f"{flag}.z": (z, None)})
        for axis, values, low, high in (
            ("x", x, -table.back, table.front),
            ("y", y, -table.half_width, table.half_width),
        ):
            if values[0] < low or values[-1] > high:
                raise UsageError(
                    f"{flag}.{axis} {values[0]:g} {values[-1]:g}: past the table, which spans {low:g} to {high:g}"
                    f" (--env.table.*)"
                )
        if z is not None and not z[0] > 0.0:
            raise UsageError(f"{flag}.z {z[0]:g} {z[-1]:g}: must be above the table's top (z = 0)")


@dataclass
class ReachRewards:
    """Per-term weights (0 disables a term). Each term is integrated over time (multiplied by the control step)."""

    reach: float = 1.0
    """1 - tanh(d / reach_std), d the distance from the end-effector to the target."""
    reach_fine: float = 1.0
    """exp(-d^2 / reach_fine_std^2): pays for the last centimetres."""
    action_rate: float = -0.01
    """Sum of squared changes of the action since the last step."""
    joint_limits: float = -1.0
    """Sum of joint excursions beyond `soft_joint_limit` of each joint's range."""
    joint_vel: float = -0.001
    """Sum of squared joint velocities."""
    termination: float = -50.0
    """1 on the step the hand presses on the table (the episode ends): a penalty when negative. Ending an episode must
    cost more than the action and velocity penalties an untrained policy pays over the rest of it (up to about 1.2
    in a 4 s episode), or a run with few environments learns to end its episodes on the table."""


@dataclass
class ReachConfig(ManipulationConfig):
    """Bring the end-effector to a target position drawn anew each episode."""

    target: Box3 = field(default_factory=Box3)
    """Where targets are drawn (uniformly)."""
    reach_std: float = 0.1
    """Distance scale of the `reach` term (metres)."""
    reach_fine_std: float = 0.02
    """Distance scale of the `reach_fine` term (metres)."""
    success_distance: float = 0.03
    """An episode succeeds when it times out with the end-effector this close to the target (metres)."""
    rewards: ReachRewards = field(default_factory=ReachRewards)
    """Reward term weights."""

    def prepare_assets(self) -> None:
        """Where targets are drawn, checked (one line naming the flag) before the scene is built."""
        t = self.target
        self.check_over_table("--env.target", t.x, t.y, t.z)
        super().prepare_assets()


@dataclass
class CubeConfig:
    """The cube to lift: its size, mass and friction are drawn per environment at every reset, and its start pose on
    the table."""

    half_size: Range = (0.015, 0.025)
    """Half the edge length (metres)."""
    mass: Range = (0.03, 0.1)
    """Mass (kg)."""
    friction: Range = (0.6, 1.2)
    """Sliding friction coefficient of the cube's faces."""
    x: Range = (0.25, 0.35)
    """Start position, forward (metres from the arm's base)."""
    y: Range = (-0.1, 0.1)
    """Start position, sideways (metres)."""
    yaw: Range = (-math.pi, math.pi)
    """Start heading about the vertical (radians)."""


@dataclass
class LiftRewards:
    """Per-term weights (0 disables a term). Each term is integrated over time (multiplied by the control step)."""

    lift: float = 1.0
    """Staged: reach * (1 + bring), reach = exp(-|ee - cube|^2 / reach_std^2) and bring = exp(-|cube - goal|^2 /
    bring_std^2). Reaching pays first; carrying the cube towards the goal only pays with the hand on it."""
    lift_precise: float = 1.0
    """exp(-|cube - goal|^2 / precise_std^2): pays for the last centimetres."""
    lifted: float = 0.0
    """reach while the cube is clear of the table, 0 on it: pays for any lift made with the hand at the cube, where
    `lift` grows by little until the cube nears the goal (a cube on the table already earns most of `bring`)."""
    grasp: float = 0.0
    """reach while every fingertip touches the cube, 0 otherwise: pays for closing the hand on it."""
    height: float = 0.0
    """min(rise / rise_span, 1) while every fingertip touches the cube, rise the height of the cube above where it
    rests on the table: pays for every millimetre a held cube is raised, where `lifted` pays only once it is
    clear."""
    carry: float = 0.0
    """reach * bring while the cube is clear of the table, 0 on it: pays for carrying a lifted cube towards the goal,
    where `lift`'s bring also pays a cube left on the table for being under the goal (`bring_std` is its
    distance scale)."""
    action_rate: float = -0.01
    """Sum of squared changes of the action since the last step."""
    joint_limits: float = -1.0
    """Sum of joint excursions beyond `soft_joint_limit` of each joint's range."""
    joint_vel: float = -0.001
    """Sum of squared joint velocities."""


@dataclass
class LiftConfig(ManipulationConfig):
    """Grasp a cube on the table and hold it at a goal position in the air."""

    cube: CubeConfig = field(default_factory=CubeConfig)
    """The cube and its randomization."""
    goal: Box3 = field(default_factory=lambda: Box3(x=(0.25, 0.4), y=(-0.15, 0.15), z=(0.15, 0.3)))
    """Where goals are drawn (uniformly, once per episode)."""
    fingertip_friction: Range = (0.8, 1.5)
    """Sliding friction of the fingertips' geoms, drawn per environment at every reset."""
    reach_std: float = 0.1
    """Distance scale of the reaching part of `lift` (metres)."""
    bring_std: float = 0.3
    """Distance scale of the carrying part of `lift` and of `carry` (metres)."""
    precise_std: float = 0.05
    """Distance scale of `lift_precise` (metres)."""
    pinch_tolerance: float | None = 0.003
    """A grasp (the `grasp` and `height` terms, `Metrics/grasped_fraction`) counts only while the fingers' half
    opening, read from the arm record's `grasp_pose`, is the cube's half edge within this (metres): closed fingertips
    pressing on the cube from above touch it too, but do not hold it. None, or an arm without `grasp_pose`: every
    fingertip touching the cube is enough."""
    rise_span: float = 0.05
    """Rise over which the `height` term grows from 0 to 1 (metres)."""
    success_distance: float = 0.05
    """The cube counts as at the goal this close to it (metres)."""
    hold_s: float = 0.5
    """An episode succeeds when it times out with the cube at the goal, off the table, for at least this long."""
    start_in_hand: float = 0.0
    """Share of the training episodes that start with the cube held between the fingers, the arm at its home pose
    and the gripper commanded closed (a start from which lifting is near, so that it gets explored); the others,
    every evaluation episode and `play` start with the cube on the table. Needs the arm record's `grasp_pose`."""
    start_at_cube: float = 0.0
    """Share of the training episodes that start with the hand around the cube on the table, the fingers open wide of
    it (the arm in one of the poses solved at setup for cube positions 1 cm apart, the cube turned so that the fingers
    close on two of its faces): reaching is done, closing and lifting are near. With `start_in_hand`, the shares
    add up to at most 1; evaluation and `play` start with the cube on the table and the arm at home."""
    drop_height: float = -0.05
    """The episode terminates when the cube's centre falls below this height: off the table's edge (metres)."""
    rewards: LiftRewards = field(default_factory=LiftRewards)
    """Reward term weights."""

    def prepare_assets(self) -> None:
        """The ranges drawn from, and the hold, checked (one line naming the flag) before the scene is built."""
        from mjfleet.errors import UsageError

        ranges = {
            "--env.cube.half-size": (self.cube.half_size, 0.0),
            "--env.cube.mass": (self.cube.mass, 0.0),
            "--env.cube.friction": (self.cube.friction, 0.0),
            "--env.fingertip-friction": (self.fingertip_friction, 0.0),
            "--env.cube.x": (self.cube.x, None),
            "--env.cube.y": (self.cube.y, None),
            "--env.cube.yaw": (self.cube.yaw, None),
        }
        check_ranges(ranges)
        self.check_over_table("--env.cube", self.cube.x, self.cube.y)
        self.check_over_table("--env.goal", self.goal.x, self.goal.y, self.goal.z)
        if not 0.0 <= self.hold_s < self.episode_length_s:
            raise UsageError(
                f"--env.hold-s must be at least 0 and shorter than the episode ({self.episode_length_s:g} s; got"
                f" {self.hold_s:g})"
            )
        super().prepare_assets()

    def as_judged(self) -> Self:
        """Judged from the start every user's episode has: the cube on the table."""
        return dataclasses.replace(super().as_judged(), start_in_hand=0.0, start_at_cube=0.0)

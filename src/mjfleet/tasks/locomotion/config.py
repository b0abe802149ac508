"""Settings of the velocity-tracking locomotion tasks (every field is a ``--env.<...>`` flag)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Self

from mjfleet.envs.config import EnvConfig, check_at_least, check_ranges
from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.robots import absolute_robot_path

TerrainType = Literal["bumps", "slope_up", "slope_down", "stairs_up", "stairs_down"]
"""Tile kinds: random bumps; a pit to climb out of or a pyramid to walk down (slopes, stairs)."""


@dataclass
class LocomotionRewards:
    """Per-term weights (0 disables a term). Each term is integrated over time (multiplied by the control step)."""

    track_lin_vel_xy: float = 1.0
    """exp(-|v_xy - command_xy|^2 / tracking_std^2), base-frame linear velocity."""
    track_yaw_rate: float = 0.5
    """exp(-(w_z - command_yaw)^2 / tracking_std^2), base-frame yaw rate."""
    lin_vel_z: float = -2.0
    """Squared base-frame vertical velocity."""
    ang_vel_xy: float = -0.05
    """Squared base-frame roll and pitch rates."""
    torques: float = -1e-5
    """Sum of squared actuator forces."""
    joint_acc: float = -2.5e-7
    """Sum of squared joint accelerations."""
    action_rate: float = -0.01
    """Sum of squared changes of the action since the last step."""
    feet_air_time: float = 0.0
    """Quadruped gait: at each touchdown, the foot's air time minus `air_time_threshold` (only while commanded to
    move)."""
    biped_air_time: float = 0.0
    """Biped gait: while exactly one foot is on the ground, the shorter of the current stance/swing times, capped
    at `air_time_threshold` (only while commanded to move)."""
    feet_slide: float = 0.0
    """Horizontal speed of feet that touch the ground."""
    undesired_contacts: float = -1.0
    """Number of undesired contact geoms (thighs, calves, shins, forearms) touching the ground."""
    flat_orientation: float = 0.0
    """Squared horizontal components of the projected gravity (base tilt)."""
    joint_limits: float = 0.0
    """Sum of joint-angle excursions beyond `soft_joint_limit` of each joint's range (radians)."""
    joint_deviation: float = 0.0
    """Sum of absolute deviations from the default angle of the robot's `deviation_joints` (hip ab/adduction,
    arms, waist)."""
    base_height: float = 0.0
    """Squared difference between the base height above the ground and `target_base_height`."""
    alive: float = 0.0
    """1 on every step that does not end the episode by termination. A positive weight keeps staying up worth more
    than the penalties of an untrained, flailing policy, which otherwise learns to end its episodes early."""
    termination: float = 0.0
    """1 on the step an episode terminates (not on time-outs): a penalty when negative."""


@dataclass
class CommandCurriculumConfig:
    """Training commands drawn from a share of their ranges that widens as the policy tracks them (Isaac Lab's and
    legged_gym's command curriculum); the evaluation and `play` always draw from the full ranges."""

    start: float = 1.0
    """Share of every command range the training environments draw from at first (each bound times it); 1 draws
    from the full ranges from the start: no curriculum."""
    step: float = 0.1
    """Share added whenever the training episodes that ended over the last episode's length tracked well."""
    promote_at: float = 0.8
    """They tracked well when their planar tracking reward, summed over each episode and divided by the full episode
    length (a fall forfeits the rest), averaged over this share of its most."""


@dataclass
class CommandConfig:
    """Base-velocity commands, drawn uniformly per environment and redrawn at intervals."""

    lin_vel_x: tuple[float, float] = (-1.0, 1.0)
    """Forward velocity range (m/s, base frame)."""
    lin_vel_y: tuple[float, float] = (-1.0, 1.0)
    """Sideways velocity range (m/s, base frame)."""
    yaw_rate: tuple[float, float] = (-1.0, 1.0)
    """Yaw rate range (rad/s)."""
    resample_interval_s: float = 10.0
    """Each environment draws a new command this often (and at every reset)."""
    standing_fraction: float = 0.02
    """Probability that a drawn command is zero (stand still)."""
    min_lin_speed: float = 0.1
    """Drawn linear commands slower than this become zero, so "move" commands are clearly distinguishable."""
    curriculum: CommandCurriculumConfig = field(default_factory=CommandCurriculumConfig)
    """Start the training commands small and widen them (off by default)."""


@dataclass
class TerrainConfig:
    """The ground: a plane, or a heightfield of tiles (rows = difficulty levels, columns = terrain types)."""

    kind: Literal["flat", "rough"] = "flat"
    """`flat`: the model's floor plane. `rough`: a tiled heightfield with a difficulty curriculum."""
    types: tuple[TerrainType, ...] = ("bumps", "slope_up", "slope_down", "stairs_up", "stairs_down")
    """Tile types, one column each; environment `i` trains on column `i % len(types)`."""
    num_levels: int = 5
    """Difficulty levels (rows); level 0 is nearly flat, the last is the hardest."""
    tile_size: float = 6.0
    """Side of a square tile (metres)."""
    border: float = 4.0
    """Flat margin around the tiles (metres)."""
    edge_margin: float = 0.3
    """A robot whose base comes this close to the heightfield's outer edge ends its episode as a time-out
    (`out_of_terrain`), before it walks off the terrain and falls (metres; mjlab's margin)."""
    resolution: float = 0.1
    """Heightfield grid spacing (metres)."""
    platform_size: float = 1.6
    """Side of the flat spawn platform at each tile's centre (metres)."""
    bump_height: tuple[float, float] = (0.02, 0.1)
    """Bump amplitude at the easiest and the hardest level: heights uniform in +-amplitude (metres)."""
    bump_spacing: float = 0.3
    """Distance between random bump heights; the surface is interpolated in between (metres)."""
    slope: tuple[float, float] = (0.0, 0.4)
    """Slope (rise over run) at the easiest and the hardest level."""
    step_height: tuple[float, float] = (0.04, 0.18)
    """Stair riser height at the easiest and the hardest level (metres)."""
    step_width: float = 0.3
    """Stair tread depth (metres)."""
    seed: int = 0
    """Seed of the bump heights (the same on every worker, so all workers train on one terrain)."""
    curriculum: bool = True
    """Move environments to harder levels when they walk far, and easier when they fall short of their commands."""
    max_init_level: int = 1
    """Environments start on a level drawn uniformly from 0 to this."""
    promote_fraction: float = 0.5
    """Promote when the distance walked from the spawn point exceeds this fraction of `tile_size`."""
    demote_fraction: float = 0.5
    """Demote when the distance walked is below this fraction of the distance the episode's commands ask for over a
    whole episode (their mean speed times its length): a robot that falls early is demoted."""
    spawn_jitter: float = 0.5
    """Spawn points are drawn uniformly within +-this of the tile centre (metres, within the platform)."""


@dataclass
class RandomizationConfig:
    """Domain randomization: per-world physics parameters and random pushes (None or 0 disables an item)."""

    friction: tuple[float, float] | None = None
    """Sliding friction of every geom of a world, drawn uniformly from this range."""
    added_base_mass: tuple[float, float] | None = None
    """Mass added to the base body of a world (kg, uniform); the subtree masses are updated to match."""
    kp_scale: tuple[float, float] | None = None
    """Factor on every position actuator's stiffness (kp) of a world, uniform."""
    kd_scale: tuple[float, float] | None = None
    """Factor on every position actuator's damping (kv) of a world, uniform."""
    com_offset: tuple[float, float, float] | None = None
    """Offset of the base body's centre of mass in a world, uniform within +- these (x, y, z; metres, in the body's
    frame): a payload or a battery not where the file puts it."""
    encoder_bias: tuple[float, float] | None = None
    """Calibration error of every actuated joint's encoder in a world (radians, uniform per joint): the policy reads
    each angle plus its bias, and its servo targets, taken in that biased frame, reach the joint minus the bias."""
    on_reset: bool = False
    """Redraw the per-world parameters at every reset instead of once at startup."""
    push_interval_s: tuple[float, float] = (10.0, 15.0)
    """Time between pushes of one environment, uniform (seconds)."""
    push_velocity: float = 0.0
    """A push adds a horizontal base velocity uniform in +-this per axis (m/s); 0 disables pushes."""

    def check(self) -> None:
        """:class:`UsageError` naming the flag of a range out of order or out of bounds (negative friction trained
        silently)."""
        check_ranges(
            {
                "--env.randomization.friction": (self.friction, 0.0),
                "--env.randomization.added-base-mass": (self.added_base_mass, None),
                "--env.randomization.kp-scale": (self.kp_scale, 0.0),
                "--env.randomization.kd-scale": (self.kd_scale, None),
                "--env.randomization.encoder-bias": (self.encoder_bias, None),
                "--env.randomization.push-interval-s": (self.push_interval_s, 0.0),
            }
        )
        check_at_least(
            {
                "--env.randomization.kd-scale": (self.kd_scale[0] if self.kd_scale else 0.0, 0.0, False),
                "--env.randomization.push-velocity": (self.push_velocity, 0.0, False),
            }
        )


@dataclass
class NoiseConfig:
    """Uniform noise added to the policy's observations (the critic sees clean values)."""

    scale: float = 0.0
    """Multiplies every amplitude below; 0 disables the noise."""
    ang_vel: float = 0.2
    """Base angular velocity noise amplitude (rad/s)."""
    gravity: float = 0.05
    """Projected gravity noise amplitude."""
    joint_pos: float = 0.01
    """Joint position noise amplitude (rad)."""
    joint_vel: float = 1.5
    """Joint velocity noise amplitude (rad/s)."""


NOISE_FIELDS = tuple(f.name for f in dataclasses.fields(NoiseConfig))
"""The noise amplitudes (and their scale), none of which may be negative."""


@dataclass
class LocomotionConfig(EnvConfig):
    """Velocity tracking with a legged robot on flat or rough ground."""

    robot: str = "go1"
    """Which robot to drive: a record name (`go1`, `humanoid`: primitive models shipped here; `unitree_go1`,
    `unitree_g1`; `list-tasks --robots` names them all), `menagerie:unitree_go1` /
    `menagerie:unitree_g1` (MuJoCo Menagerie files), or a path to an MJCF that has the names of one of those
    records (recorded absolute)."""
    action_scale: float = 0.25
    """Joint position target = default angle + action_scale * action (radians)."""
    action_scale_of_force: float = 0.0
    """When above 0, each joint's action scale is this fraction of its actuator's force limit over its position gain
    instead of `action_scale`: one unit of action asks every servo for the same share of what it can exert (0.25 is
    mjlab's rule). Needs position actuators with force limits."""
    tracking_std: float = 0.5
    """Width of the exponential velocity-tracking rewards (m/s or rad/s)."""
    air_time_threshold: float = 0.5
    """Target swing time of the air-time rewards (seconds)."""
    contact_force: float = 1.0
    """A zone touches the ground when MuJoCo found a contact between them and the normal forces on the zone exceed
    this (newtons)."""
    soft_joint_limit: float = 0.9
    """Fraction of each joint's range, around its middle, beyond which `joint_limits` penalises."""
    target_base_height: float = 0.0
    """Target of the `base_height` reward (metres above the ground; 0 uses the robot's standing height)."""
    termination_height: float = 0.15
    """The episode terminates when the base is lower than this above the ground (metres)."""
    termination_tilt: float = 1.2
    """The episode terminates when the base tilts more than this from upright (radians)."""
    init_joint_noise: float = 0.1
    """Initial joint angles are the default plus uniform noise within +-this (radians, clipped to the range)."""
    init_base_velocity: float = 0.3
    """Initial base linear and angular velocities are uniform within +-this per axis."""
    height_scan: tuple[int, int] = (0, 0)
    """Critic-only ground heights around the base: (points along x, points along y) in the heading frame; (0, 0)
    for none."""
    height_scan_spacing: float = 0.15
    """Distance between height-scan points (metres)."""
    solver_iterations: int = 10
    """Constraint-solver iteration cap (replaces the MJCF's; converged worlds stop early, so a cap rarely reached
    costs little; `sim.solver_notices` prints a notice for every world that hits it)."""
    linesearch_iterations: int = 16
    """Line-search iteration cap of the constraint solver (replaces the MJCF's, for the same reason)."""
    commands: CommandConfig = field(default_factory=CommandConfig)
    """Velocity commands."""
    rewards: LocomotionRewards = field(default_factory=LocomotionRewards)
    """Reward term weights."""
    terrain: TerrainConfig = field(default_factory=TerrainConfig)
    """Ground and curriculum."""
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    """Domain randomization."""
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    """Observation noise."""

    def __post_init__(self) -> None:
        self.robot = absolute_robot_path(self.robot)

    def as_judged(self) -> Self:
        """The file's contact model and the full command ranges: what the evaluation and ``play`` run."""
        judged = super().as_judged()
        off = dataclasses.replace(self.commands.curriculum, start=1.0)
        return dataclasses.replace(judged, commands=dataclasses.replace(self.commands, curriculum=off))

    def model_records(self) -> dict[str, str]:
        """The robot's record (its servos, home pose and zones make the model of the file)."""
        from mjfleet.runs.model_files import record_entry
        from mjfleet.tasks.locomotion.sources import resolve_robot

        return record_entry("robot", resolve_robot(self.robot))

    def model_files(self) -> list[Path]:
        """The robot's MJCF (on disk after :meth:`prepare_assets`)."""
        from mjfleet.tasks.locomotion.sources import resolve_robot, robot_file

        return [robot_file(resolve_robot(self.robot))]

    def _check_settings(self) -> None:
        """:class:`UsageError` naming the flag of a setting out of its range (they crash or silently mistrain)."""
        c, noise, t = self.commands, self.noise, self.terrain
        self.randomization.check()
        check_ranges(
            {
                "--env.commands.lin-vel-x": (c.lin_vel_x, None),
                "--env.commands.lin-vel-y": (c.lin_vel_y, None),
                "--env.commands.yaw-rate": (c.yaw_rate, None),
            }
        )
        at_least: dict[str, tuple[float, float, bool]] = {
            "--env.tracking-std": (self.tracking_std, 0.0, True),
            "--env.soft-joint-limit": (self.soft_joint_limit, 0.0, True),
            "--env.termination-tilt": (self.termination_tilt, 0.0, True),
            "--env.solver-iterations": (self.solver_iterations, 1, False),
            "--env.linesearch-iterations": (self.linesearch_iterations, 1, False),
            "--env.height-scan": (min(self.height_scan), 0, False),
            "--env.height-scan-spacing": (self.height_scan_spacing, 0.0, True),
            "--env.commands.resample-interval-s": (c.resample_interval_s, 0.0, True),
            "--env.commands.standing-fraction": (c.standing_fraction, 0.0, False),
            "--env.commands.min-lin-speed": (c.min_lin_speed, 0.0, False),
            **{f"--env.noise.{name.replace('_', '-')}": (getattr(noise, name), 0.0, False) for name in NOISE_FIELDS},
        }
        if self.terrain.kind == "rough":
            if not t.types:
                raise UsageError("--env.terrain.types is empty: name at least one terrain type")
            check_ranges(
                {
                    "--env.terrain.bump-height": (t.bump_height, None),
                    "--env.terrain.slope": (t.slope, None),
                    "--env.terrain.step-height": (t.step_height, None),
                }
            )
            at_least |= {
                "--env.terrain.num-levels": (t.num_levels, 1, False),
                "--env.terrain.tile-size": (t.tile_size, 0.0, True),
                "--env.terrain.border": (t.border, 0.0, False),
                "--env.terrain.edge-margin": (t.edge_margin, 0.0, False),
                "--env.terrain.resolution": (t.resolution, 0.0, True),
                "--env.terrain.platform-size": (t.platform_size, 0.0, False),
                "--env.terrain.bump-spacing": (t.bump_spacing, 0.0, True),
                "--env.terrain.step-width": (t.step_width, 0.0, True),
                "--env.terrain.max-init-level": (t.max_init_level, 0, False),
                "--env.terrain.promote-fraction": (t.promote_fraction, 0.0, False),
                "--env.terrain.demote-fraction": (t.demote_fraction, 0.0, False),
                "--env.terrain.spawn-jitter": (t.spawn_jitter, 0.0, False),
            }
        check_at_least(at_least)
        if self.terrain.kind == "rough" and not t.platform_size < t.tile_size:
            raise UsageError(
                f"--env.terrain.platform-size must be smaller than a tile (--env.terrain.tile-size {t.tile_size:g};"
                f" got {t.platform_size:g})"
            )
        if c.standing_fraction > 1:
            raise UsageError(f"--env.commands.standing-fraction must be at most 1 (got {c.standing_fraction:g})")

    def prepare_assets(self) -> None:
        """Resolve ``robot``, bring its MJCF onto the disk (Menagerie models: download into the cache) and check that
        it has every keyframe, body, geom, joint and actuator the robot's record names."""
        from mjfleet.tasks.locomotion.sources import resolve_robot, robot_file
        from mjfleet.tasks.registry import BUILTIN_PACKAGE, robot_package

        self._check_settings()
        robot = resolve_robot(self.robot)
        path = robot_file(robot)
        if robot.asset is None:  # the files shipped here are checked by the tests; no MuJoCo import for them
            from mjfleet.tasks.locomotion.check import check_robot_file

            package = robot_package(robot.name)
            of = f" of package {package!r}" if package != BUILTIN_PACKAGE else ""
            check_robot_file(robot, path, f"--env.robot {self.robot}{of}")

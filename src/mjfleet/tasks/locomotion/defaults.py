"""Complete default configs of the velocity tasks for any robot record: a quadruped's or a biped's MDP on flat or
rough ground, and the PPO settings that train them.

Each function returns a new, complete dataclass for the robot it is given; a task tunes it further with
``dataclasses.replace``. The built-in tasks are made from these (``presets.py``), and so are a package's own.
"""

from __future__ import annotations

import dataclasses

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.sim.config import ContactModel, SimConfig
from mjfleet.tasks.locomotion.config import (
    CommandConfig,
    LocomotionConfig,
    LocomotionRewards,
    NoiseConfig,
    RandomizationConfig,
    TerrainConfig,
)
from mjfleet.tasks.locomotion.robots import RobotSpec

EPISODE_LENGTH_S = 20.0
"""Episode time limit of every locomotion task (two command intervals)."""

HEIGHT_SCAN = (11, 7)
"""Critic height-scan grid of the rough tasks: 1.5 m x 0.9 m around the base at 0.15 m."""


def locomotion_sim(nconmax: int, njmax: int, training_contacts: ContactModel | None = None) -> SimConfig:
    """5 ms physics (the MJCF timestep), 4 substeps: 50 Hz control. ``nconmax`` and ``njmax`` size the contact and
    constraint pools per world: enough for the robot standing on its feet plus the contacts of a fall."""
    return SimConfig(decimation=4, nconmax=nconmax, njmax=njmax, training_contacts=training_contacts or ContactModel())


CPU_TRAINING_CONTACTS = ContactModel(
    applies="cpu", cone="pyramidal", max_condim=3, joint_friction=False, self_collisions=False
)
"""The contact model Menagerie robots train on on the CPU: each change is a share of the physics time there
(``bench <task> --contact-costs``), and the policy is judged on the file as shipped. The file's ``impratio`` stays:
friction as hard as the file's (Menagerie's Go1: 100) costs no more with pyramidal cones, and a Go1 policy trained with
impratio 1 slipped less than it expected on the file and fell (0.92 against 0.98 on its training model)."""


def rough_randomization() -> RandomizationConfig:
    """Rough tasks: friction, payload and gain variation, and pushes."""
    return RandomizationConfig(
        friction=(0.4, 1.25),
        added_base_mass=(-1.0, 3.0),
        kp_scale=(0.9, 1.1),
        kd_scale=(0.8, 1.2),
        push_interval_s=(10.0, 15.0),
        push_velocity=0.5,
    )


def light_randomization() -> RandomizationConfig:
    """Flat tasks: a little friction and payload variation, no pushes, exact gains."""
    return RandomizationConfig(friction=(0.6, 1.0), added_base_mass=(-0.5, 1.0))


def quadruped_rewards(flat: bool) -> LocomotionRewards:
    """legged_gym's quadruped terms. Rough ground: half the air-time bonus, and no penalty for the tilt that slopes
    and stairs require."""
    return LocomotionRewards(
        track_lin_vel_xy=1.5,
        track_yaw_rate=0.75,
        lin_vel_z=-2.0,
        ang_vel_xy=-0.05,
        torques=-2e-4,
        joint_acc=-2.5e-7,
        action_rate=-0.01,
        feet_air_time=0.25 if flat else 0.125,
        undesired_contacts=-1.0,
        flat_orientation=-2.5 if flat else 0.0,
        termination=-200.0,
    )


def quadruped_flat_config(robot: RobotSpec, sim: SimConfig, termination_height: float = 0.15) -> LocomotionConfig:
    """A quadruped on a plane: omnidirectional commands up to 1 m/s and 1 rad/s, light randomization, no noise.
    ``termination_height``: a base lower than this above the ground is a fall (metres)."""
    return LocomotionConfig(
        robot=robot.name,
        episode_length_s=EPISODE_LENGTH_S,
        sim=sim,
        action_scale=0.25,
        termination_height=termination_height,
        commands=CommandConfig(lin_vel_x=(-1.0, 1.0), lin_vel_y=(-1.0, 1.0), yaw_rate=(-1.0, 1.0)),
        rewards=quadruped_rewards(flat=True),
        terrain=TerrainConfig(kind="flat"),
        randomization=light_randomization(),
        noise=NoiseConfig(scale=0.0),
    )


def on_rough_ground(
    flat: LocomotionConfig, sim: SimConfig, rewards: LocomotionRewards, terrain: TerrainConfig
) -> LocomotionConfig:
    """A flat task moved onto rough ground: more contacts, the critic's height scan, full randomization and noise."""
    return dataclasses.replace(
        flat,
        sim=sim,
        height_scan=HEIGHT_SCAN,
        rewards=rewards,
        terrain=terrain,
        randomization=rough_randomization(),
        noise=NoiseConfig(scale=1.0),
    )


def quadruped_rough_config(robot: RobotSpec, sim: SimConfig, termination_height: float = 0.15) -> LocomotionConfig:
    """A quadruped on the tiled heightfield with the curriculum, full randomization, pushes and observation noise."""
    flat = quadruped_flat_config(robot, sim, termination_height)
    return on_rough_ground(flat, sim, quadruped_rewards(flat=False), TerrainConfig(kind="rough"))


def biped_rewards(flat: bool) -> LocomotionRewards:
    """Humanoid terms: single-stance air time, foot slip, posture, and a reward for staying up."""
    return LocomotionRewards(
        track_lin_vel_xy=1.0,
        track_yaw_rate=1.0,
        lin_vel_z=-0.2 if flat else 0.0,
        ang_vel_xy=-0.05,
        torques=-2e-6,
        joint_acc=-1e-7,
        action_rate=-0.005,
        biped_air_time=0.75,
        feet_slide=-0.1,
        undesired_contacts=0.0,
        flat_orientation=-1.0 if flat else 0.0,
        joint_limits=-1.0,
        joint_deviation=-0.1,
        # Staying up must pay more than the penalties of the first, flailing policies cost (about 1.5 per second
        # here), or PPO learns to fall early: without it episodes shortened from ~550 to ~45 steps.
        alive=2.0,
        termination=-200.0,
    )


def biped_flat_config(robot: RobotSpec, sim: SimConfig, termination_height: float = 0.4) -> LocomotionConfig:
    """A humanoid on a plane: forward 0-1 m/s, sideways +-0.5 m/s, turning +-1 rad/s."""
    return LocomotionConfig(
        robot=robot.name,
        episode_length_s=EPISODE_LENGTH_S,
        sim=sim,
        # 0.5 rad per unit of the initial N(0, 1) action noise knocked the robot over within ~1 s.
        action_scale=0.25,
        air_time_threshold=0.4,
        termination_height=termination_height,
        termination_tilt=1.0,
        init_joint_noise=0.05,
        init_base_velocity=0.1,
        commands=CommandConfig(lin_vel_x=(0.0, 1.0), lin_vel_y=(-0.5, 0.5), yaw_rate=(-1.0, 1.0)),
        rewards=biped_rewards(flat=True),
        terrain=TerrainConfig(kind="flat"),
        randomization=light_randomization(),
        noise=NoiseConfig(scale=0.0),
    )


def biped_rough_config(robot: RobotSpec, sim: SimConfig, termination_height: float = 0.4) -> LocomotionConfig:
    """A humanoid on the tiled heightfield (gentler stairs and slopes), full randomization and noise, no sideways
    commands."""
    terrain = TerrainConfig(
        kind="rough", tile_size=8.0, platform_size=2.0, slope=(0.0, 0.3), step_height=(0.02, 0.12), step_width=0.4
    )
    flat = biped_flat_config(robot, sim, termination_height)
    rough = on_rough_ground(flat, sim, biped_rewards(flat=False), terrain)
    return dataclasses.replace(rough, commands=dataclasses.replace(rough.commands, lin_vel_y=(0.0, 0.0)))


def locomotion_agent(iterations: int, hidden: tuple[int, ...], entropy_coef: float = 0.01) -> AgentConfig:
    """PPO settings of the locomotion tasks (rsl_rl's legged-robot defaults). The experiment name is the task's."""
    return AgentConfig(
        max_iterations=iterations,
        num_steps_per_env=24,
        save_interval=50,
        policy=PolicyConfig(actor_hidden_dims=hidden, critic_hidden_dims=hidden, init_std=1.0),
        algorithm=AlgorithmConfig(entropy_coef=entropy_coef),  # otherwise AlgorithmConfig's (rsl_rl's) defaults
    )


def cpu_agent(agent: AgentConfig, hidden_dims: tuple[int, ...]) -> AgentConfig:
    """``agent`` as it trains fastest on a few CPU cores: smaller networks, 8 passes per rollout, KL target 0.02
    (docs/performance.md)."""
    return dataclasses.replace(
        agent,
        policy=dataclasses.replace(agent.policy, actor_hidden_dims=hidden_dims, critic_hidden_dims=hidden_dims),
        algorithm=dataclasses.replace(agent.algorithm, desired_kl=0.02, num_learning_epochs=8),
    )

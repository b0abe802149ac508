"""Complete default environment and PPO configs of the four locomotion tasks."""

from __future__ import annotations

import dataclasses

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.sim.config import SimConfig
from mjfleet.tasks.locomotion.config import (
    CommandConfig,
    LocomotionConfig,
    LocomotionRewards,
    NoiseConfig,
    RandomizationConfig,
    TerrainConfig,
)

EPISODE_LENGTH_S = 20.0
"""Episode time limit of every locomotion task (two command intervals)."""

HEIGHT_SCAN = (11, 7)
"""Critic height-scan grid of the rough tasks: 1.5 m x 0.9 m around the base at 0.15 m."""


def _sim(nconmax: int, njmax: int) -> SimConfig:
    """5 ms physics (the MJCF timestep), 4 substeps: 50 Hz control."""
    return SimConfig(decimation=4, nconmax=nconmax, njmax=njmax)


def _rough_randomization() -> RandomizationConfig:
    return RandomizationConfig(
        friction=(0.4, 1.25),
        added_base_mass=(-1.0, 3.0),
        kp_scale=(0.9, 1.1),
        kd_scale=(0.8, 1.2),
        push_interval_s=(10.0, 15.0),
        push_velocity=0.5,
    )


def _light_randomization() -> RandomizationConfig:
    """Flat tasks: a little friction and payload variation, no pushes, exact gains."""
    return RandomizationConfig(friction=(0.6, 1.0), added_base_mass=(-0.5, 1.0))


def _go1_rewards(flat: bool) -> LocomotionRewards:
    """Rough ground: half the air-time bonus, and no penalty for the tilt that slopes and stairs require."""
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


def go1_flat_config() -> LocomotionConfig:
    """Go1 on a plane: omnidirectional commands up to 1 m/s and 1 rad/s, light randomization, no noise."""
    return LocomotionConfig(
        robot="go1",
        episode_length_s=EPISODE_LENGTH_S,
        sim=_sim(nconmax=16, njmax=64),
        action_scale=0.25,
        termination_height=0.15,
        commands=CommandConfig(lin_vel_x=(-1.0, 1.0), lin_vel_y=(-1.0, 1.0), yaw_rate=(-1.0, 1.0)),
        rewards=_go1_rewards(flat=True),
        terrain=TerrainConfig(kind="flat"),
        randomization=_light_randomization(),
        noise=NoiseConfig(scale=0.0),
    )


def _rough(
    flat: LocomotionConfig, sim: SimConfig, rewards: LocomotionRewards, terrain: TerrainConfig
) -> LocomotionConfig:
    """A flat task moved onto rough ground: more contacts, the critic's height scan, full randomization and noise."""
    return dataclasses.replace(
        flat,
        sim=sim,
        height_scan=HEIGHT_SCAN,
        rewards=rewards,
        terrain=terrain,
        randomization=_rough_randomization(),
        noise=NoiseConfig(scale=1.0),
    )


def go1_rough_config() -> LocomotionConfig:
    """Go1 on the tiled heightfield with the curriculum, full randomization, pushes and observation noise."""
    return _rough(go1_flat_config(), _sim(nconmax=32, njmax=128), _go1_rewards(flat=False), TerrainConfig(kind="rough"))


def _humanoid_rewards(flat: bool) -> LocomotionRewards:
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


def humanoid_flat_config() -> LocomotionConfig:
    """G1-class humanoid on a plane: forward 0-1 m/s, sideways +-0.5 m/s, turning +-1 rad/s."""
    return LocomotionConfig(
        robot="humanoid",
        episode_length_s=EPISODE_LENGTH_S,
        sim=_sim(nconmax=32, njmax=160),
        # 0.5 rad per unit of the initial N(0, 1) action noise knocked the robot over within ~1 s.
        action_scale=0.25,
        air_time_threshold=0.4,
        termination_height=0.4,
        termination_tilt=1.0,
        init_joint_noise=0.05,
        init_base_velocity=0.1,
        commands=CommandConfig(lin_vel_x=(0.0, 1.0), lin_vel_y=(-0.5, 0.5), yaw_rate=(-1.0, 1.0)),
        rewards=_humanoid_rewards(flat=True),
        terrain=TerrainConfig(kind="flat"),
        randomization=_light_randomization(),
        noise=NoiseConfig(scale=0.0),
    )


def humanoid_rough_config() -> LocomotionConfig:
    """G1-class humanoid on the tiled heightfield (gentler stairs and slopes), full randomization and noise."""
    terrain = TerrainConfig(
        kind="rough", tile_size=8.0, platform_size=2.0, slope=(0.0, 0.3), step_height=(0.02, 0.12), step_width=0.4
    )
    rough = _rough(humanoid_flat_config(), _sim(nconmax=48, njmax=200), _humanoid_rewards(flat=False), terrain)
    # No sideways walking on stairs and slopes.
    return dataclasses.replace(rough, commands=dataclasses.replace(rough.commands, lin_vel_y=(0.0, 0.0)))


def locomotion_agent(name: str, iterations: int, hidden: tuple[int, ...], entropy_coef: float = 0.01) -> AgentConfig:
    """PPO settings of the locomotion tasks (rsl_rl's legged-robot defaults)."""
    return AgentConfig(
        experiment_name=name,
        max_iterations=iterations,
        num_steps_per_env=24,
        save_interval=50,
        policy=PolicyConfig(actor_hidden_dims=hidden, critic_hidden_dims=hidden, init_std=1.0),
        algorithm=AlgorithmConfig(entropy_coef=entropy_coef),  # otherwise AlgorithmConfig's (rsl_rl's) defaults
    )


def go1_flat_agent() -> AgentConfig:
    """Small networks; a few hundred iterations on a GPU."""
    return locomotion_agent("go1_velocity_flat", 300, (128, 128, 128))


def _cpu_levers(agent: AgentConfig, hidden_dims: tuple[int, ...]) -> AgentConfig:
    """``agent`` as it trains fastest on a few CPU cores: smaller networks, 8 passes per rollout, KL target 0.02."""
    return dataclasses.replace(
        agent,
        policy=dataclasses.replace(agent.policy, actor_hidden_dims=hidden_dims, critic_hidden_dims=hidden_dims),
        algorithm=dataclasses.replace(agent.algorithm, desired_kl=0.02, num_learning_epochs=8),
    )


def go1_flat_cpu_agent() -> AgentConfig:
    """On the CPU the update of 128-128-128 networks costs as much as the physics. Networks of 64-64 cost a third as
    much per pass, which pays for 8 passes over each rollout instead of 5; a KL target of 0.02 lets the adaptive
    learning rate take larger steps. Together 0.47-0.64 of the time to ``--stop-when 'success>=0.95'`` on 2 cores
    over three seeds, with policies that play as well (docs/performance.md, "Second sitting")."""
    return _cpu_levers(go1_flat_agent(), (64, 64))


def go1_rough_agent() -> AgentConfig:
    """Larger networks and a long run for the terrain curriculum."""
    return locomotion_agent("go1_velocity_rough", 1500, (512, 256, 128))


def humanoid_flat_agent() -> AgentConfig:
    """Humanoids need longer to learn to balance before they walk."""
    return locomotion_agent("humanoid_velocity_flat", 1500, (256, 128, 128), entropy_coef=0.008)


def humanoid_flat_cpu_agent() -> AgentConfig:
    """The levers of ``go1_flat_cpu_agent`` at the humanoid's scale: 128-128 networks (a pass of the update costs 0.14 s
    there against 0.25 s with 256-128-128 on 2 cores), 8 passes over each rollout, a KL target of 0.02. On 2 cores
    ``--stop-when 'success>=0.95'`` exits after 14:16 instead of 32:32 (326 iterations instead of 713) for seed 42 and
    16:05 instead of 27:28 for seed 1, with policies that play as well (docs/performance.md, "The humanoid on the same
    2 cores")."""
    return _cpu_levers(humanoid_flat_agent(), (128, 128))


def humanoid_rough_agent() -> AgentConfig:
    """The longest run: balance, walking, then the curriculum."""
    return locomotion_agent("humanoid_velocity_rough", 3000, (512, 256, 128), entropy_coef=0.008)


# --- Menagerie robots: the same MDPs on MuJoCo Menagerie's Unitree models --------------------------------------------
# Constraint pools are larger than the primitive models': Menagerie's Go1 has joint friction (one row per joint),
# elliptic condim-6 feet (6 rows per contact) and self-collisions; the G1 has 29 joints.


def _menagerie(cfg: LocomotionConfig, robot: str, sim: SimConfig) -> LocomotionConfig:
    """The same MDP on a Menagerie robot, with mjlab's share of standing commands (its velocity tasks on the same
    robots: docs/tasks.md, "Against mjlab 1.6.0"); a robot that must learn to stand still sees it 10% of the time."""
    commands = dataclasses.replace(cfg.commands, standing_fraction=0.1)
    return dataclasses.replace(cfg, robot=robot, sim=sim, commands=commands)


def unitree_go1_flat_config() -> LocomotionConfig:
    """``go1_flat_config`` on Menagerie's Unitree Go1 (its own position actuators and collision geoms), with mjlab's
    joint-limit penalty."""
    cfg = _menagerie(go1_flat_config(), "unitree_go1", _sim(nconmax=32, njmax=128))
    return dataclasses.replace(cfg, rewards=dataclasses.replace(cfg.rewards, joint_limits=-1.0))


def unitree_go1_rough_config() -> LocomotionConfig:
    """``go1_rough_config`` on Menagerie's Unitree Go1, with mjlab's joint-limit penalty. No actuator damping
    randomization: Menagerie's Go1 damps in its joints, its actuators' damping gain is 0."""
    cfg = _menagerie(go1_rough_config(), "unitree_go1", _sim(nconmax=48, njmax=192))
    return dataclasses.replace(
        cfg,
        rewards=dataclasses.replace(cfg.rewards, joint_limits=-1.0),
        randomization=dataclasses.replace(cfg.randomization, kd_scale=None),
    )


def unitree_g1_flat_config() -> LocomotionConfig:
    """``humanoid_flat_config`` on Menagerie's Unitree G1 (29 position servos)."""
    return _menagerie(humanoid_flat_config(), "unitree_g1", _sim(nconmax=48, njmax=200))


def unitree_g1_rough_config() -> LocomotionConfig:
    """``humanoid_rough_config`` on Menagerie's Unitree G1."""
    return _menagerie(humanoid_rough_config(), "unitree_g1", _sim(nconmax=64, njmax=256))


def unitree_go1_flat_agent() -> AgentConfig:
    """800 iterations: on the CPU its policy played at 0.73 after 520, 0.83 after 576 and 0.91 after 750
    (docs/tasks.md); ``--stop-when`` ends a run earlier."""
    return dataclasses.replace(go1_flat_agent(), experiment_name="unitree_go1_velocity_flat", max_iterations=800)


def unitree_go1_rough_agent() -> AgentConfig:
    return dataclasses.replace(go1_rough_agent(), experiment_name="unitree_go1_velocity_rough")


def _mjlab_entropy(agent: AgentConfig) -> AgentConfig:
    """mjlab's G1 entropy bonus (0.01) instead of the primitive humanoid's 0.008."""
    return dataclasses.replace(agent, algorithm=dataclasses.replace(agent.algorithm, entropy_coef=0.01))


def unitree_g1_flat_agent() -> AgentConfig:
    return _mjlab_entropy(dataclasses.replace(humanoid_flat_agent(), experiment_name="unitree_g1_velocity_flat"))


def unitree_g1_rough_agent() -> AgentConfig:
    return _mjlab_entropy(dataclasses.replace(humanoid_rough_agent(), experiment_name="unitree_g1_velocity_rough"))

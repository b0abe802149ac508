"""Complete default environment and PPO configs of the built-in locomotion tasks: the defaults of
:mod:`~mjfleet.tasks.locomotion.defaults` for the robots shipped with mjfleet."""

from __future__ import annotations

import dataclasses

from mjfleet.envs.config import EnvConfig
from mjfleet.rl.config import AgentConfig
from mjfleet.tasks.locomotion.config import LocomotionConfig
from mjfleet.tasks.locomotion.defaults import (
    CPU_TRAINING_CONTACTS,
    biped_flat_config,
    biped_rough_config,
    cpu_agent,
    locomotion_agent,
    locomotion_sim,
    quadruped_flat_config,
    quadruped_rough_config,
)
from mjfleet.tasks.locomotion.robots import GO1, HUMANOID, UNITREE_G1, UNITREE_GO1


def go1_flat_config() -> LocomotionConfig:
    """Go1 on a plane: omnidirectional commands up to 1 m/s and 1 rad/s, light randomization, no noise."""
    return quadruped_flat_config(GO1, locomotion_sim(nconmax=16, njmax=64))


def go1_rough_config() -> LocomotionConfig:
    """Go1 on the tiled heightfield with the curriculum, full randomization, pushes and observation noise."""
    return quadruped_rough_config(GO1, locomotion_sim(nconmax=32, njmax=128))


CPU_TRAINING_ENVS = 896
"""``--env.num-envs`` on the CPU of the tasks whose CPU defaults were measured with 896 environments training beside
128 evaluating (1,024 simulated): the evaluation's come on top, and on the CPU every simulated environment costs."""


GO1_CPU_TRACKING = (2.25, 1.125)
"""Weights of the primitive Go1's two tracking terms on the CPU (planar velocity, yaw rate): 1.5 times the quadruped's
1.5 and 0.75: the tracking outweighs the penalties sooner. Its deterministic policy met ``--stop-when
'success>=0.95'`` after 157, 141 and 175 iterations (seeds 42, 1, 2; `play` 0.97, 0.98, 0.97) where the quadruped's
weights took 184, 194 and 209 (`play` 0.95, 0.93, 0.91): docs/performance.md."""


def go1_flat_cpu_config() -> LocomotionConfig:
    """``go1_flat_config`` with the environments its CPU defaults were measured with and ``GO1_CPU_TRACKING`` (the
    GPU's weights stay the quadruped's: not measured there)."""
    return dataclasses.replace(_tracking(go1_flat_config(), *GO1_CPU_TRACKING), num_envs=CPU_TRAINING_ENVS)


def _tracking(cfg: LocomotionConfig, lin_vel_xy: float, yaw_rate: float) -> LocomotionConfig:
    """``cfg`` with the weights of its two tracking terms (planar velocity, yaw rate)."""
    rewards = dataclasses.replace(cfg.rewards, track_lin_vel_xy=lin_vel_xy, track_yaw_rate=yaw_rate)
    return dataclasses.replace(cfg, rewards=rewards)


def humanoid_flat_config() -> LocomotionConfig:
    """G1-class humanoid on a plane: forward 0-1 m/s, sideways +-0.5 m/s, turning +-1 rad/s."""
    return biped_flat_config(HUMANOID, locomotion_sim(nconmax=32, njmax=160))


def humanoid_flat_cpu_config() -> LocomotionConfig:
    """``humanoid_flat_config`` with the environments its CPU defaults were measured with."""
    return dataclasses.replace(humanoid_flat_config(), num_envs=CPU_TRAINING_ENVS)


def humanoid_rough_config() -> LocomotionConfig:
    """G1-class humanoid on the tiled heightfield (gentler stairs and slopes), full randomization and noise."""
    return biped_rough_config(HUMANOID, locomotion_sim(nconmax=48, njmax=200))


def go1_flat_agent() -> AgentConfig:
    """Small networks; a few hundred iterations on a GPU."""
    return locomotion_agent(300, (128, 128, 128))


def go1_flat_cpu_agent() -> AgentConfig:
    """On the CPU the update of 128-128-128 networks costs as much as the physics. Networks of 64-64 cost a third as
    much per pass, which pays for 8 passes over each rollout instead of 5; a KL target of 0.02 lets the adaptive
    learning rate take larger steps. Together 0.47-0.64 of the time to ``--stop-when 'success>=0.95'`` on 2 cores
    over three seeds, with policies that play as well (docs/notes/performance_log.md, "Second sitting"; the current
    time is in docs/performance.md, "What to expect"). No entropy bonus: the action noise then shrinks from 1.0 to
    ~0.3 by iteration 125 instead of ~0.65, and the deterministic policy that ``--stop-when`` reads walks sooner
    (184, 194, 209 iterations for seeds 42, 1, 2 against 232, 190, 237 with 0.01). Menagerie's Go1, whose action
    scale is a quarter of this one's, learned slower without it (``unitree_go1_flat_cpu_agent``)."""
    return _entropy(cpu_agent(go1_flat_agent(), (64, 64)), 0.0)


def go1_flat_off_policy(env: EnvConfig, agent: AgentConfig, on_cpu: bool) -> tuple[EnvConfig, AgentConfig]:
    """The off-policy learners' go1-velocity-flat on the CPU, found with ``fast-td3``: 64 environments of 4 steps an
    iteration, 16 gradient steps of 512 transitions each (every transition used 32 times: on 2 cores a gradient step
    costs far more than an environment step), a discount of 0.97 and ``fast-td3``'s exploration noise drawn from
    [0.2, 0.8] (FastTD3's for quadrupeds), 16 evaluation environments, and checkpoints every 500 of its many small
    iterations. On GPUs the generic settings stay (not measured there)."""
    if not on_cpu:
        return env, agent
    env = dataclasses.replace(env, num_envs=64)
    agent = dataclasses.replace(
        agent,
        num_steps_per_env=4,
        eval_envs=16,
        max_iterations=16000,  # above every recorded run's (docs/results/learners.json)
        save_interval=500,
    )
    agent = agent.with_off_policy(batch_size=512, gradient_steps=16, gamma=0.97)
    return env, dataclasses.replace(agent, fast_td3=dataclasses.replace(agent.fast_td3, noise_min=0.2, noise_max=0.8))


def go1_rough_agent() -> AgentConfig:
    """Larger networks and a long run for the terrain curriculum."""
    return locomotion_agent(1500, (512, 256, 128))


def humanoid_flat_agent() -> AgentConfig:
    """Humanoids need longer to learn to balance before they walk."""
    return locomotion_agent(1500, (256, 128, 128), entropy_coef=0.008)


def humanoid_flat_cpu_agent() -> AgentConfig:
    """The levers of ``go1_flat_cpu_agent`` at the humanoid's scale: 128-128 networks (a pass of the update costs 0.14 s
    there against 0.25 s with 256-128-128 on 2 cores), 8 passes over each rollout, a KL target of 0.02. On 2 cores
    ``--stop-when 'success>=0.95'`` exits after 14:16 instead of 32:32 (326 iterations instead of 713) for seed 42 and
    16:05 instead of 27:28 for seed 1, with policies that play as well (docs/notes/performance_log.md, "The humanoid on
    the same 2 cores"; the current time is in docs/performance.md, "What to expect")."""
    return cpu_agent(humanoid_flat_agent(), (128, 128))


def humanoid_rough_agent() -> AgentConfig:
    """The longest run: balance, walking, then the curriculum."""
    return locomotion_agent(3000, (512, 256, 128), entropy_coef=0.008)


# --- Menagerie robots: the same MDPs on MuJoCo Menagerie's Unitree models --------------------------------------------
# Constraint pools are larger than the primitive models': Menagerie's Go1 has joint friction (one row per joint),
# elliptic condim-6 feet (6 rows per contact) and self-collisions; the G1 has 29 joints.


def _menagerie(cfg: LocomotionConfig) -> LocomotionConfig:
    """The same MDP on a Menagerie robot, with mjlab's share of standing commands (its velocity tasks on the same
    robots: docs/mjlab.md); a robot that must learn to stand still sees it 10% of the time."""
    return dataclasses.replace(cfg, commands=dataclasses.replace(cfg.commands, standing_fraction=0.1))


def unitree_go1_flat_config() -> LocomotionConfig:
    """``go1_flat_config`` on Menagerie's Unitree Go1 (its own position actuators and collision geoms), with mjlab's
    joint-limit penalty."""
    cfg = _menagerie(
        quadruped_flat_config(
            UNITREE_GO1, locomotion_sim(nconmax=32, njmax=128, training_contacts=CPU_TRAINING_CONTACTS)
        )
    )
    return dataclasses.replace(cfg, rewards=dataclasses.replace(cfg.rewards, joint_limits=-1.0))


UNITREE_GO1_CPU_ACTION_SCALE = 0.06
"""``--env.action-scale`` of Menagerie's Go1 on the CPU: a quarter of the hip and thigh actuators' force limit over
their gain (0.25 x 23.7 / 100 rad), where 0.25 rad asks for targets the actuators cannot reach. On 2 CPU cores
(seeds 42, 1, 2) the deterministic policy met ``--stop-when 'success>=0.95'`` after 182, 189 and 177 iterations
(play 0.93, 0.96, 0.91) where 0.25 took 348 and 306 (play 0.96, 0.92) and had not met it at 321 for seed 2."""


UNITREE_GO1_CPU_ENTROPY = 0.005
"""PPO's entropy bonus for Menagerie's Go1 on the CPU, half the GPU's: seeds 42, 1, 2 met ``--stop-when
'success>=0.95'`` after 202, 205 and 253 iterations against 205, 331 and 251 with 0.01. Without a bonus it learned
slower (its actions are scaled to a quarter of the primitive Go1's)."""


def unitree_go1_flat_cpu_config() -> LocomotionConfig:
    """``unitree_go1_flat_config`` with the action scale measured on the CPU (the GPU's is still 0.25: not measured
    there)."""
    return dataclasses.replace(unitree_go1_flat_config(), action_scale=UNITREE_GO1_CPU_ACTION_SCALE)


def unitree_go1_rough_config() -> LocomotionConfig:
    """``go1_rough_config`` on Menagerie's Unitree Go1, with mjlab's joint-limit penalty. No actuator damping
    randomization: Menagerie's Go1 damps in its joints, its actuators' damping gain is 0."""
    cfg = _menagerie(
        quadruped_rough_config(
            UNITREE_GO1, locomotion_sim(nconmax=48, njmax=192, training_contacts=CPU_TRAINING_CONTACTS)
        )
    )
    return dataclasses.replace(
        cfg,
        rewards=dataclasses.replace(cfg.rewards, joint_limits=-1.0),
        randomization=dataclasses.replace(cfg.randomization, kd_scale=None),
    )


def unitree_go1_rough_cpu_config() -> LocomotionConfig:
    """``unitree_go1_rough_config`` with the flat task's CPU action scale (the same actuators saturate the same way on
    rough ground)."""
    return dataclasses.replace(unitree_go1_rough_config(), action_scale=UNITREE_GO1_CPU_ACTION_SCALE)


G1_CPU_TRAINING_CONTACTS = dataclasses.replace(CPU_TRAINING_CONTACTS, self_collisions=True)
"""The G1's training contact model on the CPU keeps its self-collisions: a G1 policy trained without them stood for
all 1,000 steps of its episodes on that model and fell after 188 on average on the file as shipped (16 episodes,
iteration 150), where its legs meet; with only the self-collisions of the file back, it stood again."""


def unitree_g1_flat_config() -> LocomotionConfig:
    """``humanoid_flat_config`` on Menagerie's Unitree G1 (29 position servos)."""
    return _menagerie(
        biped_flat_config(UNITREE_G1, locomotion_sim(nconmax=48, njmax=200, training_contacts=G1_CPU_TRAINING_CONTACTS))
    )


UNITREE_G1_CPU_TRACKING = 2.0
"""Weight of both tracking terms of Menagerie's G1 on the CPU (mjlab's; the humanoid's 1.0 leaves ``alive`` at twice
the tracking): with 1.0 its deterministic policy stood without walking through 428 iterations (`play` 0.06-0.11);
with 2.0 it walked (`play` 0.47 after 401 iterations with the entropy bonus 0.01)."""

UNITREE_G1_CPU_ACTION_SCALE_OF_FORCE = 0.25
"""``--env.action-scale-of-force`` of Menagerie's G1 on the CPU: each joint's action scale a quarter of its servo's
torque limit over its gain, as for the Go1 (knees 0.46 rad, ankles 0.63, shoulders 0.08, wrists 0.06-0.31, where one
0.25 rad for every joint asks the arms for more than they can exert and the legs for less). On Menagerie's g1.xml
seeds 42 and 1 met ``--stop-when 'success>=0.95'`` after 468 and 470 iterations (`play` 0.95, 0.93) where 0.25 rad
took 538 and 672 (`play` 0.97, 0.93); seed 2 after 506 (`play` 0.95)."""


def unitree_g1_flat_cpu_config() -> LocomotionConfig:
    """``unitree_g1_flat_config`` with the tracking weights and action scales measured on the CPU (the GPU's stay 1.0
    and 0.25 rad: not measured there)."""
    return _g1_cpu(unitree_g1_flat_config())


def _g1_cpu(cfg: LocomotionConfig) -> LocomotionConfig:
    tracked = _tracking(cfg, UNITREE_G1_CPU_TRACKING, UNITREE_G1_CPU_TRACKING)
    return dataclasses.replace(tracked, action_scale_of_force=UNITREE_G1_CPU_ACTION_SCALE_OF_FORCE)


def unitree_g1_rough_config() -> LocomotionConfig:
    """``humanoid_rough_config`` on Menagerie's Unitree G1."""
    return _menagerie(
        biped_rough_config(
            UNITREE_G1, locomotion_sim(nconmax=64, njmax=256, training_contacts=G1_CPU_TRAINING_CONTACTS)
        )
    )


def unitree_g1_rough_cpu_config() -> LocomotionConfig:
    """``unitree_g1_rough_config`` with the flat task's CPU tracking weights and action scales."""
    return _g1_cpu(unitree_g1_rough_config())


def unitree_go1_flat_agent() -> AgentConfig:
    """800 iterations: on the CPU its policy played at 0.73 after 520, 0.83 after 576 and 0.91 after 750
    (docs/notes/training_log.md); ``--stop-when`` ends a run earlier."""
    return dataclasses.replace(go1_flat_agent(), max_iterations=800)


def unitree_go1_flat_cpu_agent() -> AgentConfig:
    """The levers of ``go1_flat_cpu_agent`` on Menagerie's Go1: 64-64 networks, 8 passes, KL target 0.02; and
    ``UNITREE_GO1_CPU_ENTROPY``."""
    return _entropy(cpu_agent(unitree_go1_flat_agent(), (64, 64)), UNITREE_GO1_CPU_ENTROPY)


def _entropy(agent: AgentConfig, coef: float) -> AgentConfig:
    return dataclasses.replace(agent, algorithm=dataclasses.replace(agent.algorithm, entropy_coef=coef))


def _mjlab_entropy(agent: AgentConfig) -> AgentConfig:
    """mjlab's G1 entropy bonus (0.01) instead of the primitive humanoid's 0.008."""
    return _entropy(agent, 0.01)


def unitree_g1_flat_agent() -> AgentConfig:
    return _mjlab_entropy(humanoid_flat_agent())


def unitree_g1_flat_cpu_agent() -> AgentConfig:
    """The levers of ``humanoid_flat_cpu_agent`` on Menagerie's G1: 128-128 networks, 8 passes, KL target 0.02; and
    half mjlab's entropy bonus: with 0.01 over 29 joints the action noise grew to a standard deviation of 1.6 and the
    deterministic policy, 0.47 at iteration 401, fell back to 0.30 by 639; with 0.005 the noise stays near 0.8."""
    return _entropy(cpu_agent(humanoid_flat_agent(), (128, 128)), 0.005)


def unitree_g1_rough_agent() -> AgentConfig:
    return _mjlab_entropy(humanoid_rough_agent())


UNITREE_G1_ROUGH_CPU_ITERATIONS = 1500
"""The rough G1's run length on the CPU, half the GPU's 3000 (3 h 10 min on 2 cores at 3.8 s per iteration). In a
run of 1612 iterations at these defaults (seed 42) the evaluation's success was 0.91, 0.92 and 0.94 over iterations
1001-1200, 1201-1400 and 1401-1612 with its planar error at 0.14-0.15 throughout, and the mean training terrain level
peaked around 1100; the checkpoint of iteration 1612 played 0.98 on the curriculum's first levels and 0.87 on all five
(docs/notes/performance_log.md). The Go1's rough task runs 1500 iterations too."""


def unitree_g1_rough_cpu_agent() -> AgentConfig:
    """The flat task's CPU levers and entropy bonus; ``UNITREE_G1_ROUGH_CPU_ITERATIONS``."""
    agent = _entropy(cpu_agent(humanoid_rough_agent(), (128, 128)), 0.005)
    return dataclasses.replace(agent, max_iterations=UNITREE_G1_ROUGH_CPU_ITERATIONS)


def unitree_go1_rough_cpu_agent() -> AgentConfig:
    """The flat task's CPU levers (8 passes, KL target 0.02) with 128-128 networks rather than its 64-64: the critic
    also reads the 77-point height scan, and the terrain asks more of the policy than flat ground. The flat task's
    entropy bonus too: with 0.01 the action noise grew to 1.14 over 1500 iterations on rough ground, with 0.005 it
    stays at 0.71-0.74 and the final policy plays 0.76 on the curriculum's first levels against 0.59 (seed 42)."""
    return _entropy(cpu_agent(go1_rough_agent(), (128, 128)), UNITREE_GO1_CPU_ENTROPY)

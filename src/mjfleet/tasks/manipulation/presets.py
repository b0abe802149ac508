"""The default configs of the manipulation tasks on the YAM arm (no simulator imports)."""

from __future__ import annotations

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.sim.config import SimConfig
from mjfleet.tasks.manipulation.config import LiftConfig, ReachConfig

REACH_TASK = "mjfleet.tasks.manipulation.reach:ReachTask"
"""``TaskSpec.task_class`` of a reach task."""
LIFT_CUBE_TASK = "mjfleet.tasks.manipulation.lift:LiftCubeTask"
"""``TaskSpec.task_class`` of a cube-lifting task."""


def manipulation_sim() -> SimConfig:
    """5 ms physics (the arm record's), 4 substeps: a 50 Hz policy."""
    return SimConfig(decimation=4)


def reach_config(arm: str) -> ReachConfig:
    """Arm ``arm``'s end-effector to targets in front of it, 4 s episodes."""
    return ReachConfig(num_envs=1024, episode_length_s=4.0, arm=arm, sim=manipulation_sim())


def lift_cube_config(arm: str) -> LiftConfig:
    """Arm ``arm`` lifts a randomized cube to a goal in the air, 8 s episodes; elliptic friction cones for the grasp.

    The recipe with which the YAM learns it: the arm's targets filtered, a quarter of the training episodes started
    with the cube in the hand and a quarter with the open hand around it on the table (both need the arm record's
    ``grasp_pose``; without one every episode starts on the table), the grasp, height and lifted terms on and the goal
    terms (``lift``, ``lift_precise``, ``carry``) weighed 4. Without the filter, the in-hand starts or those terms the
    YAM's policies learnt to hold the cube on the table, or on it, but not to lift it; without the starts around the
    cube they lifted it late or never; without ``carry`` some held it short of the goal (docs/manipulation.md)."""
    cfg = LiftConfig(
        num_envs=1024,
        episode_length_s=8.0,
        arm=arm,
        contact_cone="elliptic",
        impratio=10.0,
        sim=SimConfig(decimation=4, nconmax=32, njmax=160),
        action_filter=0.1,
        start_in_hand=0.25,
        start_at_cube=0.25,
    )
    cfg.rewards.grasp, cfg.rewards.height, cfg.rewards.lifted = 1.0, 2.0, 2.0
    cfg.rewards.lift, cfg.rewards.lift_precise, cfg.rewards.carry = 4.0, 4.0, 4.0
    return cfg


def yam_reach_config() -> ReachConfig:
    """The YAM's end-effector to targets in front of it."""
    return reach_config("yam")


def yam_reach_cpu_config() -> ReachConfig:
    """``yam_reach_config`` with as many environments as 2 CPU cores step quickly."""
    cfg = yam_reach_config()
    cfg.num_envs = 256
    return cfg


def yam_lift_cube_config() -> LiftConfig:
    """The YAM lifts a randomized cube to a goal in the air (:func:`lift_cube_config`'s recipe)."""
    return lift_cube_config("yam")


def yam_lift_cube_cpu_config() -> LiftConfig:
    """``yam_lift_cube_config`` with as many environments as 2 CPU cores step quickly."""
    cfg = yam_lift_cube_config()
    cfg.num_envs = 256
    return cfg


def manipulation_agent(iterations: int, hidden: tuple[int, ...]) -> AgentConfig:
    """PPO settings of the manipulation tasks. The experiment name is the task's."""
    return AgentConfig(
        max_iterations=iterations,
        num_steps_per_env=24,
        save_interval=50,
        policy=PolicyConfig(actor_hidden_dims=hidden, critic_hidden_dims=hidden, init_std=1.0),
        algorithm=AlgorithmConfig(entropy_coef=0.005),
    )


def on_the_cpu(agent: AgentConfig) -> AgentConfig:
    """``agent`` for the CPU's 256 environments: the evaluation's own simulation (16 of them) steps on every second
    training step until the run nears its condition, where on every one it cost 7-8% of an iteration (its per-call
    work is most of a step this small)."""
    agent.eval_step_interval = 2
    return agent


def yam_reach_agent() -> AgentConfig:
    return manipulation_agent(500, (128, 128))


def yam_reach_cpu_agent() -> AgentConfig:
    return on_the_cpu(yam_reach_agent())


def yam_lift_cube_agent() -> AgentConfig:
    return manipulation_agent(3000, (256, 128, 64))


def yam_lift_cube_cpu_agent() -> AgentConfig:
    return on_the_cpu(yam_lift_cube_agent())

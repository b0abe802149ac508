"""The tasks and robots shipped with mjfleet: a source like a package's entry point, loaded first by the registry.

Task classes are given by path: they load the simulator, configs do not.
"""

from __future__ import annotations

import dataclasses

from mjfleet.envs.config import EnvConfig
from mjfleet.rl.config import AgentConfig, PolicyConfig
from mjfleet.tasks.cartpole.config import balance_config, swingup_config
from mjfleet.tasks.legged import LOCOMOTION_TASK
from mjfleet.tasks.locomotion import presets as loco
from mjfleet.tasks.locomotion.robots import BUILTIN_ROBOTS, RobotSpec
from mjfleet.tasks.locomotion.sources import menagerie_description
from mjfleet.tasks.manipulation import presets as manip
from mjfleet.tasks.manipulation.arms import BUILTIN_ARMS, ArmSpec
from mjfleet.tasks.spec import TaskSpec
from mjfleet.tasks.tracking import presets as tracking


def _cartpole_agent(iterations: int) -> AgentConfig:
    return AgentConfig(
        max_iterations=iterations,
        num_steps_per_env=32,
        save_interval=50,
        policy=PolicyConfig(actor_hidden_dims=(64, 64), critic_hidden_dims=(64, 64)),
        # Its episodes span 8-16 iterations already; stepping a separate evaluation 4 times per step costs its cheap
        # physics more in calls than the lag it saves (bench on 2 cores: 95-109k against 125-145k env-steps/s).
        eval_steps_per_step=1,
    )


# Module-level functions rather than lambdas: specs built by two calls of tasks() compare equal.
def _balance_agent() -> AgentConfig:
    return _cartpole_agent(80)


def _swingup_agent() -> AgentConfig:
    return _cartpole_agent(150)


def _cartpole_off_policy(env: EnvConfig, agent: AgentConfig, iterations: int) -> tuple[EnvConfig, AgentConfig]:
    """SAC's and TD3's cart-pole: 64 environments of 8 steps an iteration, 16 gradient steps of 512 transitions each
    (every transition used 16 times), 16 evaluation environments, and ``iterations`` enough for their many small
    updates."""
    env = dataclasses.replace(env, num_envs=64)
    agent = dataclasses.replace(agent, num_steps_per_env=8, eval_envs=16, max_iterations=iterations)
    return env, agent.with_off_policy(batch_size=512, gradient_steps=16)


def _balance_off_policy(env: EnvConfig, agent: AgentConfig, on_cpu: bool) -> tuple[EnvConfig, AgentConfig]:
    return _cartpole_off_policy(env, agent, 3000)  # above every recorded run's (docs/results/learners.json)


def _swingup_off_policy(env: EnvConfig, agent: AgentConfig, on_cpu: bool) -> tuple[EnvConfig, AgentConfig]:
    return _cartpole_off_policy(env, agent, 6000)  # above every recorded run's (docs/results/learners.json)


_CARTPOLE = "mjfleet.tasks.cartpole.cartpole:CartpoleTask"


def tasks() -> list[TaskSpec | RobotSpec | ArmSpec]:
    """The built-in robot and arm records and tasks."""
    return [
        *BUILTIN_ROBOTS,
        *BUILTIN_ARMS,
        TaskSpec(
            "cartpole-balance",
            "Keep a pole upright on a cart for 5 s, starting near upright.",
            _CARTPOLE,
            balance_config,
            _balance_agent,
            off_policy=_balance_off_policy,
        ),
        TaskSpec(
            "cartpole-swingup",
            "Swing a hanging pole up by pushing its cart, then balance it (10 s episodes).",
            _CARTPOLE,
            swingup_config,
            _swingup_agent,
            off_policy=_swingup_off_policy,
        ),
        TaskSpec(
            "go1-velocity-flat",
            "Go1 quadruped follows random forward/sideways/turn velocity commands on flat ground.",
            LOCOMOTION_TASK,
            loco.go1_flat_config,
            loco.go1_flat_agent,
            cpu_agent_cfg=loco.go1_flat_cpu_agent,
            cpu_env_cfg=loco.go1_flat_cpu_config,
            off_policy=loco.go1_flat_off_policy,
        ),
        TaskSpec(
            "go1-velocity-rough",
            "Go1 follows velocity commands over bumps, slopes and stairs (curriculum, randomization).",
            LOCOMOTION_TASK,
            loco.go1_rough_config,
            loco.go1_rough_agent,
        ),
        TaskSpec(
            "humanoid-velocity-flat",
            "G1-class humanoid walks to follow forward/sideways/turn velocity commands on flat ground.",
            LOCOMOTION_TASK,
            loco.humanoid_flat_config,
            loco.humanoid_flat_agent,
            cpu_agent_cfg=loco.humanoid_flat_cpu_agent,
            cpu_env_cfg=loco.humanoid_flat_cpu_config,
        ),
        TaskSpec(
            "humanoid-velocity-rough",
            "G1-class humanoid walks over bumps, slopes and stairs (curriculum, randomization).",
            LOCOMOTION_TASK,
            loco.humanoid_rough_config,
            loco.humanoid_rough_agent,
        ),
        *_menagerie_tasks(),
        *_manipulation_tasks(),
    ]


def _menagerie_tasks() -> list[TaskSpec]:
    """The locomotion MDPs on MuJoCo Menagerie's Unitree Go1 and G1 (files from the mujoco-menagerie cache)."""
    go1 = "Menagerie Unitree Go1 follows velocity commands"
    g1 = "Menagerie Unitree G1 walks to follow velocity commands"
    return [
        TaskSpec(
            "unitree-go1-velocity-flat",
            menagerie_description("unitree_go1", f"{go1} on flat ground."),
            LOCOMOTION_TASK,
            loco.unitree_go1_flat_config,
            loco.unitree_go1_flat_agent,
            cpu_agent_cfg=loco.unitree_go1_flat_cpu_agent,
            cpu_env_cfg=loco.unitree_go1_flat_cpu_config,
        ),
        TaskSpec(
            "unitree-go1-velocity-rough",
            menagerie_description("unitree_go1", f"{go1} over bumps, slopes and stairs (curriculum, randomization)."),
            LOCOMOTION_TASK,
            loco.unitree_go1_rough_config,
            loco.go1_rough_agent,
            cpu_agent_cfg=loco.unitree_go1_rough_cpu_agent,
            cpu_env_cfg=loco.unitree_go1_rough_cpu_config,
        ),
        TaskSpec(
            "unitree-g1-velocity-flat",
            menagerie_description("unitree_g1", f"{g1} on flat ground."),
            LOCOMOTION_TASK,
            loco.unitree_g1_flat_config,
            loco.unitree_g1_flat_agent,
            cpu_agent_cfg=loco.unitree_g1_flat_cpu_agent,
            cpu_env_cfg=loco.unitree_g1_flat_cpu_config,
        ),
        TaskSpec(
            "unitree-g1-velocity-rough",
            menagerie_description("unitree_g1", f"{g1} over bumps, slopes and stairs (curriculum, randomization)."),
            LOCOMOTION_TASK,
            loco.unitree_g1_rough_config,
            loco.unitree_g1_rough_agent,
            cpu_agent_cfg=loco.unitree_g1_rough_cpu_agent,
            cpu_env_cfg=loco.unitree_g1_rough_cpu_config,
        ),
        TaskSpec(
            "unitree-g1-tracking",
            menagerie_description(
                "unitree_g1", "Unitree G1 follows a reference motion (--env.motion: a retargeted CSV or npz)."
            ),
            "mjfleet.tasks.tracking.task:TrackingTask",
            tracking.unitree_g1_tracking_config,
            tracking.unitree_g1_tracking_agent,
            cpu_agent_cfg=tracking.unitree_g1_tracking_cpu_agent,
        ),
    ]


def _manipulation_tasks() -> list[TaskSpec]:
    """Reaching and lifting with MuJoCo Menagerie's I2RT YAM arm (files from the mujoco-menagerie cache)."""
    return [
        TaskSpec(
            "yam-reach",
            menagerie_description(
                "i2rt_yam", "Menagerie I2RT YAM arm (MIT) brings its gripper to random targets in front of it."
            ),
            manip.REACH_TASK,
            manip.yam_reach_config,
            manip.yam_reach_agent,
            cpu_env_cfg=manip.yam_reach_cpu_config,
            cpu_agent_cfg=manip.yam_reach_cpu_agent,
        ),
        TaskSpec(
            "yam-lift-cube",
            menagerie_description(
                "i2rt_yam", "Menagerie I2RT YAM arm (MIT) grasps a randomized cube and lifts it to a goal."
            ),
            manip.LIFT_CUBE_TASK,
            manip.yam_lift_cube_config,
            manip.yam_lift_cube_agent,
            cpu_env_cfg=manip.yam_lift_cube_cpu_config,
            cpu_agent_cfg=manip.yam_lift_cube_cpu_agent,
        ),
    ]

"""Everything a package needs to add a legged robot and its velocity tasks to mjfleet (docs/your_robot.md).

A package declares a :class:`RobotSpec` (its MJCF, base body, feet and contact zones, home pose, servos) and
:class:`TaskSpec`\\ s whose configs come from the functions here, and returns them from a function named under the
``mjfleet.tasks`` entry-point group of its ``pyproject.toml``::

    [project.entry-points."mjfleet.tasks"]
    my_robot = "my_robot.tasks:tasks"

The built-in robots and tasks are declared the same way (``mjfleet.tasks.builtin``). Nothing here imports torch or
MuJoCo, so ``list-tasks`` and command-line parsing stay fast.
"""

from __future__ import annotations

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
from mjfleet.tasks.locomotion.defaults import (
    EPISODE_LENGTH_S,
    biped_flat_config,
    biped_rewards,
    biped_rough_config,
    cpu_agent,
    light_randomization,
    locomotion_agent,
    locomotion_sim,
    on_rough_ground,
    quadruped_flat_config,
    quadruped_rewards,
    quadruped_rough_config,
    rough_randomization,
)
from mjfleet.tasks.locomotion.robots import GeomKind, RobotSpec, Servo, Zone
from mjfleet.tasks.spec import TaskSpec

LOCOMOTION_TASK = "mjfleet.tasks.locomotion.task:LocomotionTask"
"""``TaskSpec.task_class`` of a velocity task (the class is imported when an environment is built)."""

__all__ = [
    "EPISODE_LENGTH_S",
    "LOCOMOTION_TASK",
    "AgentConfig",
    "AlgorithmConfig",
    "CommandConfig",
    "GeomKind",
    "LocomotionConfig",
    "LocomotionRewards",
    "NoiseConfig",
    "PolicyConfig",
    "RandomizationConfig",
    "RobotSpec",
    "Servo",
    "SimConfig",
    "TaskSpec",
    "TerrainConfig",
    "Zone",
    "biped_flat_config",
    "biped_rewards",
    "biped_rough_config",
    "cpu_agent",
    "light_randomization",
    "locomotion_agent",
    "locomotion_sim",
    "on_rough_ground",
    "quadruped_flat_config",
    "quadruped_rewards",
    "quadruped_rough_config",
    "rough_randomization",
]

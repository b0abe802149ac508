"""Everything a package needs to add an arm and its manipulation tasks to mjfleet (docs/manipulation.md).

A package declares an :class:`ArmSpec` (its MJCF, end-effector site, hand, gripper, fingertips, home pose) and
:class:`TaskSpec`\\ s whose configs come from the functions here, and returns them from a function named under the
``mjfleet.tasks`` entry-point group of its ``pyproject.toml``, as a legged robot's package does
(:mod:`mjfleet.tasks.legged`)::

    [project.entry-points."mjfleet.tasks"]
    my_arm = "my_arm.tasks:tasks"

The built-in YAM arm and its tasks are declared the same way (``mjfleet.tasks.builtin``). Nothing here imports torch
or MuJoCo, so ``list-tasks`` and command-line parsing stay fast.
"""

from __future__ import annotations

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.sim.config import SimConfig
from mjfleet.tasks.locomotion.robots import GeomKind, Zone
from mjfleet.tasks.manipulation.arms import ArmSpec
from mjfleet.tasks.manipulation.config import (
    Box3,
    CubeConfig,
    LiftConfig,
    LiftRewards,
    ManipulationConfig,
    ReachConfig,
    ReachRewards,
    TableConfig,
)
from mjfleet.tasks.manipulation.presets import (
    LIFT_CUBE_TASK,
    REACH_TASK,
    lift_cube_config,
    manipulation_agent,
    manipulation_sim,
    reach_config,
)
from mjfleet.tasks.spec import TaskSpec

__all__ = [
    "LIFT_CUBE_TASK",
    "REACH_TASK",
    "AgentConfig",
    "AlgorithmConfig",
    "ArmSpec",
    "Box3",
    "CubeConfig",
    "GeomKind",
    "LiftConfig",
    "LiftRewards",
    "ManipulationConfig",
    "PolicyConfig",
    "ReachConfig",
    "ReachRewards",
    "SimConfig",
    "TableConfig",
    "TaskSpec",
    "Zone",
    "lift_cube_config",
    "manipulation_agent",
    "manipulation_sim",
    "reach_config",
]

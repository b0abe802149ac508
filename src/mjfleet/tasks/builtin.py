"""The tasks shipped with mjfleet: a task source like a plugin's entry point, loaded first by the registry.

Task classes are given by path: they load the simulator, configs do not.
"""

from __future__ import annotations

from mjfleet.rl.config import AgentConfig, PolicyConfig
from mjfleet.tasks.cartpole.config import balance_config, swingup_config
from mjfleet.tasks.locomotion import presets as loco
from mjfleet.tasks.spec import TaskSpec


def _cartpole_agent(name: str, iterations: int) -> AgentConfig:
    return AgentConfig(
        experiment_name=name,
        max_iterations=iterations,
        num_steps_per_env=32,
        save_interval=50,
        policy=PolicyConfig(actor_hidden_dims=(64, 64), critic_hidden_dims=(64, 64)),
    )


# Module-level functions rather than lambdas: specs built by two calls of tasks() compare equal.
def _balance_agent() -> AgentConfig:
    return _cartpole_agent("cartpole_balance", 80)


def _swingup_agent() -> AgentConfig:
    return _cartpole_agent("cartpole_swingup", 150)


_CARTPOLE = "mjfleet.tasks.cartpole.cartpole:CartpoleTask"
_LOCOMOTION = "mjfleet.tasks.locomotion.task:LocomotionTask"


def tasks() -> list[TaskSpec]:
    """The built-in tasks."""
    return [
        TaskSpec(
            "cartpole-balance",
            "Keep a pole upright on a cart for 5 s, starting near upright.",
            _CARTPOLE,
            balance_config,
            _balance_agent,
        ),
        TaskSpec(
            "cartpole-swingup",
            "Swing a hanging pole up by pushing its cart, then balance it (10 s episodes).",
            _CARTPOLE,
            swingup_config,
            _swingup_agent,
        ),
        TaskSpec(
            "go1-velocity-flat",
            "Go1 quadruped follows random forward/sideways/turn velocity commands on flat ground.",
            _LOCOMOTION,
            loco.go1_flat_config,
            loco.go1_flat_agent,
        ),
        TaskSpec(
            "go1-velocity-rough",
            "Go1 follows velocity commands over bumps, slopes and stairs (curriculum, randomization).",
            _LOCOMOTION,
            loco.go1_rough_config,
            loco.go1_rough_agent,
        ),
        TaskSpec(
            "humanoid-velocity-flat",
            "G1-class humanoid walks to follow forward/sideways/turn velocity commands on flat ground.",
            _LOCOMOTION,
            loco.humanoid_flat_config,
            loco.humanoid_flat_agent,
        ),
        TaskSpec(
            "humanoid-velocity-rough",
            "G1-class humanoid walks over bumps, slopes and stairs (curriculum, randomization).",
            _LOCOMOTION,
            loco.humanoid_rough_config,
            loco.humanoid_rough_agent,
        ),
    ]

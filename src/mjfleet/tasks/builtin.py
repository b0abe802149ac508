"""The tasks shipped with mjfleet (task classes by path: they load the simulator, configs do not)."""

from __future__ import annotations

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.tasks.cartpole.config import balance_config, swingup_config
from mjfleet.tasks.registry import TaskSpec, register


def _cartpole_agent(name: str, iterations: int) -> AgentConfig:
    return AgentConfig(
        experiment_name=name,
        max_iterations=iterations,
        num_steps_per_env=32,
        save_interval=50,
        policy=PolicyConfig(actor_hidden_dims=(64, 64), critic_hidden_dims=(64, 64)),
        algorithm=AlgorithmConfig(learning_rate=1e-3, entropy_coef=0.005),
    )


register(
    TaskSpec(
        id="cartpole-balance",
        description="Keep a pole upright on a cart for 5 s, starting near upright.",
        task_class="mjfleet.tasks.cartpole.cartpole:CartpoleTask",
        env_cfg=balance_config,
        agent_cfg=lambda: _cartpole_agent("cartpole_balance", 80),
    )
)
register(
    TaskSpec(
        id="cartpole-swingup",
        description="Swing a hanging pole up by pushing its cart, then balance it (10 s episodes).",
        task_class="mjfleet.tasks.cartpole.cartpole:CartpoleTask",
        env_cfg=swingup_config,
        agent_cfg=lambda: _cartpole_agent("cartpole_swingup", 150),
    )
)


# --- locomotion ----------------------------------------------------------------------------------------------------
from mjfleet.tasks.locomotion import presets as _loco  # noqa: E402

LOCOMOTION_TASK = "mjfleet.tasks.locomotion.task:LocomotionTask"

register(
    TaskSpec(
        id="go1-velocity-flat",
        description="Go1 quadruped follows random forward/sideways/turn velocity commands on flat ground.",
        task_class=LOCOMOTION_TASK,
        env_cfg=_loco.go1_flat_config,
        agent_cfg=_loco.go1_flat_agent,
    )
)
register(
    TaskSpec(
        id="go1-velocity-rough",
        description="Go1 follows velocity commands over bumps, slopes and stairs (curriculum, randomization).",
        task_class=LOCOMOTION_TASK,
        env_cfg=_loco.go1_rough_config,
        agent_cfg=_loco.go1_rough_agent,
    )
)
register(
    TaskSpec(
        id="humanoid-velocity-flat",
        description="G1-class humanoid walks to follow forward/sideways/turn velocity commands on flat ground.",
        task_class=LOCOMOTION_TASK,
        env_cfg=_loco.humanoid_flat_config,
        agent_cfg=_loco.humanoid_flat_agent,
    )
)
register(
    TaskSpec(
        id="humanoid-velocity-rough",
        description="G1-class humanoid walks over bumps, slopes and stairs (curriculum, randomization).",
        task_class=LOCOMOTION_TASK,
        env_cfg=_loco.humanoid_rough_config,
        agent_cfg=_loco.humanoid_rough_agent,
    )
)

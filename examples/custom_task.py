"""Register a task variant from your own code and train it through the Python API.

Run with ``uv run python examples/custom_task.py``. A package of your own would instead expose a function returning
``TaskSpec``s under the ``mjfleet.tasks`` entry-point group (see docs/writing_tasks.md), so ``uv run train
<your-task>`` finds it.
"""

from __future__ import annotations

import dataclasses

from mjfleet.console import configure_logging
from mjfleet.rl.config import AgentConfig
from mjfleet.tasks.cartpole.cartpole import CartpoleRewards, CartpoleTask, balance_config
from mjfleet.tasks.registry import register
from mjfleet.tasks.spec import TaskSpec
from mjfleet.train import TrainConfig, run


def gentle_balance_config():
    """Balance with a strong effort penalty: the policy learns to push as little as it can."""
    cfg = balance_config()
    return dataclasses.replace(cfg, rewards=CartpoleRewards(alive=1.0, effort=-0.5))


register(
    TaskSpec(
        id="cartpole-gentle-balance",
        description="Balance the pole while pushing as little as possible.",
        task_class=CartpoleTask,
        env_cfg=gentle_balance_config,
        agent_cfg=lambda: AgentConfig(experiment_name="cartpole_gentle_balance", max_iterations=40),
    )
)


def train_config() -> TrainConfig:
    """What ``train cartpole-gentle-balance --gpu-ids None`` would train (its runs under its experiment's folder)."""
    cfg = TrainConfig(
        env=gentle_balance_config(),
        agent=AgentConfig(experiment_name="cartpole_gentle_balance", max_iterations=40),
        task="cartpole-gentle-balance",
    )
    cfg.gpu_ids = None  # the CPU (``--gpu-ids None``)
    return cfg


if __name__ == "__main__":
    configure_logging()
    results = run(train_config())
    print(f"finished at iteration {results[0].final_iteration}")

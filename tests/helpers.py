"""Small training configurations for tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mjfleet.config import TrainConfig
from mjfleet.tasks.registry import get_task


def small_train_config(
    task_id: str = "cartpole-balance",
    num_envs: int = 64,
    iterations: int = 3,
    steps: int = 16,
    seed: int = 0,
    log_root: Path | None = None,
    **overrides: object,
) -> TrainConfig:
    """A real but small training configuration (CPU, no random episode starts unless asked)."""
    spec = get_task(task_id)
    agent = dataclasses.replace(spec.agent_cfg(), max_iterations=iterations, num_steps_per_env=steps, save_interval=1)
    env = dataclasses.replace(spec.env_cfg(), num_envs=num_envs)
    cfg = TrainConfig(env=env, agent=agent, task=task_id, seed=seed, gpu_ids=("None",), init_at_random_ep_len=False)
    if log_root is not None:
        cfg.log_root = log_root
    return dataclasses.replace(cfg, **overrides)  # type: ignore[arg-type]

"""Shared fixtures: small real environments on the CPU (no simulator mocks)."""

from __future__ import annotations

import dataclasses
import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("WANDB_MODE", "offline")
# The suite runs under `uv run pytest`, which marks its children: the commands a run prints would then begin with
# "uv run" in every test. The tests of that prefix start their command through uv themselves.
os.environ.pop("UV_RUN_RECURSION_DEPTH", None)

from mjfleet.envs.env import MjEnv
from mjfleet.tasks.registry import get_task


def make_env(task_id: str = "cartpole-balance", num_envs: int = 16, seed: int = 0, **overrides: object) -> MjEnv:
    """A real CPU environment of ``task_id`` with ``num_envs`` worlds."""
    spec = get_task(task_id)
    cfg = dataclasses.replace(spec.env_cfg(), num_envs=num_envs, **overrides)
    return MjEnv(spec.load_task_class()(cfg), device="cpu", seed=seed)


@pytest.fixture
def balance_env() -> MjEnv:
    return make_env()

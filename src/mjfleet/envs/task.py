# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""The contract between a task (its MDP) and the generic batched environment."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import mujoco
import torch

from mjfleet.envs.config import EnvConfig

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv

CfgT = TypeVar("CfgT", bound=EnvConfig)


class Task(ABC, Generic[CfgT]):
    """One MDP: its model, resets, actions, observations, reward terms and terminations, side by side.

    Reward terms are methods named ``reward_<name>`` returning one value per environment; the task config's
    ``rewards`` dataclass holds one weight per term (``--env.rewards.<name>``). The environment computes only
    terms with a non-zero weight and scales the weighted sum by the control step, so returns are per-second
    integrals independent of the decimation.
    """

    forward_after_reset: ClassVar[bool] = False
    """Recompute kinematics after resets, for tasks whose observations read derived quantities (body poses,
    sensors) rather than only ``qpos``/``qvel``."""

    batched_model_fields: ClassVar[tuple[str, ...]] = ()
    """``mujoco_warp.Model`` fields that get one copy per world (domain randomization), e.g. ``("geom_friction",)``;
    write them through ``env.sim.model_field(name)`` in :meth:`setup` or :meth:`reset`. Captured graphs read the
    arrays in place, so new values take effect without re-capturing."""

    video_camera: ClassVar[str | None] = None
    """Named model camera for videos; None tracks the first body with a free camera."""

    def __init__(self, cfg: CfgT) -> None:
        self.cfg = cfg

    @abstractmethod
    def build_model(self) -> mujoco.MjModel:
        """Return the host MuJoCo model."""

    def setup(self, env: MjEnv) -> None:
        """Allocate task buffers and look up ids once the simulation exists."""

    @property
    @abstractmethod
    def num_actions(self) -> int:
        """Action dimension."""

    @abstractmethod
    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        """Write the initial state of the listed environments into ``env.sim``."""

    @abstractmethod
    def apply_actions(self, env: MjEnv, actions: torch.Tensor) -> None:
        """Turn (clipped) policy actions into ``env.sim.ctrl``."""

    @abstractmethod
    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        """Observation groups; ``policy`` is required, ``critic`` may add privileged state."""

    @abstractmethod
    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        """Boolean terminal conditions by name (time-outs are handled by the environment)."""

    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Task statistics of the episodes ending in ``env_ids`` (logged as ``Metrics/<name>``)."""
        return {}

    def metric_names(self) -> tuple[str, ...]:
        """Names returned by :meth:`episode_metrics`, fixed so every rank logs the same keys."""
        return ()

    def after_step(self, env: MjEnv) -> None:
        """Update task state after physics and before rewards (e.g. command resampling, counters)."""

    @abstractmethod
    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """Whether each episode ending in ``env_ids`` counts as a success (``time_outs`` is for those ids)."""

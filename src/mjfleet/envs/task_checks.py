"""What a task's methods return, checked where a mistake would otherwise surface later as a tensor error that names
neither the task nor the term (a float termination flag, a ``(n, 1)`` reward, a success over every environment
instead of the ended ones): one line each, a :class:`UsageError`. The checks read shapes and dtypes only (no device
sync)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from mjfleet.errors import UsageError


def describe(value: object) -> str:
    """``value`` as a check's message shows it: a tensor's dtype and shape, or any other object's type."""
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def check_flags(task: object, method: str, flags: Mapping[str, Any], num_envs: int) -> None:
    """Each of ``method``'s flags (``terminations``, ``time_outs``) one bool per environment."""
    for name, flag in flags.items():
        if not (isinstance(flag, torch.Tensor) and flag.dtype == torch.bool and tuple(flag.shape) == (num_envs,)):
            raise UsageError(
                f"{type(task).__name__}.{method}()[{name!r}] must be a bool tensor of shape ({num_envs},), one flag "
                f"per environment; got {describe(flag)}"
            )


def check_reward(task: object, name: str, value: object, num_envs: int) -> None:
    """A reward term one value per environment (or one for all)."""
    if not (isinstance(value, torch.Tensor) and tuple(value.shape) in ((), (num_envs,))):
        raise UsageError(
            f"{type(task).__name__}.reward_{name}() must return a tensor of shape ({num_envs},), one value per "
            f"environment; got {describe(value)}"
        )


def check_episode_values(
    task: object, success: object, metrics: Mapping[str, Any], declared: tuple[str, ...], ended: int
) -> None:
    """``success`` and each of ``episode_metrics``'s values one per ended episode (the ``env_ids`` they were given),
    the metrics those ``metric_names`` declares."""
    cls = type(task).__name__
    if not (isinstance(success, torch.Tensor) and tuple(success.shape) == (ended,)):
        raise UsageError(
            f"{cls}.success() must return one value per episode ending in env_ids, shape ({ended},); got "
            f"{describe(success)} (index the task's per-environment state with env_ids)"
        )
    if set(metrics) != set(declared):
        raise UsageError(
            f"{cls}.episode_metrics() returned {sorted(metrics)}, but metric_names() declares {sorted(declared)}"
        )
    for name, value in metrics.items():
        if not (isinstance(value, torch.Tensor) and tuple(value.shape) == (ended,)):
            raise UsageError(
                f"{cls}.episode_metrics()[{name!r}] must be one value per episode ending in env_ids, shape "
                f"({ended},); got {describe(value)} (index the task's per-environment state with env_ids)"
            )


def check_observations(task: object, groups: object, num_envs: int) -> None:
    """Observation groups by name, a ``policy`` one among them, each a ``(num_envs, size)`` float32 tensor: the
    learners' own errors about a wrong one name neither the task nor the group."""
    name = f"{type(task).__name__}.observations()"
    if not isinstance(groups, Mapping):
        raise UsageError(
            f"{name} must return a dict of observation groups by name ('policy', ...); got {describe(groups)}"
        )
    if "policy" not in groups:
        raise UsageError(f"{name} returned the groups {sorted(groups)}; a 'policy' group is required")
    for group, value in groups.items():
        if not (isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[0] == num_envs):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise UsageError(
                f"{name} group {group!r} must be a (num_envs, size) = ({num_envs}, size) tensor, got {shape}"
                f" ({num_envs}: the environments of the simulation being built)"
            )
        if value.dtype != torch.float32:
            raise UsageError(
                f"{name} group {group!r} must be a float32 tensor (the networks' dtype), got {value.dtype}"
            )


def check_fresh_observations(task: object, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """The observations of a step are tensors of their own, not the memory of the step before's: a learner keeps a
    step's observation while the environments step (PPO stores it with its action, a replay buffer beside the next
    one), and a view of the simulation's state, or a buffer the task fills in place, changes under it."""
    held = {value.untyped_storage().data_ptr() for value in before.values() if isinstance(value, torch.Tensor)}
    for group, value in after.items():
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in held:
            raise UsageError(
                f"{type(task).__name__}.observations() group {group!r} is the memory it returned the step before (a"
                " view of the simulation's state, or a buffer filled in place), which the learners hold across the"
                " step: return a new tensor (torch.cat, torch.stack, or .clone())"
            )

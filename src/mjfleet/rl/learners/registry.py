"""The learners ``--agent.learner`` chooses from, by name, and what the run machinery needs to know of each: how to
build it, which ``--agent.*`` settings it reads, what its checkpoints hold, what the start-up line calls it.

A learner is one module (its :class:`~mjfleet.rl.learners.base.Learner` and a function that builds it) and one
:func:`register` call: the built-in ones are registered below; a package of its own registers its own the same way
when it is imported (docs/learners.md, "Adding a learner"). Nothing else asks for a learner by its name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.config import AgentConfig
    from mjfleet.rl.learners.base import Learner
    from mjfleet.runtime.context import DistributedContext

    LearnerFactory = Callable[[MjEnv, AgentConfig, DistributedContext, int], Learner]


@dataclass(frozen=True)
class LearnerEntry:
    """One learner as the run machinery knows it."""

    name: str
    """What ``--agent.learner`` says; recorded in checkpoints and in the run's fingerprint."""
    build: str
    """``module:function`` building it from ``(env, agent_cfg, ctx, train_envs)`` for the first ``train_envs``
    environments of ``env``; imported only when a run uses it (skrl loads for the skrl learners alone)."""
    label: str
    """The algorithm's short name (``PPO``, ``SAC``), for the start-up line."""
    settings: str | None
    """The group of ``--agent.<settings>.*`` it reads besides the networks (``--agent.policy.*``) and the loop; a
    group only other learners read does not decide what a run trains (:mod:`mjfleet.runs.fingerprint`)."""
    checkpoint_keys: tuple[str, ...]
    """What a checkpoint it writes holds at least; a file without them is not its checkpoint."""
    networks: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]
    """Where its checkpoints keep the actor's and the critic's networks: ``(role, key paths)``, the first path present
    wins (``play`` reads the hidden layer sizes from them)."""
    off_policy: bool = False
    """Whether it learns from a replay buffer (its warm-up and buffer settings apply)."""
    requires: tuple[str, ...] = ()
    """Distributions its module imports that a run checks are installed before anything is created (``skrl``)."""

    def factory(self) -> LearnerFactory:
        module, _, function = self.build.partition(":")
        return getattr(importlib.import_module(module), function)


_ENTRIES: dict[str, LearnerEntry] = {}


def register(entry: LearnerEntry) -> None:
    """Make ``entry`` a choice of ``--agent.learner`` (a name registered twice is refused)."""
    if entry.name in _ENTRIES and _ENTRIES[entry.name] != entry:
        raise ValueError(f"a learner named {entry.name!r} is registered already")
    _ENTRIES[entry.name] = entry


def unregister(name: str) -> None:
    """Remove a learner registered with :func:`register` (for tests that register one of their own)."""
    _ENTRIES.pop(name, None)


def learner_names() -> tuple[str, ...]:
    """Every registered learner's name, the built-in ones first."""
    return tuple(_ENTRIES)


def learner_entry(name: str) -> LearnerEntry:
    """The registered learner ``name`` (:class:`KeyError` for one not registered)."""
    return _ENTRIES[name]


def build_learner(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> Learner:
    """The learner ``--agent.learner`` names, for the first ``train_envs`` environments of ``env``.

    Its class's ``name`` must be the entry's: checkpoints record the learner by it, and ``play``, ``--resume`` and
    ``--finish`` look that name up here. An off-policy entry's class must ask for ``final_observations``.
    """
    entry = learner_entry(agent_cfg.learner)
    learner = entry.factory()(env, agent_cfg, ctx, train_envs)
    if getattr(learner, "name", None) != entry.name:
        raise TypeError(
            f"learner {entry.name!r} builds a {type(learner).__name__} named {getattr(learner, 'name', None)!r}:"
            f" set its class's name = {entry.name!r} (checkpoints record it)"
        )
    if entry.off_policy and not learner.final_observations:
        raise TypeError(
            f"learner {entry.name!r} is registered off_policy, but {type(learner).__name__} does not ask for the"
            " observations episodes end in: set its class's final_observations = True (the environments reset"
            " inside the step, and a replay buffer would bootstrap a time-out from the next episode's first"
            " observation)"
        )
    return learner


def network_state(entry: LearnerEntry, data: dict[str, Any], role: str) -> dict[str, Any]:
    """The saved state of the ``actor`` or ``critic`` network in a checkpoint of ``entry`` (empty where none)."""
    for path in dict(entry.networks).get(role, ()):
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, dict):
            return value
    return {}


_SKRL_NETWORKS = (("actor", (("skrl", "policy"),)), ("critic", (("skrl", "value"), ("skrl", "critic_1"))))
"""skrl's actor is its ``policy`` model; the critic is PPO's ``value`` model or SAC's and TD3's first critic."""

for _entry in (
    LearnerEntry(
        name="rsl-rl-ppo",
        build="mjfleet.rl.learners.rsl_rl:RslRlPpo",
        label="PPO",
        settings="algorithm",
        # rsl_rl's own checkpoints hold these too.
        checkpoint_keys=("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter"),
        networks=(("actor", (("actor_state_dict",),)), ("critic", (("critic_state_dict",),))),
    ),
    LearnerEntry(
        name="skrl-ppo",
        build="mjfleet.rl.learners.skrl.algorithms:build_ppo",
        label="PPO",
        settings="algorithm",
        checkpoint_keys=("skrl", "iter"),
        networks=_SKRL_NETWORKS,
        requires=("skrl",),
    ),
    LearnerEntry(
        name="skrl-sac",
        build="mjfleet.rl.learners.skrl.algorithms:build_sac",
        label="SAC",
        settings="sac",
        checkpoint_keys=("skrl", "iter"),
        networks=_SKRL_NETWORKS,
        requires=("skrl",),
        off_policy=True,
    ),
    LearnerEntry(
        name="skrl-td3",
        build="mjfleet.rl.learners.skrl.algorithms:build_td3",
        label="TD3",
        settings="td3",
        checkpoint_keys=("skrl", "iter"),
        networks=_SKRL_NETWORKS,
        requires=("skrl",),
        off_policy=True,
    ),
):
    register(_entry)

"""The learners ``--agent.learner`` chooses from, by name, and what the run machinery needs to know of each: how to
build it, which ``--agent.*`` settings it reads, what its checkpoints hold, what the start-up line calls it.

A learner is one module (its :class:`~mjfleet.rl.learners.base.Learner` and a function that builds it) and one
:class:`LearnerEntry`: the built-in ones are registered below; an installed package names its entries in the
``mjfleet.learners`` entry-point group, read the first time a learner is looked up (docs/learners.md, "Adding a
learner"). Nothing else asks for a learner by its name.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from mjfleet.errors import UsageError, exception_line

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
    """Modules (import names) its module imports, which a run checks can be imported before anything is created
    (``skrl``)."""

    def factory(self) -> LearnerFactory:
        module, _, function = self.build.partition(":")
        return getattr(importlib.import_module(module), function)


ENTRY_POINT_GROUP = "mjfleet.learners"
"""The entry-point group of installed packages' learners: each entry point names a :class:`LearnerEntry`, a sequence
of them, or a function returning either."""

logger = logging.getLogger(__name__)
_ENTRIES: dict[str, LearnerEntry] = {}
_packages_read = False


def _read_packages() -> None:
    """Register the learners of every installed package's ``mjfleet.learners`` entry points, once. One that cannot
    be loaded is a warning naming the package (its learners stay unknown); the others load."""
    global _packages_read
    if _packages_read:
        return
    _packages_read = True
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.value):
        try:
            value = ep.load()
            value = value() if callable(value) and not isinstance(value, LearnerEntry) else value
            entries = [value] if isinstance(value, LearnerEntry) else list(value)
            if not all(isinstance(e, LearnerEntry) for e in entries):
                raise TypeError("it gives something other than LearnerEntry objects")
            for entry in entries:
                register(entry)
        except Exception as e:  # a package's failure: name it, keep the other learners
            dist = getattr(ep, "dist", None)
            package = dist.name if dist is not None else ep.value.partition(":")[0]
            logger.warning(
                "package %r: its %s entry point %r is not loaded (%s)",
                package,
                ENTRY_POINT_GROUP,
                ep.name,
                exception_line(e),
            )


def register(entry: LearnerEntry) -> None:
    """Make ``entry`` a choice of ``--agent.learner`` (a name registered twice is refused, and so is a ``settings``
    group that ``--agent`` does not have: the run's fingerprint would leave the settings it reads out)."""
    from mjfleet.rl.config import AgentConfig

    if entry.name in _ENTRIES and _ENTRIES[entry.name] != entry:
        raise ValueError(f"a learner named {entry.name!r} is registered already")
    defaults = AgentConfig()
    groups = [f.name for f in dataclasses.fields(defaults) if dataclasses.is_dataclass(getattr(defaults, f.name))]
    if entry.settings is not None and entry.settings not in groups:
        raise ValueError(
            f"learner {entry.name!r} reads settings {entry.settings!r}, which is not a group of --agent"
            f" ({', '.join(groups)})"
        )
    _ENTRIES[entry.name] = entry


def unregister(name: str) -> None:
    """Remove a learner registered with :func:`register` (for tests that register one of their own)."""
    _ENTRIES.pop(name, None)


def learner_names() -> tuple[str, ...]:
    """Every registered learner's name, the built-in ones first."""
    _read_packages()
    return tuple(_ENTRIES)


def learner_entry(name: str) -> LearnerEntry:
    """The registered learner ``name`` (:class:`KeyError` for one not registered)."""
    _read_packages()
    return _ENTRIES[name]


def build_learner(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> Learner:
    """The learner ``--agent.learner`` names, for the first ``train_envs`` environments of ``env``.

    Its class's ``name`` must be the entry's: checkpoints record the learner by it, and ``play``, ``--resume`` and
    ``--finish`` look that name up here. An off-policy entry's class must ask for ``final_observations``.
    """
    entry = learner_entry(agent_cfg.learner)
    learner = entry.factory()(env, agent_cfg, ctx, train_envs)
    _check_learner(entry, learner)
    return learner


def check_learner_class(entry: LearnerEntry) -> None:
    """:func:`build_learner`'s checks before anything is created, where ``entry.build`` names a class (a function's
    learner is checked when it is built). The built-in learners are not imported for it."""
    if entry.build.startswith("mjfleet."):
        return
    try:
        target = entry.factory()
    except (ImportError, AttributeError) as e:
        raise UsageError(f"learner {entry.name!r}: its build {entry.build!r} cannot be imported ({e})") from None
    if isinstance(target, type):
        _check_learner(entry, target)


def _check_learner(entry: LearnerEntry, learner: object) -> None:
    """Refuse a learner (or its class) whose ``name`` is not the entry's, or an off-policy one that does not ask for
    the observations episodes end in."""
    cls = learner if isinstance(learner, type) else type(learner)
    if getattr(learner, "name", None) != entry.name:
        raise UsageError(
            f"learner {entry.name!r} builds a {cls.__name__} named {getattr(learner, 'name', None)!r}:"
            f" set its class's name = {entry.name!r} (checkpoints record it)"
        )
    if entry.off_policy and not getattr(learner, "final_observations", False):
        raise UsageError(
            f"learner {entry.name!r} is registered off_policy, but {cls.__name__} does not ask for the"
            " observations episodes end in: set its class's final_observations = True (the environments reset"
            " inside the step, and a replay buffer would bootstrap a time-out from the next episode's first"
            " observation)"
        )


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
    LearnerEntry(
        name="fast-td3",
        build="mjfleet.rl.learners.fast_td3:build_fast_td3",
        label="FastTD3",
        settings="fast_td3",
        checkpoint_keys=("fast_td3", "iter"),
        networks=(("actor", (("fast_td3", "actor"),)), ("critic", (("fast_td3", "critic_1"),))),
        off_policy=True,
    ),
):
    register(_entry)

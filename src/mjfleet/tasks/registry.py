"""Task ids mapped to their task class and default configs; third-party packages add tasks by entry point."""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from mjfleet.envs.config import EnvConfig
from mjfleet.errors import UsageError
from mjfleet.rl.config import AgentConfig

if TYPE_CHECKING:
    from mjfleet.envs.task import Task

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mjfleet.tasks"
"""Entry-point group: each entry point names a callable returning a ``TaskSpec`` or a list of them."""


@dataclass(frozen=True)
class TaskSpec:
    """Everything needed to build one task."""

    id: str
    """Lowercase kebab-case id, e.g. ``cartpole-balance``."""
    description: str
    """One line for ``list-tasks``."""
    task_class: type[Task[Any]] | str
    """The task implementation, or its ``"module:Class"`` path: imported only when an environment is built, so
    listing tasks and parsing a command do not load the simulator."""
    env_cfg: Callable[[], EnvConfig]
    """Returns a complete default environment config."""
    agent_cfg: Callable[[], AgentConfig]
    """Returns a complete default PPO config."""

    def load_task_class(self) -> type[Task[Any]]:
        """The task class (imported now if given as ``"module:Class"``)."""
        if not isinstance(self.task_class, str):
            return self.task_class
        module, _, name = self.task_class.partition(":")
        return getattr(importlib.import_module(module), name)


_REGISTRY: dict[str, TaskSpec] = {}
_loaded = False


def register(spec: TaskSpec) -> None:
    """Add a task; ids are unique."""
    if spec.id in _REGISTRY and _REGISTRY[spec.id] != spec:
        raise ValueError(f"task id {spec.id!r} is registered twice")
    _REGISTRY[spec.id] = spec


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import mjfleet.tasks.builtin  # noqa: F401  (registers the built-in tasks)

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            specs = ep.load()()
        except Exception as e:
            logger.warning("could not load tasks from entry point %r: %s", ep.name, e)
            continue
        for spec in specs if isinstance(specs, list | tuple) else [specs]:
            register(spec)


def all_tasks() -> dict[str, TaskSpec]:
    """Every registered task, by id."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def get_task(task_id: str) -> TaskSpec:
    """Look up a task; an unknown id raises :class:`UsageError` naming the closest ids."""
    tasks = all_tasks()
    if task_id in tasks:
        return tasks[task_id]
    close = difflib.get_close_matches(task_id, tasks, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}?" if close else "run list-tasks to see them"
    raise UsageError(f"unknown task {task_id!r}; {hint}")

"""Task ids mapped to their :class:`TaskSpec`; built-in and third-party tasks load through one mechanism.

A task source is a callable returning a ``TaskSpec`` or a list of them, named ``"module:function"``. The built-in
source comes first; third-party packages add sources under the ``mjfleet.tasks`` entry-point group.
"""

from __future__ import annotations

import difflib
import logging
from importlib.metadata import EntryPoint, entry_points

from mjfleet.errors import UsageError
from mjfleet.tasks.spec import TaskSpec

__all__ = ["ENTRY_POINT_GROUP", "TaskSpec", "all_tasks", "get_task", "register"]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mjfleet.tasks"
"""Entry-point group: each entry point names a callable returning a ``TaskSpec`` or a list of them."""

BUILTIN_SOURCE = EntryPoint(name="builtin", value="mjfleet.tasks.builtin:tasks", group=ENTRY_POINT_GROUP)
"""The tasks shipped with mjfleet, loaded like an entry point but not from installed metadata: the package also
runs from a source tree on ``PYTHONPATH``."""

_REGISTRY: dict[str, TaskSpec] = {}
_loaded = False


def register(spec: TaskSpec) -> None:
    """Add a task; ids are unique."""
    if spec.id in _REGISTRY and _REGISTRY[spec.id] != spec:
        raise ValueError(f"task id {spec.id!r} is registered twice")
    _REGISTRY[spec.id] = spec


def _register_source(source: EntryPoint) -> None:
    """Call the function ``source`` names and register the specs it returns."""
    specs = source.load()()
    for spec in specs if isinstance(specs, list | tuple) else [specs]:
        if not isinstance(spec, TaskSpec):
            raise TypeError(f"{source.value} returned {type(spec).__name__}, not a TaskSpec")
        register(spec)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _register_source(BUILTIN_SOURCE)  # a failure here is a bug in mjfleet itself: let it raise
    _loaded = True  # before the plugins, which may look up built-in tasks
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            _register_source(ep)
        except Exception as e:
            logger.warning("could not load tasks from entry point %r: %s", ep.name, e)


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

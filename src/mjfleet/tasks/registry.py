"""Tasks and robots by name; built-in and third-party ones load through one mechanism.

A source is a callable returning a ``TaskSpec``, a ``RobotSpec`` (a legged robot), an ``ArmSpec`` (an arm) or a list of
them, named ``"module:function"``.
The built-in source comes first; installed packages add theirs under the ``mjfleet.tasks`` entry-point group. A
package's source is taken whole or not at all: one that cannot be imported, raises, returns something else, reuses
a registered id or robot name, or whose robot file lacks what its record names, adds nothing, and the problem is one
line naming the package (``list-tasks`` prints it; ``train``/``play`` of its tasks stop with it). Robot files are
checked when a package's tasks are first looked up or listed, not at every load: parsing a command imports no MuJoCo.
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from mjfleet.errors import UsageError, exception_line
from mjfleet.rl.learners.registry import ENTRY_POINT_GROUP as LEARNERS_GROUP
from mjfleet.tasks.locomotion.robots import RobotSpec
from mjfleet.tasks.manipulation.arms import ArmSpec
from mjfleet.tasks.spec import TaskSpec

__all__ = [
    "ENTRY_POINT_GROUP",
    "ArmSpec",
    "RobotSpec",
    "TaskSpec",
    "all_arms",
    "all_robots",
    "all_tasks",
    "broken_packages",
    "check_robot_files",
    "get_task",
    "menagerie_robot",
    "package_of",
    "register",
    "robot_package",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mjfleet.tasks"
"""Entry-point group: each entry point names a callable returning ``TaskSpec``s, ``RobotSpec``s and ``ArmSpec``s."""

BUILTIN_SOURCE = EntryPoint(name="builtin", value="mjfleet.tasks.builtin:tasks", group=ENTRY_POINT_GROUP)
"""The tasks and robots shipped with mjfleet, loaded like an entry point but not from installed metadata: the package
also runs from a source tree on ``PYTHONPATH``."""

BUILTIN_PACKAGE = "mjfleet"
"""What :func:`package_of` says for the built-in tasks and robots."""

TASK_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
"""Task ids are lowercase kebab-case (they are typed on command lines and become folder names)."""

Item = TaskSpec | RobotSpec | ArmSpec


@dataclass(frozen=True)
class Broken:
    """A package whose source added nothing."""

    problem: str
    """One line: what is wrong."""
    task_ids: tuple[str, ...] = ()
    """The ids it declared, where it got as far as declaring them."""


_REGISTRY: dict[str, TaskSpec] = {}
_ROBOTS: dict[str, RobotSpec] = {}
_ARMS: dict[str, ArmSpec] = {}
_PACKAGES: dict[str, str] = {}
"""``task:<id>`` / ``robot:<name>`` / ``arm:<name>`` -> the package that registered it."""
_BROKEN: dict[str, Broken] = {}
_UNCHECKED: dict[str, tuple[list[RobotSpec], tuple[str, ...]]] = {}
_MENAGERIE: dict[str, str] = {}
"""Package tasks by id whose robot or arm record comes from Menagerie, with that Menagerie robot (found by the check:
a built-in task's description says it itself)."""
"""Package -> its robots whose files are not checked yet, and its task ids: checked when one of its tasks is looked up
or the tasks are listed, not at every load (that needs MuJoCo, which parsing a command must not import)."""
_loaded = False


class SourceError(Exception):
    """A source that cannot be registered: the message is one line, the ids are those it declared."""

    def __init__(self, message: str, task_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.task_ids = task_ids


def register(item: Item, package: str = "") -> None:
    """Add a task, a robot or an arm record; ids and names are unique (registering an equal one again does nothing)."""
    problem = _clash(item)
    if problem:
        raise ValueError(problem)
    if isinstance(item, TaskSpec):
        _REGISTRY[item.id] = item
    elif isinstance(item, ArmSpec):
        _ARMS[item.name] = item
    else:
        _ROBOTS[item.name] = item
    _PACKAGES.setdefault(_key(item), package or BUILTIN_PACKAGE)


def _key(item: Item) -> str:
    if isinstance(item, TaskSpec):
        return f"task:{item.id}"
    return f"arm:{item.name}" if isinstance(item, ArmSpec) else f"robot:{item.name}"


def _clash(item: Item) -> str:
    """Why ``item`` cannot be registered next to those already there ('' if it can)."""
    table: dict[str, TaskSpec] | dict[str, RobotSpec] | dict[str, ArmSpec]
    if isinstance(item, TaskSpec):
        kind, name, table = "task id", item.id, _REGISTRY
    elif isinstance(item, ArmSpec):
        kind, name, table = "arm name", item.name, _ARMS
    else:
        kind, name, table = "robot name", item.name, _ROBOTS
    if name in table and table[name] != item:
        return f"{kind} {name!r} is taken by package {_PACKAGES.get(_key(item), BUILTIN_PACKAGE)!r}"
    return ""


def _source_items(source: EntryPoint) -> list[Item]:
    """Call the function ``source`` names; what it returns, checked on its own (no registry state)."""
    try:
        function = source.load()
    except Exception as e:
        raise SourceError(f"cannot import {source.value} ({exception_line(e)})") from e
    try:
        returned = function()
    except Exception as e:
        raise SourceError(f"{source.value} raised {exception_line(e)}") from e
    is_list = isinstance(returned, list | tuple)
    items: list[object] = list(returned) if is_list else [returned]
    wrong = sorted({type(i).__name__ for i in items if not isinstance(i, TaskSpec | RobotSpec | ArmSpec)})
    if wrong or not items:
        what = "an empty list" if not items else f"a list holding {', '.join(wrong)}" if is_list else f"a {wrong[0]}"
        raise SourceError(f"{source.value} returned {what}, not TaskSpecs, RobotSpecs and ArmSpecs (or a list of them)")
    specs = [i for i in items if isinstance(i, TaskSpec | RobotSpec | ArmSpec)]
    ids = tuple(i.id for i in specs if isinstance(i, TaskSpec))
    bad_ids = [i for i in ids if not TASK_ID.fullmatch(i)]
    if bad_ids:
        raise SourceError(f"task id {bad_ids[0]!r} is not lowercase kebab-case (e.g. my-robot-walk)", ids)
    keys = [_key(i) for i in specs]
    repeated = next((k for k in keys if keys.count(k) > 1), None)
    if repeated:
        kind, _, name = repeated.partition(":")
        raise SourceError(f"{kind} {name!r} is declared twice", ids)
    return specs


def _register_source(source: EntryPoint, package: str = "", check_files: bool = True) -> None:
    """Register everything the source returns, or nothing (:class:`SourceError` says why); with ``check_files``,
    its robots' files are checked later (:func:`check_robot_files`)."""
    items = _source_items(source)
    ids = tuple(i.id for i in items if isinstance(i, TaskSpec))
    problem = next((p for p in map(_clash, items) if p), "")
    if problem:
        raise SourceError(problem, ids)
    for item in sorted(items, key=lambda i: isinstance(i, TaskSpec)):  # records first
        register(item, package)
    # Menagerie files are checked when a task needs them: they may not be downloaded yet.
    on_disk = [i for i in items if isinstance(i, RobotSpec) and i.path is not None]
    if check_files:
        robots, known = _UNCHECKED.get(package, ([], ()))
        _UNCHECKED[package] = ([*robots, *on_disk], (*known, *ids))


def check_robot_files(package: str | None = None) -> None:
    """Check the robot files of ``package`` (of every package: None) against their records, and that its tasks'
    default settings can be made and name a robot record that is registered, once; a package where one fails is
    withdrawn, all its tasks and robots, and listed as broken."""
    _load()
    for name in [package] if package is not None else list(_UNCHECKED):
        pending = _UNCHECKED.pop(name, None)
        if pending is None:
            continue
        robots, ids = pending
        problem = _robot_file_problem(robots) or _settings_problem(ids)
        if problem:
            for key in [k for k, owner in _PACKAGES.items() if owner == name]:
                kind, _, item = key.partition(":")
                {"task": _REGISTRY, "arm": _ARMS}.get(kind, _ROBOTS).pop(item, None)
                del _PACKAGES[key]
            _BROKEN.setdefault(name, Broken(f"{problem}; its tasks are not loaded", ids))


def _robot_file_problem(robots: list[RobotSpec]) -> str:
    """The first robot file that is missing or lacks what its record names, as one line ('' if none)."""
    from mjfleet.tasks.locomotion.check import check_robot_file

    for robot in robots:
        assert robot.path is not None
        if not robot.path.is_file():
            relative = (
                f" (relative: looked for from {Path.cwd()}; give it from the package, e.g."
                ' str(Path(__file__).with_name("robot.xml")))'
                if not robot.path.is_absolute()
                else ""
            )
            return f"robot {robot.name!r}: no such MJCF file {robot.path}{relative}"
        try:
            check_robot_file(robot, robot.path, f"robot {robot.name!r} ({robot.path})")
        except UsageError as e:
            return str(e)
    return ""


def _settings_problem(ids: tuple[str, ...]) -> str:
    """The first task whose default settings cannot be made, or name a robot record no package returns ('' if
    none): said once by ``list-tasks``, not as a traceback or as a flag the user never typed."""
    from mjfleet.tasks.locomotion.robots import names_robot_file

    for task_id in ids:
        spec = _REGISTRY[task_id]
        for factory in (spec.env_cfg, spec.cpu_env_cfg):
            if factory is None:
                continue
            try:
                cfg = factory()
            except Exception as e:
                return f"task {task_id!r}: its environment settings ({_qualname(factory)}) raised {exception_line(e)}"
            robot = getattr(cfg, "robot", None)
            if isinstance(robot, str) and robot and not names_robot_file(robot) and robot not in _ROBOTS:
                return (
                    f"task {task_id!r} trains robot record {robot!r}, which no installed package returns (return it"
                    " from the source with the task)"
                )
            arm = getattr(cfg, "arm", None)
            record = _ROBOTS.get(robot) if isinstance(robot, str) else _ARMS.get(arm) if isinstance(arm, str) else None
            if record is not None and record.menagerie is not None:
                _MENAGERIE[task_id] = record.menagerie
    return ""


def menagerie_robot(task_id: str) -> str | None:
    """The Menagerie robot whose files package task ``task_id`` trains (its robot or arm record's), once its package
    is checked (:func:`check_robot_files`); None for other tasks and the built-in ones (their descriptions say it)."""
    return _MENAGERIE.get(task_id)


def _qualname(factory: object) -> str:
    return getattr(factory, "__qualname__", type(factory).__name__)


def _package(ep: EntryPoint) -> str:
    """The distribution that declares ``ep`` (its module's top-level name where metadata does not say)."""
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else ep.module.partition(".")[0]


def _load() -> None:
    global _loaded
    if _loaded:
        return
    # A failure here is a bug in mjfleet itself: let it raise. Its files are checked by the tests, not at each start.
    _register_source(BUILTIN_SOURCE, BUILTIN_PACKAGE, check_files=False)
    _loaded = True  # before the plugins, which may look up built-in tasks
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (_package(e), e.name)):
        package = _package(ep)
        try:
            _register_source(ep, package)
        except SourceError as e:
            _BROKEN.setdefault(package, Broken(f"{e}; its tasks are not loaded", e.task_ids))
            logger.debug("package %s not loaded", package, exc_info=True)
    for group in _misspelt_groups():
        for ep in sorted(entry_points(group=group), key=lambda e: (_package(e), e.name)):
            problem = f"its entry point {ep.name!r} is in the group {group!r}, which mjfleet does not read"
            readable = f"{ENTRY_POINT_GROUP!r} and {LEARNERS_GROUP!r}"
            _BROKEN.setdefault(_package(ep), Broken(f"{problem} (it reads {readable})", ()))


def _misspelt_groups() -> list[str]:
    """Installed entry-point groups that look meant for mjfleet's (``mjfleet.task``, ``mjfleet_tasks``): a package
    whose tasks sit in one would otherwise be missing without a word."""
    groups = sorted(set(entry_points().groups) - {ENTRY_POINT_GROUP, LEARNERS_GROUP})
    return [
        g
        for g in groups
        if g.lower().startswith("mjfleet") or difflib.SequenceMatcher(None, g.lower(), ENTRY_POINT_GROUP).ratio() > 0.8
    ]


def all_tasks() -> dict[str, TaskSpec]:
    """Every registered task, by id."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def all_robots() -> dict[str, RobotSpec]:
    """Every registered robot record, by name."""
    _load()
    return dict(_ROBOTS)


def all_arms() -> dict[str, ArmSpec]:
    """Every registered arm record, by name."""
    _load()
    return dict(_ARMS)


def package_of(task_id: str) -> str:
    """The package that registered task ``task_id`` (``mjfleet`` for the built-in ones)."""
    _load()
    return _PACKAGES.get(f"task:{task_id}", BUILTIN_PACKAGE)


def robot_package(name: str) -> str:
    """The package that registered robot record ``name`` (``mjfleet`` for the built-in ones)."""
    _load()
    return _PACKAGES.get(f"robot:{name}", BUILTIN_PACKAGE)


def broken_packages() -> dict[str, str]:
    """Installed packages whose tasks could not be loaded: package -> one line saying why."""
    _load()
    return {package: broken.problem for package, broken in sorted(_BROKEN.items())}


def broken_line(package: str) -> str:
    """``package 'P': <problem>``."""
    return f"package {package!r}: {_BROKEN[package].problem}"


_WARNED: set[str] = set()


def _warn_if_shadowed(task_id: str) -> None:
    """Once per process: a package that declares ``task_id`` too was not loaded, so the registered task is trained
    (a user who meant the package's would otherwise train another task without a word)."""
    owners = [p for p, b in sorted(_BROKEN.items()) if task_id in b.task_ids]
    if owners and task_id not in _WARNED:
        _WARNED.add(task_id)
        logger.warning(
            "task %r comes from package %r; %s",
            task_id,
            package_of(task_id),
            "; ".join(f"{broken_line(p)} (rename its task to train it)" for p in owners),
        )


def get_task(task_id: str) -> TaskSpec:
    """Look up a task; an unknown id raises :class:`UsageError` naming the closest ids, or the broken package it
    comes from."""
    tasks = all_tasks()
    if task_id in tasks:
        check_robot_files(package_of(task_id))
        if task_id in _REGISTRY:
            _warn_if_shadowed(task_id)
            return tasks[task_id]
    owner = next((p for p, b in _BROKEN.items() if task_id in b.task_ids), None)
    if owner is not None:
        raise UsageError(f"task {task_id!r} comes from {broken_line(owner)}")
    close = difflib.get_close_matches(task_id, tasks, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}?" if close else "run list-tasks to see them"
    # A package that could not be read may be where the id comes from: its problem first, the spelling hint after.
    unread = "".join(f"{broken_line(p)}; " for p, b in sorted(_BROKEN.items()) if not b.task_ids)
    raise UsageError(f"unknown task {task_id!r}; {unread}{hint}")

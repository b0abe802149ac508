# pyright: reportAttributeAccessIssue=false
"""Where a robot's MJCF comes from: this package's assets, MuJoCo Menagerie (through ``mujoco-menagerie``), or a path.

Menagerie files are resolved by the ``mujoco-menagerie`` package: ``MENAGERIE_ROOT`` (a checkout: ``<root>/<robot>/``)
or its download cache (``MENAGERIE_CACHE_DIR``), downloading from GitHub on first use. A model that is neither there
nor downloadable (a closed network: a cluster, a CI runner) is a :class:`~mjfleet.errors.UsageError` that says how to
bring a copy made elsewhere and name it with ``MENAGERIE_ROOT`` (docs/tasks.md, "Menagerie files on a closed network").
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mjfleet.errors import UsageError, mujoco_message
from mjfleet.paths import absolute_path
from mjfleet.tasks.locomotion.robots import RobotSpec, names_robot_file
from mjfleet.tasks.registry import all_robots

MENAGERIE_PREFIX = "menagerie:"


CLOSED_NETWORK_DOC = 'docs/tasks.md, "Menagerie files on a closed network"'
"""Where the way to use Menagerie files without GitHub is written down."""


def copy_hint(name: str) -> str:
    """How to bring Menagerie robot ``name`` onto a machine that cannot download it: a copy named by MENAGERIE_ROOT."""
    # `path` downloads the model if needed and prints its folder: a copy of that folder is a checkout's <root>/<name>.
    return (
        f"where GitHub is reachable, copy the folder that `uv run mujoco-menagerie path {name}` prints to"
        f" <dir>/{name} on this machine and set MENAGERIE_ROOT=<dir> ({CLOSED_NETWORK_DOC})"
    )


def menagerie_available(name: str) -> bool:
    """Whether the files of Menagerie robot ``name`` are on disk (checkout or cache); no download, no MuJoCo."""
    import mujoco_menagerie as mm

    cache = mm.Cache()
    if cache.root is not None:  # a folder with a model in it (an empty one is a copy or prefetch that failed)
        return any((cache.root / name).glob("*.xml"))
    return cache.is_cached(mm.get(name))


def menagerie_description(robot: str, what: str) -> str:
    """A task's description ``what``, saying how to get Menagerie robot ``robot``'s files when they are not on disk
    (no download here)."""
    try:
        available = menagerie_available(robot)
    except Exception:  # a broken cache or registry must not break list-tasks; train reports the cause
        available = False
    return what if available else f"{what} [not on disk: uv run mujoco-menagerie prefetch {robot}]"


def robot_file(robot: RobotSpec) -> Path:
    """The robot's MJCF on disk; Menagerie models are downloaded into the cache if they are not there yet."""
    if robot.path is not None:
        if not robot.path.is_file():
            raise UsageError(f"robot {robot.name!r}: no such MJCF file {robot.source!r}")
        return robot.path
    return menagerie_file(robot.source)


ROBOT_PATH_HINT = "pass another layout's file as --env.robot <path to the XML>"
"""What a legged task takes instead of a Menagerie copy in another layout."""


def menagerie_file(source: str, other_layout: str = ROBOT_PATH_HINT) -> Path:
    """The MJCF of ``menagerie:<robot>[/<entry>]`` on disk, downloaded into the cache if it is not there yet;
    ``other_layout`` tells how the task takes a copy laid out otherwise (a MENAGERIE_ROOT without the file)."""
    import mujoco_menagerie as mm

    name, _, entry = source.removeprefix(MENAGERIE_PREFIX).partition("/")
    try:
        model = mm.get(name)
        file = model.entry(entry or model.default_model).file
        cache = mm.Cache()
        if cache.root is not None:
            return _checkout_file(cache.root, name, file, other_layout)
        return model.path(cache, progress=None) / file
    except mm.MenagerieError as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(
            f"Menagerie robot {name!r} is not on this machine and cannot be downloaded ({reason}); {copy_hint(name)}"
        ) from e


def _checkout_file(root: Path, name: str, file: str, other_layout: str) -> Path:
    """``<root>/<name>/<file>`` of the copy that MENAGERIE_ROOT names, or one line saying what that folder lacks."""
    folder = root / name
    if not folder.is_dir():
        # A copied download cache holds models/<name>-<hash>/, not <name>/: the package reads it as a cache.
        cached = any((root / "models").glob(f"{name}-*"))
        instead = f"; it is a mujoco-menagerie cache: set MENAGERIE_CACHE_DIR={root} instead" if cached else ""
        raise UsageError(f"MENAGERIE_ROOT={root} has no folder {name}/{instead or '; ' + copy_hint(name)}")
    path = folder / file
    if not path.is_file():
        # e.g. mjlab's asset tree, whose go1.xml is in unitree_go1/xmls/: such a file is taken another way.
        raise UsageError(
            f"MENAGERIE_ROOT={root} has no {name}/{file} (the Menagerie layout <root>/{name}/{file}); copy Menagerie's"
            f" folder there ({CLOSED_NETWORK_DOC}), or {other_layout}"
        )
    return path


def resolve_robot(value: str) -> RobotSpec:
    """The record of ``--env.robot``: a record name (``go1``), ``menagerie:<robot>``, or a path to an MJCF.

    A path gets the first record whose names (base body, zones, joints) all exist in the file, e.g. an edited
    copy of Menagerie's ``go1.xml`` gets the ``unitree_go1`` record.
    """
    robots = all_robots()
    if value in robots:
        return robots[value]
    if value.startswith(MENAGERIE_PREFIX):
        name = value.removeprefix(MENAGERIE_PREFIX)
        found = [r for r in robots.values() if r.menagerie == name]
        if not found:
            known = ", ".join(f"{MENAGERIE_PREFIX}{r.menagerie}" for r in robots.values() if r.menagerie)
            raise UsageError(
                f"--env.robot {value!r}: no robot record for this Menagerie model (known: {known});"
                " docs/your_robot.md shows how to add one from a package of your own"
            )
        return found[0]
    if names_robot_file(value):
        path = absolute_path(value, "--env.robot")
        if not path.is_file():
            raise UsageError(f"--env.robot {value!r}: no such MJCF file")
        return _record_for_file(path, robots)
    known = ", ".join([*robots, *(f"{MENAGERIE_PREFIX}{r.menagerie}" for r in robots.values() if r.menagerie)])
    raise UsageError(f"--env.robot {value!r} is not a robot ({known}) or a path to an MJCF file")


def _record_for_file(path: Path, robots: dict[str, RobotSpec]) -> RobotSpec:
    import mujoco

    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except Exception as e:  # MuJoCo reports parse errors as ValueError or its own error types
        raise UsageError(f"--env.robot {str(path)!r}: MuJoCo cannot load it ({mujoco_message(e)})") from e
    bodies = {b.name for b in spec.bodies}
    geoms = {g.name for g in spec.geoms}
    joints = {j.name for j in spec.joints}
    missing: dict[str, list[str]] = {}
    for robot in robots.values():
        zones = [robot.zone(z) for z in robot.watched()]
        needed = [robot.base_body, *(z.body for z in zones if z.body)]
        absent = [b for b in needed if b not in bodies]
        absent += [z.geom for z in zones if z.geom and z.geom not in geoms]
        absent += [j for j in robot.deviation_joints if j not in joints]
        if not absent:
            return dataclasses.replace(robot, source=str(path))
        missing[robot.name] = absent
    best = min(missing, key=lambda k: len(missing[k]))
    raise UsageError(
        f"--env.robot {str(path)!r} matches no robot record; closest {best!r} lacks "
        f"{', '.join(missing[best][:4])}{' ...' if len(missing[best]) > 4 else ''}"
    )

"""Where an arm's record and MJCF come from: the registered records (mjfleet's own and installed packages'), and the
file on disk (a package's path, or MuJoCo Menagerie through ``mujoco-menagerie`` or ``MENAGERIE_ROOT``)."""

from __future__ import annotations

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.sources import menagerie_file
from mjfleet.tasks.manipulation.arms import ArmSpec
from mjfleet.tasks.registry import all_arms

OTHER_LAYOUT = "register an arm record whose source is another layout's file (docs/manipulation.md: your own arm)"
"""What an arm task takes instead of a Menagerie copy in another layout: arms are records, not ``--env`` paths."""


def resolve_arm(name: str) -> ArmSpec:
    """The registered arm record called ``name`` (``--env.arm``): mjfleet's own or an installed package's."""
    arms = all_arms()
    if name not in arms:
        raise UsageError(
            f"--env.arm {name!r} is not an arm ({', '.join(sorted(arms))}); docs/manipulation.md shows how to add one"
        )
    return arms[name]


def arm_file(arm: ArmSpec) -> str:
    """The arm's MJCF on disk (a Menagerie model is downloaded into the cache if missing)."""
    if arm.path is None:
        return str(menagerie_file(arm.source, OTHER_LAYOUT))
    if not arm.path.is_file():
        raise UsageError(f"arm {arm.name!r}: no such MJCF file {arm.source!r}")
    return str(arm.path)

"""The arms the manipulation tasks drive: one record per arm with every fact the tasks need about its MJCF.

A record names things in the arm's file (end-effector site, gripper joints and actuator, the hand's bodies, the
fingertips) and gives its home pose. It knows nothing about the simulator; :mod:`mjfleet.tasks.manipulation.model`
applies it to the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mjfleet.tasks.locomotion.robots import Zone

MENAGERIE_PREFIX = "menagerie:"


@dataclass(frozen=True)
class ArmSpec:
    """Everything the manipulation tasks need to know about one arm (fixed per arm, not a tunable setting).

    The arm's base is fixed in the world at the origin, on a table whose top is the plane z = 0; every actuator is a
    position servo (the arm's joints and the gripper).
    """

    name: str
    """The record's name (``--env.arm <name>``), unique among the installed arms."""
    source: str
    """Where the MJCF comes from: a path (a package's own file) or ``menagerie:<robot>[/<entry>]`` (the
    ``mujoco-menagerie`` cache or ``MENAGERIE_ROOT``)."""
    ee_site: str
    """The site between the fingertips: the point that reaches the target and grasps the object."""
    hand_body: str
    """The last link of the arm: its subtree (wrist, fingers) is the hand, the only part that collides."""
    gripper_actuator: str
    """The position actuator that opens and closes the gripper (its control range spans closed to open)."""
    gripper_joints: tuple[str, ...]
    """The fingers' joints (one may follow another through an equality constraint)."""
    fingertips: tuple[Zone, ...]
    """The fingers' contact geoms, one zone per finger: their friction is randomized in the lift task."""
    grasp_pose: tuple[tuple[str, float], ...] = ()
    """How the fingers hold a cube at the end-effector site in the home pose: (finger joint name, joint position per
    metre of the cube's half edge), e.g. ``(("left", 1.0), ("right", -1.0))`` for fingers that slide apart by the
    half edge each. Lets a share of the lift task's training episodes start with the cube in the hand
    (``--env.start-in-hand``); empty: the arm's episodes always start with the cube on the table."""
    ee_site_pos: tuple[float, float, float] | None = None
    """Where in ``hand_body``'s frame to add the site ``ee_site`` (metres), for a file whose own grasp site is not
    between the fingertips; None: the file's site called ``ee_site``."""
    home: tuple[tuple[str, float], ...] = ()
    """Default joint positions as (joint-name regular expression, value), first match wins, others 0; actions are
    offsets from it. Empty: the file's ``home`` keyframe."""
    timestep: float = 0.0
    """Physics step (seconds); 0 keeps the file's."""
    description: str = ""
    """One line about the model, for ``list-tasks`` and the docs."""

    @property
    def path(self) -> Path | None:
        """The MJCF file when the source names one (None for Menagerie models, found or downloaded first)."""
        return None if self.source.startswith(MENAGERIE_PREFIX) else Path(self.source).expanduser()

    @property
    def menagerie(self) -> str | None:
        """The Menagerie robot name when the model comes from Menagerie."""
        if not self.source.startswith(MENAGERIE_PREFIX):
            return None
        return self.source.removeprefix(MENAGERIE_PREFIX).partition("/")[0]


YAM = ArmSpec(
    name="yam",
    source="menagerie:i2rt_yam/yam",
    ee_site="fingertip_centre",
    hand_body="link_6",
    gripper_actuator="gripper",
    gripper_joints=("left_finger", "right_finger"),
    fingertips=(
        Zone("left_fingertip", body="lf_down", kinds=("sphere", "box")),
        Zone("right_fingertip", body="rf_down", kinds=("sphere", "box")),
    ),
    # The file's grasp_site lies 4.4 cm to the side of the fingertips (on the wrist's axis): the end-effector is
    # midway between the fingers' pads and their tips instead.
    ee_site_pos=(0.0, -0.037, 0.12),
    grasp_pose=(("left_finger", 1.0), ("right_finger", -1.0)),
    # Upper arm raised, forearm folded, wrist pitched down so the gripper points at the table, fingers half open.
    home=(
        (r"joint2", 1.047),
        (r"joint3", 1.05),
        (r"joint4", -0.9),
        (r"left_finger", 0.01875),
        (r"right_finger", -0.01875),
    ),
    timestep=0.005,
    description="I2RT YAM 6-DoF arm with a parallel gripper, from MuJoCo Menagerie (MIT)",
)

BUILTIN_ARMS = (YAM,)
"""The arm records shipped with mjfleet."""

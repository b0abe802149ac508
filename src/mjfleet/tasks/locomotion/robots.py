"""The robots the locomotion tasks drive: one record per robot with every fact the task needs about its MJCF.

A record names things in the robot's file (base body, foot and contact zones, joints) and says how to turn the file
into what the task expects (position servos, a ``home`` keyframe, the physics step). It knows nothing about the
simulator; :mod:`mjfleet.tasks.locomotion.sources` finds the file and :mod:`mjfleet.tasks.locomotion.model` applies
the record to it.
"""

from __future__ import annotations

import numbers
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mjfleet.paths import absolute_path

ASSETS = Path(__file__).with_name("assets")

GeomKind = Literal["sphere", "capsule", "box", "cylinder", "ellipsoid", "mesh"]


def names_robot_file(value: str) -> bool:
    """Whether ``--env.robot`` names an MJCF file (rather than a robot record)."""
    return value.endswith(".xml") or os.sep in value


def absolute_robot_path(value: str) -> str:
    """``--env.robot``, made absolute where it names an MJCF file: as typed, a relative path is the folder's the
    command ran in, and ``play`` of the run or its restart from elsewhere would look for another file."""
    return str(absolute_path(value, "--env.robot")) if names_robot_file(value) else value


@dataclass(frozen=True)
class Zone:
    """Collision geoms whose ground contact is watched together: a foot, or a link whose ground contact matters."""

    name: str
    """The zone's name: its touch sensor is ``touch_<name>``, its contact sensor against the ground ``ground_<name>``
    (``ground_<name>_<k>``, one per geom, where the zone is part of its body's geoms), and a foot's reference point
    the site ``<name>_site``."""
    body: str = ""
    """Watch the collision geoms of this body (those of ``kinds`` only, if given)."""
    kinds: tuple[GeomKind, ...] = ()
    """Geom types to watch on ``body``; empty for all (e.g. ``("sphere",)`` picks a foot out of its calf)."""
    geom: str = ""
    """Or watch exactly this named geom (the primitive models name every collision geom)."""


@dataclass(frozen=True)
class Servo:
    """Position servos for the joints matching ``joints``: how a model without them gets them."""

    joints: str
    """Regular expression matched against the whole joint name."""
    kp: float
    """Stiffness (N m / rad)."""
    kd: float
    """Damping (N m s / rad)."""
    effort: float
    """Torque limit (N m)."""
    armature: float = 0.0
    """Rotor inertia reflected to the joint (kg m^2), set where the file gives none."""


@dataclass(frozen=True)
class RobotSpec:
    """Everything the locomotion task needs to know about one robot (fixed per robot, not a tunable setting)."""

    name: str
    """The record's name (``--env.robot <name>``), unique among the installed robots."""
    source: str
    """Where the MJCF comes from: a path (a package's own file: ``str(Path(__file__).with_name("my_robot.xml"))``),
    ``menagerie:<robot>[/<entry>]`` (the ``mujoco-menagerie`` cache or ``MENAGERIE_ROOT``), or
    ``builtin:<file in mjfleet's assets/>``."""
    base_body: str
    """The body carrying the free joint."""
    feet: tuple[str, ...]
    """Foot zones (names; see :meth:`zone`), in the order of the foot observations."""
    undesired_contacts: tuple[str, ...]
    """Zones whose ground contact is penalised (``undesired_contacts`` reward)."""
    terminal_contacts: tuple[str, ...]
    """Zones whose ground contact ends the episode (a fall)."""
    deviation_joints: tuple[str, ...]
    """Joints pulled towards their default angle by the ``joint_deviation`` reward."""
    zones: tuple[Zone, ...] = ()
    """How zone names map to geoms; a name without an entry here is the geom of that name."""
    home: tuple[tuple[str, float], ...] = ()
    """Default joint angles as (joint-name regular expression, radians), first match wins, others 0; the base is
    placed so the lowest foot geom touches the ground. Empty: the file's ``home`` keyframe."""
    servos: tuple[Servo, ...] = ()
    """Position servos replacing the file's actuators; empty: the file's own position actuators are used."""
    primitive_collisions: bool = False
    """Replace mesh collision geoms by capsules fitted to them (MuJoCo's mesh fitting)."""
    timestep: float = 0.0
    """Physics step (seconds) with the implicit-fast integrator; 0 keeps the file's options."""
    description: str = ""
    """One line about the model, for ``list-tasks`` and the docs."""

    def __post_init__(self) -> None:
        problem = _shape_problem(self)
        if problem:
            raise TypeError(f"robot record {self.name!r}: {problem}")

    @property
    def asset(self) -> Path | None:
        """The MJCF file of a built-in robot (None for the others, whose file must be found first)."""
        return ASSETS / self.source.removeprefix("builtin:") if self.source.startswith("builtin:") else None

    @property
    def path(self) -> Path | None:
        """The MJCF file when the source names one (None for Menagerie models, found or downloaded first)."""
        if self.asset is not None:
            return self.asset
        return None if self.source.startswith("menagerie:") else Path(self.source).expanduser()

    @property
    def menagerie(self) -> str | None:
        """The Menagerie robot name when the model comes from Menagerie."""
        if not self.source.startswith("menagerie:"):
            return None
        return self.source.removeprefix("menagerie:").partition("/")[0]

    def home_entry(self, joint: str) -> tuple[str, float] | None:
        """The :attr:`home` entry that sets ``joint`` (the first whose pattern matches it), or None (it stays at 0)."""
        return next(((p, a) for p, a in self.home if re.fullmatch(p, joint)), None)

    def zone(self, name: str) -> Zone:
        """The zone called ``name`` (a named geom unless :attr:`zones` says otherwise)."""
        return next((z for z in self.zones if z.name == name), Zone(name, geom=name))

    def watched(self) -> tuple[str, ...]:
        """Every zone with a ground contact sensor, once each, feet first."""
        return tuple(dict.fromkeys((*self.feet, *self.undesired_contacts, *self.terminal_contacts)))


_NAMES = ("feet", "undesired_contacts", "terminal_contacts", "deviation_joints")
"""The record's fields that are tuples of names."""


def _shape_problem(robot: RobotSpec) -> str:
    """What of the record is not of the Python shape its fields take (a pair without the trailing comma of a one-item
    tuple is the usual slip), or ``""``: found as the record is made, before a name in it is looked up."""
    one = "a tuple of one needs a trailing comma"
    for field in _NAMES:
        value = getattr(robot, field)
        if isinstance(value, str):
            return f"{field} must be a tuple of names, not the string {value!r} ({one}: ({value!r},))"
        if not all(isinstance(name, str) for name in value):
            return f"{field} must be a tuple of names (got {value!r})"
    for field, kind in (("zones", Zone), ("servos", Servo)):
        items = getattr(robot, field)
        if isinstance(items, kind) or not all(isinstance(item, kind) for item in items):
            return f"{field} must be a tuple of {kind.__name__}(...) (got {items!r}; {one})"
    pairs = robot.home
    if not isinstance(pairs, tuple | list):
        return f"home must be a tuple of (pattern, angle) pairs (got {pairs!r})"
    if pairs and isinstance(pairs[0], str):
        return f"home must be (pattern, angle) pairs, not one pair {pairs!r} ({one}: ({pairs!r},))"
    for pair in pairs:
        ok = isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str)
        if not ok or isinstance(pair[1], bool) or not isinstance(pair[1], numbers.Real):
            return f"home must be (pattern, angle in radians) pairs (got {pair!r})"
    return ""


GO1 = RobotSpec(
    name="go1",
    source="builtin:go1.xml",
    base_body="trunk",
    feet=("FR_foot", "FL_foot", "RR_foot", "RL_foot"),
    undesired_contacts=tuple(f"{leg}_{part}" for leg in ("FR", "FL", "RR", "RL") for part in ("thigh", "calf")),
    terminal_contacts=("trunk",),
    deviation_joints=tuple(f"{leg}_hip_joint" for leg in ("FR", "FL", "RR", "RL")),
    description="Go1-class quadruped in primitive geometry (this repository)",
)

HUMANOID = RobotSpec(
    name="humanoid",
    source="builtin:humanoid.xml",
    base_body="pelvis",
    feet=("left_foot", "right_foot"),
    undesired_contacts=tuple(f"{side}_{part}" for side in ("left", "right") for part in ("thigh", "shin", "forearm")),
    terminal_contacts=("pelvis", "torso", "head"),
    deviation_joints=(
        *(f"{side}_{j}_joint" for side in ("left", "right") for j in ("hip_roll", "hip_yaw")),
        "waist_yaw_joint",
        *(
            f"{side}_{j}_joint"
            for side in ("left", "right")
            for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow")
        ),
    ),
    description="G1-class humanoid in primitive geometry (this repository)",
)

_LEGS = ("FR", "FL", "RR", "RL")

UNITREE_GO1 = RobotSpec(
    name="unitree_go1",
    source="menagerie:unitree_go1/go1",
    base_body="trunk",
    # Menagerie's foot spheres sit in the calf bodies next to the calf capsules: the zones split them by type.
    feet=tuple(f"{leg}_foot" for leg in _LEGS),
    undesired_contacts=tuple(f"{leg}_{part}" for leg in _LEGS for part in ("thigh", "calf")),
    terminal_contacts=("trunk",),
    deviation_joints=tuple(f"{leg}_hip_joint" for leg in _LEGS),
    zones=(
        *(Zone(f"{leg}_foot", body=f"{leg}_calf", kinds=("sphere",)) for leg in _LEGS),
        *(Zone(f"{leg}_thigh", body=f"{leg}_thigh") for leg in _LEGS),
        *(Zone(f"{leg}_calf", body=f"{leg}_calf", kinds=("capsule",)) for leg in _LEGS),
        Zone("trunk", body="trunk"),
    ),
    # The file's own position actuators (kp 100, torque limits 23.7 / 35.55 N m) and `home` keyframe are used.
    timestep=0.005,
    description="Unitree Go1 from MuJoCo Menagerie (BSD-3-Clause), its own actuators and collision geoms",
)

_G1_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_G1_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")

UNITREE_G1 = RobotSpec(
    name="unitree_g1",
    source="menagerie:unitree_g1/g1",
    base_body="pelvis",
    feet=("left_foot", "right_foot"),
    undesired_contacts=tuple(f"{side}_{part}" for side in ("left", "right") for part in ("thigh", "shin", "forearm")),
    terminal_contacts=("pelvis", "torso"),
    deviation_joints=(
        *(f"{side}_{j}_joint" for side in ("left", "right") for j in ("hip_roll", "hip_yaw")),
        *(f"waist_{j}_joint" for j in ("yaw", "roll", "pitch")),
        *(f"{side}_{j}_joint" for side in ("left", "right") for j in _G1_ARM),
    ),
    zones=(
        *(Zone(f"{side}_foot", body=f"{side}_ankle_roll_link") for side in ("left", "right")),
        *(Zone(f"{side}_thigh", body=f"{side}_hip_yaw_link") for side in ("left", "right")),
        *(Zone(f"{side}_shin", body=f"{side}_knee_link") for side in ("left", "right")),
        *(Zone(f"{side}_forearm", body=f"{side}_elbow_link") for side in ("left", "right")),
        Zone("pelvis", body="pelvis"),
        Zone("torso", body="torso_link"),
    ),
    # Knees slightly bent, arms hanging: the standing pose Unitree's locomotion examples start from.
    home=(
        (r".*_hip_pitch_joint", -0.312),
        (r".*_knee_joint", 0.669),
        (r".*_ankle_pitch_joint", -0.363),
        (r".*_elbow_joint", 0.6),
        (r"left_shoulder_roll_joint", 0.2),
        (r"right_shoulder_roll_joint", -0.2),
        (r".*_shoulder_pitch_joint", 0.2),
    ),
    # Menagerie's G1 (g1.xml) gives every joint the same kp-500 position actuator; the servos' gains, torque limits
    # and rotor inertias are those of Menagerie's MJX variant (g1_mjx.xml). The file's own armature (0.01 on every
    # joint) wins over the servos' (they fill only joints without one).
    servos=(
        Servo(r".*_hip_(pitch|yaw)_joint|waist_yaw_joint", kp=75.0, kd=2.0, effort=88.0, armature=0.01017752),
        Servo(r".*_hip_roll_joint|.*_knee_joint", kp=75.0, kd=2.0, effort=139.0, armature=0.025101925),
        Servo(r".*_ankle_(pitch|roll)_joint", kp=20.0, kd=2.0, effort=50.0, armature=0.00721945),
        Servo(r"waist_(roll|pitch)_joint", kp=75.0, kd=2.0, effort=50.0, armature=0.00721945),
        Servo(r".*_(shoulder_(pitch|roll|yaw)|elbow)_joint", kp=75.0, kd=2.0, effort=25.0, armature=0.003609725),
        Servo(r".*_wrist_roll_joint", kp=20.0, kd=2.0, effort=25.0, armature=0.003609725),
        Servo(r".*_wrist_(pitch|yaw)_joint", kp=20.0, kd=2.0, effort=5.0, armature=0.00425),
    ),
    primitive_collisions=True,
    timestep=0.005,
    description="Unitree G1 (29 DoF) from MuJoCo Menagerie (BSD-3-Clause), position servos, capsule collisions",
)

BUILTIN_ROBOTS = (GO1, HUMANOID, UNITREE_GO1, UNITREE_G1)
"""The records shipped with mjfleet (registered by its built-in task source, like a package's)."""

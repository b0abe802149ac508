"""The robots the locomotion tasks drive: which geoms are feet, which contacts are bad, which joints to keep still."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ASSETS = Path(__file__).with_name("assets")


@dataclass(frozen=True)
class RobotSpec:
    """Names in a robot's MJCF that the locomotion task relies on (fixed per robot, not a tunable setting)."""

    name: str
    """Key of the robot in :data:`ROBOTS` (the ``--env.robot`` value)."""
    asset: Path
    """The MJCF file: a free-floating base, one position actuator per hinge, a ``home`` keyframe."""
    base_body: str
    """The body carrying the free joint."""
    feet: tuple[str, ...]
    """Foot geoms; each has a site ``<foot>_site`` at the sole."""
    undesired_contacts: tuple[str, ...]
    """Geoms whose ground contact is penalised (``undesired_contacts`` reward)."""
    terminal_contacts: tuple[str, ...]
    """Geoms whose ground contact ends the episode (a fall)."""
    deviation_joints: tuple[str, ...]
    """Joints pulled towards their default angle by the ``joint_deviation`` reward."""
    standing_height: float
    """Base height above the ground in the ``home`` pose (metres)."""


GO1 = RobotSpec(
    name="go1",
    asset=ASSETS / "go1.xml",
    base_body="trunk",
    feet=("FR_foot", "FL_foot", "RR_foot", "RL_foot"),
    undesired_contacts=tuple(f"{leg}_{part}" for leg in ("FR", "FL", "RR", "RL") for part in ("thigh", "calf")),
    terminal_contacts=("trunk",),
    deviation_joints=tuple(f"{leg}_hip_joint" for leg in ("FR", "FL", "RR", "RL")),
    standing_height=0.3312,
)

HUMANOID = RobotSpec(
    name="humanoid",
    asset=ASSETS / "humanoid.xml",
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
    standing_height=0.764,
)

ROBOTS: dict[str, RobotSpec] = {r.name: r for r in (GO1, HUMANOID)}
"""Robots by name."""

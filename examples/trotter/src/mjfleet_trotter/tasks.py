"""The Trotter robot record and its two velocity tasks, returned by :func:`tasks` (the package's entry point).

Everything comes from mjfleet's public API, :mod:`mjfleet.tasks.legged`; this module imports neither torch nor MuJoCo,
so ``list-tasks`` and command-line parsing stay fast.
"""

from __future__ import annotations

from pathlib import Path

from mjfleet.tasks.legged import (
    LOCOMOTION_TASK,
    AgentConfig,
    LocomotionConfig,
    RobotSpec,
    Servo,
    TaskSpec,
    Zone,
    cpu_agent,
    locomotion_agent,
    locomotion_sim,
    quadruped_flat_config,
    quadruped_rough_config,
)

LEGS = ("fl", "fr", "hl", "hr")
"""Front left, front right, hind left, hind right."""

TROTTER = RobotSpec(
    name="trotter",
    source=str(Path(__file__).with_name("trotter.xml")),
    base_body="torso",
    # Foot and torso zones are the geoms of those names; thigh and shin zones are the capsules of their bodies.
    feet=tuple(f"{leg}_foot" for leg in LEGS),
    undesired_contacts=tuple(f"{leg}_{part}" for leg in LEGS for part in ("thigh", "shin")),
    terminal_contacts=("torso",),
    deviation_joints=tuple(f"{leg}_abduct" for leg in LEGS),
    zones=(
        *(Zone(f"{leg}_thigh", body=f"{leg}_thigh") for leg in LEGS),
        *(Zone(f"{leg}_shin", body=f"{leg}_shin", kinds=("capsule",)) for leg in LEGS),
    ),
    # The file has no keyframe: the standing pose, with the base lowered until the feet touch the ground.
    home=((r".*_abduct", 0.0), (r".*_hip", 0.8), (r".*_knee", -1.5)),
    # The file has no actuators: one position servo per joint.
    servos=(
        Servo(r".*_(abduct|hip)", kp=30.0, kd=0.6, effort=20.0),
        Servo(r".*_knee", kp=30.0, kd=0.6, effort=30.0),
    ),
    description="Trotter, a 10.5 kg quadruped of boxes, capsules and spheres (mjfleet-trotter)",
)


def flat_config() -> LocomotionConfig:
    """Omnidirectional commands up to 1 m/s and 1 rad/s on a plane (the built-in Go1's MDP)."""
    return quadruped_flat_config(TROTTER, locomotion_sim(nconmax=16, njmax=64))


def rough_config() -> LocomotionConfig:
    """Bumps, slopes and stairs with the terrain curriculum, randomization, pushes and observation noise."""
    return quadruped_rough_config(TROTTER, locomotion_sim(nconmax=32, njmax=128))


def flat_agent() -> AgentConfig:
    """A few hundred iterations of 128-128-128 networks on a GPU."""
    return locomotion_agent(300, (128, 128, 128))


def flat_cpu_agent() -> AgentConfig:
    """On a few CPU cores: 64-64 networks, 8 passes per rollout, KL target 0.02."""
    return cpu_agent(flat_agent(), (64, 64))


def rough_agent() -> AgentConfig:
    """Larger networks and a long run for the terrain curriculum."""
    return locomotion_agent(1500, (512, 256, 128))


def tasks() -> list[TaskSpec | RobotSpec]:
    """The entry point: the robot record first, then the tasks that drive it."""
    return [
        TROTTER,
        TaskSpec(
            "trotter-velocity-flat",
            "Trotter quadruped follows forward/sideways/turn velocity commands on flat ground.",
            LOCOMOTION_TASK,
            flat_config,
            flat_agent,
            cpu_agent_cfg=flat_cpu_agent,
        ),
        TaskSpec(
            "trotter-velocity-rough",
            "Trotter follows velocity commands over bumps, slopes and stairs (curriculum, randomization).",
            LOCOMOTION_TASK,
            rough_config,
            rough_agent,
        ),
    ]

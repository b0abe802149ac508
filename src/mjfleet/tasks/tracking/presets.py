"""Complete default configs of the built-in tracking task: Menagerie's G1 follows a motion."""

from __future__ import annotations

import dataclasses

from mjfleet.rl.config import AgentConfig
from mjfleet.tasks.locomotion.defaults import cpu_agent, locomotion_agent, locomotion_sim
from mjfleet.tasks.locomotion.presets import G1_CPU_TRAINING_CONTACTS
from mjfleet.tasks.tracking.config import TrackingConfig

G1_TRACKED_BODIES = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)
"""The G1's bodies whose poses and velocities are tracked (mjlab's 14: the pelvis, the torso, three per limb)."""
G1_END_EFFECTORS = ("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link")
"""The G1's feet and hands: an episode ends when one's height leaves the reference's by the margin."""
G1_CPU_TRACKING_CONTACTS = dataclasses.replace(G1_CPU_TRAINING_CONTACTS, timestep_scale=2)
"""The G1's training contact model on the CPU with twice the model's timestep (10 ms, 2 physics steps per control
step): a tracking iteration costs about a fifth less, and a run met the stop condition after as many iterations as on
the model's 5 ms, with a policy that tracks the motion there within millimetres as closely (docs/tracking.md's
figures); the evaluation and `play` step the model's timestep (5 ms, the robot record's)."""


def unitree_g1_tracking_config() -> TrackingConfig:
    """Menagerie's G1 follows a motion (the shipped one unless ``--env.motion`` names another), 10 s episodes at
    50 Hz, on the G1's training contact model on the CPU at twice the model's timestep."""
    return TrackingConfig(
        robot="unitree_g1",
        episode_length_s=10.0,
        bodies=G1_TRACKED_BODIES,
        end_effectors=G1_END_EFFECTORS,
        sim=locomotion_sim(nconmax=48, njmax=200, training_contacts=G1_CPU_TRACKING_CONTACTS),
    )


def unitree_g1_tracking_agent() -> AgentConfig:
    """PPO for tracking: mjlab's entropy bonus (0.005) and 512-256-128 networks."""
    return locomotion_agent(3000, (512, 256, 128), entropy_coef=0.005)


def unitree_g1_tracking_cpu_agent() -> AgentConfig:
    """``unitree_g1_tracking_agent`` as it learns on a few CPU cores: 256-128 networks, the CPU's PPO passes and KL
    target, and half the initial action noise (a standard deviation of 1 shakes the G1 off the motion within a
    dozen steps, where the reference's joint targets alone follow it for a second)."""
    agent = cpu_agent(unitree_g1_tracking_agent(), (256, 128))
    return dataclasses.replace(agent, policy=dataclasses.replace(agent.policy, init_std=0.5))

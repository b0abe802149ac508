"""The velocity tasks' policy observation, term by term: its layout (what the ONNX sidecar tells a control loop) and
the noise each term gets while training."""

from __future__ import annotations

import torch

from mjfleet.tasks.locomotion.columns import Term, column_amplitudes
from mjfleet.tasks.locomotion.config import NoiseConfig


def policy_terms(nu: int) -> list[Term]:
    """The policy observation's terms in the order the task concatenates them, for ``nu`` actuated joints."""
    return [
        ("base_ang_vel", 3, "the base's angular velocity in its own frame (rad/s)"),
        ("projected_gravity", 3, "the unit gravity vector in the base's frame: (0, 0, -1) upright"),
        ("command", 3, "the commanded forward and sideways velocity (m/s, base frame) and yaw rate (rad/s)"),
        ("joint_pos", nu, "the angles of joint_names minus default_joint_pos (rad)"),
        ("joint_vel", nu, "the velocities of joint_names (rad/s)"),
        ("actions", nu, "the last step's actions, clipped to clip_actions"),
    ]


def noise_amplitude(noise: NoiseConfig, terms: list[Term], device: torch.device) -> torch.Tensor:
    """Per column of the policy observation, its noise's amplitude (the commands and the last actions stay exact)."""
    amplitudes = {
        "base_ang_vel": noise.ang_vel,
        "projected_gravity": noise.gravity,
        "joint_pos": noise.joint_pos,
        "joint_vel": noise.joint_vel,
    }
    parts = tuple((size, amplitudes.get(name, 0.0)) for name, size, _ in terms)
    return column_amplitudes(parts, noise.scale, device)

"""The tracking task's policy observation, term by term: its layout (what the ONNX sidecar tells a control loop) and
the noise each term gets while training."""

from __future__ import annotations

import torch

from mjfleet.tasks.locomotion.columns import Term, column_amplitudes
from mjfleet.tasks.tracking.config import TrackingConfig

ESTIMATED = ("reference_anchor_pos_b", "base_lin_vel")
"""The terms a robot knows only from motion capture or a state estimator (``--env.no-state-estimation`` drops them)."""


def policy_terms(nu: int, state_estimation: bool = True) -> list[Term]:
    """The policy observation's terms in the order the task concatenates them, for ``nu`` actuated joints; without
    ``state_estimation``, those of :data:`ESTIMATED` left out."""
    terms = observation_terms(nu)
    return terms if state_estimation else [term for term in terms if term[0] not in ESTIMATED]


def observation_terms(nu: int) -> list[Term]:
    """Every term the task computes, in its order: the policy's (all of them with state estimation), then the
    critic's own."""
    return [
        ("reference_joint_pos", nu, "the motion's angles of joint_names at the frame (rad)"),
        ("reference_joint_vel", nu, "the motion's velocities of joint_names at the frame (rad/s)"),
        (
            "reference_anchor_pos_b",
            3,
            "reference_anchor_pos minus the anchor body's position, in the anchor body's frame (m)",
        ),
        (
            "reference_anchor_ori_b",
            6,
            "the rotation from the anchor body's orientation to reference_anchor_quat: its matrix's first two"
            " columns, column by column (R00, R10, R20, R01, R11, R21)",
        ),
        ("base_lin_vel", 3, "the root body's linear velocity at its origin, in its own frame (m/s)"),
        ("base_ang_vel", 3, "the root body's angular velocity, in its own frame (rad/s)"),
        ("joint_pos", nu, "the angles of joint_names minus default_joint_pos (rad)"),
        ("joint_vel", nu, "the velocities of joint_names (rad/s)"),
        ("actions", nu, "the last step's actions, clipped to clip_actions"),
    ]


def noise_amplitude(cfg: TrackingConfig, terms: list[Term], device: torch.device) -> torch.Tensor | None:
    """Per column of the policy observation, its noise's amplitude; None when the noise is off."""
    noise = cfg.noise
    if noise.scale == 0.0:
        return None
    amplitudes = {  # the reference terms and the last actions stay exact
        "reference_anchor_pos_b": noise.anchor_pos,
        "reference_anchor_ori_b": noise.anchor_ori,
        "base_lin_vel": noise.lin_vel,
        "base_ang_vel": noise.ang_vel,
        "joint_pos": noise.joint_pos,
        "joint_vel": noise.joint_vel,
    }
    parts = tuple((size, amplitudes.get(name, 0.0)) for name, size, _ in terms)
    return column_amplitudes(parts, noise.scale, device)

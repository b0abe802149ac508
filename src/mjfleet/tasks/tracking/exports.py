"""What the tracking task's ONNX export carries besides the actor: the sidecar's description of the motion, anchor
and observation, and the motion's tables the graph reads at the frame the control loop counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from mjfleet.envs.task import ExportedTables

if TYPE_CHECKING:
    from mjfleet.tasks.tracking.task import TrackingTask


def sidecar_metadata(task: TrackingTask) -> dict[str, Any]:
    """What a control loop needs besides the graph: how actions become servo targets, the motion the policy
    follows (the graph carries it: :func:`motion_tables`), the anchor and tracked bodies, and the policy
    observation's terms in order (the servos' gains: every position-servo task's sidecar has them)."""
    return {
        "joint_targets": (
            "the motion's angles of joint_names at frame + 1 + action_scale * clip(action)"
            if task.cfg.action_offset == "reference"
            else "default_joint_pos + action_scale * clip(action)"
        ),
        "motion": {
            "file": task.cfg.motion_file().name,
            "sha256": task.motion.sha256,
            "frames": task.reference.frames,
            "frame_dt": task.dt,
        },
        "anchor_body": task.cfg.anchor_body,
        "tracked_bodies": list(task.cfg.bodies),
        "observation_terms": {
            "policy": [{"name": name, "size": size, "what": what} for name, size, what in task.policy_terms()]
        },
    }


def motion_tables(task: TrackingTask) -> ExportedTables:
    """The motion at the control rate, read at the frame the control loop counts (0 at the motion's start, one
    more each control step): the reference terms the observation starts with, the anchor's pose they are
    compared with, and the servo targets of the actions."""
    ref, anchor = task.reference, task._anchor
    zero_targets = task._zero_targets(torch.arange(ref.frames, device=ref.joint_pos.device))
    tables = {
        "reference_joint_pos": ref.joint_pos[:, task._actuated],
        "reference_joint_vel": ref.joint_vel[:, task._actuated],
        "reference_anchor_pos": ref.body_pos[:, anchor],
        "reference_anchor_quat": ref.body_quat[:, anchor],
    }
    scale = torch.as_tensor(task.action_scale, dtype=torch.float32).expand(len(task._actuated))
    return ExportedTables("frame", tables, zero_targets, scale, task.cfg.clip_actions)

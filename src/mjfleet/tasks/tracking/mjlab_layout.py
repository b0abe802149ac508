"""The tracking policy in the layout of mjlab's tracking exports, for control loops written for them (BeyondMimic's
``motion_tracking_controller``): the same inputs (``obs`` in mjlab's term order and conventions, ``time_step`` a
float of shape [1, 1]), outputs (``actions`` as offsets from ``default_joint_pos`` in units of ``action_scale``, then
the motion's joint angles and velocities and the tracked bodies' world poses and velocities at ``time_step``), fixed
shapes of batch 1, and metadata (comma-separated values under mjlab's keys).

Such a loop counts ``time_step`` one ahead of the observation: it runs the graph once at the motion's first frame
for the first observation's reference, then each call passes the next frame, whose outputs the next observation
reads. The observation of a call with ``time_step`` t is at frame t - 1.

Where mjfleet's conventions differ, the graph converts at its edges, so the actor inside is the trained one:
- the anchor orientation's two matrix columns come row by row (mjlab) and are reordered column by column;
- with ``--env.action-offset reference`` (the default) the actions are offsets from the reference's joint angles:
  the graph adds the reference's offset from ``default_joint_pos`` to the actions it outputs and takes the previous
  step's off the last actions it is fed back (all zeros: no step yet, zeros in either layout).
The base's linear velocity is the root body's origin's in its own frame in both (what such a loop's state estimator
gives; mjlab's simulation reads it at the IMU site, 9.5 cm away on the G1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mjfleet.envs.task import ForeignExport

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.tasks.tracking.task import TrackingTask

LAYOUT = "mjlab"
MJLAB_TERMS = {
    "reference_anchor_pos_b": "motion_anchor_pos_b",
    "reference_anchor_ori_b": "motion_anchor_ori_b",
    "base_lin_vel": "base_lin_vel",
    "base_ang_vel": "base_ang_vel",
    "joint_pos": "joint_pos",
    "joint_vel": "joint_vel",
    "actions": "actions",
}
"""mjfleet's policy terms by mjlab's names; mjlab's ``command`` is the two reference joint terms together."""
OUTPUTS = ("actions", "joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


def _columns(task: TrackingTask) -> dict[str, slice]:
    """Each policy term's columns in the observation (the same in both layouts: only columns within terms move)."""
    columns, start = {}, 0
    for name, size, _ in task.policy_terms():
        columns[name] = slice(start, start + size)
        start += size
    return columns


class MjlabTrackingPolicy(torch.nn.Module):
    """The actor between mjlab's inputs and outputs (the module docstring says what each edge converts)."""

    def __init__(self, actor: torch.nn.Module, task: TrackingTask) -> None:
        super().__init__()
        self.actor = actor
        ref = task.reference
        joints = task._actuated.cpu()
        self.joint_pos = ref.joint_pos[:, joints].detach().float().cpu()
        self.joint_vel = ref.joint_vel[:, joints].detach().float().cpu()
        self.bodies = [
            t.detach().float().cpu() for t in (ref.body_pos, ref.body_quat, ref.body_lin_vel, ref.body_ang_vel)
        ]
        self.last = int(ref.frames) - 1
        self.clip = float(task.cfg.clip_actions)
        columns = _columns(task)
        order = list(range(sum(size for _, size, _ in task.policy_terms())))
        ori = columns["reference_anchor_ori_b"]
        # mjlab: R00, R01, R10, R11, R20, R21 (row by row); mjfleet: R00, R10, R20, R01, R11, R21.
        order[ori] = [ori.start + i for i in (0, 2, 4, 1, 3, 5)]
        self.order = torch.as_tensor(order)
        self.actions = columns["actions"]
        self.offsets: torch.Tensor | None = None
        if task.cfg.action_offset == "reference":
            # Per step starting at frame f, the reference's offset from the standing pose at the frame it ends in.
            zero_targets = task._zero_targets(torch.arange(ref.frames, device=ref.joint_pos.device))
            default, scale = (t.detach().float().cpu() for t in (task.default_joint_pos, task.action_scale))
            self.offsets = (zero_targets.detach().float().cpu() - default) / scale

    def forward(self, obs: torch.Tensor, time_step: torch.Tensor) -> tuple[torch.Tensor, ...]:
        step = time_step.long().squeeze(-1)
        t = torch.clamp(step, 0, self.last)
        x = obs[:, self.order]
        frame = torch.clamp(step - 1, 0, self.last)  # the observation's
        actions_in = x[:, self.actions]
        if self.offsets is not None:
            acted = (actions_in != 0).any(-1, keepdim=True).to(actions_in.dtype)
            actions_in = actions_in - self.offsets[torch.clamp(frame - 1, min=0)] * acted
            x = torch.cat([x[:, : self.actions.start], actions_in, x[:, self.actions.stop :]], -1)
        # Clipped as the environment clips before the servo targets.
        actions = torch.clamp(self.actor(x), -self.clip, self.clip)
        if self.offsets is not None:
            actions = actions + self.offsets[frame]
        pos, quat, lin_vel, ang_vel = (table[t] for table in self.bodies)
        return actions, self.joint_pos[t], self.joint_vel[t], pos, quat, lin_vel, ang_vel


def _csv(values: list[float] | list[int] | list[str]) -> str:
    return ",".join(str(v) for v in values)


def mjlab_export(task: TrackingTask, env: MjEnv) -> ForeignExport:
    """The tracking policy's export in mjlab's layout (:class:`MjlabTrackingPolicy`) with mjlab's metadata keys."""
    from mjfleet.rl.checkpoint.onnx import LAYOUT_KEY, environment_metadata

    meta = environment_metadata(env)
    terms = task.policy_terms()
    names = ["command", *(MJLAB_TERMS[name] for name, _, _ in terms if not name.startswith("reference_joint"))]
    count = len(names)
    scale = [float(str(v)) for v in task.action_scale.detach().cpu().float().numpy()]
    gains = meta.get("servo_gains", {})
    metadata = {
        "run_path": "local",
        "joint_names": _csv(meta["joint_names"]),
        "joint_stiffness": _csv(gains.get("kp", [])),
        "joint_damping": _csv(gains.get("kd", [])),
        "default_joint_pos": _csv(meta["default_joint_pos"]),
        "command_names": "motion",
        "observation_names": _csv(names),
        "observation_terms_scale": _csv([1.0] * count),
        "observation_terms_flatten_history_dim": _csv([1.0] * count),
        "observation_terms_history_length": _csv([0.0] * count),
        "observation_terms_clip": ",".join(["-inf;inf"] * count),
        "action_scale": _csv(scale),
        "anchor_body_name": task.cfg.anchor_body,
        "body_names": _csv(list(task.cfg.bodies)),
        # Not mjlab's: what this file is, and of which motion.
        LAYOUT_KEY: LAYOUT,
        "mjfleet_motion_sha256": task.motion.sha256,
    }
    width = sum(size for _, size, _ in terms)
    inputs = (("obs", torch.zeros(1, width)), ("time_step", torch.zeros(1, 1)))
    return ForeignExport(LAYOUT, lambda actor: MjlabTrackingPolicy(actor, task), inputs, OUTPUTS, metadata)

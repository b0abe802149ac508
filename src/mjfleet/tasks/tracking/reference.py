"""The motion's frames on the simulation's device, for the tracked bodies (what the tracking task reads by frame)."""

from __future__ import annotations

import numpy as np
import torch

from mjfleet.tasks.tracking.motion import Kinematics


class Reference:
    """The motion's frames on a device, one tensor per quantity ``(frames, ...)``, for the tracked bodies."""

    def __init__(self, kin: Kinematics, bodies: list[int], device: torch.device) -> None:
        def t(values: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(values, dtype=torch.float32, device=device)

        self.frames = int(kin.joint_pos.shape[0])
        self.joint_pos, self.joint_vel = t(kin.joint_pos), t(kin.joint_vel)
        index = [b - 1 for b in bodies]  # the kinematics leave the world body out
        self.body_pos, self.body_quat = t(kin.body_pos[:, index]), t(kin.body_quat[:, index])
        self.body_lin_vel, self.body_ang_vel = t(kin.body_lin_vel[:, index]), t(kin.body_ang_vel[:, index])
        self.root_pos, self.root_quat = t(kin.body_pos[:, 0]), t(kin.body_quat[:, 0])
        self.root_lin_vel, self.root_ang_vel = t(kin.body_lin_vel[:, 0]), t(kin.body_ang_vel[:, 0])

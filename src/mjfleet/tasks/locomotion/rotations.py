"""Batched quaternion helpers (MuJoCo convention: w, x, y, z) for base-frame quantities."""

from __future__ import annotations

import torch


def rotate_inverse(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Express world-frame vectors ``vec`` (..., 3) in the frame of unit quaternions ``quat`` (..., 4)."""
    w, u = quat[..., :1], quat[..., 1:]
    uv = torch.cross(u, vec, dim=-1)
    return vec - 2.0 * w * uv + 2.0 * torch.cross(u, uv, dim=-1)


def rotate(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate body-frame vectors ``vec`` (..., 3) into the world frame by unit quaternions ``quat`` (..., 4)."""
    w, u = quat[..., :1], quat[..., 1:]
    uv = torch.cross(u, vec, dim=-1)
    return vec + 2.0 * w * uv + 2.0 * torch.cross(u, uv, dim=-1)


def projected_gravity(quat: torch.Tensor) -> torch.Tensor:
    """The unit gravity direction (0, 0, -1) in the body frame, (..., 3); (0, 0, -1) when upright."""
    w, x, y, z = quat.unbind(-1)
    # R^T (0, 0, -1) is minus the third row of R, written out to skip the generic rotation.
    return torch.stack((2.0 * (w * y - x * z), -2.0 * (w * x + y * z), 2.0 * (x * x + y * y) - 1.0), dim=-1)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions of rotations by ``yaw`` (radians) about the world z axis, (..., 4)."""
    half = 0.5 * yaw
    zero = torch.zeros_like(half)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)


def heading(quat: torch.Tensor) -> torch.Tensor:
    """Yaw angle (radians) of the body x axis projected on the ground plane."""
    w, x, y, z = quat.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a * b`` of quaternions (..., 4): rotation ``b`` followed by ``a``."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def conjugate(q: torch.Tensor) -> torch.Tensor:
    """The inverse rotations of unit quaternions ``q``."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def rotation_angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The angle of the rotation between unit quaternions ``a`` and ``b`` (radians, in [0, pi])."""
    dot = torch.sum(a * b, dim=-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def two_columns(q: torch.Tensor) -> torch.Tensor:
    """The first two columns of the rotation matrices of ``q`` (..., 6): a continuous encoding of an orientation."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z),
            2 * (x * y + w * z),
            2 * (x * z - w * y),
            2 * (x * y - w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z + w * x),
        ),
        dim=-1,
    )


def euler_quat(rpy: torch.Tensor) -> torch.Tensor:
    """Quaternions of roll, pitch, yaw rotations (applied in that order about the world axes), (..., 4)."""
    half = rpy / 2
    c, s = torch.cos(half), torch.sin(half)
    cr, cp, cy = c.unbind(-1)
    sr, sp, sy = s.unbind(-1)
    return torch.stack(
        (
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ),
        dim=-1,
    )

# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Arm poses solved once at setup: the hand around a cube resting on the table, for a grid of cube positions
(damped least squares on MuJoCo C; the simulation then only copies rows of the result)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from mjfleet.tasks.joint_limits import joint_ranges
from mjfleet.tasks.locomotion.model import lowest_point
from mjfleet.tasks.manipulation.arms import ArmSpec

TIP_CLEARANCE = 0.005
"""The fingertips' lowest point stays this far above the table (metres)."""
GRID_STEP = 0.01
"""Spacing of the cube positions a pose is solved for (metres)."""


@dataclass(frozen=True)
class HandAtCube:
    """Poses with the end-effector at a cube on the table, one row per cube position that has one."""

    xy: np.ndarray
    """Cube positions on the table, ``(k, 2)``."""
    qpos: np.ndarray
    """The whole ``qpos`` of each pose (the arm's joints solved, everything else as in ``home``), ``(k, nq)``."""
    yaw: np.ndarray
    """Heading of a cube whose faces meet the fingers as they close, ``(k,)``."""


def hand_at_cube_poses(
    m: mujoco.MjModel,
    arm: ArmSpec,
    home: np.ndarray,
    xs: tuple[float, float],
    ys: tuple[float, float],
    fingertip_geoms: list[int],
) -> HandAtCube:
    """Solve, for cube positions every :data:`GRID_STEP` within ``xs`` x ``ys``, the arm joints that put the
    end-effector there, low enough that the fingers straddle a cube on the table (their tips
    :data:`TIP_CLEARANCE` above it), with the hand turned as at ``home`` about the vertical through the arm's base.
    Positions the arm cannot reach within 2 mm and 1 degree are left out."""
    d = mujoco.MjData(m)
    d.qpos[:] = home
    mujoco.mj_kinematics(m, d)
    site, hand = int(m.site(arm.ee_site).id), int(m.body(arm.hand_body).id)
    tips = min(lowest_point(m, d, g) for g in fingertip_geoms)
    height = float(d.site_xpos[site][2]) - tips + TIP_CLEARANCE
    home_quat = d.xquat[hand].copy()
    fingers = set(arm.gripper_joints)
    joints = [
        j
        for j in range(m.njnt)
        if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        and m.joint(j).name not in fingers
    ]
    finger_axis = int(m.joint(arm.gripper_joints[0]).id)
    rows: list[tuple[float, float, np.ndarray, float]] = []
    for x in _grid(xs):
        for y in _grid(ys):
            turn = math.atan2(y, x) - math.atan2(float(d.site_xpos[site][1]), float(d.site_xpos[site][0]))
            target_quat = np.empty(4)
            mujoco.mju_mulQuat(target_quat, np.array([math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)]), home_quat)
            solved = _solve(m, joints, site, hand, home, np.array([x, y, height]), target_quat)
            if solved is None:
                continue
            axis = solved.xaxis[finger_axis]
            rows.append((x, y, solved.qpos.copy(), math.atan2(float(axis[1]), float(axis[0]))))
    return HandAtCube(
        xy=np.array([[x, y] for x, y, _, _ in rows]).reshape(-1, 2),
        qpos=np.array([q for _, _, q, _ in rows]).reshape(-1, m.nq),
        yaw=np.array([yaw for _, _, _, yaw in rows]),
    )


def _grid(bounds: tuple[float, float]) -> np.ndarray:
    low, high = bounds
    return np.linspace(low, high, max(1, round((high - low) / GRID_STEP) + 1))


def _solve(
    m: mujoco.MjModel,
    joints: list[int],
    site: int,
    hand: int,
    start: np.ndarray,
    target_pos: np.ndarray,
    target_quat: np.ndarray,
    iterations: int = 300,
    damping: float = 0.05,
) -> mujoco.MjData | None:
    """Damped least squares on the site's position and the hand's orientation, within the joints' ranges; the
    solution's data with its kinematics computed, or None where it misses."""
    d = mujoco.MjData(m)
    d.qpos[:] = start
    qadr = np.array([m.jnt_qposadr[j] for j in joints])
    dofs = np.array([m.jnt_dofadr[j] for j in joints])
    low, high = joint_ranges(m, np.asarray(joints))
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    error = np.zeros(6)
    for _ in range(iterations):
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        error[:3] = target_pos - d.site_xpos[site]
        error[3:] = _turn(target_quat, d.xquat[hand], d.xmat[hand])
        if np.linalg.norm(error[:3]) < 2e-4 and np.linalg.norm(error[3:]) < 2e-3:
            break
        mujoco.mj_jacSite(m, d, jacp, jacr, site)
        jac = np.vstack((jacp, jacr))[:, dofs]
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(6), error)
        d.qpos[qadr] = np.clip(d.qpos[qadr] + step, low, high)
    mujoco.mj_kinematics(m, d)
    position = float(np.linalg.norm(target_pos - d.site_xpos[site]))
    if position > 2e-3 or float(np.linalg.norm(_turn(target_quat, d.xquat[hand], d.xmat[hand]))) > math.radians(1.0):
        return None
    return d


def _turn(target: np.ndarray, quat: np.ndarray, xmat: np.ndarray) -> np.ndarray:
    """The rotation from ``quat`` to ``target`` as a world-frame rotation vector (MuJoCo gives it in the frame of
    ``quat``; the Jacobian is in the world's)."""
    local = np.zeros(3)
    mujoco.mju_subQuat(local, target, quat)
    return xmat.reshape(3, 3) @ local

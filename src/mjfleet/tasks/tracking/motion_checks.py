# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""What a robot's model can tell of a reference motion that reads well as a file: joint angles beyond reach (degrees),
a root quaternion in the other order (refused, one line), and what a robot cannot follow (warned: clips joined,
another frame rate, a first frame sunk or floating)."""

from __future__ import annotations

from collections.abc import Iterator

import mujoco
import numpy as np

from mjfleet.errors import UsageError
from mjfleet.tasks.tracking.motion import Motion

JOINT_RANGE_SLACK = 1.0
"""Radians a motion's joint angle may pass its joint's range by (a retargeting's overshoot) before the file is refused:
an angle in degrees passes it by tens."""
BODY_MATCH = 0.01
"""Metres: an npz's body positions put where the robot's kinematics puts them (on average), a quaternion order fits."""
UPRIGHT = 0.9
"""The z of the root's z axis above which it stands upright (within 25 degrees of the vertical)."""
FLOOR_MARGIN = 0.05
"""Metres by which the file's quaternion order must bring the robot's lowest body nearer the floor (on average) than
the other order, where only the other stands the root upright, for the file to mean a robot that lies or rolls over."""


ROOT_SPEED = 10.0
"""m/s: a root faster than this from one frame to the next is a cut between clips or a wrong frame rate."""
JOINT_SPEED = 40.0
"""rad/s: a joint faster than this from one frame to the next (humanoid servos reach about 20-40)."""
START_HEIGHT = (-0.02, 0.25)
"""m: where the robot's lowest body origin may be in the first frame (a G1 standing: 0.035); outside, the motion
starts sunk into the floor or floating above it (its root height measured from another floor)."""


def implausible(model: mujoco.MjModel, motion: Motion) -> list[str]:
    """What in ``motion`` a robot cannot follow though the file reads well: a jump of the root or a joint between
    two frames, the first frame below or above the floor. Each as words (the caller warns: a motion may mean it)."""
    said = []
    root = np.linalg.norm(np.diff(motion.root_pos, axis=0), axis=1) * motion.fps
    frame = int(np.argmax(root)) if root.size else 0
    if root.size and root[frame] > ROOT_SPEED:
        said.append(
            f"the root moves {root[frame] / motion.fps:.2g} m from frame {frame + 1} to {frame + 2}, {root[frame]:.0f}"
            f" m/s at {motion.fps:g} fps (two clips joined, or another frame rate?)"
        )
    hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    speeds = np.abs(np.diff(motion.joint_pos, axis=0)) * motion.fps
    if speeds.size and speeds.max() > JOINT_SPEED:
        frame, column = np.unravel_index(int(np.argmax(speeds)), speeds.shape)
        said.append(
            f"{model.joint(hinges[column]).name} turns {speeds[frame, column]:.0f} rad/s from frame {frame + 1} to"
            f" {frame + 2} at {motion.fps:g} fps (two clips joined, or another frame rate?)"
        )
    _, data = next(_posed(model, motion, motion.root_quat, hinges, np.array([0])))
    lowest = float(data.xpos[1:, 2].min())
    if not START_HEIGHT[0] <= lowest <= START_HEIGHT[1]:
        where = "below the floor" if lowest < START_HEIGHT[0] else "above the floor"
        said.append(
            f"in the first frame the robot's lowest body is {abs(lowest) * 100:.0f} cm {where} (its root height from"
            " another floor?)"
        )
    return said


def check_on_robot(model: mujoco.MjModel, motion: Motion) -> None:
    """What the robot's model can tell of the file: joint angles within reach of the joints' ranges (degrees are
    not), and root quaternions in the layout's order: an npz's own body positions where the robot's kinematics puts
    the bodies in that order and not only in the other; otherwise, not a root that stands upright throughout only in
    the other order, unless the file's order puts the robot on the floor and the other does not (a motion that lies
    or rolls over). Where both orders stand it upright, a turn about the vertical, the order cannot be told. One line
    (:class:`UsageError`) where not."""
    path = motion.path
    hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    for column, joint in enumerate(hinges):
        if not model.jnt_limited[joint]:
            continue
        low, high = model.jnt_range[joint]
        angles = motion.joint_pos[:, column]
        beyond = np.maximum(low - angles, angles - high)
        frame = int(np.argmax(beyond))
        if beyond[frame] > JOINT_RANGE_SLACK:
            raise UsageError(
                f"motion file {path}: {model.joint(joint).name} is at {angles[frame]:.3g} rad in frame {frame + 1},"
                f" {beyond[frame]:.3g} rad beyond its range [{low:.3g}, {high:.3g}] (the layout's angles are radians)"
            )
    csv = path.suffix.lower() == ".csv"
    other_quat = motion.root_quat[:, [1, 2, 3, 0]] if csv else motion.root_quat[:, [3, 0, 1, 2]]  # the other order
    if motion.body_pos is not None and motion.body_pos.shape[1] == model.nbody - 1:  # not another model's bodies
        frames = np.unique(np.linspace(0, motion.frames - 1, 8).astype(np.int64))
        as_read = _body_offset(model, motion, motion.root_quat, hinges, frames)
        other = _body_offset(model, motion, other_quat, hinges, frames)
        if other < BODY_MATCH < as_read:
            raise UsageError(
                f"motion file {path}: body_pos_w puts the bodies where the robot does with the root quaternions read as"
                f" x, y, z, w ({as_read * 100:.0f} cm from them as w, x, y, z); the layout's are w, x, y, z"
            )
        if as_read < BODY_MATCH:
            return  # the file's bodies say its order is right
    # A quaternion's components in the other order keep its norm, but tilt the upright root of every heading but the
    # one at which the swap is a half turn about the vertical (a CSV's root of heading h written w, x, y, z reads as
    # rolled by 180 degrees - h). What only the other order stands upright is that mistake, or a robot that lies or
    # rolls over about the x axis: that one has its lowest body on the floor in the file's order, not in the other.
    tilted = float(_upright(motion.root_quat).mean()) < UPRIGHT
    if not tilted or float(_upright(other_quat).min()) <= UPRIGHT:
        return
    frames = np.unique(np.linspace(0, motion.frames - 1, 64).astype(np.int64))
    if _floor_gap(model, motion, motion.root_quat, hinges, frames) + FLOOR_MARGIN < _floor_gap(
        model, motion, other_quat, hinges, frames
    ):
        return
    order, written = ("x, y, z, w", "w, x, y, z") if csv else ("w, x, y, z", "x, y, z, w")
    tilt = float(np.degrees(np.arccos(np.clip(_upright(motion.root_quat), -1.0, 1.0))).mean())
    raise UsageError(
        f"motion file {path}: the root is {tilt:.0f} degrees from upright on average (its lowest body no nearer the"
        f" floor), and upright throughout read as quaternions {written}; the layout's are {order}"
    )


def _body_offset(
    model: mujoco.MjModel, motion: Motion, root_quat: np.ndarray, hinges: list[int], frames: np.ndarray
) -> float:
    """Mean distance (metres) of the file's body positions from the robot's, at ``frames``, the root at
    ``root_quat``."""
    assert motion.body_pos is not None
    body_pos = motion.body_pos
    distances = [
        np.linalg.norm(data.xpos[1:] - body_pos[frame], axis=-1).mean()
        for frame, data in _posed(model, motion, root_quat, hinges, frames)
    ]
    return float(np.mean(distances))


def _floor_gap(
    model: mujoco.MjModel, motion: Motion, root_quat: np.ndarray, hinges: list[int], frames: np.ndarray
) -> float:
    """Mean height (metres, either side of the floor) of the robot's lowest body origin at ``frames``, the root at
    ``root_quat``."""
    gaps = [abs(float(data.xpos[1:, 2].min())) for _, data in _posed(model, motion, root_quat, hinges, frames)]
    return float(np.mean(gaps))


def _posed(
    model: mujoco.MjModel, motion: Motion, root_quat: np.ndarray, hinges: list[int], frames: np.ndarray
) -> Iterator[tuple[int, mujoco.MjData]]:
    """Each of ``frames`` with the robot posed as the motion has it there (the root at ``root_quat``), its bodies'
    poses computed (one ``MjData``, posed again for each)."""
    data = mujoco.MjData(model)
    for frame in frames:
        data.qpos[0:3], data.qpos[3:7] = motion.root_pos[frame], root_quat[frame]
        data.qpos[model.jnt_qposadr[hinges]] = motion.joint_pos[frame]
        mujoco.mj_kinematics(model, data)
        yield int(frame), data


def _upright(quat: np.ndarray) -> np.ndarray:
    """Per unit quaternion (w, x, y, z), the world's z component of the body's z axis: 1 upright, -1 upside down."""
    return 1.0 - 2.0 * (quat[:, 1] ** 2 + quat[:, 2] ** 2)

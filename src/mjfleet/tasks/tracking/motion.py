# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Reference motions: a humanoid's joint trajectory read from a file a user already has, checked, resampled to the
control rate and completed with what tracking needs (every body's pose and velocity) by MuJoCo's kinematics.

Two layouts are read:

- **CSV** as the retargeted LAFAN1 files for the G1 have it: one frame per row at 30 frames per second, no header;
  the root's position (x, y, z, metres), its orientation as a quaternion (x, y, z, w), then the robot's joint angles
  (radians) in the order of its model's hinge joints.
- **npz** as mjlab's ``csv_to_npz`` writes it: ``fps``, ``joint_pos`` (frames x joints) and ``body_pos_w`` /
  ``body_quat_w`` (frames x bodies x 3 / 4, quaternions w, x, y, z; the first body is the root). Only the joint
  angles and the root's pose are read; everything else is computed again here, on this robot model.

Everything a file can get wrong is one :class:`~mjfleet.errors.UsageError` line naming the file and what is wrong.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mjfleet.errors import UsageError
from mjfleet.paths import absolute_path

CSV_FPS = 30.0
"""Frames per second of the retargeted CSV layout (the LAFAN1 retargeting's; other tools' CSVs may have others)."""
MIN_SECONDS = 1.0
"""A motion shorter than this is refused (a few frames are no motion to learn)."""
MAX_SECONDS = 3600.0
"""A motion longer than this is refused: an npz whose ``fps`` holds the frame period reads as a 900 times slower
motion (and a tiny rate as one no memory holds)."""
FPS_RANGE = (1.0, 1000.0)
"""Frame rates a motion file may have."""
UNIT_TOLERANCE = 1e-2
"""How far a file's quaternion's norm may be from 1 (rounding in a text file); it is normalised after the check."""


@dataclass(frozen=True)
class Motion:
    """A joint trajectory: the root's pose and the joint angles, one row per frame at :attr:`fps`."""

    fps: float
    """Frames per second."""
    root_pos: np.ndarray
    """``(frames, 3)`` root positions in the world (metres)."""
    root_quat: np.ndarray
    """``(frames, 4)`` root orientations, unit quaternions (w, x, y, z)."""
    joint_pos: np.ndarray
    """``(frames, joints)`` joint angles (radians), in the model's hinge-joint order."""
    path: Path
    """The file it was read from."""
    sha256: str
    """The file's content digest: another motion under the same name is another run."""
    body_pos: np.ndarray | None = None
    """``(frames, bodies, 3)``: the file's own body positions (an npz's ``body_pos_w``; None for a CSV), read only to
    check the root's quaternion order (:func:`~mjfleet.tasks.tracking.motion_checks.check_on_robot`)."""

    @property
    def frames(self) -> int:
        return int(self.root_pos.shape[0])

    @property
    def duration_s(self) -> float:
        """Seconds from the first frame to the last."""
        return (self.frames - 1) / self.fps


def read_motion(path: Path, joints: int, csv_fps: float = CSV_FPS) -> Motion:
    """The motion in ``path`` (``.csv`` at ``csv_fps`` frames per second, or ``.npz``) of a robot with ``joints``
    hinge joints, checked."""
    if not FPS_RANGE[0] <= csv_fps <= FPS_RANGE[1]:  # NaN too; here, so that play and the viewer check it as train does
        raise UsageError(f"--env.motion-fps must be between {FPS_RANGE[0]:g} and {FPS_RANGE[1]:g} (got {csv_fps:g})")
    path = absolute_path(path, "motion file")
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "is not a regular file" if path.exists() else "does not exist"
        raise UsageError(f"motion file {path} {what}")
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise UsageError(f"motion file {path}: cannot be read ({e.strerror or type(e).__name__})") from None
    body_pos = None
    if path.suffix.lower() == ".csv":
        fps, root_pos, root_quat, joint_pos = _read_csv(path, joints, csv_fps)
    elif path.suffix.lower() == ".npz":
        fps, root_pos, root_quat, joint_pos, body_pos = _read_npz(path, joints)
    else:
        raise UsageError(f"motion file {path}: not a .csv (retargeted G1 layout) or an .npz (mjlab's csv_to_npz)")
    # Frames are counted from 1, as the lines of a CSV are.
    for name, values in (("root position", root_pos), ("root quaternion", root_quat), ("joint angle", joint_pos)):
        bad = ~np.isfinite(values).all(axis=1)
        if bad.any():
            raise UsageError(
                f"motion file {path}: frame {int(np.argmax(bad)) + 1} has a {name} that is not a finite number"
            )
    norms = np.linalg.norm(root_quat, axis=1)
    off = np.abs(norms - 1.0) > UNIT_TOLERANCE
    if off.any():
        frame = int(np.argmax(off))
        raise UsageError(
            f"motion file {path}: the root quaternion of frame {frame + 1} has norm {norms[frame]:.3f}, not 1"
        )
    root_quat = root_quat / norms[:, None]
    frames, seconds = root_pos.shape[0], (root_pos.shape[0] - 1) / fps
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        bound = f"shorter than {MIN_SECONDS:g} s" if seconds < MIN_SECONDS else f"longer than {MAX_SECONDS:g} s"
        raise UsageError(
            f"motion file {path}: {frames} frame{'s' if frames != 1 else ''} at {fps:g} per second, {bound}"
        )
    return Motion(fps, root_pos, root_quat, joint_pos, path, digest, body_pos)


def _read_csv(path: Path, joints: int, fps: float) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's "CSV UTF-8" begins with a byte-order mark
    except UnicodeDecodeError:
        raise UsageError(
            f"motion file {path}: not UTF-8 text (a text file of another encoding: save it as UTF-8)"
        ) from None
    # (line number from 1, its values): blank lines and comments (#) are not frames
    lines = [(n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line]
    if not lines:
        raise UsageError(f"motion file {path}: no frames (the file is empty)")
    columns = 7 + joints
    layout = f"the layout has {columns} (root x y z, quaternion x y z w, {joints} joint angles)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            rows = np.loadtxt([line for _, line in lines], delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError:
        raise UsageError(f"motion file {path}: {_first_bad_line(lines, columns, layout)}") from None
    if rows.shape[1] != columns:
        raise UsageError(f"motion file {path}: {rows.shape[1]} columns, {layout}")
    quat_xyzw = rows[:, 3:7]
    return fps, rows[:, 0:3], quat_xyzw[:, [3, 0, 1, 2]], rows[:, 7:]


def _first_bad_line(lines: list[tuple[int, str]], columns: int, layout: str) -> str:
    """What is wrong with the first line of ``lines`` that is not ``columns`` numbers separated by commas."""
    for number, line in lines:
        cells = line.split(",")
        shown = line if len(line) <= 60 else line[:57] + "..."
        if not _numbers(cells):
            if _numbers(cells[:-1]) and not cells[-1].strip():
                return f"line {number} ends with a comma (an empty column): {shown!r}"
            for separator, name in ((";", "semicolons"), ("\t", "tabs"), (" ", "spaces")):
                if separator in line and _numbers(line.replace(separator, " ").split()):
                    return f"line {number} separates its numbers by {name}, not commas: {shown!r}"
            words = any(not _numbers([cell]) and any(c.isalpha() for c in cell) for cell in cells)
            header = " (a header? the layout has none)" if words and number == lines[0][0] else ""
            return f"line {number} is not numbers separated by commas: {shown!r}{header}"
        if len(cells) != columns:
            return f"line {number} has {len(cells)} columns, {layout}"
    return "not a table of numbers separated by commas"


def _numbers(cells: list[str]) -> bool:
    """Whether every cell (and there is one) reads as a number."""
    try:
        [float(cell) for cell in cells]
    except ValueError:
        return False
    return bool(cells)


NPZ_KEYS = ("fps", "joint_pos", "body_pos_w", "body_quat_w")
"""What an npz motion must hold (mjlab's ``csv_to_npz`` writes these and the velocities, which are not read)."""


def _read_npz(path: Path, joints: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    with path.open("rb") as f:
        magic = f.read(6)
    if magic == b"\x93NUMPY":
        raise UsageError(f"motion file {path}: holds one array (an .npy file?), not an npz's named arrays")
    if not magic.startswith(b"PK"):
        raise UsageError(f"motion file {path}: not an npz (a zip archive of named arrays)")
    try:
        with np.load(path, allow_pickle=False) as data:  # closed on every refusal too
            missing = [key for key in NPZ_KEYS if key not in data.files]
            if missing:
                raise UsageError(f"motion file {path}: no {', '.join(missing)} (mjlab's csv_to_npz writes {NPZ_KEYS})")
            arrays = {key: np.asarray(data[key]) for key in NPZ_KEYS}
            for key, array in arrays.items():
                if array.dtype.kind not in "iuf":  # complex numbers would lose their imaginary part without a word
                    raise UsageError(f"motion file {path}: {key} holds {array.dtype} values, not real numbers")
            rate = arrays["fps"].reshape(-1)
            if rate.size != 1:
                raise UsageError(f"motion file {path}: fps holds {rate.size} values, not one frame rate")
            fps = float(rate[0])
            joint_pos, body_pos, body_quat = (
                arrays[key].astype(np.float64) for key in ("joint_pos", "body_pos_w", "body_quat_w")
            )
    except UsageError:
        raise
    except Exception as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0]
        reason = reason if len(reason) <= 100 else reason[:97] + "..."
        raise UsageError(f"motion file {path}: not a readable npz ({reason})") from None
    if not FPS_RANGE[0] <= fps <= FPS_RANGE[1]:
        raise UsageError(
            f"motion file {path}: fps {fps:g} is not a frame rate between {FPS_RANGE[0]:g} and {FPS_RANGE[1]:g} per"
            " second (is it the frame period?)"
        )
    if joint_pos.ndim != 2 or joint_pos.shape[1] != joints:
        raise UsageError(f"motion file {path}: joint_pos has shape {joint_pos.shape}, the robot has {joints} joints")
    frames = joint_pos.shape[0]
    bodies = body_pos.shape[1] if body_pos.ndim == 3 else 0
    if bodies < 1 or body_pos.shape != (frames, bodies, 3) or body_quat.shape != (frames, bodies, 4):
        raise UsageError(
            f"motion file {path}: body_pos_w {body_pos.shape} and body_quat_w {body_quat.shape} are not {frames} frames"
            " of positions (3) and quaternions (4) of the same bodies, the root first"
        )
    return fps, body_pos[:, 0], body_quat[:, 0], joint_pos, body_pos


def resample(motion: Motion, fps: float) -> Motion:
    """``motion`` at ``fps``: frames at ``0, 1/fps, ...`` up to its duration, positions and angles interpolated
    linearly, orientations spherically."""
    if fps == motion.fps:
        return motion
    times = np.arange(0.0, motion.duration_s + 1e-9, 1.0 / fps)
    where = times * motion.fps
    first = np.minimum(np.floor(where).astype(np.int64), motion.frames - 1)
    second = np.minimum(first + 1, motion.frames - 1)
    blend = (where - first)[:, None]
    root_pos = motion.root_pos[first] * (1 - blend) + motion.root_pos[second] * blend
    joint_pos = motion.joint_pos[first] * (1 - blend) + motion.joint_pos[second] * blend
    root_quat = slerp(motion.root_quat[first], motion.root_quat[second], blend[:, 0])
    return Motion(fps, root_pos, root_quat, joint_pos, motion.path, motion.sha256)


def slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation between unit quaternions ``a`` and ``b`` (rows), ``t`` in [0, 1] per row."""
    dot = np.sum(a * b, axis=1)
    b = np.where(dot[:, None] < 0, -b, b)  # the shorter way round
    dot = np.abs(dot)
    angle = np.arccos(np.clip(dot, -1.0, 1.0))
    sin = np.sin(angle)
    close = sin < 1e-6
    safe = np.where(close, 1.0, sin)
    wa = np.where(close, 1 - t, np.sin((1 - t) * angle) / safe)
    wb = np.where(close, t, np.sin(t * angle) / safe)
    out = wa[:, None] * a + wb[:, None] * b
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@dataclass(frozen=True)
class Kinematics:
    """A motion completed on one robot model: what the tracking task reads per frame, for every body of the robot."""

    fps: float
    """Frames per second (the task's control rate)."""
    joint_pos: np.ndarray
    """``(frames, joints)``."""
    joint_vel: np.ndarray
    """``(frames, joints)`` (radians per second)."""
    body_pos: np.ndarray
    """``(frames, bodies, 3)`` body origins in the world."""
    body_quat: np.ndarray
    """``(frames, bodies, 4)`` body orientations (w, x, y, z)."""
    body_lin_vel: np.ndarray
    """``(frames, bodies, 3)`` linear velocities of the body origins (world frame)."""
    body_ang_vel: np.ndarray
    """``(frames, bodies, 3)`` angular velocities (world frame)."""


def kinematics(model: mujoco.MjModel, motion: Motion) -> Kinematics:
    """Every body's pose and velocity along ``motion`` on ``model`` (a free-floating root, then hinge joints in the
    motion's order): positions set frame by frame, velocities from the trajectory's differences (central, one-sided
    at the ends), MuJoCo's forward kinematics for the rest."""
    dt = 1.0 / motion.fps
    root_vel = np.gradient(motion.root_pos, dt, axis=0)
    joint_vel = np.gradient(motion.joint_pos, dt, axis=0)
    root_ang_world = _angular_velocity(motion.root_quat, dt)
    data = mujoco.MjData(model)
    bodies = model.nbody - 1  # the world body is not the robot's
    frames = motion.frames
    body_pos = np.empty((frames, bodies, 3))
    body_quat = np.empty((frames, bodies, 4))
    body_vel = np.empty((frames, bodies, 6))
    velocity = np.empty(6)
    local = np.empty(3)
    for i in range(frames):
        data.qpos[0:3], data.qpos[3:7], data.qpos[7:] = motion.root_pos[i], motion.root_quat[i], motion.joint_pos[i]
        # A free joint's angular velocity is in the root's own frame.
        mujoco.mju_rotVecQuat(local, root_ang_world[i], _conjugate(motion.root_quat[i]))
        data.qvel[0:3], data.qvel[3:6], data.qvel[6:] = root_vel[i], local, joint_vel[i]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_comVel(model, data)
        body_pos[i] = data.xpos[1:]
        body_quat[i] = data.xquat[1:]
        for b in range(1, model.nbody):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, b, velocity, 0)
            body_vel[i, b - 1] = velocity
    return Kinematics(
        motion.fps, motion.joint_pos, joint_vel, body_pos, body_quat, body_vel[..., 3:], body_vel[..., :3]
    )


def _conjugate(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def _angular_velocity(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocities of an orientation trajectory: the rotation from the frame before to the frame
    after over twice the step (one frame apart at the ends)."""
    frames = quat.shape[0]
    before = np.concatenate(([0], np.arange(frames - 1)))
    after = np.concatenate((np.arange(1, frames), [frames - 1]))
    span = (after - before) * dt
    out = np.zeros((frames, 3))
    difference = np.empty(4)
    for i in range(frames):
        mujoco.mju_mulQuat(difference, quat[after[i]], _conjugate(quat[before[i]]))
        if difference[0] < 0:
            difference = -difference
        mujoco.mju_quat2Vel(out[i], difference, span[i])
    return out

# pyright: reportAttributeAccessIssue=false
"""Reference motions: the retargeted-G1 CSV and mjlab's npz read into one trajectory, every bad file refused in one
line naming it, resampling to the control rate, and the bodies' poses and velocities from MuJoCo's kinematics (on
the G1-named test fixture, so without Menagerie's files)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mjfleet.errors import UsageError
from mjfleet.tasks.tracking.motion import CSV_FPS, Motion, kinematics, read_motion, resample
from mjfleet.tasks.tracking.motion_checks import check_on_robot, implausible

G1_FIXTURE = Path(__file__).with_name("fixtures") / "menagerie" / "unitree_g1" / "g1.xml"


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(G1_FIXTURE))


def _joints(model: mujoco.MjModel) -> int:
    return model.nq - 7


def _trajectory(joints: int, seconds: float = 2.0, fps: float = CSV_FPS, yaw_rate: float = 0.5) -> np.ndarray:
    """CSV rows of a root walking forward at 0.3 m/s while turning at ``yaw_rate`` and swaying its joints."""
    t = np.arange(0.0, seconds + 1e-9, 1.0 / fps)
    yaw = yaw_rate * t
    quat_xyzw = np.stack((np.zeros_like(t), np.zeros_like(t), np.sin(yaw / 2), np.cos(yaw / 2)), axis=1)
    root = np.stack((0.3 * t, 0.05 * np.sin(t), 0.75 + 0.01 * np.cos(3 * t)), axis=1)
    angles = 0.3 * np.sin(np.outer(t, np.linspace(0.5, 2.0, joints)))
    return np.concatenate((root, quat_xyzw, angles), axis=1)


def _csv(tmp_path: Path, rows: np.ndarray, name: str = "walk.csv") -> Path:
    path = tmp_path / name
    np.savetxt(path, rows, delimiter=",", fmt="%.9f")
    return path


def test_a_csv_motion_is_the_file_root_pose_and_joint_angles(model: mujoco.MjModel, tmp_path: Path) -> None:
    rows = _trajectory(_joints(model))
    motion = read_motion(_csv(tmp_path, rows), _joints(model))
    assert motion.fps == CSV_FPS and motion.frames == rows.shape[0]
    assert np.allclose(motion.root_pos, rows[:, :3]) and np.allclose(motion.joint_pos, rows[:, 7:])
    assert np.allclose(motion.root_quat, rows[:, [6, 3, 4, 5]])  # w, x, y, z
    assert len(motion.sha256) == 64


def test_kinematics_reproduce_the_file_and_its_velocities(model: mujoco.MjModel, tmp_path: Path) -> None:
    rows = _trajectory(_joints(model), yaw_rate=0.5)
    reference = kinematics(model, read_motion(_csv(tmp_path, rows), _joints(model)))
    data = mujoco.MjData(model)
    for frame in (0, 17, rows.shape[0] - 1):
        data.qpos[:3], data.qpos[3:7], data.qpos[7:] = rows[frame, :3], rows[frame, [6, 3, 4, 5]], rows[frame, 7:]
        mujoco.mj_kinematics(model, data)
        assert np.allclose(reference.body_pos[frame], data.xpos[1:], atol=1e-9)
        assert np.allclose(np.abs(np.sum(reference.body_quat[frame] * data.xquat[1:], axis=1)), 1.0, atol=1e-9)
    inner = slice(2, -2)
    assert np.allclose(reference.body_lin_vel[inner, 0, 0], 0.3, atol=1e-3)  # the root walks forward at 0.3 m/s
    assert np.allclose(reference.body_ang_vel[inner, 0], [0.0, 0.0, 0.5], atol=1e-6)  # and turns at 0.5 rad/s
    expected = 0.3 * np.linspace(0.5, 2.0, _joints(model)) * np.cos(np.outer(1.0, np.linspace(0.5, 2.0, 29)))
    assert np.allclose(reference.joint_vel[30], expected[0], atol=2e-2)  # at t = 1 s


def test_resampling_keeps_the_motion_and_its_duration(model: mujoco.MjModel, tmp_path: Path) -> None:
    motion = read_motion(_csv(tmp_path, _trajectory(_joints(model))), _joints(model))
    fifty = resample(motion, 50.0)
    assert fifty.fps == 50.0 and fifty.frames == 101 and fifty.duration_s == pytest.approx(2.0)
    assert np.allclose(fifty.root_pos[::5], motion.root_pos[::3])  # the frames both rates share
    assert np.allclose(fifty.root_quat[::5], motion.root_quat[::3])
    assert np.allclose(np.linalg.norm(fifty.root_quat, axis=1), 1.0)


def test_the_npz_of_a_csv_gives_the_same_reference(model: mujoco.MjModel, tmp_path: Path) -> None:
    """An npz in mjlab's layout written from a CSV's motion at 50 frames per second (as mjlab's csv_to_npz does)
    reads back as the CSV resampled to the same rate."""
    joints = _joints(model)
    from_csv = kinematics(model, resample(read_motion(_csv(tmp_path, _trajectory(joints)), joints), 50.0))
    npz = tmp_path / "walk.npz"
    np.savez(
        npz,
        fps=[50],
        joint_pos=from_csv.joint_pos,
        joint_vel=from_csv.joint_vel,
        body_pos_w=from_csv.body_pos,
        body_quat_w=from_csv.body_quat,
        body_lin_vel_w=from_csv.body_lin_vel,
        body_ang_vel_w=from_csv.body_ang_vel,
    )
    read = read_motion(npz, joints)
    check_on_robot(model, read)  # its body positions are where the robot puts them
    from_npz = kinematics(model, resample(read, 50.0))
    for name in ("joint_pos", "joint_vel", "body_pos", "body_quat", "body_lin_vel", "body_ang_vel"):
        assert np.allclose(getattr(from_npz, name), getattr(from_csv, name), atol=1e-9), name


def _refused(path: Path, joints: int, *words: str) -> None:
    with pytest.raises(UsageError) as e:
        read_motion(path, joints)
    line = str(e.value)
    assert "\n" not in line and str(path) in line and all(w in line for w in words), line


def test_every_bad_file_is_one_line_naming_it_and_what_is_wrong(model: mujoco.MjModel, tmp_path: Path) -> None:
    joints = _joints(model)
    rows = _trajectory(joints)
    _refused(tmp_path / "missing.csv", joints, "does not exist")
    _refused(_csv(tmp_path, rows[:, :-1], "short_row.csv"), joints, f"{rows.shape[1] - 1} columns", "36")
    nan = rows.copy()
    nan[5, 9] = np.nan
    _refused(_csv(tmp_path, nan, "nan.csv"), joints, "frame 6 has a joint angle", "not a finite number")  # from 1
    scaled = rows.copy()
    scaled[:, 3:7] *= 2.0
    _refused(_csv(tmp_path, scaled, "scaled.csv"), joints, "quaternion of frame 1", "not 1")
    (tmp_path / "empty.csv").write_text("")
    _refused(tmp_path / "empty.csv", joints, "no frames")
    _refused(_csv(tmp_path, rows[:10], "brief.csv"), joints, "10 frames", "shorter than")
    text = tmp_path / "words.csv"
    text.write_text("root_x,root_y\n1,2\n")
    _refused(text, joints, "line 1 is not numbers separated by commas: 'root_x,root_y'", "a header?")
    ragged = _csv(tmp_path, rows, "ragged.csv")
    lines = ragged.read_text().splitlines()
    ragged.write_text("\n".join([*lines[:4], lines[4] + ",0.5", *lines[5:]]))
    _refused(ragged, joints, "line 5 has 37 columns, the layout has 36")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00\x81")
    _refused(tmp_path / "binary.csv", joints, "not UTF-8 text")
    (tmp_path / "latin1.csv").write_bytes("# export de la m\u00e9thode\n".encode("latin-1"))  # a Windows export
    _refused(tmp_path / "latin1.csv", joints, "not UTF-8 text (a text file of another encoding: save it as UTF-8)")
    for rate in (0.0, -30.0, float("nan")):  # the CSV's rate: play and the viewer read it here too (0 crashed there)
        with pytest.raises(UsageError, match=r"^--env.motion-fps must be between 1 and 1000 \(got"):
            read_motion(_csv(tmp_path, rows), joints, rate)
    with pytest.raises(UsageError, match=r"^motion file ~no-such-user-here/m.csv: Could not determine home"):
        read_motion(Path("~no-such-user-here/m.csv"), joints)
    np.savez(tmp_path / "partial.npz", fps=[50], joint_pos=rows[:, 7:])
    _refused(tmp_path / "partial.npz", joints, "no body_pos_w, body_quat_w")
    frames = rows.shape[0]
    for name, pos, quat in (
        ("bodiless.npz", np.zeros((frames, 0, 3)), np.zeros((frames, 0, 4))),
        ("three_part_quaternions.npz", np.zeros((frames, 2, 3)), np.tile([1.0, 0.0, 0.0], (frames, 2, 1))),
    ):
        np.savez(tmp_path / name, fps=[50], joint_pos=rows[:, 7:], body_pos_w=pos, body_quat_w=quat)
        _refused(tmp_path / name, joints, "positions (3) and quaternions (4)")
    doubled = np.tile([2.0, 0.0, 0.0, 0.0], (frames, 1, 1))
    np.savez(
        tmp_path / "long.npz", fps=[50], joint_pos=rows[:, 7:], body_pos_w=np.zeros((frames, 1, 3)), body_quat_w=doubled
    )
    _refused(tmp_path / "long.npz", joints, "quaternion of frame 1", "not 1")
    np.savez(tmp_path / "no_rate.npz", fps=np.zeros(0), joint_pos=rows[:, 7:], body_pos_w=pos, body_quat_w=quat)
    _refused(tmp_path / "no_rate.npz", joints, "fps holds 0 values")
    for name, rate in (("period.npz", 1 / 30), ("tiny_rate.npz", 1e-300), ("fast.npz", 1e4)):  # crashed, or 900x slower
        np.savez(tmp_path / name, fps=[rate], joint_pos=rows[:, 7:], body_pos_w=pos, body_quat_w=quat)
        _refused(tmp_path / name, joints, "is not a frame rate between 1 and 1000", "frame period?")
    np.save(tmp_path / "one_array.npy", rows)
    (tmp_path / "one_array.npz").write_bytes((tmp_path / "one_array.npy").read_bytes())
    _refused(tmp_path / "one_array.npz", joints, "holds one array (an .npy file?)")
    (tmp_path / "text.npz").write_text("fps,30\n")
    _refused(tmp_path / "text.npz", joints, "not an npz (a zip archive of named arrays)")
    np.savez(tmp_path / "complex.npz", fps=[50], joint_pos=rows[:, 7:] + 1j, body_pos_w=pos, body_quat_w=quat)
    _refused(tmp_path / "complex.npz", joints, "joint_pos holds complex128 values, not real numbers")  # was cut
    objects = {"fps": np.array([{"fps": 30}], dtype=object), "body_pos_w": pos, "body_quat_w": quat}
    np.savez(tmp_path / "objects.npz", joint_pos=rows[:, 7:], **objects)
    _refused(tmp_path / "objects.npz", joints, "not a readable npz (Object arrays cannot be loaded")
    (tmp_path / "folder.csv").mkdir()
    _refused(tmp_path / "folder.csv", joints, "is a directory")
    (tmp_path / "walk.bvh").write_text("HIERARCHY")
    _refused(tmp_path / "walk.bvh", joints, "not a .csv")
    os.mkfifo(tmp_path / "pipe.csv")
    _refused(tmp_path / "pipe.csv", joints, "is not a regular file")
    # Spreadsheet and hand-written mistakes, each said as it is (all were "a header?").
    for name, change, words in (
        ("trailing.csv", lambda line: line + ",", "line 1 ends with a comma (an empty column)"),
        ("semicolons.csv", lambda line: line.replace(",", ";"), "line 1 separates its numbers by semicolons"),
        ("spaces.csv", lambda line: line.replace(",", " "), "line 1 separates its numbers by spaces"),
    ):
        lines = _csv(tmp_path, rows, name).read_text().splitlines()
        (tmp_path / name).write_text("\n".join(change(line) for line in lines) + "\n")
        _refused(tmp_path / name, joints, words)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's warnings of an empty mean came before the line
        np.savez(
            tmp_path / "no_frames.npz",
            fps=[50],
            joint_pos=np.zeros((0, joints)),
            body_pos_w=np.zeros((0, 1, 3)),
            body_quat_w=np.zeros((0, 1, 4)),
        )
        _refused(tmp_path / "no_frames.npz", joints, "0 frames at 50 per second, shorter than 1 s")


def test_joint_angles_in_degrees_are_refused_on_the_robot(model: mujoco.MjModel, tmp_path: Path) -> None:
    """Read as radians they trained without a word, every episode ending at its first step."""
    joints = _joints(model)
    rows = _trajectory(joints)
    check_on_robot(model, read_motion(_csv(tmp_path, rows), joints))
    degrees = rows.copy()
    degrees[:, 7:] = np.degrees(rows[:, 7:])
    motion = read_motion(_csv(tmp_path, degrees, "degrees.csv"), joints)
    with pytest.raises(UsageError, match=r"beyond its range \[.*\] \(the layout's angles are radians\)$") as e:
        check_on_robot(model, motion)
    assert str(tmp_path / "degrees.csv") in str(e.value) and "\n" not in str(e.value)


def test_a_motion_a_robot_cannot_follow_is_named_though_its_file_reads_well(
    model: mujoco.MjModel, tmp_path: Path
) -> None:
    """Two clips joined, another frame rate, a root height from another floor: they trained without a word."""
    joints = _joints(model)
    rows = _trajectory(joints)
    assert implausible(model, read_motion(_csv(tmp_path, rows), joints)) == []
    joined = rows.copy()
    joined[31:, 0] += 3.0  # the second second's clip starts 3 m further on
    (said,) = implausible(model, read_motion(_csv(tmp_path, joined, "joined.csv"), joints))
    assert said == "the root moves 3 m from frame 31 to 32, 90 m/s at 30 fps (two clips joined, or another frame rate?)"
    jerked = rows.copy()
    jerked[10:, 7] += 2.0
    (said,) = implausible(model, read_motion(_csv(tmp_path, jerked, "jerked.csv"), joints))
    assert said.startswith(f"{model.joint(1).name} turns 6") and "from frame 10 to 11 at 30 fps" in said
    for lift, where in ((0.5, "above the floor"), (-0.2, "below the floor")):
        moved = rows.copy()
        moved[:, 2] += lift
        (said,) = implausible(model, read_motion(_csv(tmp_path, moved, "moved.csv"), joints))
        assert said.startswith("in the first frame the robot's lowest body is") and where in said


def test_an_npz_with_root_quaternions_x_y_z_w_is_refused_where_its_bodies_say_so(
    model: mujoco.MjModel, tmp_path: Path
) -> None:
    """Written x, y, z, w (scipy's order), the upright root of headings near the first's reads upright as w, x, y,
    z, turned half round: the robot tracked the motion facing backwards. The file's own body positions tell."""
    joints = _joints(model)
    walk = kinematics(model, resample(read_motion(_csv(tmp_path, _trajectory(joints)), joints), 50.0))
    npz = tmp_path / "scipy_order.npz"
    quat_xyzw = walk.body_quat[..., [1, 2, 3, 0]]
    np.savez(npz, fps=[50], joint_pos=walk.joint_pos, body_pos_w=walk.body_pos, body_quat_w=quat_xyzw)
    motion = read_motion(npz, joints)  # upright either way: not told apart by the root alone
    with pytest.raises(UsageError, match="body_pos_w puts the bodies where the robot does with the root quaternions"):
        check_on_robot(model, motion)
    other_robot = tmp_path / "other_robot.npz"  # another model's bodies: nothing to compare, the root tells
    np.savez(
        other_robot, fps=[50], joint_pos=walk.joint_pos, body_pos_w=walk.body_pos[:, :3], body_quat_w=quat_xyzw[:, :3]
    )
    with pytest.raises(UsageError, match="upright throughout read as quaternions x, y, z, w"):
        check_on_robot(model, read_motion(other_robot, joints))
    np.savez(
        other_robot,
        fps=[50],
        joint_pos=walk.joint_pos,
        body_pos_w=walk.body_pos[:, :3],
        body_quat_w=walk.body_quat[:, :3],
    )
    check_on_robot(model, read_motion(other_robot, joints))


def test_a_relative_motion_path_is_recorded_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded as typed, ``play`` of the run from another folder looked for another file."""
    from mjfleet.tasks.tracking.config import TrackingConfig

    monkeypatch.chdir(tmp_path)
    cfg = TrackingConfig(motion="motions/mine.csv")
    assert (
        cfg.motion == str(tmp_path / "motions" / "mine.csv") and cfg.motion_file() == tmp_path / "motions" / "mine.csv"
    )
    assert TrackingConfig().motion == ""  # the shipped motion
    # Named by its path, the shipped motion is the default's run (it was "other settings", said as "the run has ").
    from mjfleet.tasks.tracking.config import SHIPPED_MOTION

    assert TrackingConfig(motion=str(SHIPPED_MOTION)).motion == ""
    with pytest.raises(UsageError, match=r"^--env.motion ~no-such-user-here/m.csv: Could not determine home"):
        TrackingConfig(motion="~no-such-user-here/m.csv")


def _with_quat(rows: np.ndarray, quat_xyzw: np.ndarray | list[float]) -> np.ndarray:
    """``rows`` with the root quaternions (x, y, z, w) ``quat_xyzw`` (one per frame, or one for all)."""
    posed = rows.copy()
    posed[:, 3:7] = quat_xyzw
    return posed


def _headings(rows: np.ndarray, yaw: np.ndarray | float) -> np.ndarray:
    """``rows`` standing upright at heading ``yaw`` (radians, per frame or for all), as x, y, z, w."""
    yaw = np.broadcast_to(yaw, rows.shape[:1])
    zero = np.zeros_like(yaw)
    return _with_quat(rows, np.stack((zero, zero, np.sin(yaw / 2), np.cos(yaw / 2)), axis=1))


def _on_floor(model: mujoco.MjModel, rows: np.ndarray) -> np.ndarray:
    """``rows`` with each frame's root height set so that the robot's lowest body origin is 3 cm above the floor."""
    placed = rows.copy()
    data = mujoco.MjData(model)
    for frame in placed:
        data.qpos[:3], data.qpos[3:7], data.qpos[7:] = (0.0, 0.0, 0.0), frame[[6, 3, 4, 5]], frame[7:]
        mujoco.mj_kinematics(model, data)
        frame[2] = 0.03 - data.xpos[1:, 2].min()
    return placed


def _refused_on_robot(model: mujoco.MjModel, path: Path, *words: str) -> None:
    motion = read_motion(path, _joints(model))
    with pytest.raises(UsageError) as e:
        check_on_robot(model, motion)
    line = str(e.value)
    assert "\n" not in line and str(path) in line and all(w in line for w in words), line


def _read_on_robot(model: mujoco.MjModel, path: Path) -> Motion:
    motion = read_motion(path, _joints(model))
    check_on_robot(model, motion)
    return motion


def test_a_motion_path_through_parent_folders_is_recorded_without_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--env.motion ../x/squat.csv`` was recorded as ``/a/b/../x/squat.csv``: another run than the same file named
    ``/a/x/squat.csv``, and the shipped motion so named was not the default's run."""
    from mjfleet.tasks.tracking.config import SHIPPED_MOTION, TrackingConfig

    (tmp_path / "b").mkdir()
    (tmp_path / "x").mkdir()
    monkeypatch.chdir(tmp_path / "b")
    assert TrackingConfig(motion="../x/squat.csv").motion == str(tmp_path / "x" / "squat.csv")
    assert TrackingConfig(motion=str(tmp_path / "b" / ".." / "x" / "./squat.csv")).motion == str(
        tmp_path / "x" / "squat.csv"
    )
    shipped = SHIPPED_MOTION.parent / ".." / "motions" / SHIPPED_MOTION.name
    assert TrackingConfig(motion=str(shipped)).motion == ""
    # Through a symbolic link, ".." is the parent of the link's target: the path is kept as typed.
    (tmp_path / "deep" / "x").mkdir(parents=True)
    (tmp_path / "b" / "link").symlink_to(tmp_path / "deep" / "x")
    through = tmp_path / "b" / "link" / ".." / "x" / "squat.csv"  # the file deep/x/squat.csv
    assert TrackingConfig(motion=str(through)).motion == str(through)


@pytest.mark.parametrize("degrees", [0, 30, 90, 120, 150])
def test_a_quaternion_written_in_the_other_order_is_refused_at_any_heading(
    model: mujoco.MjModel, tmp_path: Path, degrees: float
) -> None:
    """Its norm is 1 either way: read in the wrong order, the upright root of heading h lay rolled by 180 degrees - h
    and training ran on it without a word (only headings within 60 degrees of the first, upside down, were told)."""
    joints = _joints(model)
    rows = _on_floor(model, _trajectory(joints, yaw_rate=0.0))
    for name, yaw in (
        ("still", np.radians(degrees)),
        ("turning", np.radians(degrees) + np.linspace(-0.25, 0.25, len(rows))),
    ):
        right = _headings(rows, yaw)
        assert _read_on_robot(model, _csv(tmp_path, right, f"{name}_right.csv")).frames == len(rows)
        wxyz = _with_quat(rows, right[:, [6, 3, 4, 5]])
        _refused_on_robot(
            model,
            _csv(tmp_path, wxyz, f"{name}_wxyz.csv"),
            f"the root is {180 - degrees:.0f} degrees from upright on average" if name == "still" else "from upright",
            "upright throughout read as quaternions w, x, y, z; the layout's are x, y, z, w",
        )


def test_a_swapped_order_is_told_where_the_root_turns_and_not_at_the_opposite_heading(
    model: mujoco.MjModel, tmp_path: Path
) -> None:
    joints = _joints(model)
    rows = _on_floor(model, _trajectory(joints, yaw_rate=0.0))
    # A turn in place, once round.
    right = _headings(rows, np.linspace(0.0, 2 * np.pi, len(rows)))
    assert _read_on_robot(model, _csv(tmp_path, right, "turn.csv")).frames == len(rows)
    _refused_on_robot(model, _csv(tmp_path, _with_quat(rows, right[:, [6, 3, 4, 5]]), "turn_wxyz.csv"), "w, x, y, z")
    # Facing the opposite way, written w, x, y, z, a file is the same text as one facing the first way written x, y,
    # z, w: it reads as a half turn (docs/tracking.md: check the heading in play --video).
    opposite = _headings(rows, np.pi)
    assert _read_on_robot(model, _csv(tmp_path, opposite, "opposite.csv")).frames == len(rows)
    swapped = _with_quat(rows, opposite[:, [6, 3, 4, 5]])
    assert np.allclose(swapped[:, 3:7], _headings(rows, 0.0)[:, 3:7], atol=1e-12)
    assert _read_on_robot(model, _csv(tmp_path, swapped, "opposite_wxyz.csv")).frames == len(rows)


def test_an_npz_written_x_y_z_w_is_refused_by_its_root_alone(model: mujoco.MjModel, tmp_path: Path) -> None:
    """mjlab's layout is w, x, y, z: body positions of another model tell nothing, the root tells (a root of the
    first heading written x, y, z, w reads as a half turn, upright: not told)."""
    joints = _joints(model)
    rows = _on_floor(model, _trajectory(joints, yaw_rate=0.0))
    frames = rows.shape[0]
    for degrees in (60, 90, 180):
        quat_xyzw = _headings(rows, np.radians(degrees))[:, 3:7]
        for name, quat in (("right", quat_xyzw[:, [3, 0, 1, 2]]), ("xyzw", quat_xyzw)):
            path = tmp_path / f"{name}{degrees}.npz"
            np.savez(path, fps=[30], joint_pos=rows[:, 7:], body_pos_w=rows[:, None, :3], body_quat_w=quat[:, None])
            if name == "right":
                assert _read_on_robot(model, path).frames == frames
            else:
                _refused_on_robot(model, path, "upright throughout read as quaternions x, y, z, w", "are w, x, y, z")


def test_motions_that_lie_roll_over_or_turn_around_are_read(model: mujoco.MjModel, tmp_path: Path) -> None:
    """On its back or its side, turned around, and rolling over once between two standing seconds, the robot on the
    floor: where only the other order stands it upright (its side, the roll), that order would sink its legs into
    the floor."""
    joints = _joints(model)
    rows = _trajectory(joints)
    frames = rows.shape[0]
    half = np.sqrt(0.5)
    for name, quat_xyzw in (
        ("back", [0.0, -half, 0.0, half]),
        ("side", [half, 0.0, 0.0, half]),
        ("around", [0.0, 0.0, 1.0, 0.0]),
    ):
        posed = _on_floor(model, _with_quat(rows, quat_xyzw))
        assert _read_on_robot(model, _csv(tmp_path, posed, f"{name}.csv")).frames == frames, name
    roll = np.concatenate((np.zeros(30), np.linspace(0.0, 2 * np.pi, frames - 60), np.full(30, 2 * np.pi)))
    cartwheel = _with_quat(rows, np.stack((np.sin(roll / 2), 0 * roll, 0 * roll, np.cos(roll / 2)), axis=1))
    assert _read_on_robot(model, _csv(tmp_path, _on_floor(model, cartwheel), "cartwheel.csv")).frames == frames
    # The same, floating where the robot would stand: nothing says it lies on purpose.
    _refused_on_robot(model, _csv(tmp_path, _with_quat(rows, [half, 0.0, 0.0, half]), "floating.csv"), "w, x, y, z")


def test_a_spreadsheets_csv_and_other_frame_rates_are_read(model: mujoco.MjModel, tmp_path: Path) -> None:
    """A byte-order mark and a blank last line (spreadsheets write both) failed with numpy's words; a CSV at another
    rate than the LAFAN1 retargeting's 30 per second (``--env.motion-fps``) was played slower or faster."""
    joints = _joints(model)
    rows = _trajectory(joints, fps=60.0)
    path = _csv(tmp_path, rows)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes() + b"  \n\n")
    motion = read_motion(path, joints, csv_fps=60.0)
    assert motion.fps == 60.0 and motion.frames == rows.shape[0] and motion.duration_s == pytest.approx(2.0)
    assert np.allclose(motion.joint_pos, rows[:, 7:])
    with pytest.raises(UsageError, match="40 frames at 60 per second, shorter than 1 s"):
        read_motion(_csv(tmp_path, rows[:40], "brief.csv"), joints, csv_fps=60.0)

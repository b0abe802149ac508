# pyright: reportAttributeAccessIssue=false
"""A robot file that lacks what its record names is one line, exit 2, before the run directory exists.

The files are the Menagerie fixture with a part taken out (as mjlab's copy of Menagerie's Go1 lacks the keyframe and
the actuators), written to a temporary folder; nothing here needs the network or the real Menagerie files.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.check import robot_problems
from mjfleet.tasks.locomotion.config import LocomotionConfig
from mjfleet.tasks.locomotion.robots import BUILTIN_ROBOTS, GO1, UNITREE_G1, UNITREE_GO1, RobotSpec, Servo, Zone
from mjfleet.tasks.locomotion.sources import robot_file

FIXTURE = Path(__file__).with_name("fixtures") / "menagerie"
GO1_XML = (FIXTURE / "unitree_go1" / "go1.xml").read_text()


def _without(text: str, pattern: str) -> str:
    """``text`` with every match of ``pattern`` (a whole element, across lines) taken out."""
    stripped, count = re.subn(pattern, "", text, flags=re.S)
    assert count, pattern
    return stripped


NO_KEYFRAME = _without(GO1_XML, r"\s*<keyframe>.*?</keyframe>")
MJLAB_LIKE = _without(NO_KEYFRAME, r"\s*<actuator>.*?</actuator>")
"""What mjlab's copy of Menagerie's Go1 lacks: the ``home`` keyframe and every actuator."""


def _write(tmp_path: Path, text: str, name: str = "go1.xml") -> Path:
    path = tmp_path / "robot" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _prepare_error(robot: str) -> str:
    with pytest.raises(UsageError) as caught:
        LocomotionConfig(robot=robot).prepare_assets()
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("robot", BUILTIN_ROBOTS, ids=lambda r: r.name)
def test_every_record_finds_what_it_needs_in_its_file(robot: RobotSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    assert robot_problems(robot, mujoco.MjSpec.from_file(str(robot_file(robot)))) == []


def test_a_file_without_the_home_keyframe_is_one_line_naming_it(tmp_path: Path) -> None:
    path = _write(tmp_path, NO_KEYFRAME)
    message = _prepare_error(str(path))
    assert message == (
        f"--env.robot {path} lacks what robot record 'unitree_go1' needs: no keyframe 'home' (the record takes the"
        " initial pose from it; the file has none): give the record a home=((joint pattern, angle), ...)"
    )
    # A keyframe of another name is named as what the file has.
    other = _write(tmp_path, GO1_XML.replace('<key name="home"', '<key name="stand"'))
    assert "no keyframe 'home' (the record takes the initial pose from it; the file has keyframes 'stand')" in (
        _prepare_error(str(other))
    )


def test_mjlab_like_go1_names_the_missing_keyframe_and_actuators(tmp_path: Path) -> None:
    message = _prepare_error(str(_write(tmp_path, MJLAB_LIKE)))
    assert "no actuators (the record drives the file's own position actuators; the file has none)" in message
    assert "no keyframe 'home'" in message


def test_missing_or_wrong_actuators_are_named(tmp_path: Path) -> None:
    # One actuator fewer: the keyframe's ctrl no longer fits (MuJoCo's own message), so drop the ctrl too.
    no_hip = _without(GO1_XML, r'\s*<position name="FR_hip" [^>]*/>')
    no_hip = re.sub(r' ctrl="[^"]*"', "", no_hip)
    message = _prepare_error(str(_write(tmp_path, no_hip)))
    assert "joint 'FR_hip_joint' has no actuator (the joint_deviation reward needs it driven)" in message
    assert "keyframe 'home' has no ctrl" in message
    # Torque motors where the record keeps the file's position servos.
    motors = re.sub(r"<position (name=)", r'<motor gear="1" \1', GO1_XML).replace('<position kp="100" ', "<motor ")
    message = _prepare_error(str(_write(tmp_path, motors, "motors.xml")))
    assert "actuators 'FR_hip', 'FR_thigh', 'FR_calf' and 9 more are not position servos" in message
    assert "e.g. motors): give the record servos=(Servo(joint pattern, kp, kd, effort), ...) to replace them" in message
    # A prop floating before the robot: the message names the body the file's first joint floats.
    crate = '<body name="crate"><freejoint/><geom type="sphere" size=".1"/></body>'
    propped = GO1_XML.replace("<worldbody>", f"<worldbody>{crate}", 1)
    message = _prepare_error(str(_write(tmp_path, propped, "propped.xml")))
    assert (
        "has no free joint as the file's first joint (the floating base; the file's first joint floats body 'crate')"
        in message
    )


def test_a_menagerie_root_copy_without_a_foot_names_the_body_and_the_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy under MENAGERIE_ROOT is taken as the record's file whatever it holds, so every name is checked here.
    (tmp_path / "unitree_go1").mkdir()
    (tmp_path / "unitree_go1" / "go1.xml").write_text(GO1_XML.replace('"FR_calf"', '"FR_shank"'))
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))
    message = _prepare_error("unitree_go1")
    assert message.startswith(f"--env.robot unitree_go1 ({tmp_path / 'unitree_go1' / 'go1.xml'}) lacks what")
    assert "no body 'FR_calf' (the contact sensor of zone 'FR_foot'; closest: " in message
    assert "; and 0 more" not in message
    # A foot sphere taken out: the body is there, the collision geom the zone watches is not.
    no_sphere = _without(GO1_XML, r'\s*<geom name="RL" type="sphere"[^>]*/>')
    (tmp_path / "unitree_go1" / "go1.xml").write_text(no_sphere)
    assert (
        "body 'RL_calf' has no collision geom of type sphere (the contact sensor of zone 'RL_foot' watches them)"
        in (_prepare_error("unitree_go1"))
    )


def test_records_with_servos_and_named_geoms_are_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    g1 = mujoco.MjSpec.from_file(str(robot_file(UNITREE_G1)))
    legs_only = dataclasses.replace(UNITREE_G1, servos=UNITREE_G1.servos[:3])
    (problem,) = robot_problems(legs_only, g1)
    assert problem.startswith("joints 'waist_roll_joint', 'waist_pitch_joint', 'left_shoulder_pitch_joint' and")
    assert problem.endswith("match no servo of the record (it drives every hinge and slide joint)")
    limp = dataclasses.replace(UNITREE_G1, servos=(dataclasses.replace(UNITREE_G1.servos[0], kp=0.0),))
    assert "has kp 0.0, kd" in robot_problems(limp, g1)[-1]  # a servo without stiffness holds nothing up
    # A servo's control range is its joint's: one without a range failed to compile after the run directory existed.
    for joint in g1.joints:
        if joint.name == "left_knee_joint":
            joint.limited = mujoco.mjtLimited.mjLIMITED_FALSE
    assert robot_problems(UNITREE_G1, g1) == [
        "joint 'left_knee_joint' has no range, which a servo of the record takes as its control range (give each a"
        " range in the file)"
    ]
    # Names that differ in case are offered first (FL_foot for fl_foot was never offered).
    from mjfleet.tasks.locomotion.check import _missing

    assert _missing("geom", "fl_foot", "a zone", ["RR_foot", "RL_foot", "FL_foot"]).endswith(
        "closest: 'FL_foot', 'RL_foot')"
    )
    # A ground of another name stayed beside the task's own (on rough terrain, a plane through its pits and steps).
    grounded = mujoco.MjSpec.from_file(str(robot_file(GO1)))
    grounded.worldbody.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05])
    assert robot_problems(GO1, grounded) == [
        "its ground plane 'ground' is not named 'floor' (the task replaces the plane named floor with its own ground, a"
        " heightfield on rough terrain, and would keep this one beside it): name it floor"
    ]
    # The primitive Go1 names its foot geoms; the base must float on the file's first joint.
    go1 = GO1
    spec = mujoco.MjSpec.from_file(str(robot_file(go1)))
    spec.geom("FR_foot").name = "FR_toe"
    spec.delete(spec.body(go1.base_body).first_joint())
    for key in list(spec.keys):  # its qpos has the free joint's 7 numbers
        spec.delete(key)
    assert robot_problems(go1, spec) == [
        "body 'trunk' has no free joint as the file's first joint (the floating base)",
        "no geom 'FR_foot' (the contact sensor of zone 'FR_foot'; closest: 'RR_foot', 'RL_foot')",
        "no keyframe 'home' (the record takes the initial pose from it; the file has none): give the record a"
        " home=((joint pattern, angle), ...)",
    ]


def test_the_records_own_patterns_zones_and_home_pose_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bad pattern raised re.error from list-tasks and train; a home pattern matching nothing left its joints at 0
    # and an angle out of range was clipped, both silently.
    from mjfleet.tasks.locomotion.robots import Zone

    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    g1 = mujoco.MjSpec.from_file(str(robot_file(UNITREE_G1)))

    def problems(**changes: object) -> list[str]:
        return robot_problems(dataclasses.replace(UNITREE_G1, **changes), g1)

    bad_servo = dataclasses.replace(UNITREE_G1.servos[0], joints=r"(*_knee")
    assert problems(servos=(bad_servo, *UNITREE_G1.servos[1:]))[0].startswith(
        "servo '(*_knee' is not a regular expression (nothing to repeat"
    )
    assert problems(home=((r"*_knee_joint", -1.5),)) == [
        "home pattern '*_knee_joint' is not a regular expression (nothing to repeat at position 0)"
    ]
    (zone,) = problems(zones=(Zone("left_foot", body="left_ankle_roll_link", kinds=("capsul",)),))  # type: ignore[arg-type]
    assert zone.startswith("zone 'left_foot' names geom kind 'capsul', which MuJoCo has not")
    (unmatched,) = problems(home=((r".*_kne_joint", 0.3),))
    assert unmatched.startswith("home pattern '.*_kne_joint' matches no hinge or slide joint (closest: ")
    assert problems(home=((r"left_knee_joint", 5.0), (r".*_knee_joint", 0.3))) == [
        "home angle 5.0 of joint 'left_knee_joint' is outside its range [-0.08, 2.8]"
    ]
    assert problems(home=((r".*_knee_joint", 0.3),)) == []
    (nameless,) = problems(zones=(Zone("left_foot"),))
    assert nameless == "zone 'left_foot' names neither a body nor a geom (Zone(name, body=...) or geom=...)"
    for actuator in list(g1.actuators):  # the record's servos replace them; they name the joint
        g1.delete(actuator)
    g1.joint("left_knee_joint").name = ""
    (unnamed,) = robot_problems(UNITREE_G1, g1)
    assert "(unnamed, in body 'left_knee_link': name it)" in unnamed and "matches no servo" in unnamed


def test_a_floor_in_a_body_of_its_own_is_named() -> None:
    # The contact zones count contacts with the world body's geoms: a floor elsewhere would never be touched.
    spec = mujoco.MjSpec.from_file(str(robot_file(GO1)))
    for geom in [g for g in spec.geoms if g.name == "floor"]:
        spec.delete(geom)
    ground = spec.worldbody.add_body(name="ground")
    ground.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05])
    assert robot_problems(GO1, spec) == [
        "its geom 'floor' is in body 'ground', not in the worldbody (the contact zones count the ground's contacts"
        " with the world body's geoms only)"
    ]


def test_train_stops_with_one_line_and_creates_nothing(tmp_path: Path) -> None:
    from mjfleet.cli.train import main as train_main

    from .helpers import run_main

    path = _write(tmp_path, MJLAB_LIKE)
    logs = tmp_path / "logs"
    for extra in ([], ["--dry-run"]):
        argv = ["unitree-go1-velocity-flat", "--env.robot", str(path), "--gpu-ids", "None", "--env.num-envs", "4"]
        code, _, err = run_main(train_main, [*argv, *extra, "--log-root", str(logs)])
        assert code == 2 and "Traceback" not in err
        (error,) = [line for line in err.splitlines() if line.startswith("error:")]
        assert "no keyframe 'home'" in error and "no actuators" in error
        assert not logs.exists()


def test_building_the_task_checks_the_file_as_well(tmp_path: Path) -> None:
    """``play`` and scripts build the task without train's checks: the same line, not MuJoCo's KeyError."""
    from mjfleet.tasks.locomotion.task import LocomotionTask

    path = _write(tmp_path, NO_KEYFRAME)
    with pytest.raises(UsageError, match=r"^robot 'unitree_go1' \(.*go1.xml\) lacks .* no keyframe 'home'"):
        LocomotionTask(LocomotionConfig(robot=str(path)))


def test_a_record_without_timestep_on_a_file_of_another_step_is_warned(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The fixture's Go1 keeps MuJoCo's default 2 ms step: with a record that sets no timestep, the task's 4 physics
    steps per control step make 125 Hz control, which is said once, with the record's and the flag's remedies."""
    from mjfleet.envs.env import MjEnv
    from mjfleet.tasks.locomotion import check
    from mjfleet.tasks.locomotion import task as locomotion
    from mjfleet.tasks.registry import get_task

    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    untimed = dataclasses.replace(UNITREE_GO1, timestep=0.0)
    monkeypatch.setattr(locomotion, "resolve_robot", lambda value: untimed)
    monkeypatch.setattr(check, "_said_rates", set())
    cfg = get_task("unitree-go1-velocity-flat").env_cfg()
    assert isinstance(cfg, LocomotionConfig)
    cfg = dataclasses.replace(cfg, num_envs=2)

    def warnings(decimation: int) -> list[str]:
        caplog.clear()
        sim = dataclasses.replace(cfg.sim, decimation=decimation, backend="mujoco")
        MjEnv(locomotion.LocomotionTask(dataclasses.replace(cfg, sim=sim)), device="cpu")
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

    (line,) = warnings(4)
    assert line.startswith(
        "robot 'unitree_go1': the record sets no timestep, so the file's physics step (2 ms) with 4 physics steps per"
        " control step makes 125 Hz control, not the 50 Hz the task's settings are tuned for; set timestep=0.005"
        " in its record or --env.sim.decimation 10"
    )
    assert warnings(4) == []  # said once per robot and rate
    assert warnings(10) == []  # 50 Hz


BROKEN = GO1_XML.replace('<site name="imu"/>', '<site name="imu"', 1)
"""The fixture with one tag left open (on the line of the trunk's ``imu`` site)."""


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_a_broken_robot_file_keeps_mujocos_line_number(tmp_path: Path) -> None:
    """A syntax error in a package's robot file: MuJoCo's whole message, its line number included, in one line."""
    from mjfleet.cli.train import main as train_main
    from mjfleet.tasks.locomotion.check import check_robot_file
    from mjfleet.tasks.locomotion.robots import UNITREE_GO1

    from .helpers import run_main

    path = _write(tmp_path, BROKEN, "mydog.xml")
    assert BROKEN != GO1_XML
    with pytest.raises(UsageError) as caught:
        check_robot_file(UNITREE_GO1, path, "robot 'mydog' of package 'mydogs'")
    message = str(caught.value)
    assert "\n" not in message and f"MuJoCo cannot load {path} (XML parse error" in message
    line = _line_of(BROKEN, '<site name="imu"')
    assert f"Line number={line}" in message
    # The same through train (a path given as the robot), exit 2, one line, nothing created.
    argv = ["unitree-go1-velocity-flat", "--env.robot", str(path), "--gpu-ids", "None", "--log-root", str(tmp_path)]
    code, _, err = run_main(train_main, argv)
    assert code == 2 and "Traceback" not in err, err
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "Line number=" in error


def test_a_schema_error_names_the_element_and_its_line(tmp_path: Path) -> None:
    from mjfleet.tasks.locomotion.check import check_robot_file
    from mjfleet.tasks.locomotion.robots import UNITREE_GO1

    text = GO1_XML.replace('<site name="imu"/>', '<site name="imu" sizze="1"/>', 1)
    path = _write(tmp_path, text)
    with pytest.raises(
        UsageError, match=rf"unrecognized attribute: 'sizze'; Element 'site', line {_line_of(text, 'sizze')}"
    ):
        check_robot_file(UNITREE_GO1, path, "--env.robot x")


def test_a_relative_robot_file_is_recorded_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As typed, play of the run (or its restart) from another folder would look for another file.
    from mjfleet.tasks.tracking.config import TrackingConfig

    monkeypatch.chdir(tmp_path)
    assert LocomotionConfig(robot="robots/go1.xml").robot == str(tmp_path / "robots" / "go1.xml")
    assert TrackingConfig(robot="g1.xml").robot == str(tmp_path / "g1.xml")
    assert LocomotionConfig(robot="menagerie:unitree_go1").robot == "menagerie:unitree_go1"  # a name stays a name
    with pytest.raises(UsageError, match=r"^--env.robot ~no-such-user-here/go1.xml: Could not determine home"):
        LocomotionConfig(robot="~no-such-user-here/go1.xml")  # was Path.expanduser's traceback


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"feet": "lf_foot"}, "feet must be a tuple of names, not the string 'lf_foot' (a tuple of one needs a"),
        ({"terminal_contacts": "chassis"}, "terminal_contacts must be a tuple of names, not the string 'chassis'"),
        ({"zones": Zone("lf_foot", body="lf_shin")}, "zones must be a tuple of Zone(...) (got Zone(name='lf_foot'"),
        ({"servos": Servo(".*", 20.0, 1.0, 5.0)}, "servos must be a tuple of Servo(...) (got Servo(joints='.*'"),
        ({"home": (".*_knee", -1.4)}, "home must be (pattern, angle) pairs, not one pair ('.*_knee', -1.4)"),
        ({"home": ((".*_knee", "-1.4"),)}, "home must be (pattern, angle in radians) pairs (got ('.*_knee', '-1.4'))"),
        ({"home": {".*_knee": -1.4}}, "home must be a tuple of (pattern, angle) pairs (got {'.*_knee': -1.4})"),
    ],
)
def test_a_record_field_of_the_wrong_python_shape_is_said_as_the_record_is_made(
    fields: dict[str, object], problem: str
) -> None:
    base: dict[str, object] = {"name": "boxdog", "source": "boxdog.xml", "base_body": "chassis", "feet": ("lf_foot",)}
    base |= {"undesired_contacts": (), "terminal_contacts": ("chassis",), "deviation_joints": ()}
    with pytest.raises(TypeError, match=re.escape(f"robot record 'boxdog': {problem}")):
        RobotSpec(**{**base, **fields})  # type: ignore[arg-type]
    assert RobotSpec(**base).home == ()  # type: ignore[arg-type]
    assert RobotSpec(**base, home=[[".*_knee", np.float32(-1.4)]]).home  # type: ignore[arg-type]  # lists, NumPy


def test_a_home_keyframe_outside_the_joint_or_control_ranges_is_one_line(tmp_path: Path) -> None:
    # The first calf (the fixture: range [-2.8, -0.9]) bent the wrong way in the pose, then in the targets alone.
    pose = GO1_XML.replace('qpos="0 0 0.27 1 0 0 0 0 0.9 -1.8', 'qpos="0 0 0.27 1 0 0 0 0 0.9 1.4', 1)
    message = _prepare_error(str(_write(tmp_path, pose)))
    assert "keyframe 'home' puts joint 'FR_calf_joint' at 1.4, outside its range [-2.8, -0.9]" in message
    targets = GO1_XML.replace('ctrl="0 0.9 -1.8', 'ctrl="0 0.9 1.4', 1)
    message = _prepare_error(str(_write(tmp_path, targets)))
    assert "keyframe 'home' aims actuator 'FR_calf' at 1.4, outside its control range [-2.8, -0.9]" in message


def test_a_keyframe_ctrl_without_the_actuators_it_was_written_for_says_the_count(tmp_path: Path) -> None:
    no_actuators = _without(GO1_XML, r"\s*<actuator>.*?</actuator>")
    message = _prepare_error(str(_write(tmp_path, no_actuators)))
    assert "invalid ctrl size" in message
    assert "(a keyframe's ctrl has one value per actuator; the file has 0 actuators)" in message


def test_a_file_that_does_not_compile_says_so_and_where_its_meshes_are_looked_for(tmp_path: Path) -> None:
    """It read "lacks what robot record 'go1' needs: MuJoCo cannot compile it (Error opening file 'shell.stl')": the
    file lacks nothing the record names, and the folder the relative path was taken against went unsaid."""
    text = GO1_XML.replace("<worldbody>", '<asset><mesh name="shell_x" file="shell_x.stl"/></asset>\n<worldbody>', 1)
    path = _write(tmp_path, text)
    message = _prepare_error(str(path))
    assert "MuJoCo cannot compile it" in message and "lacks what robot record" not in message
    assert f"looked for under {path.parent}" in message

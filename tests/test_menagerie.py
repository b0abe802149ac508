# pyright: reportAttributeAccessIssue=false
"""Robots from MuJoCo Menagerie: records, the file lookup (fixture laid out like a Menagerie checkout, never the
network), the offline error and the closed-network copy, and, where the real files are on disk, every Menagerie task
end to end."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.contacts import zone_geoms, zone_sensors
from mjfleet.tasks.locomotion.model import build_model
from mjfleet.tasks.locomotion.presets import UNITREE_G1_ROUGH_CPU_ITERATIONS
from mjfleet.tasks.locomotion.robots import GO1, HUMANOID, UNITREE_G1, UNITREE_GO1
from mjfleet.tasks.locomotion.sources import CLOSED_NETWORK_DOC, menagerie_available, resolve_robot, robot_file
from mjfleet.tasks.locomotion.task import SPAWN_CLEARANCE
from mjfleet.tasks.registry import get_task
from mjfleet.tasks.spec import TaskSpec

from .helpers import missing_files

FIXTURE = Path(__file__).with_name("fixtures") / "menagerie"
"""Our own tiny MJCFs with the names of Menagerie's unitree_go1/go1.xml and unitree_g1/g1.xml (not their files)."""

MENAGERIE_TASKS = (
    "unitree-go1-velocity-flat",
    "unitree-go1-velocity-rough",
    "unitree-g1-velocity-flat",
    "unitree-g1-velocity-rough",
)


@pytest.fixture
def fixture_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MENAGERIE_ROOT", str(FIXTURE))
    return FIXTURE


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No checkout, an empty cache, and a download location that does not exist (fails at once, no network)."""
    monkeypatch.delenv("MENAGERIE_ROOT", raising=False)
    monkeypatch.setenv("MENAGERIE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MENAGERIE_BASE_URL", (tmp_path / "nowhere").as_uri())


# --- records and the model builder (fixture) ---------------------------------------------------------------------
@pytest.mark.parametrize("robot", [UNITREE_GO1, UNITREE_G1], ids=lambda r: r.name)
def test_menagerie_records_build_a_task_model_from_a_checkout(fixture_root: Path, robot) -> None:
    assert robot_file(robot) == fixture_root / robot.menagerie / f"{robot.source.rpartition('/')[2]}.xml"
    m = build_model(robot, None)
    assert m.opt.timestep == robot.timestep and m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert m.geom("floor").type[0] == mujoco.mjtGeom.mjGEOM_PLANE  # Menagerie robot files have no ground
    # A touch sensor and ground contact sensors per zone, nothing else (the file's IMU sensors are dropped); a
    # reference site per foot.
    touch = [int(m.sensor(f"touch_{name}").id) for name in robot.watched()]
    ground = [s for name in robot.watched() for s in zone_sensors(m, name)]
    assert touch + ground == list(range(m.nsensor))  # touch sensors first: contiguous columns
    assert np.all(m.sensor_type[touch] == mujoco.mjtSensor.mjSENS_TOUCH)
    assert np.all(m.sensor_type[ground] == mujoco.mjtSensor.mjSENS_CONTACT)
    assert np.all(m.sensor_refid[ground] == 0)  # the world body: the ground
    for foot in robot.feet:
        assert m.site_bodyid[m.site(f"{foot}_site").id] == m.geom_bodyid[zone_geoms(m, robot, foot)[0]]
    # Every hinge is driven by a position servo whose target is the home pose; the feet touch the ground there.
    hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    assert sorted(m.actuator_trnid[:, 0]) == hinges
    assert np.all(m.actuator_biasprm[:, 1] == -m.actuator_gainprm[:, 0])  # kp: a position servo
    key = m.key("home")
    np.testing.assert_allclose(key.ctrl, key.qpos[m.jnt_qposadr[m.actuator_trnid[:, 0]]])
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, key.id)
    mujoco.mj_kinematics(m, d)
    # Each foot stands on the floor; Menagerie's own Go1 keyframe (base at 0.27 m) sinks the feet 1.8 cm, which the
    # task's spawn height makes up (test_episodes_start_with_every_foot_above_the_ground).
    for foot in robot.feet:
        assert _floor_distance(m, d, zone_geoms(m, robot, foot)) == pytest.approx(0.0, abs=0.02)


def _floor_distance(m: mujoco.MjModel, d: mujoco.MjData, geoms: list[int]) -> float:
    floor = m.geom("floor").id
    return min(mujoco.mj_geomDistance(m, d, g, floor, 1.0, None) for g in geoms)


@pytest.mark.parametrize("task_id", ["unitree-go1-velocity-flat", "unitree-g1-velocity-flat", "go1-velocity-flat"])
def test_episodes_start_with_every_foot_above_the_ground(fixture_root: Path, task_id: str) -> None:
    """Spawned at the keyframe's base height, Menagerie's Go1 started every episode with its feet up to a centimetre
    inside the ground (1.8 cm from the keyframe, 2 cm of clearance, the reset's joint noise): a jolt at each reset,
    and on rough terrain contacts before the first step. The spawn raises the base by what the keyframe sinks."""
    spec = get_task(task_id)
    cfg = dataclasses.replace(spec.env_cfg(), num_envs=4, init_joint_noise=0.0)
    env = MjEnv(spec.load_task_class()(cfg), device="cpu", seed=0)
    robot = spec.load_task_class()(cfg).robot
    m, d = env.sim.mj_model, mujoco.MjData(env.sim.mj_model)
    for world in range(4):
        d.qpos[:] = env.sim.qpos[world].numpy()
        mujoco.mj_kinematics(m, d)
        lowest = min(_floor_distance(m, d, zone_geoms(m, robot, foot)) for foot in robot.feet)
        assert lowest == pytest.approx(SPAWN_CLEARANCE, abs=1e-4)


def test_g1_record_gives_servo_gains_and_fits_capsules_to_mesh_collisions(fixture_root: Path) -> None:
    m = build_model(UNITREE_G1, None)
    assert m.nu == 29  # the fixture's two torque motors are replaced, every joint gets a servo
    knee = m.actuator("left_knee")
    assert knee.gainprm[0] == 75.0 and knee.biasprm[2] == -2.0 and tuple(knee.forcerange) == (-139.0, 139.0)
    assert tuple(m.actuator("left_ankle_roll").forcerange) == (-50.0, 50.0)
    assert m.dof_armature[m.jnt_dofadr[m.joint("left_knee_joint").id]] == pytest.approx(0.025101925)
    np.testing.assert_allclose(m.actuator("left_knee").ctrlrange, m.joint("left_knee_joint").range)
    torso = [g for g in range(m.ngeom) if m.geom_bodyid[g] == m.body("torso_link").id and m.geom_contype[g]]
    assert [int(m.geom_type[g]) for g in torso][:1] == [mujoco.mjtGeom.mjGEOM_CAPSULE]  # fitted to the torso mesh
    assert not any(m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH and m.geom_contype[g] for g in range(m.ngeom))
    # The home pose follows the record: bent knees, and the base placed so the sole capsules touch the ground.
    key = m.key("home")
    assert key.qpos[m.jnt_qposadr[m.joint("left_knee_joint").id]] == pytest.approx(0.669)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, key.id)
    mujoco.mj_kinematics(m, d)
    for foot in UNITREE_G1.feet:  # the lowest sole capsule just touches (bounding boxes: within 1 mm)
        assert _floor_distance(m, d, zone_geoms(m, UNITREE_G1, foot)) == pytest.approx(0.0, abs=1e-3)


def test_a_go1_zone_splits_the_foot_from_its_calf(fixture_root: Path) -> None:
    m = build_model(UNITREE_GO1, None)
    foot, calf = zone_geoms(m, UNITREE_GO1, "FR_foot"), zone_geoms(m, UNITREE_GO1, "FR_calf")
    assert [m.geom(g).name for g in foot] == ["FR"]
    assert len(calf) == 1 and m.geom_type[calf[0]] == mujoco.mjtGeom.mjGEOM_CAPSULE
    assert len(zone_geoms(m, UNITREE_GO1, "trunk")) == 1


def test_servos_of_a_record_aim_at_the_files_home_keyframe(fixture_root: Path) -> None:
    """A record with servos and no home pose of its own: the file's keyframe, whose controls went with the file's
    actuators, aimed every servo at 0 (a Go1's knee outside its range), without a word."""
    from mjfleet.tasks.locomotion.robots import Servo

    robot = dataclasses.replace(UNITREE_GO1, servos=(Servo(r".*", kp=30.0, kd=0.6, effort=25.0),))
    m = build_model(robot, None)
    key = m.key("home")
    assert key.ctrl.tolist() == pytest.approx([0.0, 0.9, -1.8] * 4)
    assert key.ctrl.tolist() == pytest.approx(key.qpos[m.jnt_qposadr[m.actuator_trnid[:, 0]]].tolist())


def test_the_g1_on_the_cpu_asks_each_servo_for_a_quarter_of_its_torque_limit(fixture_root: Path) -> None:
    """One 0.25 rad for all 29 joints asked the G1's 25 N m shoulders (gain 75) for more than they exert and its
    knees and ankles for less; scaled by force, Menagerie's G1 walked in fewer iterations on the CPU."""
    spec = get_task("unitree-g1-velocity-flat")
    cfg = dataclasses.replace(spec.env_defaults(on_cpu=True), num_envs=2)
    task = spec.load_task_class()(cfg)
    env = MjEnv(task, device="cpu", seed=0)
    m = env.sim.mj_model
    scale = {m.joint(int(m.actuator_trnid[i, 0])).name: float(task.action_scale[i]) for i in range(m.nu)}
    assert scale["left_knee_joint"] == pytest.approx(0.25 * 139 / 75)
    assert scale["right_ankle_pitch_joint"] == pytest.approx(0.25 * 50 / 20)
    assert scale["left_shoulder_pitch_joint"] == pytest.approx(0.25 * 25 / 75)
    assert scale["right_wrist_yaw_joint"] == pytest.approx(0.25 * 5 / 20)
    # The GPU keeps one scale for every joint until it is measured there.
    assert spec.env_defaults(on_cpu=False).action_scale_of_force == 0.0


@pytest.mark.parametrize("robot", ["unitree-go1", "unitree-g1"])
def test_rough_menagerie_tasks_train_on_the_cpu_with_the_flat_tasks_cpu_settings(robot: str) -> None:
    flat, rough = get_task(f"{robot}-velocity-flat"), get_task(f"{robot}-velocity-rough")
    flat_env, rough_env = flat.env_defaults(on_cpu=True), rough.env_defaults(on_cpu=True)
    flat_ppo, rough_ppo = flat.agent_defaults(on_cpu=True).algorithm, rough.agent_defaults(on_cpu=True).algorithm
    assert rough_env.action_scale == flat_env.action_scale
    assert rough_env.action_scale_of_force == flat_env.action_scale_of_force
    assert rough_env.rewards.track_lin_vel_xy == flat_env.rewards.track_lin_vel_xy
    assert (rough_ppo.entropy_coef, rough_ppo.desired_kl, rough_ppo.num_learning_epochs) == (
        flat_ppo.entropy_coef,
        flat_ppo.desired_kl,
        flat_ppo.num_learning_epochs,
    )
    # Still the rough task: terrain, height scan, a run at least as long as the flat one's; the GPU keeps its networks
    # and its run length, which the CPU shortens only for the G1 (3000 iterations are over 3 hours of 2 cores).
    assert rough_env.terrain.kind == "rough" and rough_env.height_scan is not None
    cpu_iterations = rough.agent_defaults(on_cpu=True).max_iterations
    gpu_iterations = rough.agent_defaults(on_cpu=False).max_iterations
    assert cpu_iterations == (UNITREE_G1_ROUGH_CPU_ITERATIONS if robot == "unitree-g1" else gpu_iterations)
    assert gpu_iterations >= cpu_iterations >= flat.agent_defaults(on_cpu=True).max_iterations
    assert rough.agent_defaults(on_cpu=False).policy.actor_hidden_dims == (512, 256, 128)
    assert rough.agent_defaults(on_cpu=True).policy.actor_hidden_dims == (128, 128)


# --- choosing a robot ----------------------------------------------------------------------------------------------
def test_robot_values_resolve_to_records(fixture_root: Path, tmp_path: Path) -> None:
    assert resolve_robot("go1") is GO1
    assert resolve_robot("menagerie:unitree_go1") is UNITREE_GO1
    assert resolve_robot("menagerie:unitree_g1") is UNITREE_G1
    # A path gets the record whose names it has, with the file as its source.
    edited = resolve_robot(str(FIXTURE / "unitree_go1" / "go1.xml"))
    assert edited == dataclasses.replace(UNITREE_GO1, source=str(FIXTURE / "unitree_go1" / "go1.xml"))
    assert resolve_robot(str(HUMANOID.asset)).name == "humanoid"
    stray = tmp_path / "box.xml"
    stray.write_text('<mujoco><worldbody><body name="b"><freejoint/><geom size="0.1"/></body></worldbody></mujoco>')
    for value, message in (
        ("menagerie:unitree_h1", "no robot record for this Menagerie model"),
        ("spot", "is not a robot"),
        (str(tmp_path / "missing.xml"), "no such MJCF file"),
        (str(stray), "matches no robot record"),
    ):
        with pytest.raises(UsageError, match=message):
            resolve_robot(value)


# --- offline and closed networks -----------------------------------------------------------------------------------
def test_missing_menagerie_files_are_one_usage_error_naming_menagerie_root(offline: None) -> None:
    assert not menagerie_available("unitree_go1")
    with pytest.raises(UsageError) as caught:
        robot_file(UNITREE_GO1)
    message = str(caught.value)
    assert "\n" not in message and "cannot be downloaded" in message
    # The way that works without GitHub: a copy of the model folder, made where GitHub is reachable, named by
    # MENAGERIE_ROOT; the docs section the message names exists.
    assert "mujoco-menagerie path unitree_go1" in message and "MENAGERIE_ROOT=<dir>" in message
    assert CLOSED_NETWORK_DOC in message
    docs = (Path(__file__).parents[1] / "docs" / "tasks.md").read_text()
    assert "### Menagerie files on a closed network" in docs


def test_download_errors_of_the_package_become_the_same_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import mujoco_menagerie as mm

    def unreachable(self: object, robot: object, progress: object = None) -> Path:
        raise mm.DownloadError("https://github.invalid/unitree_go1.tar.xz: <urlopen error [Errno -3] name resolution>")

    monkeypatch.delenv("MENAGERIE_ROOT", raising=False)
    monkeypatch.setenv("MENAGERIE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(mm.Cache, "resolve", unreachable)
    with pytest.raises(UsageError, match=r"\(https://github.invalid/.*name resolution>\); where GitHub is reachable"):
        robot_file(UNITREE_GO1)


def test_a_menagerie_root_without_the_robot_says_what_it_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))
    # An empty folder (or a checkout without this robot): the copy to make.
    with pytest.raises(UsageError, match=r"MENAGERIE_ROOT=.* has no folder unitree_go1/; where GitHub is reachable"):
        robot_file(UNITREE_GO1)
    # A copied download cache: the variable that reads it.
    (tmp_path / "models" / "unitree_go1-0123456789abcdef").mkdir(parents=True)
    with pytest.raises(UsageError, match=f"it is a mujoco-menagerie cache: set MENAGERIE_CACHE_DIR={tmp_path}"):
        robot_file(UNITREE_GO1)
    # Another tree's layout (mjlab keeps unitree_go1/xmls/go1.xml): pass its file as a path.
    (tmp_path / "unitree_go1" / "xmls").mkdir(parents=True)
    assert not menagerie_available("unitree_go1")  # list-tasks says it is not on disk (a folder without a model)
    with pytest.raises(UsageError, match=r"has no unitree_go1/go1.xml .* --env.robot <path to the XML>"):
        robot_file(UNITREE_GO1)
    # An arm has no --env.robot: its record names the file (mjlab's YAM is i2rt_yam/xmls/yam.xml).
    from mjfleet.tasks.manipulation.sources import arm_file, resolve_arm

    (tmp_path / "i2rt_yam" / "xmls").mkdir(parents=True)
    with pytest.raises(UsageError, match=r"has no i2rt_yam/yam.xml .*register an arm record") as error:
        arm_file(resolve_arm("yam"))
    assert "--env.robot" not in str(error.value)


def test_a_copy_named_by_menagerie_root_trains_without_the_network(
    offline: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented way on the closed machine: a model folder copied to <dir>/<robot>, MENAGERIE_ROOT=<dir>."""
    import shutil

    from mjfleet.cli.train import main as train_main

    from .helpers import run_main

    copy = tmp_path / "menagerie"
    shutil.copytree(FIXTURE / "unitree_go1", copy / "unitree_go1")
    monkeypatch.setenv("MENAGERIE_ROOT", str(copy))
    assert menagerie_available("unitree_go1") and robot_file(UNITREE_GO1) == copy / "unitree_go1" / "go1.xml"
    argv = ["unitree-go1-velocity-flat", "--gpu-ids", "None", "--env.num-envs", "4", "--dry-run"]
    code, out, err = run_main(train_main, [*argv, "--log-root", str(tmp_path / "logs")])
    assert code == 0, err
    assert "unitree-go1-velocity-flat" in out and not (tmp_path / "logs").exists()


def test_list_tasks_and_train_offline(offline: None, tmp_path: Path) -> None:
    from mjfleet.cli.list_tasks import main as list_main
    from mjfleet.cli.train import main as train_main
    from mjfleet.tasks import builtin

    from .helpers import run_main

    listed = {spec.id: spec.description for spec in builtin.tasks() if isinstance(spec, TaskSpec)}
    assert "prefetch unitree_g1" in listed["unitree-g1-velocity-flat"]
    assert "prefetch" not in listed["go1-velocity-flat"]  # the primitive tasks need nothing
    code, out, _ = run_main(list_main, [])
    assert code == 0 and "go1-velocity-flat" in out
    # Two workers: the launcher finds the files missing before the run directory or any worker exists.
    argv = ["unitree-go1-velocity-flat", "--gpu-ids", "None", "--cpu-workers", "2", "--env.num-envs", "8"]
    code, _, err = run_main(train_main, [*argv, "--log-root", str(tmp_path / "logs")])
    assert code == 2
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "MENAGERIE_ROOT" in error and "mujoco-menagerie path unitree_go1" in error and "Traceback" not in err
    assert not (tmp_path / "logs").exists()


# --- the tasks on the fixture (CI) and on the real files (where present) -------------------------------------------
def _step_and_reset(task_id: str, num_envs: int) -> None:
    from .conftest import make_env

    env = make_env(task_id, num_envs=num_envs, seed=0)
    try:
        for _ in range(3):
            obs, reward, _, _ = env.step(torch.zeros(num_envs, env.num_actions))
            assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
        env.reset_all()
        assert torch.isfinite(env.get_observations()["critic"]).all()
    finally:
        env.close()


def test_menagerie_go1_task_steps_on_the_fixture(fixture_root: Path) -> None:
    _step_and_reset("unitree-go1-velocity-flat", num_envs=4)


def _real_files() -> str | None:
    """Why the real-file test cannot run, or None when both robots are on disk (and not only as our fixture)."""
    root = os.environ.get("MENAGERIE_ROOT")
    if root and Path(root).resolve() == FIXTURE.resolve():
        return "MENAGERIE_ROOT points at the test fixture"
    return missing_files("unitree-go1-velocity-flat") or missing_files("unitree-g1-velocity-flat")


@pytest.mark.slow
@pytest.mark.skipif(_real_files() is not None, reason=str(_real_files()))
@pytest.mark.parametrize("task_id", MENAGERIE_TASKS)
def test_menagerie_task_builds_steps_resets_and_trains(task_id: str, tmp_path: Path) -> None:
    from mjfleet.train import run

    from .helpers import small_train_config
    from .test_locomotion import SMALL_TERRAIN

    _step_and_reset(task_id, num_envs=8)
    cfg = small_train_config(task_id, num_envs=16, iterations=2, steps=8, log_root=tmp_path)
    if cfg.env.terrain.kind == "rough":
        cfg.env.terrain = dataclasses.replace(cfg.env.terrain, **SMALL_TERRAIN)  # type: ignore[attr-defined]
    (result,) = run(cfg)
    assert result.final_iteration == 2

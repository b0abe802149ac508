"""Sanity tests for the primitive-geometry locomotion robot models (Go1, G1-class humanoid)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjfleet

ASSETS = Path(mjfleet.__file__).parent / "tasks" / "locomotion" / "assets"

# name -> (xml file, nominal total mass [kg], minimum number of actuators, foot geoms)
ROBOTS = {
    "go1": ("go1.xml", 12.0, 12, ("FR_foot", "FL_foot", "RR_foot", "RL_foot")),
    "humanoid": ("humanoid.xml", 35.0, 21, ("left_foot", "right_foot")),
}
ROBOT_NAMES = list(ROBOTS)

# Boxes touch a plane at (up to) 4 corners; spheres at one point.
MAX_STANDING_CONTACTS = {"go1": 4, "humanoid": 8}


def _load(name: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(ASSETS / ROBOTS[name][0]))


def _home(model: mujoco.MjModel) -> mujoco.MjData:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    mujoco.mj_forward(model, data)
    return data


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_model_loads_with_expected_structure(name: str) -> None:
    model = _load(name)
    _, _, min_nu, feet = ROBOTS[name]
    # Free-floating base plus hinge joints only, every hinge driven by one position actuator.
    assert int(model.jnt_type[0]) == mujoco.mjtJoint.mjJNT_FREE
    assert np.all(model.jnt_type[1:] == mujoco.mjtJoint.mjJNT_HINGE)
    assert model.nu == model.njnt - 1
    assert model.nu >= min_nu
    assert model.nv == 6 + model.nu
    assert np.all(model.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT)
    assert sorted(model.actuator_trnid[:, 0]) == list(range(1, model.njnt))
    assert np.all(model.actuator_gainprm[:, 0] > 0)  # position servos: kp > 0
    assert np.all(model.actuator_ctrllimited) and np.all(model.actuator_forcelimited)
    # ctrlrange equals the joint range of the driven joint.
    np.testing.assert_allclose(model.actuator_ctrlrange, model.jnt_range[model.actuator_trnid[:, 0]])
    # Names used by the tasks.
    for foot in feet:
        assert int(model.geom_type[model.geom(foot).id]) in (
            int(mujoco.mjtGeom.mjGEOM_SPHERE),
            int(mujoco.mjtGeom.mjGEOM_BOX),
        )
        model.site(f"{foot}_site")
    model.site("imu")
    for sensor in ("imu_quat", "imu_gyro", "imu_linvel", "imu_acc"):
        model.sensor(sensor)
    assert model.geom_bodyid[model.geom("floor").id] == 0
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.opt.timestep == pytest.approx(0.005)
    # No meshes or other heavy geometry.
    assert model.nmesh == 0
    allowed = (
        mujoco.mjtGeom.mjGEOM_PLANE,
        mujoco.mjtGeom.mjGEOM_SPHERE,
        mujoco.mjtGeom.mjGEOM_CAPSULE,
        mujoco.mjtGeom.mjGEOM_BOX,
        mujoco.mjtGeom.mjGEOM_CYLINDER,
    )
    assert {int(t) for t in model.geom_type} <= {int(t) for t in allowed}


def test_go1_joint_layout() -> None:
    model = _load("go1")
    assert model.nu == 12
    for leg in ("FR", "FL", "RR", "RL"):
        for part in ("hip", "thigh", "calf"):
            model.joint(f"{leg}_{part}_joint")
        model.body(f"{leg}_calf")
    model.body("trunk")


def test_humanoid_joint_layout() -> None:
    model = _load("humanoid")
    leg = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
    arm = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow")
    for side in ("left", "right"):
        for j in leg + arm:
            model.joint(f"{side}_{j}_joint")
        model.body(f"{side}_ankle_roll_link")
    model.joint("waist_yaw_joint")
    model.body("pelvis")
    assert model.nu >= 12 + 1 + 8


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_total_mass(name: str) -> None:
    model = _load(name)
    nominal = ROBOTS[name][1]
    total = model.body_subtreemass[1]
    assert total == pytest.approx(np.sum(model.body_mass))
    assert abs(total - nominal) <= 0.15 * nominal


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_no_self_collision(name: str) -> None:
    model = _load(name)
    robot = [g for g in range(model.ngeom) if model.geom_bodyid[g] != 0]
    for i in robot:
        for j in robot:
            assert not (model.geom_contype[i] & model.geom_conaffinity[j]), (
                f"{model.geom(i).name or i} can collide with {model.geom(j).name or j}"
            )
    # ... but the feet collide with the floor.
    floor = model.geom("floor").id
    for foot in ROBOTS[name][3]:
        g = model.geom(foot).id
        assert (model.geom_contype[floor] & model.geom_conaffinity[g]) or (
            model.geom_contype[g] & model.geom_conaffinity[floor]
        )


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_floor_is_removable(name: str) -> None:
    spec = mujoco.MjSpec.from_file(str(ASSETS / ROBOTS[name][0]))
    spec.delete(spec.geom("floor"))
    model = spec.compile()
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor") == -1


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_home_keyframe(name: str) -> None:
    model = _load(name)
    key = model.key("home")
    lo, hi = model.actuator_ctrlrange.T
    assert np.all((key.ctrl >= lo) & (key.ctrl <= hi))
    qpos = key.qpos[7:]
    jlo, jhi = model.jnt_range[1:].T
    assert np.all((qpos >= jlo) & (qpos <= jhi))
    # Only the feet touch the floor, with (at most) millimetre penetration.
    data = _home(model)
    feet = {model.geom(f).id for f in ROBOTS[name][3]}
    floor = model.geom("floor").id
    assert 0 < data.ncon <= MAX_STANDING_CONTACTS[name]
    for c in data.contact[: data.ncon]:
        assert {c.geom1, c.geom2} - {floor} <= feet
        assert floor in (c.geom1, c.geom2)
        assert c.dist > -2e-3
    # Every foot is in contact.
    touching = {g for c in data.contact[: data.ncon] for g in (c.geom1, c.geom2)}
    assert feet <= touching


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_stands_holding_home_ctrl(name: str) -> None:
    """2 s of plain MuJoCo with ctrl = home ctrl keeps the robot up (gains/limits are sane)."""
    model = _load(name)
    data = _home(model)
    h0 = data.qpos[2]
    heights = []
    for _ in range(int(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
        heights.append(data.qpos[2])
    assert np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel))
    assert min(heights) > 0.8 * h0
    # Still upright: base z-axis points up.
    assert data.xmat[1].reshape(3, 3)[2, 2] > 0.95
    # At rest, only the feet touch the floor and nothing moves much.
    feet = {model.geom(f).id for f in ROBOTS[name][3]}
    floor = model.geom("floor").id
    assert 0 < data.ncon <= MAX_STANDING_CONTACTS[name]
    for c in data.contact[: data.ncon]:
        assert {c.geom1, c.geom2} - {floor} <= feet
    assert np.abs(data.qvel).max() < 0.2
    # Forces stay within actuator limits (position servos are clamped).
    assert np.all(np.abs(data.actuator_force) <= model.actuator_forcerange[:, 1] + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_mujoco_warp_cpu(name: str) -> None:
    """The model is accepted by MuJoCo Warp and steps on the CPU (first call compiles kernels)."""
    wp = pytest.importorskip("warp")
    mjw = pytest.importorskip("mujoco_warp")

    model = _load(name)
    nworld, nsteps = 4, 10
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(model)
        d = mjw.make_data(model, nworld=nworld)
        mjw.reset_data_keyframe(m, d, model.key("home").id)
        for _ in range(nsteps):
            mjw.step(m, d)
        qpos = d.qpos.numpy()
        ncon = d.nacon.numpy()

    assert qpos.shape == (nworld, model.nq)
    assert np.all(np.isfinite(qpos))
    # Same trajectory as plain MuJoCo (float32 vs float64, so loosely).
    data = _home(model)
    for _ in range(nsteps):
        mujoco.mj_step(model, data)
    for w in range(nworld):
        np.testing.assert_allclose(qpos[w], data.qpos, atol=5e-3)
    assert 0 < int(ncon[0]) <= nworld * MAX_STANDING_CONTACTS[name]

# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Build the manipulation scene from an arm record: the arm on a table, the floor below, optionally a cube."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from mjfleet.errors import UsageError, mujoco_message
from mjfleet.tasks.locomotion.robots import Zone
from mjfleet.tasks.manipulation.arms import ArmSpec
from mjfleet.tasks.manipulation.sources import arm_file

if TYPE_CHECKING:  # the settings build the scene to check it (their prepare_assets): only their types here
    from mjfleet.tasks.manipulation.config import CubeConfig, ManipulationConfig

TABLE_THICKNESS = 0.04
"""The table top's thickness (metres): its upper face is the plane z = 0."""
CUBE = "cube"
"""Name of the cube's body, free joint and geom."""
HAND_TABLE_SENSOR = "hand_table"
"""Contact sensor between the hand and the table: whether they touch, then the net contact force (3 values)."""
GRASP_SENSOR_PREFIX = "grasp_"
"""With a cube, one contact sensor per fingertip zone, ``grasp_<zone>``: how many of its contacts touch the cube."""


def build_model(arm: ArmSpec, cfg: ManipulationConfig, cube: CubeConfig | None = None) -> mujoco.MjModel:
    """The scene: the arm's base at the origin on a table, the floor below; with ``cube``, a free cube (sized at its
    largest, which the task shrinks per environment). Only the hand (the subtree of ``hand_body``), the table, the
    floor and the cube collide."""
    path = arm_file(arm)
    try:
        spec = mujoco.MjSpec.from_file(path)
    except Exception as e:  # MuJoCo reports parse errors as ValueError or its own error types
        raise UsageError(f"arm {arm.name!r}: MuJoCo cannot load {path} ({mujoco_message(e)})") from e
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    world = spec.worldbody
    table = cfg.table
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[(table.front + table.back) / 2, table.half_width, TABLE_THICKNESS / 2],
        pos=[(table.front - table.back) / 2, 0.0, -TABLE_THICKNESS / 2],
        rgba=[0.55, 0.45, 0.35, 1.0],
    )
    floor = [0.0, 0.0, -table.floor_depth]
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05], pos=floor)
    world.add_light(pos=[0.3, 0.0, 2.0], dir=[0.0, 0.0, -1.0])
    world.add_camera(name="front", pos=[1.1, 0.0, 0.55], xyaxes=[0.0, 1.0, 0.0, -0.4, 0.0, 0.9])
    if cube is not None:
        body = world.add_body(name=CUBE, pos=[sum(cube.x) / 2, sum(cube.y) / 2, cube.half_size[1]])
        body.add_freejoint(name=CUBE)
        body.add_geom(
            name=CUBE,
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[cube.half_size[1]] * 3,
            mass=sum(cube.mass) / 2,
            rgba=[0.8, 0.2, 0.2, 1.0],
        )
    hand = next((b for b in spec.bodies if b.name == arm.hand_body), None)
    if hand is not None:  # else check_arm_model names what the file lacks
        # Computed inside the physics step, as the legged robots' ground contact sensors are: no contact bookkeeping
        # outside it.
        sensor = spec.add_sensor(
            name=HAND_TABLE_SENSOR,
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_XBODY,  # the subtree of hand_body
            objname=arm.hand_body,
            reftype=mujoco.mjtObj.mjOBJ_GEOM,
            refname="table",
        )
        sensor.intprm[0] = 1 | 2  # data: found, force
        sensor.intprm[1] = 3  # reduce: the net force of all matching contacts
        sensor.intprm[2] = 1  # one slot
        if cube is not None:
            for zone in arm.fingertips:
                _add_grasp_sensor(spec, zone)
        if arm.ee_site_pos is not None:
            if any(site.name == arm.ee_site for site in spec.sites):  # MuJoCo's compile: "repeated name", a traceback
                raise UsageError(
                    f"arm {arm.name!r} ({path}): its file has a site {arm.ee_site!r} already; give ee_site a name of"
                    " its own with ee_site_pos, or leave ee_site_pos out to use the file's"
                )
            hand.add_site(name=arm.ee_site, pos=list(arm.ee_site_pos), size=[0.005, 0.0, 0.0], group=4)
    m = spec.compile()
    check_arm_model(arm, m, path)
    if arm.timestep > 0:
        m.opt.timestep = arm.timestep
    if cfg.contact_cone != "file":
        m.opt.cone = (
            mujoco.mjtCone.mjCONE_ELLIPTIC if cfg.contact_cone == "elliptic" else mujoco.mjtCone.mjCONE_PYRAMIDAL
        )
    if cfg.impratio is not None:
        m.opt.impratio = cfg.impratio
    m.opt.iterations = cfg.solver_iterations
    m.opt.ls_iterations = cfg.linesearch_iterations
    # Videos render on the CPU too, where the lights' shadow maps cost four fifths of a frame (0.49 s against 0.095 s
    # for the YAM at 160x120).
    m.light_castshadow[:] = 0
    hand = subtree(m, int(m.body(arm.hand_body).id))
    robot_geoms = m.geom_bodyid > 0
    if cube is not None:
        robot_geoms &= m.geom_bodyid != m.body(CUBE).id
    off = robot_geoms & ~np.isin(m.geom_bodyid, hand)
    m.geom_contype[off] = 0
    m.geom_conaffinity[off] = 0
    return m


def _add_grasp_sensor(spec: mujoco.MjSpec, zone: Zone) -> None:
    """A contact sensor of ``zone`` (its geom, or every geom of its body) against the cube: found contacts only."""
    named = bool(zone.geom)
    sensor = spec.add_sensor(
        name=GRASP_SENSOR_PREFIX + zone.name,
        type=mujoco.mjtSensor.mjSENS_CONTACT,
        objtype=mujoco.mjtObj.mjOBJ_GEOM if named else mujoco.mjtObj.mjOBJ_BODY,
        objname=zone.geom if named else zone.body,
        reftype=mujoco.mjtObj.mjOBJ_GEOM,
        refname=CUBE,
    )
    sensor.intprm[0] = 1  # data: found
    sensor.intprm[2] = 1  # one slot


def subtree(m: mujoco.MjModel, body: int) -> np.ndarray:
    """Ids of ``body`` and every body below it."""
    inside = [body]
    for b in range(body + 1, m.nbody):  # children come after their parents
        if int(m.body_parentid[b]) in inside:
            inside.append(b)
    return np.asarray(inside)


def zone_geoms(m: mujoco.MjModel, zone: Zone) -> list[int]:
    """Collision geoms of a zone: its named geom, or its body's (of the zone's kinds, if given)."""
    if zone.geom:
        return [int(m.geom(zone.geom).id)]
    body = int(m.body(zone.body).id)
    kinds = {int(getattr(mujoco.mjtGeom, f"mjGEOM_{k.upper()}")) for k in zone.kinds}
    return [
        g
        for g in range(m.ngeom)
        if m.geom_bodyid[g] == body
        and (m.geom_contype[g] or m.geom_conaffinity[g])
        and (not kinds or int(m.geom_type[g]) in kinds)
    ]


def home_qpos(m: mujoco.MjModel, arm: ArmSpec) -> np.ndarray:
    """``qpos0`` with the arm's joints at the record's home pose (the file's ``home`` keyframe if it gives none)."""
    qpos = m.qpos0.copy()
    if not arm.home:
        key = m.key("home").qpos
        for j in range(m.njnt):
            if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE and m.jnt_bodyid[j] != 0:
                adr = int(m.jnt_qposadr[j])
                qpos[adr] = key[adr] if adr < len(key) else qpos[adr]
        return qpos
    for j in range(m.njnt):
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            continue
        value = next((v for pattern, v in arm.home if re.fullmatch(pattern, m.joint(j).name)), 0.0)
        qpos[int(m.jnt_qposadr[j])] = value
    return qpos


def check_arm_model(arm: ArmSpec, m: mujoco.MjModel, path: str) -> None:
    """One line naming what the record names but the file lacks, or position actuators it needs."""
    where = f"arm {arm.name!r} ({path})"
    missing = []
    for kind, names in (
        ("site", (arm.ee_site,)),
        ("body", (arm.hand_body, *(z.body for z in arm.fingertips if z.body))),
        ("joint", (*arm.gripper_joints, *(name for name, _ in arm.grasp_pose))),
        ("actuator", (arm.gripper_actuator,)),
        ("geom", tuple(z.geom for z in arm.fingertips if z.geom)),
    ):
        for name in names:
            if mujoco.mj_name2id(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}"), name) < 0:
                missing.append(f"{kind} {name!r}")
    if missing:
        raise UsageError(f"{where} has no {', '.join(missing)}")
    if m.nu == 0 or any(m.actuator_trntype[i] != mujoco.mjtTrn.mjTRN_JOINT for i in range(m.nu)):
        raise UsageError(f"{where}: every actuator must drive a joint (position servos)")
    for z in arm.fingertips:
        if not zone_geoms(m, z):
            raise UsageError(f"{where}: fingertip {z.name!r} has no collision geoms")
    if not arm.home and mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home") < 0:
        raise UsageError(f"{where} has no keyframe 'home' and its record no home pose (the arm starts from one)")

# pyright: reportAttributeAccessIssue=false
"""Build a robot's MuJoCo model for the locomotion tasks from its record: servos, default pose, ground (plane or
heightfield) and contact sensors."""

from __future__ import annotations

import re

import mujoco
import numpy as np

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.check import check_robot_spec
from mjfleet.tasks.locomotion.contacts import add_zone_sensors, zone_geoms
from mjfleet.tasks.locomotion.robots import RobotSpec
from mjfleet.tasks.locomotion.sources import robot_file
from mjfleet.tasks.locomotion.terrain import TerrainMap

TERRAIN_BASE = 0.2
"""Thickness of the heightfield's solid base below its lowest point (metres)."""


SELF_CONTACT_SENSOR = "self_contact"
"""The contact sensor :func:`build_model` adds on request: the robot's contacts with itself, the strongest one's."""
_REDUCE_MAXFORCE = 2
"""``reduce="maxforce"`` of an MJCF contact sensor (the Python bindings name no enum for it)."""


def build_model(robot: RobotSpec, terrain: TerrainMap | None, self_contacts: bool = False) -> mujoco.MjModel:
    """The robot's model as the task expects it: position servos, a ``home`` keyframe, each zone's sensors and each
    foot's reference site (:mod:`~mjfleet.tasks.locomotion.contacts`), and a ``floor`` plane, replaced by ``terrain``
    when given.

    ``self_contacts``: also a contact sensor of the robot's contacts with itself (its root body's subtree against
    itself: the ground is not in it), reading how many there are and the force of the strongest, named
    ``SELF_CONTACT_SENSOR``.
    """
    path = robot_file(robot)
    # Also here, not only in prepare_assets: play, the viewer and scripts build the task without train's checks. On a
    # parse of its own: deleting an element from a spec once compiled costs MuJoCo tens of milliseconds each (1.2 s
    # for the G1's actuators and sensors), before its first compile next to nothing.
    check_robot_spec(robot, mujoco.MjSpec.from_file(str(path)), f"robot {robot.name!r} ({path})")
    spec = mujoco.MjSpec.from_file(str(path))
    # The task reads the base state from qpos/qvel (exact after the step); the MJCF's IMU sensors are unused, and
    # its accelerometer would force an extra force pass (rne_postconstraint) in every substep.
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    if robot.timestep > 0:
        spec.option.timestep = robot.timestep
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    if not any(g.name == "floor" for g in spec.geoms):  # Menagerie's robot files leave the ground to their scenes
        # Colliding whatever the file's main default says (robot geoms made contype 0 there would leave it none).
        spec.worldbody.add_geom(
            name="floor",
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[0.0, 0.0, 0.05],
            condim=3,
            contype=1,
            conaffinity=1,
        )
        spec.worldbody.add_light(pos=[0.0, 0.0, 4.0], dir=[0.0, 0.0, -1.0])
    if robot.primitive_collisions:
        fit_primitive_collisions(spec)
    if robot.servos:
        _add_servos(spec, robot)
        if not robot.home:
            _aim_servos_at_home(spec)
    if robot.home:
        for key in list(spec.keys):  # before the compile that _set_home reads
            spec.delete(key)
        _set_home(spec, robot)
    add_zone_sensors(spec, spec.compile(), robot)
    if self_contacts:
        root = spec.worldbody.first_body().name
        field = mujoco.mjtConDataField
        spec.add_sensor(
            name=SELF_CONTACT_SENSOR,
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_XBODY,  # a subtree, as MJCF's subtree1/subtree2
            objname=root,
            reftype=mujoco.mjtObj.mjOBJ_XBODY,
            refname=root,
            intprm=[(1 << int(field.mjCONDATA_FOUND)) | (1 << int(field.mjCONDATA_FORCE)), _REDUCE_MAXFORCE, 1],
        )
    if terrain is not None:
        _add_heightfield(spec, terrain)
    return spec.compile()


def fit_primitive_collisions(spec: mujoco.MjSpec) -> int:
    """Turn every colliding mesh geom into a capsule fitted to its mesh; returns how many changed.

    Mesh-ground and mesh-mesh contacts go through the general convex collider, several times slower than the
    capsule routines on the GPU; MuJoCo fits the capsule when the geom keeps its mesh but changes its type.
    """
    changed = 0
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH and (geom.contype or geom.conaffinity):
            geom.type = mujoco.mjtGeom.mjGEOM_CAPSULE
            changed += 1
    return changed


def _add_servos(spec: mujoco.MjSpec, robot: RobotSpec) -> None:
    """Replace the file's actuators by one position servo per hinge or slide joint, gains from the record."""
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    for joint in spec.joints:
        if joint.type not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            continue
        servo = next((s for s in robot.servos if re.fullmatch(s.joints, joint.name)), None)
        if servo is None:
            raise UsageError(f"robot {robot.name!r}: no servo gains for joint {joint.name!r} of {robot.source}")
        if joint.armature == 0.0:
            joint.armature = servo.armature
        actuator = spec.add_actuator(name=joint.name.removesuffix("_joint"), target=joint.name)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.set_to_position(kp=servo.kp, kv=servo.kd, inheritrange=1.0)
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-servo.effort, servo.effort]


def _aim_servos_at_home(spec: mujoco.MjSpec) -> None:
    """The record's servos at the file's ``home`` keyframe aim at its joint angles: the file's actuators, deleted for
    them, took the keyframe's controls with them (every target 0, a knee's outside its range)."""
    m = spec.compile()
    try:
        qpos = m.key("home").qpos
    except KeyError:  # the robot file's checks say that it has none
        return
    ctrl = qpos[m.jnt_qposadr[m.actuator_trnid[:, 0]]]
    for key in spec.keys:
        if key.name == "home":
            key.ctrl = ctrl.tolist()


def _set_home(spec: mujoco.MjSpec, robot: RobotSpec) -> None:
    """Add the record's default pose as the ``home`` keyframe (``spec`` has none left of the file's), the base high
    enough that the feet touch."""
    m = spec.compile()
    d = mujoco.MjData(m)
    qpos = m.qpos0.copy()
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            name = m.joint(j).name
            entry = robot.home_entry(name)
            angle = 0.0 if entry is None else entry[1]
            low, high = m.jnt_range[j] if m.jnt_limited[j] else (-np.inf, np.inf)
            qpos[m.jnt_qposadr[j]] = np.clip(angle, low, high)
    qpos[:7] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    feet = [g for foot in robot.feet for g in zone_geoms(m, robot, foot)]
    qpos[2] = -min(lowest_point(m, d, g) for g in feet)
    ctrl = qpos[m.jnt_qposadr[m.actuator_trnid[:, 0]]]
    spec.add_key(name="home", qpos=qpos.tolist(), ctrl=ctrl.tolist())


def spawn_height(m: mujoco.MjModel, robot: RobotSpec) -> float:
    """Base height of the ``home`` pose over flat ground: the keyframe's own, or higher where the keyframe puts a
    foot below the ground (Menagerie's Go1 stands its feet 1.8 cm into it), so that every episode starts with the
    feet on the ground rather than in it."""
    key = m.key("home")
    d = mujoco.MjData(m)
    d.qpos[:] = key.qpos
    mujoco.mj_kinematics(m, d)
    feet = [g for foot in robot.feet for g in zone_geoms(m, robot, foot)]
    return float(key.qpos[2]) - min(0.0, min(lowest_point(m, d, g) for g in feet))


def lowest_point(m: mujoco.MjModel, d: mujoco.MjData, geom: int) -> float:
    """Lowest world z of the geom: exact for spheres and capsules, of its bounding box otherwise (the corners of a
    rotated box around a sphere reach below it)."""
    kind, size, centre_z = m.geom_type[geom], m.geom_size[geom], float(d.geom_xpos[geom][2])
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return centre_z - float(size[0])
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:  # the segment's ends lie half a length along the geom's z axis
        return centre_z - abs(float(d.geom_xmat[geom][8]) * float(size[1])) - float(size[0])
    centre, half = m.geom_aabb[geom, :3], m.geom_aabb[geom, 3:]
    corners = centre + half * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    world = d.geom_xpos[geom] + corners @ d.geom_xmat[geom].reshape(3, 3).T
    return float(world[:, 2].min())


def _add_heightfield(spec: mujoco.MjSpec, terrain: TerrainMap) -> None:
    floor = spec.geom("floor")
    material, condim, contype, conaffinity = floor.material, floor.condim, floor.contype, floor.conaffinity
    spec.delete(floor)
    low, high = float(terrain.heights.min()), float(terrain.heights.max())
    # MuJoCo scales heightfield data in [0, 1] by the elevation; keep it positive even for an all-flat grid.
    elevation = max(high - low, 1e-3)
    nrow, ncol = terrain.heights.shape
    half_x, half_y = terrain.half_extent
    spec.add_hfield(
        name="terrain",
        size=[half_x, half_y, elevation, TERRAIN_BASE],
        nrow=nrow,
        ncol=ncol,
        userdata=((terrain.heights - low) / elevation).astype(np.float32).ravel().tolist(),
    )
    spec.worldbody.add_geom(
        name="terrain",
        type=mujoco.mjtGeom.mjGEOM_HFIELD,
        hfieldname="terrain",
        pos=[0.0, 0.0, low],
        material=material,
        condim=condim,
        contype=contype,
        conaffinity=conaffinity,
    )
    # MuJoCo C collides a geom with each triangular prism of the heightfield. Its native convex solver returns the
    # prism's side faces as normals: a small sphere (the G1's 5 mm foot points) across a cell's edge gets two
    # opposite horizontal contacts and no support, and sinks. The legacy solver sets a sphere's or capsule's normal
    # from its own surface: with it, a G1 policy trained on the plane kept 0.85 of its 0.95 on a flat heightfield,
    # 0.06 without. MuJoCo Warp keeps its own heightfield collider, which needs no such care, whatever this flag says.
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_NATIVECCD

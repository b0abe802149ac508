# pyright: reportAttributeAccessIssue=false
"""Build a robot's MuJoCo model for the locomotion tasks: ground (plane or heightfield) and contact sensors."""

from __future__ import annotations

import mujoco
import numpy as np

from mjfleet.tasks.locomotion.robots import RobotSpec
from mjfleet.tasks.locomotion.terrain import TerrainMap

TOUCH_MARGIN = 0.005
"""Touch zones are the collision geoms grown by this much (metres), so contact points always lie inside."""

TERRAIN_BASE = 0.2
"""Thickness of the heightfield's solid base below its lowest point (metres)."""


def touch_sensor_name(geom: str) -> str:
    """Name of the touch sensor (and of its site) watching ``geom``."""
    return f"touch_{geom}"


def build_model(robot: RobotSpec, terrain: TerrainMap | None) -> mujoco.MjModel:
    """The robot's model with a touch sensor per watched geom, and the floor plane replaced by ``terrain``.

    Touch sensors are computed inside the physics step (after the constraint solver), so contact flags cost one
    small kernel per substep and need no contact bookkeeping outside the captured graph. A touch sensor sums the
    normal forces of the contacts of its site's body that fall into the site's volume; one site per geom, shaped
    like it, separates e.g. a calf's own contacts from those of the foot on the same body.
    """
    spec = mujoco.MjSpec.from_file(str(robot.asset))
    # The task reads the base state from qpos/qvel (exact after the step); the MJCF's IMU sensors are unused, and
    # its accelerometer would force an extra force pass (rne_postconstraint) in every substep.
    for sensor in list(spec.sensors):
        spec.delete(sensor)
    _add_touch_sensors(spec, robot)
    if terrain is not None:
        _add_heightfield(spec, terrain)
    return spec.compile()


def _add_touch_sensors(spec: mujoco.MjSpec, robot: RobotSpec) -> None:
    compiled = spec.compile()
    watched = dict.fromkeys((*robot.feet, *robot.undesired_contacts, *robot.terminal_contacts))
    for name in watched:
        geom = compiled.geom(name)
        kind = mujoco.mjtGeom(int(geom.type[0]))
        size = np.array(geom.size, dtype=float)
        if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
            size[0] += TOUCH_MARGIN  # radius grows; the half-length stays (the caps grow with the radius)
        elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
            size[0] += TOUCH_MARGIN
        elif kind == mujoco.mjtGeom.mjGEOM_BOX:
            size += TOUCH_MARGIN
        else:
            raise ValueError(f"touch zone for {kind.name} geom {name!r} is not supported")
        body = spec.body(compiled.body(int(geom.bodyid[0])).name)
        site_name = touch_sensor_name(name)
        body.add_site(
            name=site_name,
            type=mujoco.mjtGeom(kind),
            size=size,
            pos=np.array(geom.pos, dtype=float),
            quat=np.array(geom.quat, dtype=float),
            group=5,
        )
        spec.add_sensor(
            name=site_name, type=mujoco.mjtSensor.mjSENS_TOUCH, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site_name
        )


def _add_heightfield(spec: mujoco.MjSpec, terrain: TerrainMap) -> None:
    floor = spec.geom("floor")
    material, condim = floor.material, floor.condim
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
    )

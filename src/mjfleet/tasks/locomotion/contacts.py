# pyright: reportAttributeAccessIssue=false
"""A legged robot's contact zones and their ground contact: which collision geoms a zone is, the sensors that
watch it inside the physics step, and the reading of them.

Each zone has two sensors: a touch sensor (the normal forces on the zone: cheap, but the robot pressing on itself
counts too) and a contact sensor of the zone against the world body that counts the contacts MuJoCo found (the
ground only). A zone touches the ground when both read: found, and pressed harder than ``contact_force``. Reading the
contact sensors' forces instead would cost MuJoCo C far more per physics step: each computes every matched
contact's force.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.columns import Index, columns
from mjfleet.tasks.locomotion.robots import RobotSpec

TOUCH_SENSOR_PREFIX = "touch_"
"""A zone's touch sensor, and its site, are ``touch_<zone>``."""
GROUND_SENSOR_PREFIX = "ground_"
"""A zone's contact sensor against the ground is ``ground_<zone>`` (``ground_<zone>_<k>``, one per geom, where the
zone is part of its body's geoms)."""
TOUCH_MARGIN = 0.005
"""A touch sensor's site is the zone's collision geoms grown by this much (metres), so contact points lie inside."""

_FOUND = 1 << int(mujoco.mjtConDataField.mjCONDATA_FOUND)


def is_collision(m: mujoco.MjModel, geom: int) -> bool:
    """Whether the geom takes part in collisions."""
    return bool(m.geom_contype[geom] or m.geom_conaffinity[geom])


def zone_geoms(m: mujoco.MjModel, robot: RobotSpec, name: str) -> list[int]:
    """Ids of the collision geoms of the zone called ``name``."""
    zone = robot.zone(name)
    if zone.geom:
        try:
            geom = int(m.geom(zone.geom).id)
        except KeyError:
            raise UsageError(f"robot {robot.name!r}: {robot.source} has no geom {zone.geom!r}") from None
        if not is_collision(m, geom):
            raise UsageError(f"robot {robot.name!r}: geom {zone.geom!r} of zone {name!r} collides with nothing")
        return [geom]
    try:
        body = int(m.body(zone.body).id)
    except KeyError:
        raise UsageError(f"robot {robot.name!r}: {robot.source} has no body {zone.body!r}") from None
    kinds = {int(getattr(mujoco.mjtGeom, f"mjGEOM_{k.upper()}")) for k in zone.kinds}
    found = [
        g
        for g in range(m.ngeom)
        if m.geom_bodyid[g] == body and is_collision(m, g) and (not kinds or int(m.geom_type[g]) in kinds)
    ]
    if not found:
        raise UsageError(f"robot {robot.name!r}: zone {name!r} has no collision geom in {robot.source}")
    return found


def add_zone_sensors(spec: mujoco.MjSpec, compiled: mujoco.MjModel, robot: RobotSpec) -> None:
    """The sensors of every zone of ``robot.watched()``, touch sensors first, then contact sensors, each in the
    zones' order (their readings are then contiguous columns), and a reference site ``<foot>_site`` at the centre
    of each foot's zone where the file has none. A touch sensor's site is shaped like the zone (its
    geom, or a box around its geoms): it separates e.g. a calf's own contacts from those of the foot on the same
    body. A contact sensor counts the zone's contacts with the world body's geoms (the ground, plane or
    heightfield), never with the robot itself.

    For the contact sensor, a zone that is all the collision geoms of its (named) body is watched through the body;
    a zone that is part of them (a foot sphere on its calf) gets one sensor per geom, an unnamed geom named
    ``<zone>_<k>`` (or the first such name the file does not use) for the sensor to reach it. ``compiled`` is
    ``spec`` compiled, with no edit since (an edit invalidates the compiled ids).
    """
    spec_geoms = {int(g.id): g for g in spec.geoms}
    spec_bodies = {int(b.id): b for b in spec.bodies}
    taken = {g.name for g in spec.geoms}
    sites = {s.name for s in spec.sites}
    zones = {name: zone_geoms(compiled, robot, name) for name in robot.watched()}
    for name, geoms in zones.items():
        kind, size, pos, quat = zone_shape(compiled, geoms)
        site = TOUCH_SENSOR_PREFIX + name
        body = spec_bodies[int(compiled.geom_bodyid[geoms[0]])]
        body.add_site(name=site, type=kind, size=size, pos=pos, quat=quat, group=5)
        spec.add_sensor(name=site, type=mujoco.mjtSensor.mjSENS_TOUCH, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
        if name in robot.feet and f"{name}_site" not in sites:  # the foot's reference point
            body.add_site(name=f"{name}_site", pos=pos, group=5)
    for name, geoms in zones.items():
        body = int(compiled.geom_bodyid[geoms[0]])
        of_body = [g for g in range(compiled.ngeom) if compiled.geom_bodyid[g] == body and is_collision(compiled, g)]
        body_name = compiled.body(body).name
        if sorted(geoms) == of_body and body_name:
            _add_ground_sensor(spec, GROUND_SENSOR_PREFIX + name, mujoco.mjtObj.mjOBJ_BODY, body_name)
            continue
        for k, g in enumerate(geoms):
            geom = spec_geoms[g]
            if not geom.name:
                geom.name = _free_name(f"{name}_{k}", taken)
                taken.add(geom.name)
            sensor = GROUND_SENSOR_PREFIX + (name if len(geoms) == 1 else f"{name}_{k}")
            _add_ground_sensor(spec, sensor, mujoco.mjtObj.mjOBJ_GEOM, geom.name)


_SHAPED = (
    mujoco.mjtGeom.mjGEOM_SPHERE,
    mujoco.mjtGeom.mjGEOM_CAPSULE,
    mujoco.mjtGeom.mjGEOM_BOX,
    mujoco.mjtGeom.mjGEOM_CYLINDER,
)


def zone_shape(m: mujoco.MjModel, geoms: list[int]) -> tuple[mujoco.mjtGeom, np.ndarray, np.ndarray, np.ndarray]:
    """A site (type, size, pos, quat in the body frame) enclosing the zone's geoms, grown by ``TOUCH_MARGIN``."""
    if len(geoms) == 1 and m.geom_type[geoms[0]] in _SHAPED:
        g = geoms[0]
        kind = mujoco.mjtGeom(int(m.geom_type[g]))
        size = np.array(m.geom_size[g], dtype=float)
        if kind == mujoco.mjtGeom.mjGEOM_CAPSULE or kind == mujoco.mjtGeom.mjGEOM_SPHERE:
            size[0] += TOUCH_MARGIN  # the radius grows; a capsule's half-length stays (its caps grow with the radius)
        elif kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
            size[:2] += TOUCH_MARGIN
        else:
            size += TOUCH_MARGIN
        return kind, size, np.array(m.geom_pos[g], dtype=float), np.array(m.geom_quat[g], dtype=float)
    # Several geoms, or a mesh: a box around their bounding boxes, axis-aligned in the body frame.
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
    points = []
    for g in geoms:
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, m.geom_quat[g])
        corners = m.geom_aabb[g, :3] + m.geom_aabb[g, 3:] * signs
        points.append(m.geom_pos[g] + corners @ rot.reshape(3, 3).T)
    stacked = np.concatenate(points)
    low, high = stacked.min(axis=0), stacked.max(axis=0)
    return mujoco.mjtGeom.mjGEOM_BOX, (high - low) / 2 + TOUCH_MARGIN, (high + low) / 2, np.array([1.0, 0, 0, 0])


def _free_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with the first suffix ``_1``, ``_2``, ... that makes it unused."""
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def _add_ground_sensor(spec: mujoco.MjSpec, name: str, objtype: mujoco.mjtObj, objname: str) -> None:
    spec.add_sensor(
        name=name,
        type=mujoco.mjtSensor.mjSENS_CONTACT,
        objtype=objtype,
        objname=objname,
        reftype=mujoco.mjtObj.mjOBJ_BODY,
        refname="world",
        intprm=[_FOUND, 0, 1],  # found contacts, no reduction, one slot
    )


def zone_sensors(m: mujoco.MjModel, name: str) -> list[int]:
    """Ids of the contact sensors of the zone called ``name``."""
    try:
        return [int(m.sensor(GROUND_SENSOR_PREFIX + name).id)]
    except KeyError:
        pass
    found: list[int] = []
    while True:
        try:
            found.append(int(m.sensor(f"{GROUND_SENSOR_PREFIX}{name}_{len(found)}").id))
        except KeyError:
            break
    if not found:
        raise KeyError(f"no contact sensor of zone {name!r}")
    return found


class ZoneContacts:
    """Whether each zone touches the ground, read from ``sensordata`` after the physics step: the zones of
    ``robot.watched()``, in that order. A zone touches it when its contact sensor found a contact with the ground
    and its touch sensor reads normal forces above ``threshold`` (newtons)."""

    def __init__(self, m: mujoco.MjModel, robot: RobotSpec, threshold: float, device: torch.device) -> None:
        self.zones = robot.watched()
        self.threshold = threshold
        self._touch = columns([int(m.sensor(TOUCH_SENSOR_PREFIX + z).adr[0]) for z in self.zones], device)
        sensors = [(z, s) for z, name in enumerate(self.zones) for s in zone_sensors(m, name)]
        self._found = columns([int(m.sensor_adr[s]) for _, s in sensors], device)
        # A zone of several contact sensors adds their counts; None where every zone has one.
        zone_of = [z for z, _ in sensors]
        self._zone_of = None if len(sensors) == len(self.zones) else torch.as_tensor(zone_of, device=device)

    def index(self, names: tuple[str, ...], device: torch.device) -> Index:
        """Columns of the zones ``names`` in what :meth:`__call__` returns."""
        return columns([self.zones.index(n) for n in names], device)

    def __call__(self, sensordata: torch.Tensor) -> torch.Tensor:
        """``(num_envs, zones)`` booleans: the zone touches the ground."""
        found = sensordata[:, self._found]
        if self._zone_of is not None:
            found = found.new_zeros(found.shape[0], len(self.zones)).index_add_(1, self._zone_of, found)
        return (sensordata[:, self._touch] > self.threshold) & (found > 0)

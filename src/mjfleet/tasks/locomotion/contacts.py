# pyright: reportAttributeAccessIssue=false
"""A legged robot's contact zones and their ground contact: which collision geoms a zone is, the contact sensors
that find its contacts with the ground inside the physics step, and the reading of them."""

from __future__ import annotations

import mujoco
import torch

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.columns import Index, columns
from mjfleet.tasks.locomotion.robots import RobotSpec

GROUND_SENSOR_PREFIX = "touch_"
"""A zone's contact sensor is ``touch_<zone>`` (``touch_<zone>_<k>``, one per geom, where the zone is part of its
body's geoms)."""

_FOUND = 1 << int(mujoco.mjtConDataField.mjCONDATA_FOUND)
"""What the sensors read: how many contacts they found. Their force would cost MuJoCo C a tenth more per physics
step of the go1 (each sensor computes every matched contact's force), and a contact MuJoCo finds is one the ground
pushes on or is about to."""


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


def add_ground_sensors(spec: mujoco.MjSpec, compiled: mujoco.MjModel, robot: RobotSpec) -> None:
    """One contact sensor per zone of ``robot.watched()``, in that order: how many contacts the zone has with the
    world body's geoms (the ground, plane or heightfield), never with the robot itself.

    A zone that is all the collision geoms of its (named) body is watched through the body; a zone that is part of
    them (a foot sphere on its calf) gets one sensor per geom, an unnamed geom named ``<zone>_<k>`` (or the first
    such name the file does not use) for the sensor to reach it. ``compiled`` is ``spec`` compiled, with no edit
    since (an edit invalidates the compiled ids).
    """
    spec_geoms = {int(g.id): g for g in spec.geoms}
    taken = {g.name for g in spec.geoms}
    for name in robot.watched():
        geoms = zone_geoms(compiled, robot, name)
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
    ``robot.watched()``, in that order."""

    def __init__(self, m: mujoco.MjModel, robot: RobotSpec, device: torch.device) -> None:
        self.zones = robot.watched()
        sensors = [(z, s) for z, name in enumerate(self.zones) for s in zone_sensors(m, name)]
        self._cols = columns([int(m.sensor_adr[s]) for _, s in sensors], device)
        # A zone of several sensors adds their counts; None where every zone has one.
        zone_of = [z for z, _ in sensors]
        self._zone_of = None if len(sensors) == len(self.zones) else torch.as_tensor(zone_of, device=device)

    def index(self, names: tuple[str, ...], device: torch.device) -> Index:
        """Columns of the zones ``names`` in what :meth:`__call__` returns."""
        return columns([self.zones.index(n) for n in names], device)

    def __call__(self, sensordata: torch.Tensor) -> torch.Tensor:
        """``(num_envs, zones)`` booleans: the zone has a contact with the ground."""
        found = sensordata[:, self._cols]
        if self._zone_of is not None:
            found = found.new_zeros(found.shape[0], len(self.zones)).index_add_(1, self._zone_of, found)
        return found > 0

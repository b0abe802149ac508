# pyright: reportAttributeAccessIssue=false
"""Contact zones of a robot file as users write them: geoms without names, names the sensors' geoms would take,
bodies without names, a zone named after a geom that collides with nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import pytest
import torch

from mjfleet.errors import UsageError
from mjfleet.tasks.locomotion.config import TerrainConfig
from mjfleet.tasks.locomotion.contacts import ZoneContacts, add_zone_sensors, zone_geoms, zone_sensors
from mjfleet.tasks.locomotion.model import build_model
from mjfleet.tasks.locomotion.robots import ASSETS, GO1, RobotSpec, Zone
from mjfleet.tasks.locomotion.terrain import generate

FILE = """<mujoco><worldbody><geom name="floor" type="plane" size="1 1 1"/>
<body name="base" pos="0 0 0.3"><joint type="slide" axis="0 0 1"/><geom type="box" size="0.1 0.1 0.05"/>
  <body name="leg" pos="0 0 -0.1"><joint type="hinge"/>
    <geom name="foot_0" type="capsule" size="0.02 0.08"/>
    <geom type="sphere" size="0.03" pos="0 0 -0.1"/><geom type="sphere" size="0.03" pos="0.02 0 -0.1"/>
    <geom name="look" type="sphere" size="0.03" contype="0" conaffinity="0"/>
  </body>
  <body pos="0.1 0 -0.1"><geom name="toe" type="sphere" size="0.03" pos="0 0 -0.05"/></body>
</body></worldbody></mujoco>"""


def _robot(*zones: Zone) -> RobotSpec:
    names = tuple(z.name for z in zones)
    return dataclasses.replace(GO1, feet=names, undesired_contacts=(), terminal_contacts=(), zones=zones)


def test_geoms_named_for_their_sensors_avoid_names_the_file_uses() -> None:
    spec = mujoco.MjSpec.from_string(FILE)
    add_zone_sensors(spec, spec.compile(), _robot(Zone("foot", body="leg", kinds=("sphere",))))
    m = spec.compile()
    sensors = zone_sensors(m, "foot")
    assert len(sensors) == 2  # two of the leg's three colliding geoms: one sensor each
    assert all(m.sensor_objtype[s] == mujoco.mjtObj.mjOBJ_GEOM for s in sensors)
    assert sorted(m.geom(int(m.sensor_objid[s])).name for s in sensors) == ["foot_0_1", "foot_1"]  # foot_0: the file's


def test_a_zone_on_a_body_without_a_name_is_watched_through_its_geom() -> None:
    spec = mujoco.MjSpec.from_string(FILE)
    add_zone_sensors(spec, spec.compile(), _robot(Zone("toe", geom="toe")))
    m = spec.compile()
    (sensor,) = zone_sensors(m, "toe")
    assert m.sensor_objtype[sensor] == mujoco.mjtObj.mjOBJ_GEOM and m.geom(int(m.sensor_objid[sensor])).name == "toe"


def test_a_zone_named_after_a_geom_that_collides_with_nothing_is_one_line() -> None:
    m = mujoco.MjModel.from_xml_string(FILE)
    with pytest.raises(UsageError, match="geom 'look' of zone 'look' collides with nothing"):
        zone_geoms(m, _robot(Zone("look", geom="look")), "look")


def test_a_foot_on_the_ground_touches_it_and_a_base_in_the_air_does_not() -> None:
    spec = mujoco.MjSpec.from_string(FILE)
    robot = _robot(Zone("foot", body="leg", kinds=("sphere",)), Zone("base", body="base"))
    add_zone_sensors(spec, spec.compile(), robot)
    m = spec.compile()
    d = mujoco.MjData(m)
    for _ in range(400):
        mujoco.mj_step(m, d)
    zones = ZoneContacts(m, robot, 1.0, torch.device("cpu"))(torch.as_tensor(d.sensordata[None], dtype=torch.float32))
    assert zones.tolist() == [[True, False]]


def test_the_added_ground_collides_whatever_the_files_main_default_says(tmp_path: Path) -> None:
    """Robot geoms made ``contype="0"`` in the file's main default: the floor (and a terrain) the task adds took that
    default too, and the robot fell through the ground."""
    text = (ASSETS / "go1.xml").read_text()
    text = text.replace('<geom name="floor" type="plane" size="0 0 0.05" material="grid" condim="3"/>', "")
    text = text.replace("<default>", '<default>\n    <geom contype="0" conaffinity="1"/>', 1)
    assert 'name="floor"' not in text
    (tmp_path / "go1.xml").write_text(text)
    robot = dataclasses.replace(GO1, source=str(tmp_path / "go1.xml"))
    small = TerrainConfig(kind="rough", num_levels=2, types=("bumps",), tile_size=4.0, border=2.0)
    for terrain in (None, generate(small)):
        m = build_model(robot, terrain)
        ground = int(m.geom("terrain" if terrain is not None else "floor").id)
        assert m.geom_contype[ground] == 1 and m.geom_conaffinity[ground] == 1

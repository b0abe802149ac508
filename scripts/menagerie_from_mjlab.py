"""Build a MuJoCo Menagerie-layout tree of the Go1, the G1 and the YAM arm from the ``mjlab`` wheel, for machines that
reach PyPI but not GitHub (CI).

``mujoco-menagerie`` downloads its models from GitHub. The ``mjlab`` wheel on PyPI carries copies of the three robots
(meshes and MJCF) under ``mjlab/asset_zoo/robots/``, but its MJCF files leave out what mjlab sets in Python: the
actuators, the joints' damping, armature and friction, the contact settings of the Go1's feet, the gravity
compensation of the arm, the ``home`` keyframes. This script writes ``<out>/<robot>/<file>.xml`` plus ``assets/`` (the
layout ``MENAGERIE_ROOT`` names) with those added as Menagerie's files set them (Go1, G1: BSD-3-Clause; YAM: MIT).

What it writes is *not* Menagerie's text: the collision geoms are mjlab's (a box and a sphere on the Go1's trunk
instead of Menagerie's box, cylinders and capsules; capsules under the G1's soles instead of four spheres), so a
policy trained on one need not walk on the other. It serves the tests: every record finds its names, the robots
stand on their actuators, the training and shipped contact models compile and step, the tasks train a few
iterations. Training figures are measured on Menagerie's own files (docs/tasks.md, "Menagerie files on a closed
network").

    uv run python scripts/menagerie_from_mjlab.py --out .menagerie      # downloads mjlab==1.6.0 with pip
    uv run python scripts/menagerie_from_mjlab.py --out .menagerie --wheel mjlab-1.6.0-py3-none-any.whl
    export MENAGERIE_ROOT=$PWD/.menagerie
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from pathlib import Path

MJLAB = "mjlab==1.6.0"
"""The wheel whose robot copies the tree is built from (its layout ``mjlab/asset_zoo/robots/<robot>/xmls/``)."""

NOTE = (
    " Built by mjfleet's scripts/menagerie_from_mjlab.py from the copy in the mjlab wheel ({wheel}), with the"
    " actuators, joint and contact settings and keyframe of MuJoCo Menagerie's {robot}/{file} ({licence}); the"
    " collision geoms are mjlab's. For tests: not Menagerie's text. "
)


def _sub(parent: ET.Element, tag: str, index: int | None = None, **attrs: str) -> ET.Element:
    """A new child ``<tag attrs/>`` of ``parent``, appended or inserted at ``index``."""
    child = ET.Element(tag, attrs)
    if index is None:
        parent.append(child)
    else:
        parent.insert(index, child)
    return child


def _option(root: ET.Element, **attrs: str) -> None:
    """Menagerie's ``<option>``, right after ``<compiler>``."""
    index = [c.tag for c in root].index("compiler") + 1
    _sub(root, "option", index, **attrs)


def _default_class(root: ET.Element, name: str) -> ET.Element:
    found = root.find(f".//default[@class='{name}']")
    if found is None:
        raise SystemExit(f"the wheel's file has no default class {name!r}: another mjlab version's layout")
    return found


def _set_default(cls: ET.Element, tag: str, **attrs: str) -> None:
    """Add ``attrs`` to the class's default ``<tag>``, created where the class has none (one per tag and class)."""
    found = cls.find(tag)
    if found is None:
        _sub(cls, tag, 0, **attrs)
    else:
        found.attrib.update(attrs)


def _joints(root: ET.Element) -> dict[str, ET.Element]:
    return {j.attrib["name"]: j for j in root.iter("joint") if "name" in j.attrib}


def _actuators(root: ET.Element, entries: list[dict[str, str]]) -> None:
    actuator = _sub(root, "actuator")
    for attrs in entries:
        _sub(actuator, "position", **attrs)


def _keyframe(root: ET.Element, **attrs: str) -> None:
    _sub(_sub(root, "keyframe"), "key", name="home", **attrs)


def go1(root: ET.Element) -> None:
    """Menagerie's Go1: elliptic cones, damped joints with armature and friction, 100 N m/rad position actuators
    (23.7 N m, the knees 35.55 N m), the feet's contact settings, the standing keyframe."""
    _option(root, cone="elliptic", impratio="100")
    go1_class = _default_class(root, "go1")
    _set_default(go1_class, "geom", friction="0.6", margin="0.001", condim="1")
    _set_default(go1_class, "joint", damping="2", armature="0.01", frictionloss="0.2")
    _set_default(go1_class, "position", kp="100", forcerange="-23.7 23.7")
    foot = _default_class(root, "foot").find("geom")
    assert foot is not None
    foot.attrib.update(priority="1", solimp="0.015 1 0.031", condim="6", friction="0.8 0.02 0.01")
    joints = _joints(root)
    entries = []
    for leg in ("FR", "FL", "RR", "RL"):
        joints[f"{leg}_hip_joint"].set("damping", "1")
        for part, name in (("hip", "hip"), ("thigh", "thigh"), ("calf", "calf")):
            joint = joints[f"{leg}_{part}_joint"]
            # In the go1 class, as Menagerie's are (through its subclasses): its kp and force range, not MuJoCo's
            # kp of 1, under which the robot cannot hold its own weight.
            entry = {
                "name": f"{leg}_{name}",
                "class": "go1",
                "joint": joint.attrib["name"],
                "ctrlrange": joint.attrib["range"],
            }
            if part == "calf":
                entry["forcerange"] = "-35.55 35.55"
            entries.append(entry)
    _actuators(root, entries)
    stance = " ".join(["0 0.9 -1.8"] * 4)
    _keyframe(root, qpos=f"0 0 0.27 1 0 0 0 {stance}", ctrl=stance)


def g1(root: ET.Element) -> None:
    """Menagerie's G1: armature 0.01 and friction loss 0.3 on every joint, a kp-500 position actuator per joint (the
    robot record replaces them with its servos)."""
    _set_default(_default_class(root, "g1"), "joint", armature="0.01", frictionloss="0.3")
    _actuators(
        root,
        [
            {"name": name.removesuffix("_joint"), "joint": name, "kp": "500", "ctrlrange": joint.attrib["range"]}
            for name, joint in _joints(root).items()
        ],
    )


_YAM_4340 = ("joint1", "joint2", "joint3")


def yam(root: ET.Element) -> None:
    """Menagerie's YAM: the implicit-fast integrator, the motors' armature and position gains, joint friction, gravity
    compensation from the upper arm on, a gripper actuator on the left finger (the right follows by the equality),
    no wrist camera, the home keyframe."""
    _option(root, integrator="implicitfast")
    _set_default(_default_class(root, "yam"), "joint", frictionloss="0.1")
    camera = root.find(".//body[@name='camera_d405']")
    for parent in root.iter("body"):
        if camera is not None and camera in list(parent):
            parent.remove(camera)
    for asset in root.iter("asset"):
        for mesh in [m for m in asset if m.get("name") == "camera_d405"]:
            asset.remove(mesh)
    worldbody = root.find("worldbody")
    assert worldbody is not None
    for cam in [c for c in worldbody if c.tag == "camera"]:
        worldbody.remove(cam)
    link_2 = root.find(".//body[@name='link_2']")
    assert link_2 is not None
    for body in link_2.iter("body"):
        body.set("gravcomp", "1")
    grasp = root.find(".//site[@name='grasp_site']")
    assert grasp is not None
    grasp.set("pos", "0 0 0.1347")
    joints = _joints(root)
    entries = []
    for i in range(1, 7):
        name = f"joint{i}"
        heavy = name in _YAM_4340
        joints[name].set("armature", "0.032" if heavy else "0.0018")
        kp, kv = ("40", "2.5") if heavy else ("20", ".5") if name == "joint4" else ("10", "1")
        force = "-28 28" if heavy else "-10 10"
        limits = joints[name].attrib["range"]
        entries.append({"name": name, "joint": name, "kp": kp, "kv": kv, "forcerange": force, "ctrlrange": limits})
    for finger in ("left_finger", "right_finger"):
        joints[finger].attrib.update(armature="0.1", frictionloss="0.1")
    entries.append({"name": "gripper", "joint": "left_finger", "kp": "100", "kv": "10", "ctrlrange": "0.0 0.041"})
    _actuators(root, entries)
    _keyframe(root, qpos="0 1.047 1.047 0 0 0 0 0", ctrl="0 1.047 1.047 0 0 0 0")


ROBOTS: dict[str, tuple[str, str, Callable[[ET.Element], None]]] = {
    "unitree_go1": ("go1.xml", "BSD-3-Clause", go1),
    "unitree_g1": ("g1.xml", "BSD-3-Clause", g1),
    "i2rt_yam": ("yam.xml", "MIT", yam),
}
"""Menagerie robot -> (its MJCF's name, the model's licence, what Menagerie's file has that mjlab's copy lacks)."""


def build(wheel: Path, out: Path) -> list[Path]:
    """Write the tree under ``out`` from ``wheel``; returns the MJCF files written."""
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith("mjlab/asset_zoo/robots/")]
            archive.extractall(tmp, members)
        for robot, (file, licence, complete) in ROBOTS.items():
            source = Path(tmp, "mjlab/asset_zoo/robots", robot, "xmls")
            if not (source / file).is_file():
                raise SystemExit(f"{wheel} has no mjlab/asset_zoo/robots/{robot}/xmls/{file}")
            target = out / robot
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source / "assets", target / "assets")
            tree = ET.parse(source / file)
            complete(tree.getroot())
            tree.getroot().insert(0, ET.Comment(NOTE.format(wheel=wheel.name, robot=robot, file=file, licence=licence)))
            ET.indent(tree, space="  ")
            tree.write(target / file, encoding="unicode")
            written.append(target / file)
    return written


def download(directory: Path) -> Path:
    """The mjlab wheel, downloaded by pip (no dependencies) into ``directory``: this interpreter's pip, or uv's
    (a uv environment has no pip of its own)."""
    pip = [sys.executable, "-m", "pip"] if importlib.util.find_spec("pip") else ["uvx", "pip"]
    subprocess.run([*pip, "download", "--quiet", "--no-deps", "-d", str(directory), MJLAB], check=True)
    (wheel,) = directory.glob("mjlab-*.whl")
    return wheel


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the tree's root (MENAGERIE_ROOT)")
    parser.add_argument("--wheel", type=Path, help=f"a downloaded {MJLAB} wheel (default: pip downloads it)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download(Path(tmp))
        for path in build(wheel, args.out):
            print(path)


if __name__ == "__main__":
    main()

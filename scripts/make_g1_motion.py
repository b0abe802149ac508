"""Make the motion mjfleet ships for the G1 tracking task: keyed joint poses of Menagerie's G1, eased between, with the
root placed by MuJoCo's kinematics so that the lower foot touches the ground in every frame (no flight phase).

    MENAGERIE_ROOT=<dir> uv run python scripts/make_g1_motion.py    # writes src/mjfleet/tasks/tracking/motions/

The motion (6 s at 30 frames per second, the retargeted-G1 CSV layout): from the home pose the right arm waves twice,
both arms come forward and the robot squats down and up, then returns to the home pose. Keyed here, not retargeted
from anyone's motion capture: free to ship.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import mujoco
import numpy as np

from mjfleet.tasks.locomotion.model import build_model, lowest_point, zone_geoms
from mjfleet.tasks.locomotion.robots import UNITREE_G1
from mjfleet.tasks.tracking.config import SHIPPED_MOTION

FPS = 30
KEYS: list[tuple[float, dict[str, float]]] = [
    (0.0, {}),
    (0.6, {"right_shoulder_roll_joint": -1.3, "right_elbow_joint": 0.2, "right_shoulder_pitch_joint": -0.3}),
    (0.9, {"right_shoulder_roll_joint": -1.3, "right_elbow_joint": 0.9, "right_shoulder_pitch_joint": -0.3}),
    (1.2, {"right_shoulder_roll_joint": -1.3, "right_elbow_joint": 0.2, "right_shoulder_pitch_joint": -0.3}),
    (1.5, {"right_shoulder_roll_joint": -1.3, "right_elbow_joint": 0.9, "right_shoulder_pitch_joint": -0.3}),
    (2.1, {}),
    (
        2.7,
        {
            "left_shoulder_pitch_joint": -1.2,
            "right_shoulder_pitch_joint": -1.2,
            "left_elbow_joint": 0.2,
            "right_elbow_joint": 0.2,
        },
    ),
    (
        3.7,
        {
            "left_shoulder_pitch_joint": -1.2,
            "right_shoulder_pitch_joint": -1.2,
            "left_elbow_joint": 0.2,
            "right_elbow_joint": 0.2,
            "squat": 0.7,
        },
    ),
    (
        4.7,
        {
            "left_shoulder_pitch_joint": -1.2,
            "right_shoulder_pitch_joint": -1.2,
            "left_elbow_joint": 0.2,
            "right_elbow_joint": 0.2,
        },
    ),
    (5.4, {}),
    (6.0, {}),
]
"""(time in seconds, joint offsets from the home pose); ``squat`` bends both knees by that much, with the hips and
ankles half as much the other way (thigh and shin of nearly equal length: the feet stay flat, the torso upright)."""


def ease(t: float) -> float:
    return 0.5 - 0.5 * math.cos(math.pi * t)


def offsets_at(t: float) -> dict[str, float]:
    for (t0, a), (t1, b) in itertools.pairwise(KEYS):
        if t0 <= t <= t1:
            w = ease((t - t0) / (t1 - t0)) if t1 > t0 else 1.0
            return {k: (1 - w) * a.get(k, 0.0) + w * b.get(k, 0.0) for k in {*a, *b}}
    return {}


def main() -> None:
    m = build_model(UNITREE_G1, None)
    d = mujoco.MjData(m)
    home = m.key("home").qpos.copy()
    hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    names = [m.joint(j).name for j in hinges]
    feet = [g for foot in UNITREE_G1.feet for g in zone_geoms(m, UNITREE_G1, foot)]
    rows = []
    for i in range(int(KEYS[-1][0] * FPS) + 1):
        offsets = offsets_at(i / FPS)
        squat = offsets.pop("squat", 0.0)
        q = home.copy()
        for name, value in offsets.items():
            q[m.jnt_qposadr[hinges[names.index(name)]]] += value
        for side in ("left", "right"):
            for joint, share in (("hip_pitch", -0.5), ("knee", 1.0), ("ankle_pitch", -0.5)):
                q[m.jnt_qposadr[hinges[names.index(f"{side}_{joint}_joint")]]] += share * squat
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        q[2] -= min(lowest_point(m, d, g) for g in feet)
        quat_xyzw = [q[4], q[5], q[6], q[3]]
        rows.append([*q[0:3], *quat_xyzw, *(q[m.jnt_qposadr[j]] for j in hinges)])
    SHIPPED_MOTION.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(SHIPPED_MOTION, np.asarray(rows), delimiter=",", fmt="%.6f")
    print(f"{Path(SHIPPED_MOTION).name}: {len(rows)} frames, {len(hinges)} joints")


if __name__ == "__main__":
    main()

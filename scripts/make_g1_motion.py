"""Make keyed motions of the G1 for the tracking task: joint poses of Menagerie's G1 eased between keys, with the
root placed by MuJoCo's kinematics so that the lower foot touches the ground in every frame (no flight phase).

    MENAGERIE_ROOT=<dir> uv run python scripts/make_g1_motion.py --out motion.csv    # the shipped motion
    MENAGERIE_ROOT=<dir> uv run python scripts/make_g1_motion.py --motion wave-twist-squat --out motion.csv

``wave-squat`` (shipped; 6 s at 30 frames per second, the retargeted-G1 CSV layout): from the home pose the right arm
waves twice, both arms come forward and the robot squats down and up, then returns to the home pose.
``wave-twist-squat`` (7 s; never used to tune the task, a check of how it learns a motion it was not tuned on): the
left arm waves twice, the waist turns both ways with the arms out, the robot squats deeper with the arms forward.
Keyed here, not retargeted from anyone's motion capture: free to ship.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import mujoco
import numpy as np

from mjfleet.tasks.locomotion.contacts import zone_geoms
from mjfleet.tasks.locomotion.model import build_model, lowest_point
from mjfleet.tasks.locomotion.robots import UNITREE_G1

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

ARMS_OUT = {"left_shoulder_roll_joint": 0.6, "right_shoulder_roll_joint": -0.6}
LEFT_WAVE = {"left_shoulder_roll_joint": 1.3, "left_shoulder_pitch_joint": -0.3}
TWIST_KEYS: list[tuple[float, dict[str, float]]] = [
    (0.0, {}),
    (0.8, {**LEFT_WAVE, "left_elbow_joint": 0.2}),
    (1.1, {**LEFT_WAVE, "left_elbow_joint": 0.9}),
    (1.4, {**LEFT_WAVE, "left_elbow_joint": 0.2}),
    (1.7, {**LEFT_WAVE, "left_elbow_joint": 0.9}),
    (2.3, {}),
    (3.0, {**ARMS_OUT, "waist_yaw_joint": 0.5}),
    (3.8, {**ARMS_OUT, "waist_yaw_joint": -0.5}),
    (4.4, {}),
    (5.4, {"left_shoulder_pitch_joint": -1.0, "right_shoulder_pitch_joint": -1.0, "squat": 0.9}),
    (6.4, {}),
    (7.0, {}),
]
MOTIONS = {"wave-squat": KEYS, "wave-twist-squat": TWIST_KEYS}


def ease(t: float) -> float:
    return 0.5 - 0.5 * math.cos(math.pi * t)


def offsets_at(keys: list[tuple[float, dict[str, float]]], t: float) -> dict[str, float]:
    for (t0, a), (t1, b) in itertools.pairwise(keys):
        if t0 <= t <= t1:
            w = ease((t - t0) / (t1 - t0)) if t1 > t0 else 1.0
            return {k: (1 - w) * a.get(k, 0.0) + w * b.get(k, 0.0) for k in {*a, *b}}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description="Make keyed motions of the G1 for the tracking task.")
    parser.add_argument("--motion", choices=sorted(MOTIONS), default="wave-squat", help="which keyed motion")
    parser.add_argument("--out", type=Path, required=True, help="the CSV to write (the shipped motion's: its path)")
    args = parser.parse_args()
    keys = MOTIONS[args.motion]
    out: Path = args.out
    if out.suffix.lower() != ".csv":  # the tracking task reads a file by its ending
        parser.error(f"--out {out}: the motion is written in the CSV layout; name the file .csv")
    m = build_model(UNITREE_G1, None)
    d = mujoco.MjData(m)
    home = m.key("home").qpos.copy()
    hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    names = [m.joint(j).name for j in hinges]
    feet = [g for foot in UNITREE_G1.feet for g in zone_geoms(m, UNITREE_G1, foot)]
    rows = []
    for i in range(int(keys[-1][0] * FPS) + 1):
        offsets = offsets_at(keys, i / FPS)
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
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(out, np.asarray(rows), delimiter=",", fmt="%.6f")
    print(f"{out}: {len(rows)} frames, {len(hinges)} joints")


if __name__ == "__main__":
    main()

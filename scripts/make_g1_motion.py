"""Make motions of the G1 for the tracking task: keyed ones, joint poses of Menagerie's G1 eased between keys with the
root placed by MuJoCo's kinematics so that the lower foot touches the ground in every frame (no flight phase), and a
recorded one, the G1 walking under a velocity policy of its own (`unitree-g1-velocity-flat`) in the simulation.

    MENAGERIE_ROOT=<dir> uv run python scripts/make_g1_motion.py --out motion.csv    # the shipped motion
    MENAGERIE_ROOT=<dir> uv run python scripts/make_g1_motion.py --motion wave-twist-squat --out motion.csv
    MENAGERIE_ROOT=<dir> uv run python scripts/make_g1_motion.py --motion walk --policy <run>/model_<it>.pt \
        --out motion.csv

``wave-squat`` (shipped; 6 s at 30 frames per second, the retargeted-G1 CSV layout): from the home pose the right arm
waves twice, both arms come forward and the robot squats down and up, then returns to the home pose.
``wave-twist-squat`` (7 s; never used to tune the task, a check of how it learns a motion it was not tuned on): the
left arm waves twice, the waist turns both ways with the arms out, the robot squats deeper with the arms forward.
``walk`` (7.5 s): the robot stands for a second, walks forward at 0.6 m/s for 3 s, curves left at 0.4 m/s and
0.6 rad/s for 2 s, and stops for 1.5 s, as the policy given with ``--policy`` does it on MuJoCo C (its commands held,
its deterministic actions), each control step's pose resampled to the CSV's 30 frames per second.
Keyed or recorded here, not retargeted from anyone's motion capture: free to ship.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path
from typing import Any

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
WALK: list[tuple[float, dict[str, float]]] = [
    (1.0, {"lin_vel_x": 0.0, "lin_vel_y": 0.0, "yaw_rate": 0.0}),
    (3.0, {"lin_vel_x": 0.6, "lin_vel_y": 0.0, "yaw_rate": 0.0}),
    (2.0, {"lin_vel_x": 0.4, "lin_vel_y": 0.0, "yaw_rate": 0.6}),
    (1.5, {"lin_vel_x": 0.0, "lin_vel_y": 0.0, "yaw_rate": 0.0}),
]
"""The recorded walk: (seconds, the commands held for them)."""


def ease(t: float) -> float:
    return 0.5 - 0.5 * math.cos(math.pi * t)


def offsets_at(keys: list[tuple[float, dict[str, float]]], t: float) -> dict[str, float]:
    for (t0, a), (t1, b) in itertools.pairwise(keys):
        if t0 <= t <= t1:
            w = ease((t - t0) / (t1 - t0)) if t1 > t0 else 1.0
            return {k: (1 - w) * a.get(k, 0.0) + w * b.get(k, 0.0) for k in {*a, *b}}
    return {}


def record_walk(checkpoint: Path) -> tuple[np.ndarray, float]:
    """The G1's free joint and hinge angles (nq) at every control step of :data:`WALK` under the velocity policy of
    ``checkpoint`` (its run's settings, judged as ``play`` judges), and the control step (s)."""
    import torch

    from mjfleet.cli.play import parse_args
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.evaluation.episodes import load_policy
    from mjfleet.tasks.registry import get_task

    task_id, cfg, agent_cfg = parse_args(
        [
            "unitree-g1-velocity-flat",
            "--gpu-ids",
            "None",
            "--checkpoint",
            str(checkpoint),
            "--num-episodes",
            "1",
            "--seed",
            "0",
        ]
    )
    env = MjEnv(get_task(task_id).load_task_class()(cfg.env), device="cpu", seed=0)
    policy = load_policy(checkpoint, env, agent_cfg, "cpu")
    task: Any = env.task
    task.hold_commands(env, WALK[0][1])
    env.reset_all()
    poses = [env.sim.qpos[0].numpy().copy()]
    with torch.inference_mode():
        for seconds, commands in WALK:
            task.hold_commands(env, commands)
            for _ in range(round(seconds / env.step_dt)):
                _, _, dones, _ = env.step(policy(env.get_observations()))
                if bool(dones[0]):
                    raise SystemExit(f"the policy's episode ended {len(poses) * env.step_dt:.2f} s into the walk")
                poses.append(env.sim.qpos[0].numpy().copy())
    return np.asarray(poses), float(env.step_dt)


def resample(poses: np.ndarray, dt: float, fps: int) -> np.ndarray:
    """Poses ``dt`` apart at ``fps`` frames per second: positions and angles linearly, the root's quaternion
    (w, x, y, z at 3:7) normalised after the same blend (steps of a few hundredths of a second)."""
    times = np.arange(int((len(poses) - 1) * dt * fps) + 1) / fps
    index = np.minimum((times / dt).astype(int), len(poses) - 2)
    blend = (times / dt - index)[:, None]
    out = poses[index] * (1 - blend) + poses[index + 1] * blend
    out[:, 3:7] /= np.linalg.norm(out[:, 3:7], axis=1, keepdims=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Make motions of the G1 for the tracking task.")
    parser.add_argument("--motion", choices=[*sorted(MOTIONS), "walk"], default="wave-squat", help="which motion")
    parser.add_argument("--policy", type=Path, help="walk: a unitree-g1-velocity-flat checkpoint (model_<it>.pt)")
    parser.add_argument("--out", type=Path, required=True, help="the CSV to write (the shipped motion's: its path)")
    args = parser.parse_args()
    out: Path = args.out
    if out.suffix.lower() != ".csv":  # the tracking task reads a file by its ending
        parser.error(f"--out {out}: the motion is written in the CSV layout; name the file .csv")
    if args.motion == "walk":
        if args.policy is None:
            parser.error("--motion walk records a velocity policy: pass its checkpoint with --policy")
        poses, dt = record_walk(args.policy)
        m = build_model(UNITREE_G1, None)
        hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        q = resample(poses, dt, FPS)
        rows = np.concatenate([q[:, 0:3], q[:, [4, 5, 6, 3]], q[:, [m.jnt_qposadr[j] for j in hinges]]], axis=1)
        write(out, rows, len(hinges))
        return
    keys = MOTIONS[args.motion]
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
    write(out, np.asarray(rows), len(hinges))


def write(out: Path, rows: np.ndarray, joints: int) -> None:
    """The motion in the retargeted-G1 CSV layout: root position, quaternion x, y, z, w, the hinge angles."""
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(out, rows, delimiter=",", fmt="%.6f")
    print(f"{out}: {len(rows)} frames, {joints} joints")


if __name__ == "__main__":
    main()

"""How well a cube held by the YAM survives action noise, with and without ``--env.action-filter``.

Every episode of ``yam-lift-cube`` starts with the cube in the hand (``--env.start-in-hand 1``); the arm's actions
are Gaussian noise around home, the gripper's stays -1 (closed). Prints the share of steps the cube is off the table
for each noise scale and filter (MuJoCo C, one thread). An episode whose cube falls off the table ends and restarts
in the hand, as in training.

    MENAGERIE_ROOT=... uv run python scripts/hold_under_noise.py [--envs 64] [--seconds 2]
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from mjfleet.envs.env import MjEnv
from mjfleet.tasks.manipulation.lift import LiftCubeTask
from mjfleet.tasks.manipulation.presets import yam_lift_cube_config

NOISE = (0.3, 1.0)
FILTERS = (1.0, 0.2, 0.1)


def held_share(noise: float, action_filter: float, envs: int, seconds: float, seed: int) -> float:
    """Mean over steps and environments of whether the cube is off the table."""
    cfg = dataclasses.replace(
        yam_lift_cube_config(), num_envs=envs, start_in_hand=1.0, start_at_cube=0.0, action_filter=action_filter
    )
    env = MjEnv(LiftCubeTask(cfg), seed=seed)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    gen = torch.Generator().manual_seed(seed)
    gripper = int(env.sim.mj_model.actuator(task.arm.gripper_actuator).id)
    steps = round(seconds / env.step_dt)
    lifted = 0.0
    for _ in range(steps):
        actions = torch.randn(envs, env.num_actions, generator=gen) * noise
        actions[:, gripper] = -1.0
        env.step(actions)
        lifted += float(task.lifted(env).float().mean())
    env.close()
    return lifted / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| action noise (standard deviation) | " + " | ".join(_filter_name(f) for f in FILTERS) + " |")
    print("| --- |" + " --- |" * len(FILTERS))
    for noise in NOISE:
        shares = [held_share(noise, f, args.envs, args.seconds, args.seed) for f in FILTERS]
        print(f"| {noise} | " + " | ".join(f"{s:.2f}" for s in shares) + " |")


def _filter_name(action_filter: float) -> str:
    return "unfiltered" if action_filter == 1.0 else f"`--env.action-filter {action_filter}`"


if __name__ == "__main__":
    main()

# pyright: reportAttributeAccessIssue=false
"""The manipulation tasks on MuJoCo Menagerie's I2RT YAM arm, with real physics: the scene, resets and randomization,
success and termination on hand-made states, and a few iterations of training followed by ``play``.

Runs where the YAM's files are on disk (``MENAGERIE_ROOT`` or the mujoco-menagerie cache), like the Menagerie
locomotion tasks; skipped with the reason elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import imageio.v2 as imageio
import mujoco
import numpy as np
import pytest
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.envs.task import PRIVILEGED_SUCCESS, declared_stat_keys
from mjfleet.errors import UsageError
from mjfleet.sim.config import Backend
from mjfleet.tasks.manipulation.arms import YAM, ArmSpec
from mjfleet.tasks.manipulation.config import LiftConfig, ReachConfig, TableConfig
from mjfleet.tasks.manipulation.lift import LiftCubeTask
from mjfleet.tasks.manipulation.model import CUBE, build_model
from mjfleet.tasks.manipulation.presets import lift_cube_config, yam_lift_cube_config, yam_reach_config
from mjfleet.tasks.manipulation.reach import ReachTask
from mjfleet.tasks.registry import all_tasks

from .helpers import missing_files
from .test_menagerie import FIXTURE

TASKS = ("yam-reach", "yam-lift-cube")


def _yam_files() -> str | None:
    """Why the YAM tests cannot run, or None when its Menagerie files are on disk."""
    root = os.environ.get("MENAGERIE_ROOT")
    if root and Path(root).resolve() == FIXTURE.resolve():
        return "MENAGERIE_ROOT points at the test fixture"
    return missing_files("yam-reach")


needs_yam = pytest.mark.skipif(_yam_files() is not None, reason=str(_yam_files()))


def _reach(num_envs: int = 4, **overrides: object) -> MjEnv:
    cfg = dataclasses.replace(yam_reach_config(), num_envs=num_envs, **overrides)  # type: ignore[arg-type]
    return MjEnv(ReachTask(cfg), seed=0)


def _lift(num_envs: int = 4, **overrides: object) -> MjEnv:
    """A lift task whose episodes start with the cube on the table unless ``start_in_hand`` or ``start_at_cube`` say
    otherwise."""
    overrides = {"start_in_hand": 0.0, "start_at_cube": 0.0, **overrides}
    cfg = dataclasses.replace(yam_lift_cube_config(), num_envs=num_envs, **overrides)  # type: ignore[arg-type]
    return MjEnv(LiftCubeTask(cfg), seed=0)


# --- registration (no files needed) ------------------------------------------------------------------------------
def test_manipulation_tasks_are_registered_with_the_arms_source_and_licence() -> None:
    tasks = all_tasks()
    for task_id in TASKS:
        spec = tasks[task_id]
        assert "I2RT YAM" in spec.description and "(MIT)" in spec.description
        cfg = spec.env_cfg()
        assert cfg.arm == "yam" and cfg.sim.decimation == 4  # type: ignore[attr-defined]
        assert spec.env_defaults(on_cpu=True).num_envs < cfg.num_envs
        assert spec.agent_cfg().experiment_name == task_id.replace("-", "_")
    assert isinstance(tasks["yam-reach"].env_cfg(), ReachConfig)
    assert isinstance(tasks["yam-lift-cube"].env_cfg(), LiftConfig)
    assert YAM.menagerie == "i2rt_yam" and "MIT" in YAM.description


def test_an_arm_file_without_the_records_names_is_one_line(tmp_path: Path) -> None:
    xml = tmp_path / "arm.xml"
    xml.write_text(
        '<mujoco><worldbody><body name="link"><joint name="j" axis="0 0 1"/><geom size="0.05"/></body></worldbody>'
        '<actuator><position name="a" joint="j"/></actuator></mujoco>'
    )
    arm = dataclasses.replace(YAM, name="mine", source=str(xml))
    with pytest.raises(UsageError, match=r"arm 'mine' \(.*arm.xml\) has no site 'fingertip_centre', body 'link_6'"):
        build_model(arm, yam_reach_config())
    missing = dataclasses.replace(arm, source=str(tmp_path / "none.xml"))
    assert isinstance(missing, ArmSpec)
    with pytest.raises(UsageError, match="no such MJCF file"):
        build_model(missing, yam_reach_config())


# --- the scene -----------------------------------------------------------------------------------------------------
@needs_yam
def test_only_the_hand_table_floor_and_cube_collide() -> None:
    m = build_model(YAM, yam_lift_cube_config(), cube=yam_lift_cube_config().cube)
    colliding = {m.body(int(m.geom_bodyid[g])).name for g in range(m.ngeom) if m.geom_contype[g]}
    assert colliding == {"world", "link_6", "lf_rot", "lf_down", "rf_rot", "rf_down", CUBE}
    assert m.opt.timestep == YAM.timestep and m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC


@needs_yam
def test_the_table_is_the_config_s() -> None:
    cfg = yam_reach_config()
    cfg.table = TableConfig(front=0.5, back=0.1, half_width=0.3, floor_depth=0.6)
    m = build_model(YAM, cfg)
    table, floor = m.geom("table"), m.geom("floor")
    x_from, x_to = table.pos[0] - table.size[0], table.pos[0] + table.size[0]
    assert np.allclose([x_from, x_to, table.size[1], table.pos[2] + table.size[2]], [-0.1, 0.5, 0.3, 0.0])
    assert np.isclose(floor.pos[2], -0.6)


@needs_yam
def test_reach_starts_at_home_and_holds_it_with_zero_actions() -> None:
    env = _reach(num_envs=8, init_joint_noise=0.0)
    task = env.task
    assert isinstance(task, ReachTask)
    start = task.ee_pos(env).clone()
    assert torch.allclose(start, start[0].expand_as(start))  # no noise: every arm at home
    assert 0.1 < float(start[0, 2]) < 0.4 and float(start[0, 0]) > 0.15  # the gripper above the table, in front
    steps = [env.step(torch.zeros(8, env.num_actions)) for _ in range(50)]
    obs, reward, _, _ = steps[-1]
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    # Servos hold the home pose against gravity to within a centimetre.
    assert float(torch.linalg.vector_norm(task.ee_pos(env) - start, dim=-1).max()) < 0.01
    # Targets are drawn inside the configured box, one per environment.
    box = task.cfg.target
    for axis, (low, high) in enumerate((box.x, box.y, box.z)):
        assert bool(((task.target[:, axis] >= low) & (task.target[:, axis] <= high)).all())
    assert task.target.unique(dim=0).shape[0] == 8


@needs_yam
def test_the_action_filter_moves_the_arm_targets_part_way_and_the_policy_observes_them() -> None:
    plain, env = _reach(num_envs=2), _reach(num_envs=2, action_filter=0.25)
    task = env.task
    assert isinstance(task, ReachTask)
    home, gripper = task.default_joint_pos, task.arm.gripper_actuator
    g = env.sim.mj_model.actuator(gripper).id
    arm = [i for i in range(env.num_actions) if i != g]
    action = torch.full((2, env.num_actions), 0.4)
    for k in (1, 2):
        env.step(action)
        aimed = home + 0.4 * task.action_scale
        # After k steps the arm's targets have come 1 - 0.75^k of the way; the gripper's all of it at once.
        expected = home + (aimed - home) * (1 - 0.75**k)
        assert torch.allclose(env.sim.ctrl[:, arm], expected[arm].expand(2, -1), atol=1e-6)
        assert torch.allclose(env.sim.ctrl[:, g], aimed[g].expand(2), atol=1e-6)
    # The targets are observed (relative to home) after what every arm task observes; unfiltered, they are not.
    observed = env.get_observations()["policy"]
    assert observed.shape[-1] == plain.get_observations()["policy"].shape[-1] + env.num_actions
    assert torch.equal(observed[:, 3 * env.num_actions : 4 * env.num_actions], env.sim.ctrl - home)
    env.reset_all()
    assert torch.equal(task.targets, home.expand(2, -1))
    with pytest.raises(UsageError, match=r"--env\.action-filter must be in"):
        _reach(num_envs=1, action_filter=0.0)


@needs_yam
def test_reach_success_needs_the_end_effector_at_the_target_when_time_runs_out() -> None:
    env = _reach(num_envs=3)
    task = env.task
    assert isinstance(task, ReachTask)
    ee = task.ee_pos(env)
    offsets = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.02], [0.1, 0.0, 0.0]])
    task.target[:] = ee + offsets  # on it, 2 cm away (inside the 3 cm tolerance), 10 cm away
    task.after_step(env)
    ids = torch.arange(3)
    assert task.success(env, ids, torch.ones(3, dtype=torch.bool)).tolist() == [True, True, False]
    assert task.success(env, ids, torch.zeros(3, dtype=torch.bool)).tolist() == [False, False, False]
    # The reach terms pay most on the target.
    assert float(task.reward_reach(env)[0]) == pytest.approx(1.0, abs=1e-3)
    assert float(task.reward_reach(env)[2]) < 0.5 and float(task.reward_reach_fine(env)[2]) < 1e-3


@needs_yam
@pytest.mark.parametrize("threshold", [10.0, 0.0])
def test_the_hand_pressed_into_the_table_ends_the_episode(threshold: float) -> None:
    env = _reach(num_envs=2, init_joint_noise=0.0, hand_table_force=threshold)
    task = env.task
    assert isinstance(task, ReachTask)
    shoulder = int(env.sim.mj_model.jnt_qposadr[env.sim.mj_model.joint("joint2").id])
    env.sim.qpos[1, shoulder] += 1.0  # row 1's gripper 4 cm into the table top; row 0 stays at home
    actions = torch.zeros(2, env.num_actions)
    actions[1, 1] = 1.0 / task.cfg.action_scale  # and its servo keeps pushing there
    _, _, dones, extras = env.step(actions)
    if threshold == 0.0:  # never
        assert not dones.any()
        return
    assert dones.tolist() == [False, True]
    ids, ended = extras["episodes"]
    assert ids.tolist() == [1] and ended["Episode_Termination/hand_on_table"][0] == 1.0
    # It costs: without a price, ending early on the table beat the flailing penalties of an untrained policy, and
    # reach runs of 64 environments collapsed into 8-step episodes.
    penalty = env.reward_terms["termination"]
    assert penalty[0] == 0.0 and float(penalty[1]) == pytest.approx(task.cfg.rewards.termination * env.step_dt)
    assert float(penalty[1]) <= -1.0


# --- lifting -------------------------------------------------------------------------------------------------------
@needs_yam
def test_cubes_are_randomized_per_environment_and_rest_on_the_table() -> None:
    env = _lift(num_envs=6)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    cfg = task.cfg.cube
    half = task.cube_half_size.clone()
    assert half.unique().numel() == 6 and bool(((half >= cfg.half_size[0]) & (half <= cfg.half_size[1])).all())
    assert task.cube_mass.unique().numel() == 6 and task.cube_friction.unique().numel() == 6
    for _ in range(25):
        env.step(torch.zeros(6, env.num_actions))
    # Each cube settles on the table at its own half size: the physics uses each world's size.
    assert torch.allclose(task.cube_pos(env)[:, 2], half, atol=2e-3), (task.cube_pos(env)[:, 2], half)
    xy = task.cube_pos(env)[:, :2]
    assert bool((xy[:, 0] >= cfg.x[0] - 0.01).all() and (xy[:, 0] <= cfg.x[1] + 0.01).all())
    assert not env.terminated.any()


def _place_cube(env: MjEnv, task: LiftCubeTask, row: int, pos: torch.Tensor) -> None:
    adr = task._cube_qpos
    env.sim.qpos[row, adr : adr + 3] = pos
    env.sim.qpos[row, adr + 3 : adr + 7] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    env.sim.qvel[row] = 0.0


@needs_yam
def test_cube_held_at_the_goal_succeeds_and_a_dropped_cube_terminates() -> None:
    env = _lift(num_envs=4)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    goal = task.goal.clone()
    _place_cube(env, task, 0, goal[0])  # at the goal
    _place_cube(env, task, 1, goal[1] + torch.tensor([0.0, 0.0, 0.08]))  # lifted, but 8 cm from the goal
    _place_cube(env, task, 3, torch.tensor([0.8, 0.0, -0.2]))  # off the table's edge, below its top
    env.sim.forward()
    ids, timed_out = torch.arange(4), torch.ones(4, dtype=torch.bool)
    held = math.ceil(task.cfg.hold_s / env.step_dt)
    for _ in range(held - 1):
        task.after_step(env)
    assert not task.success(env, ids, timed_out).any()  # not held long enough yet
    task.after_step(env)
    assert task.success(env, ids, timed_out).tolist() == [True, False, False, False]
    assert not task.success(env, ids, torch.zeros(4, dtype=torch.bool)).any()  # only at the end of an episode
    assert task.terminations(env)["cube_dropped"].tolist() == [False, False, False, True]
    assert float(task.reward_lift_precise(env)[0]) == pytest.approx(1.0)


@needs_yam
def test_with_no_hold_a_success_still_needs_the_cube_at_the_goal_in_the_last_step() -> None:
    # --env.hold-s 0 made every time-out a success: no step held was "at least 0 s".
    env = _lift(num_envs=2, hold_s=0.0)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    _place_cube(env, task, 0, task.goal[0].clone())
    env.sim.forward()
    task.after_step(env)
    assert task.success(env, torch.arange(2), torch.ones(2, dtype=torch.bool)).tolist() == [True, False]


@needs_yam
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--env.cube.half-size", "0.03", "0.01"], "--env.cube.half-size 0.03 0.01: the low end is above the high"),
        (["--env.cube.mass", "-1", "0"], "--env.cube.mass -1 0: must be above 0"),
        (["--env.hold-s", "-1"], "--env.hold-s must be at least 0 and shorter than the episode"),
        # Drawn past the table's edge or inside it: cubes dropped at once, goals never reached, silently.
        (["--env.cube.x", "0.75", "0.8"], "--env.cube.x 0.75 0.8: past the table, which spans -0.2 to 0.7"),
        (["--env.goal.z", "-0.1", "0.2"], "--env.goal.z -0.1 0.2: must be above the table's top (z = 0)"),
    ],
)
def test_a_range_or_hold_the_lift_cannot_draw_is_one_line(flags: list[str], words: str, tmp_path: Path) -> None:
    from .helpers import refused_train

    argv = ["yam-lift-cube", "--gpu-ids", "None", *flags]
    argv += ["--agent.max-iterations", "1", "--env.num-envs", "4"]  # were it not refused, it would be brief
    assert words in refused_train(argv, tmp_path / "logs")


@needs_yam
def test_a_reach_target_inside_the_table_is_one_line(tmp_path: Path) -> None:
    from .helpers import refused_train

    argv = ["yam-reach", "--gpu-ids", "None", "--env.target.z", "-0.2", "-0.1", "--agent.max-iterations", "1"]
    assert "--env.target.z -0.2 -0.1: must be above the table's top (z = 0)" in refused_train(argv, tmp_path / "logs")


@needs_yam
def test_lifted_pays_for_a_cube_off_the_table_with_the_hand_at_it() -> None:
    env = _lift(num_envs=3)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    ee = task.ee_pos(env)
    _place_cube(env, task, 0, ee[0])  # in the hand, in the air
    _place_cube(env, task, 1, torch.tensor([0.3, 0.0, float(task.cube_half_size[1])]))  # on the table
    _place_cube(env, task, 2, ee[2] + torch.tensor([0.0, 0.0, 0.3]))  # in the air, far from the hand
    env.sim.forward()
    task.after_step(env)
    lifted = task.reward_lifted(env)
    assert float(lifted[0]) == pytest.approx(1.0, abs=1e-3)
    assert float(lifted[1]) == 0.0
    assert float(lifted[2]) < 1e-3
    # No fingertip touches a cube on the table or one in the air away from the hand: grasp pays nothing.
    assert task.grasped(env)[1:].tolist() == [False, False]
    assert task.reward_grasp(env)[1:].tolist() == [0.0, 0.0]


@needs_yam
@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_a_cube_between_the_closed_fingers_is_held_at_the_goal_and_succeeds(backend: Backend) -> None:
    """The end-effector site is where a grasp holds: a cube placed there, the fingers on its faces and the gripper
    closing, stays in the hand for a second of physics, touched by both fingertips (the grasp sensors of either
    backend), and holding it at the goal is a success."""
    cfg = yam_lift_cube_config()
    cube = dataclasses.replace(cfg.cube, half_size=(0.015, 0.015), mass=(0.05, 0.05))
    sim = dataclasses.replace(cfg.sim, backend=backend)
    env = _lift(num_envs=1, init_joint_noise=0.0, cube=cube, sim=sim)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    m = env.sim.mj_model
    ee = task.ee_pos(env)[0].clone()
    _place_cube(env, task, 0, ee)
    for finger, sign in (("left_finger", 1.0), ("right_finger", -1.0)):  # the fingertips 15 mm from the centre
        env.sim.qpos[0, int(m.jnt_qposadr[m.joint(finger).id])] = sign * 0.0146
    env.sim.forward()
    task.goal[0] = ee
    close = torch.zeros(1, env.num_actions)
    close[0, -1] = -1.0  # the gripper's action: closed; the arm holds its home pose
    steps = round(1.0 / env.step_dt)
    for _ in range(steps):
        _, _, dones, _ = env.step(close)
        assert not dones.any()
    assert float(torch.linalg.vector_norm(task.cube_pos(env)[0] - ee)) < 0.01  # still in the hand
    assert float(torch.linalg.vector_norm(task.cube_pos(env)[0] - task.ee_pos(env)[0])) < 0.005
    assert bool(task.lifted(env)[0]) and float(task._held_steps[0]) == steps
    assert bool(task.grasped(env)[0])  # both fingertips on the cube
    assert task.success(env, torch.arange(1), torch.ones(1, dtype=torch.bool)).tolist() == [True]


@needs_yam
@pytest.mark.parametrize("tolerance", [0.003, None])
def test_fingertips_on_the_cube_grasp_it_only_as_far_apart_as_it_is_wide(tolerance: float | None) -> None:
    """Closed fingertips pressed into the cube touch it as a pinch does; only the pinch, whose opening is the cube's
    width, is a grasp (``--env.pinch-tolerance None``: both are)."""
    cfg = yam_lift_cube_config()
    cube = dataclasses.replace(cfg.cube, half_size=(0.015, 0.015))
    env = _lift(num_envs=2, init_joint_noise=0.0, cube=cube, pinch_tolerance=tolerance)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    m = env.sim.mj_model
    for row, half_opening in ((0, 0.0146), (1, 0.005)):  # a pinch; fingers closed 10 mm inside the faces
        _place_cube(env, task, row, task.ee_pos(env)[row].clone())
        for finger, sign in (("left_finger", 1.0), ("right_finger", -1.0)):
            env.sim.qpos[row, int(m.jnt_qposadr[m.joint(finger).id])] = sign * half_opening
    env.sim.forward()
    assert bool(torch.all(env.sim.sensordata[:, task._grasp_adr] > 0))  # every fingertip touches, in both
    assert task.grasped(env).tolist() == ([True, False] if tolerance else [True, True])
    with pytest.raises(UsageError, match=r"--env\.pinch-tolerance must be positive"):
        _lift(num_envs=1, pinch_tolerance=0.0)


@needs_yam
def test_training_episodes_can_start_with_the_cube_held_and_evaluation_rows_start_on_the_table() -> None:
    """``--env.start-in-hand 1``: every cube, whatever its drawn size and mass, starts between the fingers and
    stays there under the closed gripper; rows set aside for evaluation restart with the cube on the table, and the
    policy is judged (evaluation, ``play``) without in-hand starts."""
    env = _lift(num_envs=6, start_in_hand=1.0)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    assert bool(task.lifted(env).all())
    env.split_evaluation(2)
    started = task.training_start(env)
    assert started is not None and started.tolist() == [True] * 4 + [False] * 2
    assert task.lifted(env).tolist() == [True] * 4 + [False] * 2
    close = torch.zeros(6, env.num_actions)
    close[:, -1] = -1.0
    for _ in range(round(1.0 / env.step_dt)):
        _, _, dones, _ = env.step(close)
        assert not dones.any()
    assert task.grasped(env).tolist() == [True] * 4 + [False] * 2
    assert task.lifted(env).tolist() == [True] * 4 + [False] * 2
    # Held at the home pose, well over rise_span above the table: the height term pays in full; on the table, nothing.
    assert task.reward_height(env).tolist() == [1.0] * 4 + [0.0] * 2
    # carry pays a held cube what lift's bring part pays it; a cube on the table, nothing (where bring pays it).
    carry, reach, lift = task.reward_carry(env), task._reach, task.reward_lift(env)
    assert torch.allclose(carry[:4], lift[:4] - reach[:4]) and bool(torch.all(carry[:4] > 0))
    assert carry[4:].tolist() == [0.0, 0.0] and bool(torch.all(lift[4:] > reach[4:]))
    assert env.task.cfg.as_judged().start_in_hand == 0.0  # type: ignore[attr-defined]


@needs_yam
def test_training_episodes_can_start_with_the_hand_around_the_cube_on_the_table() -> None:
    """``--env.start-at-cube 1``: every training row starts with the cube resting on the table between the open
    fingers (a pose solved at setup), and closing the gripper with the arm held there grasps it, without pressing the
    hand on the table; evaluation rows start with the arm at home, away from the cube."""
    env = _lift(num_envs=6, start_at_cube=1.0)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    env.split_evaluation(2)
    started = task.training_start(env)
    assert started is not None and started.tolist() == [True] * 4 + [False] * 2
    cube, ee = task.cube_pos(env), task.ee_pos(env)
    beside = torch.linalg.vector_norm(ee[:, :2] - cube[:, :2], dim=-1)
    assert bool(torch.all(beside[:4] < 2e-3)) and bool(torch.all(beside[4:] > 0.02))
    assert torch.allclose(cube[:, 2], task.cube_half_size) and not task.grasped(env).any()
    hold = (task.targets - task.default_joint_pos) / task.action_scale
    hold[:, task._gripper_id] = -1.0  # close
    for _ in range(round(0.5 / env.step_dt)):
        _, _, dones, _ = env.step(hold)
        assert not dones.any()
    assert task.grasped(env).tolist() == [True] * 4 + [False] * 2
    assert task.cfg.as_judged().start_at_cube == 0.0
    with pytest.raises(UsageError, match="together at most 1"):
        _lift(num_envs=2, start_at_cube=0.6, start_in_hand=0.5)


@needs_yam
def test_a_cube_pushed_off_the_table_ends_the_episode_in_the_physics() -> None:
    env = _lift(num_envs=2)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    _place_cube(env, task, 1, torch.tensor([0.75, 0.0, 0.05]))  # beyond the table's far edge (0.7 m)
    episodes = None
    for _ in range(30):
        _, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
        if dones[1]:
            episodes = extras["episodes"]
            break
    assert episodes is not None, "the cube fell past the table's top without ending its episode"
    ids, ended = episodes
    row = ids.tolist().index(1)
    assert ended["Episode_Termination/cube_dropped"][row] == 1.0 and ended["Episode/success"][row] == 0.0
    assert float(task.cube_pos(env)[1, 2]) > 0.0  # reset: back on the table


# --- training and play ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@needs_yam
@pytest.mark.parametrize("task_id", TASKS)
def test_task_trains_a_few_iterations_and_plays(task_id: str, tmp_path: Path) -> None:
    from mjfleet.cli import play
    from mjfleet.runtime.context import DistributedContext
    from mjfleet.train.worker import train_worker

    from .helpers import make_run_dir, run_main, small_train_config

    cfg = small_train_config(task_id, num_envs=16, iterations=2, steps=8, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, task_id)
    result = train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    assert len(result.records) == 2 and all(r.env_steps_per_s > 0 for r in result.records)
    meta = json.loads((run_dir / "policy.onnx.json").read_text())
    assert meta["joint_names"][-1] == "left_finger" and len(meta["default_joint_pos"]) == 7

    video = tmp_path / "play.mp4"
    argv = [task_id, "--checkpoint", str(run_dir / "model_2.pt"), "--num-episodes", "2", "--gpu-ids", "None"]
    argv += ["--video", "--video-path", str(video), "--video-width", "160", "--video-height", "120"]
    argv += ["--env.episode-length-s", "0.5"]  # 25 frames: rendering the arm's meshes on the CPU takes ~0.1 s each
    code, out, err = run_main(play.main, argv)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["episodes"] == 2 and 0.0 <= summary["success_rate"] <= 1.0
    assert "final_distance" in summary and summary["video"] == str(video)
    # The front camera frames the arm over the table (and the red cube, where there is one).
    frames = imageio.mimread(video)
    assert len(frames) >= summary["mean_length"] and frames[0].shape == (120, 160, 3)
    first = frames[0].astype(int)
    red = (first[..., 0] > 150) & (first[..., 1] < 80) & (first[..., 2] < 80)
    assert first.std() > 10 and (int(red.sum()) > 0) == (task_id == "yam-lift-cube")


# --- an arm from a package of its own -----------------------------------------------------------------------------
MINI_ARM = Path(__file__).with_name("fixtures") / "arm" / "mini_arm.xml"
"""Our own four-joint arm with a two-finger gripper (not a Menagerie file): runs everywhere."""

ARM_PACKAGE = f"""
from mjfleet.tasks.arms import ArmSpec, TaskSpec, Zone, REACH_TASK, LIFT_CUBE_TASK
from mjfleet.tasks.arms import lift_cube_config, manipulation_agent, reach_config

ARM = ArmSpec(
    name="mini",
    source={str(MINI_ARM)!r},
    ee_site="tip",
    hand_body="hand",
    gripper_actuator="gripper",
    gripper_joints=("left_finger", "right_finger"),
    fingertips=(Zone("left_tip", geom="left_pad"), Zone("right_tip", geom="right_pad")),
    home=(("shoulder", 0.4), ("elbow", 1.2), ("wrist", 0.3), ("left_finger", 0.015), ("right_finger", 0.015)),
)

def reach():
    return reach_config("mini")

def lift():
    return lift_cube_config("mini")

def agent():
    return manipulation_agent(10, (32, 32))

def tasks():
    return [
        ARM,
        TaskSpec("mini-reach", "A small arm reaches.", REACH_TASK, reach, agent),
        TaskSpec("mini-lift-cube", "A small arm lifts a cube.", LIFT_CUBE_TASK, lift, agent),
    ]
"""


@pytest.fixture
def arm_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution ``mjfleet-fake-arm`` on ``sys.path`` whose entry point returns an arm and its two tasks; the
    registry loads again with it and is put back afterwards."""
    import sys

    from mjfleet.tasks import registry

    site = tmp_path / "site"
    site.mkdir()
    (site / "mjfleet_fake_arm.py").write_text(ARM_PACKAGE)
    dist = site / "mjfleet_fake_arm-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mjfleet-fake-arm\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mjfleet.tasks]\nmini = mjfleet_fake_arm:tasks\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_loaded", False)
    for table in ("_REGISTRY", "_ROBOTS", "_ARMS", "_PACKAGES", "_BROKEN", "_UNCHECKED"):
        monkeypatch.setattr(registry, table, {})
    yield
    sys.modules.pop("mjfleet_fake_arm", None)


def _mini_arm(**record: object) -> ArmSpec:
    """A record of the fixture's four-joint arm: its names, no fingertip zones, ``record`` for the rest."""
    return ArmSpec(
        name="mini",
        source=str(MINI_ARM),
        ee_site="tip",
        hand_body="hand",
        gripper_actuator="gripper",
        gripper_joints=("left_finger", "right_finger"),
        fingertips=(),
        **record,  # type: ignore[arg-type]
    )


def test_an_arm_without_a_home_pose_anywhere_is_one_line() -> None:
    # Neither the record nor the file gives a home pose: a KeyError from MuJoCo, after the run existed.
    arm = _mini_arm()
    with pytest.raises(UsageError, match=r"arm 'mini' \(.*mini_arm.xml\) has no keyframe 'home' and its record no"):
        build_model(arm, yam_reach_config())


def test_a_record_naming_what_the_file_lacks_or_has_twice_is_one_line() -> None:
    """A misspelt grasp_pose joint was MuJoCo's KeyError in the worker after the run existed (exit 1); an ee_site_pos
    under the name of a site the file has, MuJoCo's "repeated name"."""
    arm = _mini_arm(home=(("shoulder", 0.4),), grasp_pose=(("left_fingr", 1.0), ("right_finger", 1.0)))
    with pytest.raises(UsageError, match=r"arm 'mini' \(.*mini_arm.xml\) has no joint 'left_fingr'"):
        build_model(arm, yam_reach_config())
    twice = dataclasses.replace(arm, grasp_pose=(), ee_site_pos=(0.0, 0.0, -0.07))
    with pytest.raises(UsageError, match=r"its file has a site 'tip' already; give ee_site a name of its own"):
        build_model(twice, yam_reach_config())
    build_model(dataclasses.replace(twice, ee_site="grip"), yam_reach_config())  # a name of its own: builds


def test_an_arm_from_a_package_lists_builds_and_trains(arm_package: None, tmp_path: Path) -> None:
    from mjfleet.cli import list_tasks, train
    from mjfleet.tasks import registry

    from .helpers import run_main

    assert registry.all_arms()["mini"].path == MINI_ARM and "yam" in registry.all_arms()
    assert registry.package_of("mini-reach") == "mjfleet-fake-arm" and registry.broken_packages() == {}
    _, out, _ = run_main(list_tasks.main, [])
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["mini-lift-cube"].endswith("[package mjfleet-fake-arm]")

    # The package's arm in both tasks: its names found in its file, its cube on the table.
    # The lift's recipe is the default on any arm; this one has no grasp_pose, so its episodes all start on the table.
    env = MjEnv(LiftCubeTask(dataclasses.replace(lift_cube_config("mini"), num_envs=2)), seed=0)
    targets = 5  # the filtered servo targets, which the policy observes
    assert env.num_actions == 5 and env.get_observations()["policy"].shape == (2, 3 * 5 + 3 + 3 + 6 + targets)
    assert env.task.cfg.start_in_hand == env.task.cfg.start_at_cube == 0.0  # type: ignore[attr-defined]
    assert env.task.training_start(env) is None
    # Nor is their privileged success logged, so --stop-when does not offer it (a stop on it would never come).
    declared = declared_stat_keys(LiftCubeTask, lift_cube_config("mini"))
    assert "Episode/success" in declared and PRIVILEGED_SUCCESS not in declared
    for _ in range(10):
        env.step(torch.zeros(2, env.num_actions))
    assert torch.isfinite(env.sim.qpos).all() and not env.terminated.any()

    logs = tmp_path / "logs"
    flags = ["--gpu-ids", "None", "--log-root", str(logs), "--agent.max-iterations", "2", "--env.num-envs", "16"]
    code, _, err = run_main(train.main, ["mini-reach", *flags, "--agent.num-steps-per-env", "8"])
    assert code == 0, err
    assert sorted(p.name for p in (logs / "mini_reach").glob("*/model_2.pt"))


def test_an_unknown_arm_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"--env.arm 'nope' is not an arm \(yam\); docs/manipulation.md shows how"):
        ReachTask(dataclasses.replace(yam_reach_config(), arm="nope"))


def test_train_without_the_arms_files_says_how_to_bring_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mjfleet.cli import train

    from .helpers import run_main

    monkeypatch.delenv("MENAGERIE_ROOT", raising=False)
    monkeypatch.setenv("MENAGERIE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MENAGERIE_BASE_URL", (tmp_path / "nowhere").as_uri())  # fails at once, no network
    logs = tmp_path / "logs"
    code, _, err = run_main(train.main, ["yam-reach", "--gpu-ids", "None", "--log-root", str(logs)])
    assert code == 2 and "Traceback" not in err
    (line,) = err.splitlines()
    assert "Menagerie robot 'i2rt_yam' is not on this machine" in line and "MENAGERIE_ROOT=<dir>" in line
    assert not logs.exists()


@needs_yam
def test_privileged_starts_report_their_success_apart_from_the_episodes_play_judges() -> None:
    """Episodes that began with the cube in the hand or the hand at the cube count into
    ``Episode/success_privileged``, never into ``Episode/success`` (which every stop condition reads)."""
    env = _lift(num_envs=64, start_in_hand=0.5, start_at_cube=0.25)
    task = env.task
    assert isinstance(task, LiftCubeTask)
    env.max_episode_length = 1  # every episode times out in the next step
    started = task.training_start(env)
    assert started is not None
    privileged = int(started.sum())
    assert 0 < privileged < 64
    env.step(torch.zeros(64, env.num_actions))
    _, counts = env.stats.pop()
    count = dict(zip(env.stats.keys, counts.tolist(), strict=True))
    assert count["Episode/success_privileged"] == privileged
    assert count["Episode/success"] == 64 - privileged
    assert count["Episode/return"] == 64


def test_a_run_records_its_arm_record_with_its_files() -> None:
    # An edited home pose, end-effector site or grasp pose builds another scene: play and --finish say so.
    records = yam_lift_cube_config().model_records()
    ((label, text),) = records.items()
    assert label == f"arm record {YAM.name!r}" and '"ee_site"' in text and "source" not in json.loads(text)
    assert json.loads(text)["home"] == [list(pair) for pair in YAM.home]


@needs_yam
@pytest.mark.parametrize("make", [_reach, _lift])
@pytest.mark.parametrize("action_filter", [1.0, 0.2])
def test_the_sidecar_says_how_to_build_the_observation(make: Callable[..., MjEnv], action_filter: float) -> None:
    """A control loop could not build the observation: no term layout, and no word of the gripper point the
    positions are measured from (a site mjfleet adds, 4.4 cm from the file's own grasp site)."""
    env = make(num_envs=2, action_filter=action_filter)
    meta = env.task.export_metadata()
    terms = meta["observation_terms"]["policy"]
    assert sum(t["size"] for t in terms) == env.get_observations()["policy"].shape[1]
    assert ("servo_targets" in [t["name"] for t in terms]) == (action_filter < 1)
    m, point = env.sim.mj_model, meta["gripper_point"]
    site = m.site(point["site"])
    assert point["body"] == m.body(int(site.bodyid[0])).name == "link_6"
    assert point["offset"] == pytest.approx([0.0, -0.037, 0.12])


@needs_yam
def test_a_video_shows_the_target_the_policy_reaches_for() -> None:
    """Neither the reach target nor the lift goal was drawn: a video could not show whether a policy reached it."""
    from functools import partial

    from mjfleet.render.video import WorldVideo

    env = _reach(num_envs=1)
    task = env.task
    assert isinstance(task, ReachTask)
    [marker] = task.video_markers(env, 0)
    assert marker.pos == pytest.approx(task.target[0].tolist()) and marker.radius == task.cfg.success_distance
    frames = []
    for markers in (None, partial(task.video_markers, env)):
        recorder = WorldVideo(env.sim, 0, None, 120, 160, markers=markers)
        try:
            recorder.capture()
        finally:
            recorder.close()
        frames.append(recorder.frames[0].astype(int))
    plain, marked = frames
    changed = np.abs(marked - plain).sum(axis=-1) > 30
    assert changed.any()
    assert (marked[changed][:, 1] > marked[changed][:, 0]).mean() > 0.5  # green where it differs

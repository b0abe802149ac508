"""Locomotion tasks on real CPU simulations: registration, MDP plumbing, contacts, commands, curriculum,
domain randomization, and a short training run that must improve."""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
import time
from pathlib import Path

import mujoco
import mujoco_warp as mjw
import numpy as np
import pytest
import torch
import warp as wp

from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.runtime.context import DistributedContext
from mjfleet.sim.config import Backend, SimConfig
from mjfleet.sim.factory import create_simulation
from mjfleet.tasks.locomotion.commands import CommandCurriculum
from mjfleet.tasks.locomotion.config import (
    CommandConfig,
    CommandCurriculumConfig,
    LocomotionConfig,
    RandomizationConfig,
    TerrainConfig,
)
from mjfleet.tasks.locomotion.contacts import ZoneContacts, zone_sensors
from mjfleet.tasks.locomotion.curriculum import TerrainCurriculum
from mjfleet.tasks.locomotion.model import _add_heightfield, build_model
from mjfleet.tasks.locomotion.randomization import BATCHED_FIELDS, DomainRandomizer, movable_centre_of_mass
from mjfleet.tasks.locomotion.robots import GO1, UNITREE_GO1
from mjfleet.tasks.locomotion.rotations import heading, projected_gravity, quat_mul, rotate, rotate_inverse, yaw_quat
from mjfleet.tasks.locomotion.task import LocomotionTask
from mjfleet.tasks.locomotion.terrain import HeightLookup, generate
from mjfleet.tasks.registry import all_tasks, get_task
from mjfleet.train.config import TrainConfig
from mjfleet.train.worker import train_worker

from .conftest import make_env
from .helpers import missing_files

TASKS = ("go1-velocity-flat", "go1-velocity-rough", "humanoid-velocity-flat", "humanoid-velocity-rough")

SMALL_TERRAIN = {"num_levels": 3, "types": ("bumps", "stairs_up", "slope_down"), "tile_size": 4.0, "border": 2.0}
"""A 3 x 3-tile heightfield: enough for every code path, quick to build."""


def _small_terrain(cfg: LocomotionConfig) -> TerrainConfig:
    return dataclasses.replace(cfg.terrain, **SMALL_TERRAIN)  # type: ignore[arg-type]


def make_loco_env(task_id: str, num_envs: int = 8, seed: int = 0, **overrides: object) -> MjEnv:
    """A CPU environment of ``task_id``; rough tasks get the small terrain unless ``terrain`` is given."""
    spec = get_task(task_id)
    cfg = spec.env_cfg()
    assert isinstance(cfg, LocomotionConfig)
    if cfg.terrain.kind == "rough" and "terrain" not in overrides:
        overrides["terrain"] = _small_terrain(cfg)
    return make_env(task_id, num_envs=num_envs, seed=seed, **overrides)


def _task(env: MjEnv) -> LocomotionTask:
    assert isinstance(env.task, LocomotionTask)
    return env.task


# --- registration and configs ------------------------------------------------------------------------------------
def test_all_locomotion_tasks_are_registered_with_complete_configs() -> None:
    tasks = all_tasks()
    for task_id in TASKS:
        spec = tasks[task_id]
        assert spec.load_task_class() is LocomotionTask
        assert spec.description and "\n" not in spec.description
        cfg, agent = spec.env_cfg(), spec.agent_cfg()
        assert isinstance(cfg, LocomotionConfig)
        assert cfg.episode_length_s == 20.0 and cfg.sim.decimation == 4
        assert cfg.sim.nconmax is not None and cfg.sim.njmax is not None
        assert (cfg.terrain.kind == "rough") == task_id.endswith("rough")
        assert agent.experiment_name == task_id.replace("-", "_")
        # Factories return fresh objects: tuning one config never leaks into the next.
        assert spec.env_cfg() is not cfg and spec.env_cfg() == cfg


def test_reward_weights_are_cli_flags() -> None:
    from mjfleet.cli.train import parse_args

    cfg = parse_args(
        [
            "go1-velocity-flat",
            "--env.rewards.track_lin_vel_xy",
            "0.5",
            "--env.rewards.feet-air-time",
            "0.1",
            "--env.randomization.friction",
            "0.3",
            "0.9",
            "--env.terrain.types",
            "bumps",
            "stairs_up",
        ]
    )
    assert isinstance(cfg.env, LocomotionConfig)
    assert cfg.env.rewards.track_lin_vel_xy == 0.5 and cfg.env.rewards.feet_air_time == 0.1
    assert cfg.env.randomization.friction == (0.3, 0.9)
    assert cfg.env.terrain.types == ("bumps", "stairs_up")


# --- base state ---------------------------------------------------------------------------------------------------
def test_rotations_match_mujoco() -> None:
    gen = torch.Generator().manual_seed(0)
    quat = torch.nn.functional.normalize(torch.randn(16, 4, generator=gen, dtype=torch.float64), dim=-1)
    vec = torch.randn(16, 3, generator=gen, dtype=torch.float64)
    for q, v, body, world in zip(quat, vec, rotate_inverse(quat, vec), rotate(quat, vec), strict=True):
        expected_world, expected_body, conj = np.zeros(3), np.zeros(3), np.zeros(4)
        mujoco.mju_rotVecQuat(expected_world, v.numpy(), q.numpy())
        mujoco.mju_negQuat(conj, q.numpy())
        mujoco.mju_rotVecQuat(expected_body, v.numpy(), conj)
        np.testing.assert_allclose(world.numpy(), expected_world, atol=1e-12)
        np.testing.assert_allclose(body.numpy(), expected_body, atol=1e-12)
    down = torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64).expand(16, 3)
    torch.testing.assert_close(projected_gravity(quat), rotate_inverse(quat, down))
    yaw = torch.linspace(-3.0, 3.0, 16, dtype=torch.float64)
    torch.testing.assert_close(heading(quat_mul(yaw_quat(yaw), yaw_quat(0.0 * yaw))), yaw)


def test_base_velocity_is_read_in_the_base_frame() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=2)
    task, sim = _task(env), env.sim
    sim.qpos[:, 3:7] = torch.tensor([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)])  # facing +y
    sim.qvel[:] = 0.0
    sim.qvel[:, 1] = 0.5  # moving along world +y: forward for this base
    sim.qvel[:, 5] = 0.3  # yaw rate
    lin_vel, ang_vel, gravity, _ = task._base_state(env)
    torch.testing.assert_close(lin_vel, torch.tensor([[0.5, 0.0, 0.0]] * 2), atol=1e-6, rtol=0)
    torch.testing.assert_close(ang_vel[:, 2], torch.full((2,), 0.3))
    torch.testing.assert_close(gravity, torch.tensor([[0.0, 0.0, -1.0]] * 2), atol=1e-6, rtol=0)


# --- build, step, reset ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task_id", TASKS)
def test_builds_steps_and_resets(task_id: str) -> None:
    env = make_loco_env(task_id, num_envs=8, episode_length_s=0.2)  # 10 control steps
    task = _task(env)
    nu = env.num_actions
    assert nu == env.sim.mj_model.nu == (12 if task.cfg.robot == "go1" else 21)
    obs = env.get_observations()
    policy_dim = 9 + 3 * nu
    scan = math.prod(task.cfg.height_scan) if task.cfg.terrain.kind == "rough" else 0
    critic_dim = policy_dim + 3 + 1 + len(task.robot.feet) + 2 + scan
    assert obs["policy"].shape == (8, policy_dim) and obs["critic"].shape == (8, critic_dim)
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        obs, reward, dones, extras = env.step(torch.randn(8, nu, generator=gen) * 0.5)
        assert torch.isfinite(obs["policy"]).all() and torch.isfinite(obs["critic"]).all()
        assert torch.isfinite(reward).all()
    assert torch.all(dones)  # every episode ended: fallen or timed out at step 10
    values = extras["episodes"][1]
    assert set(values) >= {"Metrics/lin_vel_error", "Metrics/yaw_rate_error", "Episode_Termination/fall"}
    assert ("Metrics/terrain_level" in values) == task_id.endswith("rough")
    assert torch.all(env.episode_length_buf == 0)
    # After the auto-reset the robots stand at their spawn points, upright, joints near the default pose.
    gravity = obs["policy"][:, 3:6]
    assert torch.all(gravity[:, 2] < -0.95)
    height = env.sim.qpos[:, 2] - task.ground_height(env.sim.qpos[:, :2])
    assert torch.all((height - task.target_height).abs() < 0.05)
    offset = task.joint_pos(env) - task._home_joint_pos
    assert torch.all(offset.abs() <= task.cfg.init_joint_noise + 1e-5)
    # The critic's first columns are the policy's terms without noise.
    torch.testing.assert_close(obs["critic"][:, 9 : 9 + nu], task.joint_pos(env) - task.default_joint_pos)


@pytest.mark.parametrize("notices", [False, True])
def test_solver_iteration_notices_print_only_when_asked(notices: bool, capfd: pytest.CaptureFixture[str]) -> None:
    # One solver and one line-search iteration: every world with contacts hits both limits (Warp's notices).
    sim = dataclasses.replace(
        get_task("go1-velocity-flat").env_cfg().sim, solver_notices=notices, use_graph=False, backend="warp"
    )
    env = make_loco_env("go1-velocity-flat", num_envs=4, solver_iterations=1, linesearch_iterations=1, sim=sim)
    capfd.readouterr()
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        env.step(torch.randn(4, env.num_actions, generator=gen) * 3.0)
    # The limits were hit either way; only the printing differs.
    assert torch.all(wp.to_torch(env.sim.data.overflow) & int(mjw.OverflowType.LS_ITERATIONS))
    assert ("iterations limit reached" in capfd.readouterr().out) == notices


def test_zero_action_stands_with_feet_on_the_ground() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=4)
    task = _task(env)
    for _ in range(25):
        _, _, dones, _ = env.step(torch.zeros(4, env.num_actions))
        assert not dones.any()
    assert task.feet_contact.all()
    assert not task.terminal_contact.any() and torch.all(task.undesired_count == 0)
    torch.testing.assert_close(env.sim.ctrl, task.default_joint_pos.expand(4, -1))


def test_action_scale_of_force_asks_each_servo_for_the_same_share_of_its_limit() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=2, action_scale_of_force=0.25)
    task, m = _task(env), env.sim.mj_model
    limits = np.abs(m.actuator_forcerange[:, 1])
    assert len(set(limits.tolist())) == 2  # hips and thighs 23.7 N m, calves 35.55: the scales differ
    expected = torch.as_tensor(0.25 * limits / m.actuator_gainprm[:, 0], dtype=torch.float32)
    torch.testing.assert_close(task.action_scale, expected)
    actions = torch.ones(2, env.num_actions)
    task.apply_actions(env, actions)
    torch.testing.assert_close(env.sim.ctrl, (task.default_joint_pos + expected).expand(2, -1))
    # Servo torque at the target = gain x offset = a quarter of each limit.
    torch.testing.assert_close(
        expected * torch.as_tensor(m.actuator_gainprm[:, 0]).float(), 0.25 * torch.as_tensor(limits).float()
    )


def test_action_scale_of_force_needs_force_limits() -> None:
    from mjfleet.errors import UsageError
    from mjfleet.tasks.locomotion.actions import action_scales

    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="j"/><geom size=".1"/></body></worldbody>'
        '<actuator><position name="a" joint="j" kp="10"/></actuator></mujoco>'
    )
    assert action_scales(m, 0.3, 0.0) == [0.3]
    with pytest.raises(UsageError, match="actuator 'a' has no force limit"):
        action_scales(m, 0.3, 0.25)


def test_a_termination_height_the_standing_robot_does_not_clear_is_one_line() -> None:
    """A small robot under the defaults' 0.15 m: every episode ended as a fall at its first step, without a word."""
    from .conftest import make_env

    with pytest.raises(UsageError, match=r"--env.termination-height 0.5 is not below the base height of robot 'go1'"):
        make_env("go1-velocity-flat", num_envs=2, termination_height=0.5)


def test_trunk_on_the_ground_is_a_base_contact_termination() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=2)
    env.step(torch.zeros(2, env.num_actions))
    # World 1 upside down, trunk resting on the floor (the legs point up).
    env.sim.qpos[1, 2] = 0.055
    env.sim.qpos[1, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    env.sim.qvel[1] = 0.0
    _, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert dones.tolist() == [False, True]
    values = extras["episodes"][1]
    assert values["Episode_Termination/base_contact"].tolist() == [1.0]


def test_termination_reward_reads_the_step_terminations_and_terminations_have_no_side_effects() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=2)
    task = _task(env)
    assert task.termination_names() == ("base_contact", "fall")
    env.step(torch.zeros(2, env.num_actions))
    env.sim.qpos[1, 2] += 1.0  # world 1 flipped: a fall on the next step
    env.sim.qpos[1, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    _, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert dones.tolist() == [False, True] and env.terminated.tolist() == [False, True]
    weight = env.reward_weights["termination"] * env.step_dt
    assert extras["episodes"][1]["Episode_Reward/termination"].tolist() == pytest.approx([weight])
    # World 1 stands again after its reset: asking for the terminations now leaves the reward term's input alone.
    assert task.reward_termination(env).tolist() == [0.0, 1.0]
    assert not any(task.terminations(env)["fall"].tolist())
    assert task.reward_termination(env).tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    ("task_id", "quadruped_clock"), [("go1-velocity-flat", True), ("humanoid-velocity-flat", False)]
)
def test_gait_clocks_run_only_for_weighted_gait_rewards(task_id: str, quadruped_clock: bool) -> None:
    env = make_loco_env(task_id, num_envs=4)
    task = _task(env)
    assert ("feet_air_time" in env.reward_weights) == quadruped_clock
    assert ("biped_air_time" in env.reward_weights) != quadruped_clock
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        env.step(torch.randn(4, env.num_actions, generator=gen))
    assert bool(task._air_time.any()) == quadruped_clock
    assert bool((task._stance_time + task._swing_time).any()) != quadruped_clock


# --- commands ----------------------------------------------------------------------------------------------------
def test_commands_are_drawn_in_range_and_resampled_on_time() -> None:
    commands = CommandConfig(
        lin_vel_x=(0.5, 1.0), lin_vel_y=(-0.3, -0.2), yaw_rate=(0.1, 0.2), resample_interval_s=0.1, standing_fraction=0
    )
    env = make_loco_env("go1-velocity-flat", num_envs=16, commands=commands)  # 0.1 s = 5 control steps
    task = _task(env)
    first = task.commands.command.clone()
    assert torch.all((first[:, 0] >= 0.5) & (first[:, 0] <= 1.0))
    assert torch.all((first[:, 1] >= -0.3) & (first[:, 1] <= -0.2))
    assert torch.all((first[:, 2] >= 0.1) & (first[:, 2] <= 0.2))
    zero = torch.zeros(16, env.num_actions)
    for _ in range(4):
        env.step(zero)
    assert torch.equal(task.commands.command, first)
    torch.testing.assert_close(env.get_observations()["policy"][:, 6:9], first)
    env.step(zero)
    second = task.commands.command
    assert torch.all((second != first).any(dim=-1))  # every environment drew anew
    assert torch.all((second[:, 0] >= 0.5) & (second[:, 0] <= 1.0))


def test_standing_fraction_gives_zero_commands() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=8, commands=CommandConfig(standing_fraction=1.0))
    assert torch.all(_task(env).commands.command == 0.0)


def _ramp(start: float) -> CommandConfig:
    """Commands of every sign, none zeroed, from ``start`` of their ranges."""
    return CommandConfig(
        lin_vel_x=(-1.0, 1.0),
        lin_vel_y=(-0.5, 0.5),
        yaw_rate=(-1.0, 1.0),
        standing_fraction=0.0,
        min_lin_speed=0.0,
        curriculum=CommandCurriculumConfig(start=start, step=0.25, promote_at=0.8),
    )


def test_command_curriculum_draws_training_commands_from_its_share_and_evaluation_ones_from_the_full_ranges() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=64, commands=_ramp(0.2))
    env.split_evaluation(32)
    task = _task(env)
    env.reset_all()
    bound = torch.tensor((1.0, 0.5, 1.0))
    training, evaluation = task.commands.command[:32].abs(), task.commands.command[32:].abs()
    assert torch.all(training <= 0.2 * bound + 1e-6)
    assert torch.any(evaluation > 0.5 * bound)  # 32 draws from the full ranges: some beyond half of them
    assert "command_level" in task.metric_names()
    metrics = task.episode_metrics(env, torch.arange(64))
    assert torch.equal(metrics["command_level"], torch.tensor([0.2] * 32 + [1.0] * 32))


def test_command_curriculum_widens_only_after_an_episode_length_of_good_tracking() -> None:
    cfg = CommandCurriculumConfig(start=0.2, step=0.25, promote_at=0.8)
    ramp = CommandCurriculum(cfg, num_envs=3, episode_steps=4, device=torch.device("cpu"))
    every, counted = torch.arange(3), torch.tensor([True, True, False])

    def episode(tracking: list[float]) -> None:
        for _ in range(2):  # half the episode length: the tracking sum reads half as much as its most
            ramp.step(torch.tensor(tracking) * 2)

    episode([0.9, 0.85, 0.0])
    ramp.episodes_ended(every, counted)  # the uncounted row (an evaluation one) is ignored
    for _ in range(2):
        ramp.step(torch.zeros(3))
    assert ramp.level.item() == pytest.approx(0.45)  # judged once per episode length (the 4th step), not before
    episode([0.9, 0.5, 1.0])  # mean of the counted 0.7 < 0.8
    ramp.episodes_ended(every, counted)
    episode([0.0, 0.0, 0.0])
    assert ramp.level.item() == pytest.approx(0.45)
    for _ in range(4):  # no episode ended: nothing to judge
        ramp.step(torch.ones(3))
    ramp.episodes_ended(every, torch.zeros(3, dtype=torch.bool))  # only to start the sums afresh
    assert ramp.level.item() == pytest.approx(0.45)
    for _ in range(3):
        for _ in range(4):
            ramp.step(torch.ones(3))
        ramp.episodes_ended(every, counted)
    for _ in range(4):
        ramp.step(torch.zeros(3))
    assert ramp.level.item() == pytest.approx(1.0)  # never beyond the full ranges


def test_command_curriculum_reads_tracking_of_training_episodes_and_its_level_survives_a_checkpoint() -> None:
    # Commands drawn from 1 % of the ranges: standing still tracks them well (0.79 of the most, the drop from the
    # spawn height included), so the level rises at the first judgement after training episodes ended.
    commands = _ramp(0.01)
    commands.curriculum.promote_at = 0.7
    env = make_loco_env("go1-velocity-flat", num_envs=8, commands=commands, episode_length_s=0.2)
    task = _task(env)
    assert task.command_curriculum is not None
    zero = torch.zeros(8, env.num_actions)
    for _ in range(int(env.max_episode_length) * 2):
        env.step(zero)
    assert task.command_curriculum.level.item() == pytest.approx(0.26)
    assert torch.allclose(task.commands.scale, torch.tensor(0.26))
    other = make_loco_env("go1-velocity-flat", num_envs=8, commands=_ramp(0.01))
    other.task.load_state_dict(task.state_dict())
    other.step(torch.zeros(8, other.num_actions))
    assert torch.allclose(_task(other).commands.scale, torch.tensor(0.26))


def test_command_curriculum_does_not_judge_episodes_begun_part_way() -> None:
    """A run's first episodes begin part-way (random episode lengths): judged over a whole episode length, a perfect
    tracker's read about half, and the first judgement could not widen the ranges."""
    env = make_loco_env("go1-velocity-flat", num_envs=4, commands=_ramp(0.5))
    task = _task(env)
    assert task.command_curriculum is not None
    env.step(torch.zeros(4, env.num_actions))
    env.episode_length_buf[:] = env.max_episode_length - 1  # as a random start leaves them: they end next step
    env.from_reset[:] = torch.tensor([False, False, True, True])
    env.step(torch.zeros(4, env.num_actions))
    assert float(task.command_curriculum._count) == 2.0


def test_command_curriculum_is_off_by_default_and_where_a_policy_is_judged() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=8)
    assert _task(env).command_curriculum is None and "command_level" not in _task(env).metric_names()
    assert torch.all(_task(env).commands.scale == 1.0)
    cfg = dataclasses.replace(get_task("unitree-go1-velocity-flat").env_cfg(), commands=_ramp(0.3))
    judged = cfg.as_judged()
    assert judged.commands.curriculum.start == 1.0 and judged.commands.lin_vel_x == (-1.0, 1.0)
    assert judged.sim.training_contacts.applies == "never"
    assert cfg.commands.curriculum.start == 0.3  # the training settings are left as they are


def test_a_run_with_the_command_curriculum_evaluates_in_a_simulation_of_its_own_without_it() -> None:
    # The evaluation's own simulation has the full ranges and so no command_level metric: its statistics are read in
    # the training simulation's order.
    spec = get_task("go1-velocity-flat")
    env_cfg = dataclasses.replace(spec.env_cfg(), num_envs=64, episode_length_s=0.5, commands=_ramp(0.3))
    agent = dataclasses.replace(spec.agent_cfg(), max_iterations=3, num_steps_per_env=8, eval_envs=16)
    agent.eval_speedup = "always"  # its 25-step episodes end within the 3 iterations of 8 steps
    cfg = TrainConfig(env=env_cfg, agent=agent, task=spec.id, seed=1)
    result = train_worker(cfg, run_dir=None, ctx=DistributedContext(device="cpu"))
    last = result.records[-1]
    assert last.episode["Metrics/command_level"] == pytest.approx(0.3)
    assert "Eval_Metrics/lin_vel_error" in last.evaluation
    assert "Eval_Metrics/command_level" not in last.evaluation


@pytest.mark.parametrize(("field", "value"), [("start", 0.0), ("start", 1.5), ("step", 0.0), ("promote_at", 1.2)])
def test_command_curriculum_settings_out_of_range_are_one_line_errors(field: str, value: float) -> None:
    ramp = dataclasses.replace(CommandCurriculumConfig(start=0.5), **{field: value})
    with pytest.raises(UsageError, match=f"--env.commands.curriculum.{field.replace('_', '-')} must be"):
        make_loco_env("go1-velocity-flat", num_envs=2, commands=dataclasses.replace(CommandConfig(), curriculum=ramp))


@pytest.mark.parametrize(
    ("task_id", "flags", "says"),
    [
        ("go1-velocity-rough", ["--env.terrain.num-levels", "0"], "--env.terrain.num-levels must be at least 1"),
        ("go1-velocity-rough", ["--env.terrain.types"], "--env.terrain.types is empty"),
        ("go1-velocity-rough", ["--env.terrain.resolution", "0"], "--env.terrain.resolution must be above 0"),
        ("go1-velocity-rough", ["--env.terrain.bump-spacing", "0"], "--env.terrain.bump-spacing must be above 0"),
        ("go1-velocity-rough", ["--env.terrain.step-width", "0"], "--env.terrain.step-width must be above 0"),
        ("go1-velocity-rough", ["--env.terrain.platform-size", "20"], "platform-size must be smaller than a tile"),
        ("go1-velocity-flat", ["--env.tracking-std", "0"], "--env.tracking-std must be above 0"),
        ("go1-velocity-flat", ["--env.randomization.friction", "-1", "-0.5"], "friction -1 -0.5: must be above 0"),
        ("go1-velocity-flat", ["--env.commands.lin-vel-x", "1", "-1"], "lin-vel-x 1 -1: the low end is above"),
        ("go1-velocity-flat", ["--env.height-scan", "-1", "3"], "--env.height-scan must be at least 0"),
        ("go1-velocity-flat", ["--env.solver-iterations", "0"], "--env.solver-iterations must be at least 1"),
        ("go1-velocity-flat", ["--env.noise.scale", "-1"], "--env.noise.scale must be at least 0"),
    ],
)
def test_legged_settings_out_of_range_are_one_line_errors_before_the_run(
    task_id: str, flags: list[str], says: str, tmp_path: Path
) -> None:
    """Each crashed with a traceback after the run existed (a terrain of no levels, a zero division), or trained
    something else silently (negative friction, a tracking reward of exp(-x/0))."""
    from .helpers import refused_train

    assert says in refused_train([task_id, "--gpu-ids", "None", *flags], tmp_path / "logs")


# --- terrain and curriculum --------------------------------------------------------------------------------------
def test_terrain_tiles_join_flat_and_lookup_matches_mujoco() -> None:
    cfg = TerrainConfig(kind="rough", **SMALL_TERRAIN)  # type: ignore[arg-type]
    terrain = generate(cfg)
    res, n_tile = terrain.resolution, round(cfg.tile_size / cfg.resolution)
    n_border = round(cfg.border / cfg.resolution)
    # Tile edges (and the border) are at height 0, so neighbouring tiles join without a step.
    for k in range(len(cfg.types) + 1):
        assert np.all(terrain.heights[n_border + k * n_tile, n_border:-n_border] == 0.0)
    assert np.all(terrain.heights[:n_border] == 0.0)
    # Level 0 is easier than the last level for every type.
    assert np.all(np.abs(terrain.tile_heights[0]) <= np.abs(terrain.tile_heights[-1]) + 1e-9)
    # Stairs meet their neighbours on a flat tread (a riser one cell from the edge left a trench or a ridge), and
    # bumps fade in from the spawn platform as from the tile edge (no ledge where a robot first steps off it).
    stairs_row = n_border + cfg.types.index("stairs_up") * n_tile + n_tile // 2
    for level in range(1, cfg.num_levels):
        edge = n_border + level * n_tile
        assert np.all(terrain.heights[stairs_row, edge - 1 : edge + 2] == 0.0)
    bumps_row = n_border + cfg.types.index("bumps") * n_tile + n_tile // 2
    platform_cells = round(0.5 * cfg.platform_size / res)
    for level in range(cfg.num_levels):
        centre = n_border + level * n_tile + n_tile // 2
        amplitude = cfg.bump_height[0] + level / (cfg.num_levels - 1) * (cfg.bump_height[1] - cfg.bump_height[0])
        for side in (-1, 1):
            outside = terrain.heights[bumps_row, centre + side * (platform_cells + 1)]
            assert abs(outside) <= amplitude * res / cfg.bump_spacing + 1e-9
    # Stairs go down from the border to a pit; slopes rise to a pyramid top.
    assert terrain.tile_heights[-1, 1] < -0.5 and terrain.tile_heights[-1, 2] > 0.3

    model = build_model(GO1, terrain)
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor") == -1
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    lookup = HeightLookup(terrain, torch.device("cpu"))
    rng = np.random.default_rng(0)
    half_x, half_y = terrain.half_extent
    for _ in range(50):
        x, y = rng.uniform(-half_x + res, half_x - res), rng.uniform(-half_y + res, half_y - res)
        geomid = np.array([-1], dtype=np.int32)
        dist = mujoco.mj_ray(model, data, np.array([x, y, 5.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geomid)
        expected = lookup(torch.tensor([[x, y]], dtype=torch.float32)).item()
        assert abs((5.0 - dist) - expected) < 0.01  # bilinear vs MuJoCo's triangles


@pytest.mark.parametrize("xy", [(0.03, 0.0), (0.05, 0.05)], ids=["cell-edge", "cell-diagonal"])
def test_a_small_foot_stepping_on_a_heightfield_edge_comes_back_up(xy: tuple[float, float]) -> None:
    # Menagerie's G1 stands on 5 mm spheres. MuJoCo C's native convex solver answered such a sphere that struck an
    # edge between two heightfield prisms with the prisms' side faces as normals: it stayed inside the ground.
    flat = generate(TerrainConfig(kind="rough", bump_height=(0.0, 0.0), step_height=(0.0, 0.0), slope=(0.0, 0.0)))
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.005
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05])
    foot = spec.worldbody.add_body(pos=[*xy, 0.006])
    foot.add_freejoint()
    foot.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.005, 0.0, 0.0], mass=4.0)  # a G1 foot point's load
    _add_heightfield(spec, flat)
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qvel[2] = -1.0  # a foot strike
    mujoco.mj_step(model, data, nstep=200)
    assert 0.0 < data.qpos[2] < 0.005  # resting on the surface, barely pressed in


def test_curriculum_rule_moves_levels_both_ways() -> None:
    cfg = TerrainConfig(kind="rough", max_init_level=0, **SMALL_TERRAIN)  # type: ignore[arg-type]
    terrain = generate(cfg)
    curriculum = TerrainCurriculum(cfg, terrain, 6, torch.device("cpu"), torch.Generator().manual_seed(0))
    curriculum.levels[:] = torch.tensor([0, 1, 1, 2, 0, 2])
    ids = torch.arange(6)
    walked = torch.tensor([3.0, 3.0, 0.5, 0.5, 0.0, 3.0])  # promotion above 2 m (half a 4 m tile)
    commanded = torch.tensor([4.0, 4.0, 4.0, 0.5, 10.0, 1.0])  # demotion below half the commanded distance
    curriculum.update(ids, walked, walked, commanded)  # straight walks: as far from the spawn as the path is long
    levels = curriculum.levels.tolist()
    assert levels[:5] == [1, 2, 0, 2, 0]  # up, up, down, stays (walked enough of a short command), floor at 0
    assert 0 <= levels[5] < 3  # beat the hardest level: restarts on a random one
    # A turning command's arc ends near its start: the path covered is judged, not how far from the spawn it ended.
    curriculum.levels[:2] = 1
    curriculum.update(ids[:2], torch.tensor([0.3, 0.3]), torch.tensor([3.9, 0.3]), torch.tensor([4.0, 4.0]))
    assert curriculum.levels[:2].tolist() == [1, 0]  # followed the arc: stays; stood near the spawn: down
    xy, ground = curriculum.spawn(ids)
    expected = torch.as_tensor(terrain.tile_centres, dtype=torch.float32)[curriculum.levels, curriculum.types]
    torch.testing.assert_close(xy, expected)
    assert ground.shape == (6,)


def test_the_path_a_robot_covers_is_summed_step_by_step() -> None:
    """A loop back to the spawn point covers its whole length though it ends where it began."""
    terrain = TerrainConfig(kind="rough", max_init_level=0, spawn_jitter=0.0, **SMALL_TERRAIN)  # type: ignore[arg-type]
    env = make_loco_env("go1-velocity-rough", num_envs=1, terrain=terrain)
    task = _task(env)
    for dx, dy in ((0.5, 0.0), (0.0, 0.5), (-0.5, 0.0), (0.0, -0.5)):  # a 0.5 m square, one side per step
        env.sim.qpos[0, 0] += dx
        env.sim.qpos[0, 1] += dy
        task.after_step(env)
    assert task._covered[0].item() == pytest.approx(2.0, abs=0.01) and task._walked[0].item() < 0.01


def test_env_curriculum_promotes_far_walkers_and_demotes_laggards() -> None:
    terrain = TerrainConfig(kind="rough", max_init_level=0, spawn_jitter=0.0, **SMALL_TERRAIN)  # type: ignore[arg-type]
    env = make_loco_env("go1-velocity-rough", num_envs=3, terrain=terrain)
    task = _task(env)
    assert task.curriculum is not None
    task.curriculum.levels[:] = torch.tensor([0, 1, 1])
    env.step(torch.zeros(3, env.num_actions))
    # World 0 walked 3 m (beyond half a tile); world 1 stayed put although commanded 10 m; world 2 keeps going.
    env.sim.qpos[0, 0] += 3.0
    task._commanded[1] = 10.0  # what 10 s at 1 m/s would have accumulated
    for world in (0, 1):  # both fall over: flipped, high above the ground
        env.sim.qpos[world, 2] += 1.0
        env.sim.qpos[world, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    _, _, dones, extras = env.step(torch.zeros(3, env.num_actions))
    assert dones.tolist() == [True, True, False]
    assert task.curriculum.levels.tolist() == [1, 0, 1]
    assert extras["episodes"][1]["Metrics/terrain_level"].tolist() == [0.0, 1.0]  # the levels they played
    # The reset robots stand at the centres of their new tiles.
    xy, ground = task.curriculum.spawn(torch.tensor([0, 1]))
    torch.testing.assert_close(env.sim.qpos[:2, :2], xy)
    torch.testing.assert_close(env.sim.qpos[:2, 2] - ground, torch.full((2,), task.spawn_base_height + 0.02))


def _two_robots_on_level_one() -> tuple[MjEnv, LocomotionTask]:
    """Two Go1s on level 1 of a small rough grid, one step after their spawn."""
    terrain = TerrainConfig(kind="rough", max_init_level=0, spawn_jitter=0.0, **SMALL_TERRAIN)  # type: ignore[arg-type]
    env = make_loco_env("go1-velocity-rough", num_envs=2, terrain=terrain)
    task = _task(env)
    assert task.curriculum is not None
    task.curriculum.levels[:] = torch.tensor([1, 1])
    env.step(torch.zeros(2, env.num_actions))
    return env, task


def test_a_diverged_world_is_not_promoted() -> None:
    """MuJoCo C sets a diverged world back at the grid's origin, metres from where it spawned: read as a walk, that
    promoted it a level."""
    env, task = _two_robots_on_level_one()
    env.sim.qpos[:, 0] += 3.0  # both 3 m from their spawn points
    env.sim.qvel[1, 0] = 1e5  # and world 1 diverged there (a finite explosion, as MuJoCo C leaves one)
    _, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert dones.tolist() == [False, True] and extras["episodes"][1]["Episode_Termination/nonfinite"].tolist() == [1.0]
    assert task.curriculum.levels.tolist() == [1, 0]  # it fell


def test_a_restart_mid_episode_moves_no_level() -> None:
    """A check of the current policy restores the levels and restarts every robot mid-episode (``reset_all``): no
    episode ended there, so none is promoted or demoted (they were, by the distance walked so far)."""
    env, task = _two_robots_on_level_one()
    env.sim.qpos[0, 0] += 3.0  # world 0 walked beyond half a tile; world 1 stood although asked for 10 m
    task._commanded[1] = 10.0
    env.step(torch.zeros(2, env.num_actions))
    env.reset_all()
    assert task.curriculum.levels.tolist() == [1, 1]


def test_an_unlimited_joint_keeps_its_home_angle_and_costs_no_joint_limit(tmp_path: Path) -> None:
    """MuJoCo stores an unlimited joint's range as [0, 0]: read as limits, every reset put the joint at 0 and the
    joint-limit penalty charged each angle but 0."""
    from mjfleet.tasks.locomotion.robots import GO1

    assert GO1.path is not None
    shutil.copytree(GO1.path.parent, tmp_path, dirs_exist_ok=True)
    xml = (tmp_path / "go1.xml").read_text()
    free = '<joint name="FR_thigh_joint" class="hip" limited="false" range="0 0"/>'  # as MuJoCo stores one
    xml = xml.replace('<joint name="FR_thigh_joint" class="hip"/>', free)
    servo = '<position name="FR_thigh" joint="FR_thigh_joint" class="hip"'
    (tmp_path / "go1.xml").write_text(xml.replace(servo, f'{servo} inheritrange="0" ctrlrange="-1 4"'))
    env = make_loco_env("go1-velocity-flat", num_envs=2, robot=str(tmp_path / "go1.xml"), init_joint_noise=0.0)
    task = _task(env)
    home = task._home_joint_pos
    assert float(home[1]) == pytest.approx(0.8)  # FR_thigh's home angle
    torch.testing.assert_close(env.sim.qpos[:, task._qpos_idx], home.expand(2, -1))
    assert task.reward_joint_limits(env).tolist() == [0.0, 0.0]


def _two_robots_on_level_2_after_a_step() -> tuple[MjEnv, LocomotionTask]:
    terrain = TerrainConfig(kind="rough", max_init_level=0, spawn_jitter=0.0, **SMALL_TERRAIN)  # type: ignore[arg-type]
    env = make_loco_env("go1-velocity-rough", num_envs=2, terrain=terrain)
    task = _task(env)
    assert task.curriculum is not None
    task.curriculum.levels[:] = 2
    env.step(torch.zeros(2, env.num_actions))
    return env, task


def test_a_robot_that_falls_early_having_kept_up_is_demoted() -> None:
    """legged_gym's rule: the distance asked for is that of a whole episode. Measured over the steps it lasted, a
    robot that tracked its command for a second and fell had walked about as far as asked, and kept its level."""
    env, task = _two_robots_on_level_2_after_a_step()
    task._commanded[:] = 0.02  # 1 m/s asked for the first of two 0.02 s steps, nothing for the second:
    task.commands.command[:] = 0.0  # a mean of 0.5 m/s, over a whole 20 s episode 10 m
    env.sim.qpos[:, 0] += 1.0  # and walked 1 m
    env.sim.qpos[0, 2] += 1.0  # world 0 falls: flipped
    env.sim.qpos[0, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    _, _, dones, _ = env.step(torch.zeros(2, env.num_actions))
    assert dones.tolist() == [True, False]
    assert task.curriculum.levels.tolist() == [1, 2]


def test_a_time_out_of_an_episode_begun_part_way_that_kept_up_keeps_its_level() -> None:
    # A random start (and the evaluation's staggered starts) ends episodes by time-out after a few steps: judged over
    # a whole episode, a robot that walked as asked would lose its level.
    env, task = _two_robots_on_level_2_after_a_step()
    env.episode_length_buf[:] = env.max_episode_length - 1  # both time out at the next step
    task._commanded[:] = 0.5  # 0.5 m asked over the steps they lasted (a whole episode would ask 250 m)
    task.commands.command[:] = 0.0
    env.sim.qpos[0, 0] += 0.5  # world 0 walked it; world 1 did not
    _, _, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert dones.tolist() == [True, True] and extras["time_outs"].tolist() == [True, True]
    assert task.curriculum.levels.tolist() == [2, 1]


def test_leaving_the_terrain_is_a_time_out_not_a_fall() -> None:
    env = make_loco_env("go1-velocity-rough", num_envs=3)
    task = _task(env)
    assert task.time_out_names() == ("out_of_terrain",)
    assert task.terrain is not None
    half_x, half_y = task.terrain.half_extent
    env.step(torch.zeros(3, env.num_actions))
    # World 0 stands at the x edge, world 1 near the y edge (inside the margin); world 2 stays on its tile.
    env.sim.qpos[0, 0] = half_x - 0.1
    env.sim.qpos[1, 1] = -(half_y - 0.2)
    env.sim.qpos[:2, 2] = task.ground_height(env.sim.qpos[:2, :2]) + task.target_height  # standing on the border
    _, _, dones, extras = env.step(torch.zeros(3, env.num_actions))
    assert dones.tolist() == [True, True, False]
    assert extras["time_outs"].tolist() == [True, True, False]
    values = extras["episodes"][1]
    assert values["Episode_Termination/out_of_terrain"].tolist() == [1.0, 1.0]
    assert values["Episode_Termination/fall"].tolist() == [0.0, 0.0]
    assert values["Episode_Termination/time_out"].tolist() == [0.0, 0.0]
    assert _task(make_loco_env("go1-velocity-flat", num_envs=1)).time_out_names() == ()


# --- domain randomization ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["warp", "mujoco"])
def test_friction_change_in_one_world_changes_only_that_world(backend: Backend) -> None:
    """Per-world model fields: read in place by Warp's captured graph (no re-capture), pushed into the world's
    model by MuJoCo C; no cross-talk on either."""
    sim_cfg = dataclasses.replace(get_task("go1-velocity-flat").env_cfg().sim, backend=backend)
    env = make_loco_env("go1-velocity-flat", num_envs=4, randomization=RandomizationConfig(), sim=sim_cfg)
    sim = env.sim
    for _ in range(3):
        env.step(torch.zeros(4, env.num_actions))
    assert sim.graph_active == (backend == "warp")
    # Identical worlds, all sliding sideways at 1.5 m/s.
    sim.qpos[:] = sim.qpos[0].clone()
    sim.qvel[:] = 0.0
    sim.qvel[:, 1] = 1.5
    sim.ctrl[:] = sim.ctrl[0].clone()
    for name in ("qacc_warmstart",):
        sim.view(name)[:] = sim.view(name)[0].clone()
    friction = sim.model_field("geom_friction")
    assert friction.shape[0] == 4
    friction[2, :, 0] = 0.05  # ice in world 2 only
    sim.model_fields_changed(torch.tensor([2]))
    for _ in range(20):
        sim.step()
    qpos = sim.qpos
    for world in (1, 3):
        torch.testing.assert_close(qpos[world], qpos[0], rtol=0, atol=1e-5)
    assert qpos[2, 1] - qpos[0, 1] > 0.05  # slid noticeably farther on ice


def test_randomizer_draws_per_world_parameters() -> None:
    randomization = RandomizationConfig(
        friction=(0.3, 1.2), added_base_mass=(1.0, 3.0), kp_scale=(0.8, 1.2), kd_scale=(0.5, 1.5)
    )
    env = make_loco_env("go1-velocity-flat", num_envs=16, randomization=randomization)
    task, sim = _task(env), env.sim
    mu = sim.model_field("geom_friction")[:, :, 0]
    assert torch.all(mu == mu[:, :1]) and mu[:, 0].unique().numel() == 16
    assert torch.all((mu >= 0.3) & (mu <= 1.2))
    torch.testing.assert_close(task.randomizer.friction, mu[:, 0])
    mass, subtree = sim.model_field("body_mass"), sim.model_field("body_subtreemass")
    base = task.base_body
    nominal = env.sim.mj_model.body_mass
    added = mass[:, base] - float(nominal[base])
    assert torch.all((added >= 1.0 - 1e-5) & (added <= 3.0 + 1e-5))
    torch.testing.assert_close(added, task.randomizer.added_mass)
    # Subtree masses follow, as MuJoCo's own mj_setConst computes them for the same body masses.
    torch.testing.assert_close(subtree[:, 0], mass.sum(dim=-1))
    reference = mujoco.MjModel.from_xml_path(str(GO1.asset))
    reference.body_mass[:] = mass[3].double().numpy()
    mujoco.mj_setConst(reference, mujoco.MjData(reference))
    torch.testing.assert_close(subtree[3], torch.as_tensor(reference.body_subtreemass, dtype=torch.float32))
    gain, bias = sim.model_field("actuator_gainprm"), sim.model_field("actuator_biasprm")
    torch.testing.assert_close(gain[:, :, 0], -bias[:, :, 1])  # position servos stay consistent
    kp_ratio = gain[:, :, 0] / torch.as_tensor(env.sim.mj_model.actuator_gainprm[:, 0], dtype=torch.float32)
    assert torch.all((kp_ratio >= 0.8 - 1e-5) & (kp_ratio <= 1.2 + 1e-5))
    assert kp_ratio[:, 0].unique().numel() == 16
    # Heavier worlds sag more under the same servo targets.
    for _ in range(25):
        env.step(torch.zeros(16, env.num_actions))
    assert torch.isfinite(env.sim.qpos).all()


def test_centre_of_mass_offsets_and_encoder_biases_are_drawn_per_world() -> None:
    """The base's centre of mass moves within the ranges, per world and axis; a biased encoder shows the policy the
    angle plus its bias and takes its targets in that frame, so the servo aims at the target minus the bias."""
    randomization = RandomizationConfig(com_offset=(0.02, 0.03, 0.04), encoder_bias=(-0.01, 0.01))
    env = make_loco_env("go1-velocity-flat", num_envs=16, randomization=randomization)
    task, sim = _task(env), env.sim
    base = task.base_body
    offset = sim.model_field("body_ipos")[:, base] - torch.as_tensor(sim.mj_model.body_ipos[base], dtype=torch.float32)
    assert torch.all(offset.abs() <= torch.tensor([0.02, 0.03, 0.04]) + 1e-6)
    assert offset[:, 0].unique().numel() == 16 and float(offset[:, 2].abs().max()) > 0.02
    others = [b for b in range(sim.mj_model.nbody) if b != base]
    torch.testing.assert_close(
        sim.model_field("body_ipos")[:, others],
        torch.as_tensor(sim.mj_model.body_ipos[others], dtype=torch.float32).expand(16, -1, -1),
    )
    bias = task.randomizer.encoder_bias
    assert bias.shape == (16, env.num_actions) and float(bias.abs().max()) <= 0.01 and float(bias.std()) > 0.003
    env.step(torch.zeros(16, env.num_actions))
    torch.testing.assert_close(sim.ctrl, task.default_joint_pos - bias)
    seen = env.get_observations()["policy"]
    first = 3 + 3 + 3  # angular velocity, gravity, command
    angles = seen[:, first : first + env.num_actions]
    torch.testing.assert_close(angles, task.joint_pos(env) - task.default_joint_pos + bias)
    # The critic's privileged view has the joints as they are (it had the policy's biased readings).
    critic = env.get_observations()["critic"][:, first : first + env.num_actions]
    torch.testing.assert_close(critic, task.joint_pos(env) - task.default_joint_pos)
    # Off (the default): the file's centre of mass, no bias, and the targets are the defaults.
    plain = make_loco_env("go1-velocity-flat", num_envs=2)
    assert not _task(plain).randomizer.biased
    plain.step(torch.zeros(2, plain.num_actions))
    torch.testing.assert_close(plain.sim.ctrl, _task(plain).default_joint_pos.expand(2, -1))


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_a_base_whose_centre_of_mass_sits_at_its_origin_still_moves_it(backend: Backend) -> None:
    """MuJoCo C skips the inertial offset of a body whose centre of mass the compiler found at its origin; with the
    offset randomized, both backends put each world's centre of mass where it was drawn."""
    xml = """<mujoco><worldbody><body name="base" pos="0 0 1"><freejoint/><geom type="box" size=".2 .1 .05"/>
      <body pos=".2 0 0"><joint name="j"/><geom type="sphere" size=".02" pos="0 0 -.1"/></body></body></worldbody>
      <actuator><position joint="j" kp="10"/></actuator></mujoco>"""
    randomization = RandomizationConfig(com_offset=(0.05, 0.05, 0.05))
    plain = mujoco.MjModel.from_xml_string(xml)
    movable_centre_of_mass(plain, "base", RandomizationConfig())
    assert plain.body_sameframe[1] == mujoco.mjtSameFrame.mjSAMEFRAME_BODY  # untouched where nothing is drawn
    model = mujoco.MjModel.from_xml_string(xml)
    movable_centre_of_mass(model, "base", randomization)
    sim = create_simulation(model, 3, "cpu", SimConfig(backend=backend), BATCHED_FIELDS)
    sim.qpos[:] = torch.as_tensor(model.qpos0, dtype=torch.float32)
    DomainRandomizer(randomization, sim, 1, torch.Generator().manual_seed(0), 1).apply(torch.arange(3))
    sim.forward()
    drawn = sim.model_field("body_ipos")[:, 1]
    assert float(drawn.abs().min()) > 0.0
    torch.testing.assert_close(sim.view("xipos")[:, 1] - sim.xpos[:, 1], drawn, atol=1e-5, rtol=0)


def test_a_joint_without_an_actuator_starts_each_episode_at_its_home_angle(tmp_path: Path) -> None:
    """A robot file may leave a joint unactuated: a reset puts it where the ``home`` keyframe does (it started from
    whatever memory held)."""
    task_id = "unitree-go1-velocity-flat"
    if (reason := missing_files(task_id)) is not None:
        pytest.skip(reason)
    from mjfleet.tasks.locomotion.sources import resolve_robot, robot_file

    source = robot_file(resolve_robot(get_task(task_id).env_cfg().robot))  # type: ignore[attr-defined]
    copy = tmp_path / "go1"
    shutil.copytree(source.parent, copy)
    text = (copy / source.name).read_text()
    actuator = re.search(r'\s*<position[^>]*joint="FR_calf_joint"[^>]*/>', text)
    assert actuator is not None
    text = text.replace(actuator.group(0), "")
    text = re.sub(r'(<key name="home"[^>]*ctrl=")0 0\.9 -1\.8 ', r"\g<1>0 0.9 ", text)  # FR_calf's target gone
    (copy / source.name).write_text(text)
    env = make_loco_env(task_id, num_envs=4, robot=str(copy / source.name))
    m = env.sim.mj_model
    assert m.nu == 11
    joint = m.joint("FR_calf_joint")
    home = float(m.key("home").qpos[joint.qposadr[0]])
    torch.testing.assert_close(env.sim.qpos[:, joint.qposadr[0]], torch.full((4,), home))


@pytest.mark.parametrize("task_id", ["go1-velocity-flat", "unitree-go1-velocity-flat", "unitree-g1-velocity-flat"])
def test_the_robot_stands_on_its_servos_with_actions_of_zero(task_id: str) -> None:
    """An action of zero holds the standing pose for a second (a robot whose servos cannot carry it falls within half
    of one, and no policy learns to walk; the G1 left alone tips over after two or more)."""
    if (reason := missing_files(task_id)) is not None:
        pytest.skip(reason)
    env = make_loco_env(task_id, num_envs=4)
    task = _task(env)
    env.reset_all()
    standing = task.base_height.clone()
    for _ in range(50):
        _, _, dones, _ = env.step(torch.zeros(4, env.num_actions))
        assert not dones.any()
    assert torch.all(task.base_height > 0.8 * standing)


def test_pushes_kick_the_base() -> None:
    randomization = RandomizationConfig(push_interval_s=(0.04, 0.04), push_velocity=1.0)
    env = make_loco_env("go1-velocity-flat", num_envs=8, randomization=randomization)
    env.step(torch.zeros(8, env.num_actions))
    before = env.sim.qvel[:, :2].clone()
    task = _task(env)
    task.pushes.step(env.sim.qvel)  # the second 0.02 s tick is due
    assert torch.all((env.sim.qvel[:, :2] - before).abs().amax(dim=-1) > 0.0)
    assert torch.all((env.sim.qvel[:, :2] - before).abs() <= 1.0)


# --- statistics and success --------------------------------------------------------------------------------------
def test_success_needs_time_out_and_good_tracking() -> None:
    env = make_loco_env("go1-velocity-flat", num_envs=4, episode_length_s=0.1)
    task = _task(env)
    for _ in range(5):
        _, _, dones, extras = env.step(torch.zeros(4, env.num_actions))
    assert torch.all(dones) and torch.all(extras["time_outs"])
    values = extras["episodes"][1]
    errors = values["Metrics/lin_vel_error"]
    torch.testing.assert_close(values["Episode/success"], (errors < 0.25).float())
    # The rule itself, on hand-set sums: 4 steps with errors 0.1 (good) and 0.5 (bad), timed out or not.
    task._steps[:] = 4.0
    task._lin_err_sum[:] = torch.tensor([0.4, 2.0, 0.4, 2.0])
    ids = torch.arange(4)
    got = task.success(env, ids, torch.tensor([True, True, False, False]))
    assert got.tolist() == [True, False, False, False]


# --- training ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_go1_flat_training_improves_the_return() -> None:
    """256 CPU environments, 25 PPO iterations: ~1 min on 2 idle cores (2-2.5 min when busy), kernels cached.

    The untrained policy falls in most episodes; within 25 iterations it learns to stay up for the whole (5 s)
    episode, so falls become rare and the return rises (tracking itself takes longer to learn).
    """
    spec = get_task("go1-velocity-flat")
    # The CPU's defaults (a CPU runs this test): their smaller networks update in a fraction of the GPU's time.
    env_cfg = dataclasses.replace(spec.env_defaults(True), num_envs=256, episode_length_s=5.0)
    # No evaluation environments: they would add a quarter to the physics, and the training episodes are what is read.
    agent = dataclasses.replace(spec.agent_defaults(True), max_iterations=25, eval_envs=0)
    cfg = TrainConfig(env=env_cfg, agent=agent, task=spec.id, seed=1)
    start = time.perf_counter()
    result = train_worker(cfg, run_dir=None, ctx=DistributedContext(device="cpu"))
    elapsed = time.perf_counter() - start
    # Iteration 1 only sees episodes cut short by the random start times; compare iterations 2-6 with the last 5.
    records = [r.episode for r in result.records[1:] if "Episode/return" in r.episode]
    assert len(records) >= 20

    def mean(key: str, part: list[dict[str, float]]) -> float:
        return float(np.mean([e[key] for e in part]))

    early, late = records[:5], records[-5:]
    summary = (
        f"return {mean('Episode/return', early):.2f} -> {mean('Episode/return', late):.2f}, falls "
        f"{mean('Episode_Termination/fall', early):.2f} -> {mean('Episode_Termination/fall', late):.2f} "
        f"in {elapsed:.0f} s"
    )
    assert mean("Episode/return", late) > mean("Episode/return", early) + 0.5, summary
    assert mean("Episode_Termination/fall", late) < mean("Episode_Termination/fall", early) - 0.3, summary
    assert mean("Episode/length", late) > mean("Episode/length", early), summary


def test_curriculum_levels_survive_a_checkpoint_round_trip() -> None:
    first, second = make_env("go1-velocity-rough", num_envs=8), make_env("go1-velocity-rough", num_envs=8)
    first.task.curriculum.levels[:] = torch.arange(8) % first.task.curriculum.num_levels
    second.task.load_state_dict(first.task.state_dict())
    assert torch.equal(second.task.curriculum.levels, first.task.curriculum.levels)


def test_an_arm_pressing_on_the_torso_is_not_the_torso_on_the_ground() -> None:
    """Contact zones measure contacts with the ground only. Menagerie's G1 keeps its self-collisions: with the
    shoulders rolled inwards its arms press on its torso, which once ended every such episode by ``base_contact``;
    the feet still carry its weight."""
    task_id = "unitree-g1-velocity-flat"
    if (reason := missing_files(task_id)) is not None:
        pytest.skip(reason)
    env = make_loco_env(task_id, num_envs=2)
    task = _task(env)
    env.reset_all()
    m = env.sim.mj_model
    actions = torch.zeros(2, env.num_actions)
    for side, inwards in (("left", -0.7), ("right", 0.7)):  # radians past the home pose's roll
        i = int(m.actuator(f"{side}_shoulder_roll").id)
        actions[:, i] = inwards / float(task.action_scale[i])
    torso, arms = int(m.body("torso_link").id), {int(m.body(f"{s}_elbow_link").id) for s in ("left", "right")}
    pressed = 0
    for _ in range(10):
        _, _, dones, _ = env.step(actions)
        assert not dones.any() and not task.terminal_contact.any()
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = env.sim.qpos[0].numpy(), env.sim.qvel[0].numpy()
        mujoco.mj_forward(m, d)
        bodies = [{int(m.geom_bodyid[c.geom1]), int(m.geom_bodyid[c.geom2])} for c in d.contact[: d.ncon]]
        pressed += any(torso in pair and pair & arms for pair in bodies)
    assert pressed >= 5, "the arms never pressed on the torso: the test would prove nothing"
    assert task.feet_contact.all()  # it still stands on both feet


def test_standing_feet_touch_the_ground_alike_on_both_backends() -> None:
    touching = []
    for backend in ("warp", "mujoco"):
        env = make_loco_env("go1-velocity-flat", num_envs=2, sim=SimConfig(backend=backend, decimation=4))
        task = _task(env)
        for _ in range(25):
            env.step(torch.zeros(2, env.num_actions))
        zones = task._zone_contacts(env.sim.sensordata)
        assert not zones[:, task._undesired_touch].any() and not zones[:, task._terminal_touch].any()
        touching.append(zones[:, task._feet_touch])
    assert touching[0].all() and torch.equal(touching[0], touching[1])


def test_a_zone_of_some_of_its_bodys_geoms_touches_when_any_of_them_does() -> None:
    """Menagerie's Go1 calf zone is two of its body's three collision geoms (the third is the foot): one contact
    sensor per geom, their counts of found contacts added; the zone touches the ground where one found a contact and
    its touch sensor reads more than the threshold."""
    if (reason := missing_files("unitree-go1-velocity-flat")) is not None:
        pytest.skip(reason)
    m = build_model(UNITREE_GO1, None)
    calf = zone_sensors(m, "FR_calf")
    assert len(calf) == 2 and zone_sensors(m, "FR_foot") == [int(m.sensor("ground_FR_foot").id)]
    assert {int(m.sensor_objtype[s]) for s in calf} == {int(mujoco.mjtObj.mjOBJ_GEOM)}
    reader = ZoneContacts(m, UNITREE_GO1, 1.0, torch.device("cpu"))
    sensordata = torch.zeros(3, m.nsensordata)
    sensordata[1, int(m.sensor_adr[calf[1]])] = 2.0  # the calf's second geom finds two contacts in world 1
    sensordata[:2, int(m.sensor("touch_FR_calf").adr[0])] = 5.0  # pressed in worlds 0 (by itself: no ground) and 1
    zones = reader(sensordata)
    column = UNITREE_GO1.watched().index("FR_calf")
    assert zones.shape == (3, len(UNITREE_GO1.watched()))
    assert zones[1, column] and int(zones.sum()) == 1


def test_a_robot_without_undesired_contacts_or_deviation_joints_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    """The robot guide allows both to be `()`; an empty index list became a float tensor, and the first step failed in
    an IndexError traceback (with the run directory left behind)."""
    from mjfleet.tasks.locomotion import sources
    from mjfleet.tasks.locomotion.presets import go1_flat_config

    bare = dataclasses.replace(GO1, name="go1_bare", undesired_contacts=(), deviation_joints=())
    monkeypatch.setattr(sources, "all_robots", lambda: {"go1_bare": bare})
    cfg = dataclasses.replace(go1_flat_config(), robot="go1_bare", num_envs=4)
    cfg.rewards = dataclasses.replace(cfg.rewards, undesired_contacts=-1.0, joint_deviation=-0.1)
    env = MjEnv(LocomotionTask(cfg), device="cpu", seed=0)
    for _ in range(2):
        env.step(torch.zeros(4, env.num_actions))
    assert env.reward_terms["undesired_contacts"].abs().sum() == 0.0
    assert env.reward_terms["joint_deviation"].abs().sum() == 0.0

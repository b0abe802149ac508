# pyright: reportAttributeAccessIssue=false
"""The G1 tracking task with real physics on Menagerie's G1 (its files under MENAGERIE_ROOT, as CI builds them): the
reference replayed open-loop is the motion file, servo targets copied from the reference follow it, episodes start
where the adaptive sampling says, and a bad motion file is one line before anything is created."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mjfleet.cli import train
from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.tasks.registry import get_task
from mjfleet.tasks.tracking.config import SHIPPED_MOTION, TrackingConfig
from mjfleet.tasks.tracking.task import TrackingTask

from .helpers import missing_files, run_main

TASK = "unitree-g1-tracking"
needs_g1 = pytest.mark.skipif(missing_files(TASK) is not None, reason=str(missing_files(TASK)))


def _env(num_envs: int = 4, **overrides: object) -> MjEnv:
    cfg = dataclasses.replace(get_task(TASK).env_cfg(), num_envs=num_envs, **overrides)
    assert isinstance(cfg, TrackingConfig)
    return MjEnv(TrackingTask(cfg), seed=0)


def _tally(num_envs: int, failed_bin: int, share: float) -> TrackingTask:
    """A task whose adaptive sampling counted ``share`` failures in ``failed_bin`` and none elsewhere."""
    task = _env(num_envs=num_envs).task
    assert isinstance(task, TrackingTask)
    task.starts.failures.zero_()
    task.starts.failures[failed_bin] = share
    return task


@needs_g1
def test_the_reference_replayed_open_loop_is_the_motion_file() -> None:
    env = _env(num_envs=1, sampling="start")
    task = env.task
    assert isinstance(task, TrackingTask)
    rows = np.loadtxt(SHIPPED_MOTION, delimiter=",")
    ref, sim = task.reference, env.sim
    assert ref.frames == round((rows.shape[0] - 1) / 30 / env.step_dt) + 1  # 30 fps resampled to the control rate
    for frame, row in ((0, 0), (50, 30), (ref.frames - 1, rows.shape[0] - 1)):  # frames both rates share
        assert np.allclose(ref.root_pos[frame].numpy(), rows[row, :3], atol=1e-5)
        assert np.allclose(ref.root_quat[frame].numpy(), rows[row, [6, 3, 4, 5]], atol=1e-5)
        assert np.allclose(ref.joint_pos[frame].numpy(), rows[row, 7:], atol=1e-5)
        sim.qpos[0, :3], sim.qpos[0, 3:7] = ref.root_pos[frame], ref.root_quat[frame]
        sim.qpos[0, task._qpos_idx] = ref.joint_pos[frame][task._actuated]
        sim.forward()
        assert torch.allclose(sim.xpos[0, task._bodies], ref.body_pos[frame], atol=1e-5)


def _clean(**overrides: object) -> dict[str, object]:
    """Episodes from the motion's first frame without start noise."""
    noise = dict(start_pos_noise=0.0, start_yaw_noise=0.0, start_joint_noise=0.0, start_velocity_noise=0.0)
    return {"sampling": "start", **noise, **overrides}


@needs_g1
def test_an_action_of_zero_follows_the_reference() -> None:
    """Actions are offsets from the reference's joint angles: a policy of zeros sets the servo targets to the motion's
    and follows its first second (the arm waving) without a termination, its bodies within centimetres of the
    reference (the servos lag the faster waves by a few tenths of a radian)."""
    env = _env(num_envs=2, **_clean())
    task = env.task
    assert isinstance(task, TrackingTask)
    env.reset_all()
    for _ in range(50):
        _, _, dones, _ = env.step(torch.zeros(2, env.num_actions))
        assert not dones.any()
    metrics = {k: float(v.mean()) / float(task._steps.mean()) for k, v in task._errors.items()}
    assert metrics["body_pos_error"] < 0.08 and metrics["body_ori_error"] < 0.2, metrics


@needs_g1
def test_randomization_draws_each_worlds_friction_and_pushes_the_pelvis() -> None:
    """``--env.randomization`` works as for the velocity tasks: every geom of a world gets that world's friction, and
    a push adds up to ``push-velocity`` to the pelvis's horizontal velocity; off (the default), the friction is the
    file's and nothing pushes."""
    from mjfleet.tasks.locomotion.config import RandomizationConfig

    plain = _env(num_envs=2, **_clean())
    assert isinstance(plain.task, TrackingTask) and plain.task.pushes is None
    file_friction = torch.as_tensor(plain.sim.mj_model.geom_friction[:, 0], dtype=torch.float32)
    assert torch.equal(plain.sim.model_field("geom_friction")[:, :, 0], file_friction.expand(2, -1))

    randomization = RandomizationConfig(friction=(0.3, 1.2), push_interval_s=(0.02, 0.02), push_velocity=0.5)
    env = _env(num_envs=64, **_clean(randomization=randomization))
    task = env.task
    assert isinstance(task, TrackingTask)
    friction = env.sim.model_field("geom_friction")[:, :, 0]
    assert torch.equal(friction, friction[:, :1].expand_as(friction))  # one value per world
    assert float(friction.min()) >= 0.3 and float(friction.max()) <= 1.2 and float(friction.std()) > 0.1
    env.reset_all()
    env.step(torch.zeros(64, env.num_actions))
    before = env.sim.qvel[:, :2].clone()
    task.after_step(env)  # every timer (one step long) is due: each world's pelvis is pushed
    kick = env.sim.qvel[:, :2] - before
    assert float(kick.abs().max()) <= 0.5 and float(kick.abs().mean()) > 0.1


@needs_g1
def test_the_pelvis_centre_of_mass_and_the_encoders_are_drawn_per_world() -> None:
    """mjlab's other two randomizations: the pelvis's centre of mass moves within its ranges, and a biased encoder
    shows the policy each angle plus its bias while the servo aims at the policy's target minus it."""
    from mjfleet.tasks.locomotion.config import RandomizationConfig

    randomization = RandomizationConfig(com_offset=(0.025, 0.05, 0.05), encoder_bias=(-0.01, 0.01))
    env = _env(num_envs=8, **_clean(randomization=randomization))
    task, sim = env.task, env.sim
    assert isinstance(task, TrackingTask)
    pelvis = task._root_body
    nominal = torch.as_tensor(sim.mj_model.body_ipos[pelvis], dtype=torch.float32)
    offset = sim.model_field("body_ipos")[:, pelvis] - nominal
    assert torch.all(offset.abs() <= torch.tensor([0.025, 0.05, 0.05]) + 1e-6) and float(offset.std()) > 0.005
    env.reset_all()
    bias = task.randomizer.encoder_bias
    assert bias.shape == (8, env.num_actions) and float(bias.abs().max()) <= 0.01
    targets = task.joint_targets_at_zero().clone()
    obs, _, _, _ = env.step(torch.zeros(8, env.num_actions))
    torch.testing.assert_close(sim.ctrl, targets - bias)
    nu = env.num_actions
    angles = obs["policy"][:, 2 * nu + 15 : 3 * nu + 15]  # after the reference's angles and speeds and the anchor
    torch.testing.assert_close(angles, sim.qpos[:, task._qpos_idx] - task.default_joint_pos + bias)
    critic = obs["critic"][:, 2 * nu + 15 : 3 * nu + 15]  # the privileged view: the joints as they are
    torch.testing.assert_close(critic, sim.qpos[:, task._qpos_idx] - task.default_joint_pos)


@needs_g1
def test_the_self_collision_cost_counts_the_robot_pressing_on_itself() -> None:
    """mjlab's self-collision term: off by default (no sensor, nothing computed); weighted, a contact sensor of the
    pelvis's subtree against itself reads nothing while the G1 stands and a strong contact when its legs cross."""
    from mjfleet.tasks.locomotion.model import SELF_CONTACT_SENSOR
    from mjfleet.tasks.tracking.config import TrackingRewards

    plain = _env(num_envs=1, **_clean())
    sensors = [plain.sim.mj_model.sensor(i).name for i in range(plain.sim.mj_model.nsensor)]
    assert SELF_CONTACT_SENSOR not in sensors and "self_collisions" not in plain.reward_weights

    env = _env(num_envs=2, **_clean(rewards=TrackingRewards(self_collisions=-10.0)))
    task, sim, m = env.task, env.sim, env.sim.mj_model
    assert isinstance(task, TrackingTask) and env.reward_weights["self_collisions"] == -10.0
    env.reset_all()
    env.step(torch.zeros(2, env.num_actions))
    assert task.reward_self_collisions(env).tolist() == [0.0, 0.0]  # standing on the motion's first frame
    qpos = sim.qpos.clone()
    for joint, roll in (("left_hip_roll_joint", -0.5), ("right_hip_roll_joint", 0.5)):  # the legs cross
        qpos[:, int(m.jnt_qposadr[m.joint(joint).id])] = roll
    sim.qpos[:] = qpos
    sim.ctrl[:] = qpos[:, m.jnt_qposadr[m.actuator_trnid[:, 0]]]
    sim.forward()
    sim.step()
    assert task.reward_self_collisions(env).tolist() == [1.0, 1.0]


@needs_g1
@pytest.mark.parametrize("drift", [0.0, 0.5])
def test_on_a_fixed_base_copying_the_reference_tracks_the_whole_motion(drift: float) -> None:
    """The root held on the reference's (a fixed-base G1 moved along the motion's root path): the policy of zeros,
    which copies the reference's joint targets, plays the motion to its end as a success with a near-zero error, on
    the model's physics as judged episodes run it (the CPU's training takes twice its timestep). Held ``drift``
    metres beside the path, the body errors (relative to the anchor) stay as small; the anchor's in the world say it."""
    cfg = dataclasses.replace(get_task(TASK).env_cfg(), num_envs=1, **_clean()).as_judged()
    env = MjEnv(TrackingTask(cfg), seed=0)
    task = env.task
    assert isinstance(task, TrackingTask)
    env.reset_all()
    ref, sim = task.reference, env.sim
    extras: dict[str, Any] = {}
    for step in range(ref.frames - 1):
        frame = task.frame.clone()
        sim.qpos[:, 0:3], sim.qpos[:, 3:7] = ref.root_pos[frame], ref.root_quat[frame]
        sim.qpos[:, 1] += drift
        sim.qvel[:, 0:6] = 0.0
        sim.forward()
        _, _, dones, extras = env.step(torch.zeros(1, env.num_actions))
        if step < ref.frames - 2:
            assert not dones.any(), step
    _, episode = extras["episodes"]
    assert float(episode["Episode/success"][0]) == 1.0
    assert float(episode["Episode_Termination/motion_end"][0]) == 1.0
    errors = {k: float(episode[f"Metrics/{k}"][0]) for k in task.metric_names()}
    assert errors["body_pos_error"] < 0.02 and errors["joint_pos_error"] < 0.1, errors
    assert abs(errors["anchor_pos_error"] - drift) < 0.02 and errors["anchor_ori_error"] < 0.05, errors


def test_adaptive_sampling_bins_are_as_docs_tracking_md_counts_them() -> None:
    """ceil(frames x control step) bins of equal length, each under a second: not one per second of the motion."""
    from mjfleet.tasks.tracking.sampling import StartSampler

    def bins(seconds: float) -> tuple[int, float]:
        frames = round(seconds * 50) + 1  # the motion resampled to 50 Hz, both ends kept
        sampler = StartSampler("adaptive", frames, 0.02, 0.1, 0.001, torch.device("cpu"), torch.Generator())
        return sampler.bins, seconds / sampler.bins

    assert bins(4.0) == (5, 0.8)
    assert bins(6.0)[0] == 7  # the shipped motion's: the count its training and benchmarks ran with
    assert bins(3.98)[0] == 4  # 200 frames: mjlab's floor(200 x 0.02) + 1 has 5
    assert len(SHIPPED_MOTION.read_text().splitlines()) == 181  # 6 s at 30 frames per second


@needs_g1
def test_adaptive_sampling_starts_more_episodes_where_they_failed() -> None:
    task = _tally(8, 3, 0.5)  # every failure in the motion's fourth second
    frames = task.starts.draw(6000)
    shares = torch.bincount(task.starts.bin_of(frames), minlength=task.starts.bins).float() / frames.numel()
    even = task.cfg.adaptive_uniform / task.starts.bins
    assert abs(float(shares[3]) - (1 - task.cfg.adaptive_uniform + even)) < 0.02, shares
    # Every other second keeps its even share of the starts, however the failures are counted: none is forgotten.
    assert all(abs(float(shares[b]) - even) < 0.01 for b in range(task.starts.bins) if b != 3), shares
    assert int(frames.max()) < task.reference.frames - 1


@needs_g1
def test_the_failure_tally_is_a_running_average_of_each_batch_of_ended_episodes() -> None:
    env = _env(num_envs=8, adaptive_decay=0.01)
    task = env.task
    assert isinstance(task, TrackingTask)
    task.starts.failures.zero_()
    task.frame[:] = 0  # every episode ends in the motion's first second, half of them by a termination
    env.terminated[:] = torch.arange(8) % 2 == 0
    ids = torch.arange(8, device=env.device)
    for _ in range(1000):
        task.starts.count(task.frame[ids], env.terminated[ids])
    assert abs(float(task.starts.failures[0]) - 4.0) < 0.25 and float(task.starts.failures[1:].abs().sum()) == 0.0
    # A step that ended no training episode (evaluation rows alone, on a GPU) is no batch: the tally stays.
    before = task.starts.failures.clone()
    none = ids[:0]
    task.starts.count(task.frame[none], env.terminated[none])
    assert torch.equal(task.starts.failures, before)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--env.body-pos-std", "0"], "--env.body-pos-std must be above 0"),
        (["--env.anchor-height-limit", "-0.1"], "--env.anchor-height-limit must be above 0"),
        (["--env.randomization.friction", "-1", "-0.5"], "--env.randomization.friction -1 -0.5: must be above 0"),
    ],
)
def test_tracking_settings_out_of_range_are_one_line_errors_before_the_run(
    flags: list[str], says: str, tmp_path: Path
) -> None:
    from .helpers import refused_train

    assert says in refused_train([TASK, "--gpu-ids", "None", *flags], tmp_path / "logs")


@needs_g1
def test_a_restart_mid_episode_counts_no_failure() -> None:
    """A check of the policy restarts every episode mid-way (``reset_all``): the tally learns nothing from it."""
    task = _tally(8, 2, 0.75)
    env = _env(num_envs=8)
    fresh = env.task
    assert isinstance(fresh, TrackingTask)
    fresh.load_state_dict(task.state_dict())
    env.terminated[:] = True  # the last step's flags, of episodes that already reset
    env.reset_all()
    assert torch.equal(fresh.starts.failures, task.starts.failures)


@needs_g1
def test_observation_noise_is_mjlabs_on_the_policys_robot_terms_and_off_by_default() -> None:
    from mjfleet.tasks.tracking.config import TrackingNoise

    clean = _env(num_envs=64).get_observations()
    assert torch.equal(clean["policy"], clean["critic"][:, : clean["policy"].shape[1]])
    env = _env(num_envs=64, noise=TrackingNoise(scale=1.0))
    task = env.task
    assert isinstance(task, TrackingTask)
    obs = env.get_observations()
    width = obs["policy"].shape[1]
    error = (obs["policy"] - obs["critic"][:, :width]).abs().amax(dim=0)  # the critic reads clean values
    nu = len(task._actuated)
    expected = [0.0] * (2 * nu) + [0.25] * 3 + [0.05] * 6 + [0.5] * 3 + [0.2] * 3 + [0.01] * nu + [0.5] * nu
    expected += [0.0] * nu
    amplitude = torch.tensor(expected)
    assert torch.all(error <= amplitude + 1e-5)
    assert torch.all(error[amplitude > 0] > 0.8 * amplitude[amplitude > 0])  # 64 draws reach near the amplitude


@needs_g1
def test_a_continued_run_keeps_the_failure_tally_of_the_run_it_continues() -> None:
    task = _tally(8, 2, 0.75)
    saved = task.state_dict()
    fresh = _env(num_envs=4).task  # another number of environments: the tally is per second of the motion
    assert isinstance(fresh, TrackingTask)
    fresh.load_state_dict(saved)
    assert torch.equal(fresh.starts.failures, task.starts.failures)
    fresh.load_state_dict({"failures": torch.ones(task.starts.bins + 1)})  # another motion's bins: left as it was
    assert torch.equal(fresh.starts.failures, task.starts.failures)
    other = {"failures": torch.ones(task.starts.bins), "motion_sha256": "0" * 64}  # another motion with as many bins
    fresh.load_state_dict(other)
    assert torch.equal(fresh.starts.failures, task.starts.failures)


@needs_g1
def test_play_judges_from_the_motions_start_each_episode_from_a_slightly_different_pose() -> None:
    """The judged episodes start at the first frame on the reference's root pose, their joints within the training's
    joint noise (as mjlab's play starts them): a hundred of them are a hundred different starts, not one replayed."""
    judged = get_task(TASK).env_cfg().as_judged()
    assert isinstance(judged, TrackingConfig)
    assert judged.sampling == "start" and judged.start_joint_noise > 0
    assert judged.start_pos_noise == judged.start_yaw_noise == judged.start_velocity_noise == 0.0
    env = MjEnv(TrackingTask(dataclasses.replace(judged, num_envs=3)), seed=0)
    task = env.task
    assert isinstance(task, TrackingTask)
    env.reset_all()
    assert task.frame.tolist() == [0, 0, 0]
    joints = env.sim.qpos[:, task._qpos_idx]
    assert not torch.allclose(joints[0], joints[1]) and not torch.allclose(joints[1], joints[2])


@needs_g1
def test_evaluation_rows_of_the_training_simulation_start_as_play_and_leave_the_tally_alone() -> None:
    """Where the evaluation steps inside the training simulation (on a GPU), its rows start at the first frame on
    the reference's root, as play's do, however adaptive sampling would start them, and their failures are not
    counted as training's."""
    env = _env(num_envs=8)
    task = env.task
    assert isinstance(task, TrackingTask)
    env.split_evaluation(4)
    task.starts.failures.zero_()
    task.frame[:] = 30  # every episode ends in the motion's second second, the evaluation's by a termination
    env.terminated[:] = torch.arange(8) >= 4
    env._reset_envs(torch.arange(8, device=env.device))
    assert float(task.starts.failures.abs().sum()) == 0.0
    assert task.frame[4:].tolist() == [0, 0, 0, 0] and bool((task.frame[:4] > 0).any())
    ref = task.reference
    torch.testing.assert_close(env.sim.qpos[4:, 0:3], ref.root_pos[0].expand(4, -1))
    torch.testing.assert_close(env.sim.qpos[4:, 3:7], ref.root_quat[0].expand(4, -1))
    joints = env.sim.qpos[4:, task._qpos_idx]
    assert not torch.allclose(joints[0], joints[1])  # the joint noise play starts with


@needs_g1
@pytest.mark.parametrize(
    ("content", "words"),
    [("1,2,3\n4,5,6\n", "3 columns"), ("", "no such"), ("a,b\n", "not numbers separated by commas")],
)
def test_a_bad_motion_file_is_one_line_and_creates_nothing(content: str, words: str, tmp_path: Path) -> None:
    motion = tmp_path / "bad.csv"
    if content:
        motion.write_text(content)
    else:
        motion, words = tmp_path / "missing.csv", "does not exist"
    argv = [TASK, "--gpu-ids", "None", "--env.motion", str(motion), "--log-root", str(tmp_path / "logs")]
    code, _, err = run_main(train.main, argv)
    assert code == 2, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert str(motion) in line and words in line and "Traceback" not in err
    assert not (tmp_path / "logs").exists()


@needs_g1
def test_the_shipped_motion_turned_to_90_degrees_and_written_w_first_is_one_line(tmp_path: Path) -> None:
    """Only a root upside down most of the time was told: at 90 degrees the swap lay the robot on its side."""
    rows = np.loadtxt(SHIPPED_MOTION, delimiter=",", ndmin=2)
    yaw = np.full(len(rows), np.pi / 2)
    rows[:, 3:7] = np.stack((np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)), axis=1)  # w, x, y, z
    motion = tmp_path / "w_first.csv"
    np.savetxt(motion, rows, delimiter=",")
    cfg = get_task(TASK).env_cfg()
    assert isinstance(cfg, TrackingConfig)
    with pytest.raises(UsageError, match=r"w_first.csv: .*upright throughout read as quaternions w, x, y, z"):
        dataclasses.replace(cfg, motion=str(motion)).prepare_assets()  # train's check, before anything is created


@needs_g1
@pytest.mark.parametrize(("flag", "value"), [("--env.adaptive-uniform", "1.5"), ("--env.adaptive-decay", "0")])
def test_a_sampling_setting_out_of_its_range_is_one_line(flag: str, value: str, tmp_path: Path) -> None:
    argv = [TASK, "--gpu-ids", "None", flag, value, "--log-root", str(tmp_path / "logs")]
    code, _, err = run_main(train.main, argv)
    assert code == 2, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert flag in line and value in line and "Traceback" not in err
    assert not (tmp_path / "logs").exists()


@needs_g1
def test_a_self_collision_cost_without_self_collisions_is_one_line(tmp_path: Path) -> None:
    """The cost would read 0 on every step: the contact model without self-collisions makes nothing for it to sense."""
    argv = [TASK, "--gpu-ids", "None", "--env.rewards.self-collisions", "-10"]
    argv += ["--env.sim.training-contacts.no-self-collisions", "--log-root", str(tmp_path / "logs")]
    code, _, err = run_main(train.main, argv)
    assert code == 2, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "--env.rewards.self-collisions" in line and "no-self-collisions" in line and "Traceback" not in err
    assert not (tmp_path / "logs").exists()


@needs_g1
def test_a_run_records_its_motion_and_another_motion_is_another_run(tmp_path: Path) -> None:
    from mjfleet.config_io import plain
    from mjfleet.runs.fingerprint import fingerprint

    from .helpers import small_train_config

    cfg = small_train_config(TASK, num_envs=4, iterations=1, steps=4)
    assert SHIPPED_MOTION in cfg.env.model_files()  # its digest goes into params/model_files.yaml
    other = tmp_path / "other.csv"
    other.write_bytes(SHIPPED_MOTION.read_bytes())
    moved = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, motion=str(other)))
    assert fingerprint(plain(dataclasses.asdict(cfg))) != fingerprint(plain(dataclasses.asdict(moved)))


def test_the_shipped_motion_is_small_and_of_the_g1s_joints() -> None:
    rows = np.loadtxt(SHIPPED_MOTION, delimiter=",")
    assert rows.shape[1] == 7 + 29 and rows.shape[0] >= 30 and SHIPPED_MOTION.stat().st_size < 200_000
    quats = rows[:, 3:7]
    assert np.allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-4)


@needs_g1
def test_the_onnx_sidecar_says_how_actions_become_targets_and_which_motion() -> None:
    from types import SimpleNamespace

    from mjfleet.rl.checkpoint.onnx import policy_metadata

    env = _env(num_envs=2)
    task = env.task
    assert isinstance(task, TrackingTask)
    actor = SimpleNamespace(
        obs_groups=["policy"], obs_dim=env.get_observations()["policy"].shape[-1], obs_normalization=True
    )
    meta = policy_metadata(env, actor, iteration=3)  # pyright: ignore[reportArgumentType]
    assert meta["joint_targets"].startswith("the motion's angles of joint_names at frame + 1")
    assert meta["motion"] == {
        "file": SHIPPED_MOTION.name,
        "sha256": task.motion.sha256,
        "frames": task.reference.frames,
        "frame_dt": env.step_dt,
    }
    assert len(meta["joint_names"]) == env.num_actions == 29
    # What a control loop builds the observation and drives the servos with.
    assert meta["anchor_body"] == "torso_link" and meta["tracked_bodies"] == list(task.cfg.bodies)
    terms = meta["observation_terms"]["policy"]
    assert sum(t["size"] for t in terms) == actor.obs_dim == meta["inputs"][0]["shape"][1]
    assert [t["name"] for t in terms][:2] == ["reference_joint_pos", "reference_joint_vel"]
    assert [t["name"] for t in terms][-1] == "actions"
    env.step(torch.full((2, env.num_actions), 0.3))
    obs, at = env.get_observations()["policy"], 0
    columns = {}
    for term in terms:
        columns[term["name"]], at = obs[:, at : at + term["size"]], at + term["size"]
    qpos = env.sim.qpos[:, task._qpos_idx] - task.default_joint_pos
    torch.testing.assert_close(columns["joint_pos"], qpos)
    torch.testing.assert_close(columns["joint_vel"], env.sim.qvel[:, task._qvel_idx])
    torch.testing.assert_close(columns["actions"], env.actions)
    model = env.sim.mj_model
    gains = meta["servo_gains"]
    assert len(gains["kp"]) == len(gains["kd"]) == env.num_actions
    assert np.allclose(gains["kp"], model.actuator_gainprm[:, 0]) and min(gains["kp"]) > 0
    assert np.allclose(gains["kd"], -model.actuator_biasprm[:, 2]) and min(gains["kd"]) > 0
    assert np.allclose(gains["kp"], -model.actuator_biasprm[:, 1])  # position servos
    json.dumps(meta)  # the sidecar is JSON


@needs_g1
def test_the_exported_graph_reads_the_motion_at_the_frame_the_control_loop_counts(tmp_path: Path) -> None:
    """The ONNX policy takes the frame as its second input and carries the motion: it outputs the reference terms
    the observation starts with, the anchor's reference pose and the servo targets, as the task computes them."""
    import onnxruntime as ort

    from mjfleet.errors import UsageError
    from mjfleet.rl.checkpoint.onnx import OnnxPolicy, export_policy, metadata_path, policy_metadata
    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    env = _env(num_envs=3)
    task = env.task
    assert isinstance(task, TrackingTask)
    runner = Runner(env, get_task(TASK).agent_cfg(), DistributedContext(device="cpu"), run_dir=None)
    policy = runner.learner.policy()
    path = export_policy(policy, tmp_path / "model_0.onnx", policy_metadata(env, policy, 0), task.export_tables())
    meta = json.loads(metadata_path(path).read_text())
    assert meta["index_input"] == {"name": "frame", "shape": ["batch"], "type": "int64", "rows": task.reference.frames}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    assert names == ["actions", *[o["name"] for o in meta["table_outputs"]]]
    torch_policy = runner.get_inference_policy("cpu")
    onnx_policy = OnnxPolicy(path, index=lambda: task.export_index(env))
    a = task._anchor
    # docs/onnx.md's recipe: every frame's tables read once, in one call with zeros for obs.
    frames = np.arange(meta["index_input"]["rows"], dtype=np.int64)
    zeros = np.zeros((len(frames), meta["inputs"][0]["shape"][1]), dtype=np.float32)
    table_names = [output["name"] for output in meta["table_outputs"] if output["depends_on"] == ["frame"]]
    assert table_names == [n for n in names[1:] if n != "joint_targets"]  # the servo targets come from each step's obs
    assert next(o for o in meta["table_outputs"] if o["name"] == "joint_targets")["depends_on"] == ["obs", "frame"]
    tables = dict(zip(table_names, session.run(table_names, {"obs": zeros, "frame": frames}), strict=True))
    with torch.inference_mode():
        for _ in range(5):
            obs = env.get_observations()
            frame = task.frame.clone()
            outputs = session.run(None, {"obs": obs["policy"].numpy(), "frame": frame.numpy()})
            got = dict(zip(names, (torch.from_numpy(o) for o in outputs), strict=True))
            actions = torch_policy(obs)
            assert torch.allclose(got["actions"], actions, atol=1e-5)
            assert torch.allclose(onnx_policy(obs), actions, atol=1e-5)
            targets = task.joint_targets_at_zero() + actions * task.action_scale
            assert torch.allclose(got["joint_targets"], targets, atol=1e-5)
            joints = len(task._actuated)
            assert torch.equal(got["reference_joint_pos"], obs["policy"][:, :joints])
            assert torch.equal(got["reference_joint_vel"], obs["policy"][:, joints : 2 * joints])
            read_once = np.concatenate([tables[f"reference_joint_{q}"][frame.numpy()] for q in ("pos", "vel")], -1)
            assert np.array_equal(read_once, obs["policy"][:, : 2 * joints].numpy())
            assert torch.equal(got["reference_anchor_pos"], task.reference.body_pos[frame, a])
            assert torch.equal(got["reference_anchor_quat"], task.reference.body_quat[frame, a])
            env.step(actions)
    policy_obs = env.get_observations()["policy"].numpy()
    beyond = session.run(["reference_joint_pos"], {"obs": policy_obs, "frame": np.array([10**6, 0, -1])})[0]
    assert np.array_equal(np.asarray(beyond)[0], task.reference.joint_pos[-1, task._actuated].numpy())
    with pytest.raises(UsageError, match="'frame'"):
        OnnxPolicy(path)


@needs_g1
def test_a_policy_played_on_another_motion_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Without its run's settings beside it, play runs an ONNX file on the task's defaults: the shipped motion, not the
    one the graph carries, without a word. The graph feeds the policy its own motion, so an ONNX file is refused on
    another one (of the same name too); a checkpoint, whose policy reads the played motion, is warned about."""
    from mjfleet.rl.checkpoint.onnx import export_policy, policy_metadata
    from mjfleet.rl.evaluation.episodes import load_policy
    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    standing = tmp_path / "standing.csv"
    standing.write_text((SHIPPED_MOTION.read_text().splitlines()[0] + "\n") * 60)
    env = _env(num_envs=2, motion=str(standing))
    agent = get_task(TASK).agent_cfg()
    policy = Runner(env, agent, DistributedContext(device="cpu"), run_dir=None).learner.policy()
    path = export_policy(policy, tmp_path / "model_0.onnx", policy_metadata(env, policy, 0), env.task.export_tables())
    with caplog.at_level("WARNING"):
        load_policy(path, env, agent, "cpu")
        assert not caplog.records  # its own motion
    shipped = _env(num_envs=2)
    with pytest.raises(UsageError) as refused:
        load_policy(path, shipped, agent, "cpu")
    line = str(refused.value)
    assert line.startswith(f'{path}: exported with motion {{"file": "standing.csv", "sha256": ') and (
        f'played with {{"file": "{SHIPPED_MOTION.name}"' in line
    ), line
    assert line.endswith("the graph carries the motion it was exported with: play it with that motion (--env.motion"
                         " <its file>), or play the run's .pt checkpoint on this one")  # fmt: skip
    (tmp_path / "other").mkdir()
    edited = tmp_path / "other" / "standing.csv"  # the same name and frames, another pose
    edited.write_text((SHIPPED_MOTION.read_text().splitlines()[90] + "\n") * 60)
    with pytest.raises(UsageError, match="exported with motion"):
        load_policy(path, _env(num_envs=2, motion=str(edited)), agent, "cpu")
    # A checkpoint says it as well: its task state names the motion by its digest.
    (tmp_path / "run").mkdir()
    checkpoint = Runner(env, agent, DistributedContext(device="cpu"), run_dir=tmp_path / "run").save_checkpoint()
    assert checkpoint is not None
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_policy(checkpoint, _env(num_envs=2, motion=str(standing)), agent, "cpu")
        assert not caplog.records
        load_policy(checkpoint, shipped, agent, "cpu")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("the policy trained on another motion (sha256 "), line


@needs_g1
def test_a_checkpoint_played_on_its_own_motion_file_edited_since_says_the_file_changed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """play of a run reads the run's own motion path: told to pass the run's own, the user already had."""
    from mjfleet.rl.evaluation.episodes import load_policy
    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    motion = tmp_path / "standing.csv"
    first = SHIPPED_MOTION.read_text().splitlines()[0]
    motion.write_text((first + "\n") * 60)
    env = _env(num_envs=2, motion=str(motion))
    agent = get_task(TASK).agent_cfg()
    (tmp_path / "run").mkdir()
    checkpoint = Runner(env, agent, DistributedContext(device="cpu"), run_dir=tmp_path / "run").save_checkpoint()
    assert checkpoint is not None
    motion.write_text((first + "\n") * 61)  # a frame more
    with caplog.at_level("WARNING"):
        load_policy(checkpoint, _env(num_envs=2, motion=str(motion)), agent, "cpu")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"the motion file {motion} changed since the policy trained on it (sha256 "), line
    assert "pass the run's own" not in line


@needs_g1
def test_play_says_its_episodes_last_up_to_the_motions_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 2 s motion's episodes end at its last frame: play said "up to 10 s each", the episode length."""
    from mjfleet.cli import play

    motion = tmp_path / "standing.csv"
    motion.write_text((SHIPPED_MOTION.read_text().splitlines()[0] + "\n") * 61)  # 2 s at 30 frames per second
    argv = [TASK, "--agent", "zero", "--num-episodes", "1", "--gpu-ids", "None", "--env.motion", str(motion)]
    play.main(argv)
    said = capsys.readouterr().err.splitlines()
    assert said[0].endswith(
        f"INFO     playing 1 episode of {TASK} (up to 2 s each, 1 environment) with zero actions on cpu"
    )


@needs_g1
def test_videos_draw_the_reference_as_a_ghost_over_the_robot() -> None:
    from mjfleet.render.video import WorldVideo

    env = _env(num_envs=1, **_clean())
    task = env.task
    assert isinstance(task, TrackingTask)
    env.reset_all()
    for _ in range(40):  # the arm waves away from where the robot's lags
        env.step(torch.zeros(1, env.num_actions))
    pose = task.ghost_qpos(env, 0)
    assert pose is not None and pose.shape == (env.sim.mj_model.nq,)
    frame = int(task.frame[0])
    assert np.allclose(pose[:3], task.reference.root_pos[frame].numpy())
    plain, ghosted = WorldVideo(env.sim, 0, None, 96, 128), WorldVideo(env.sim, 0, None, 96, 128, ghost=lambda w: pose)
    plain.capture()
    ghosted.capture()
    plain.close()
    ghosted.close()
    changed = np.abs(ghosted.frames[0].astype(int) - plain.frames[0].astype(int)).sum(-1) > 30
    assert changed.mean() > 0.01  # the ghost covers part of the picture
    tint = ghosted.frames[0][changed].astype(int)
    assert (tint[:, 2] >= tint[:, 0]).mean() > 0.9  # in blue


@needs_g1
def test_the_native_viewer_draws_the_shown_environments_reference_as_a_ghost() -> None:
    """It showed the robot alone: whether it followed the motion could not be seen live."""
    import mujoco

    from mjfleet.render.video import GHOST_RGBA
    from mjfleet.viewer.native import draw_ghost
    from mjfleet.viewer.session import ViewerSession

    env = _env(num_envs=2, **_clean())
    session = ViewerSession(env, lambda obs: torch.zeros(2, env.num_actions))
    for _ in range(5):
        session.tick()
    scene = mujoco.MjvScene(session.model, maxgeom=1000)
    scene.ngeom = 7  # the last frame's ghost: replaced, not added to
    draw_ghost(session, mujoco.MjData(session.model), scene)
    assert scene.ngeom > 10 and all(np.allclose(scene.geoms[i].rgba, GHOST_RGBA) for i in range(scene.ngeom))
    pose = env.task.ghost_qpos(env, session.env_index)
    assert pose is not None
    data = mujoco.MjData(session.model)
    data.qpos[:] = pose
    mujoco.mj_kinematics(session.model, data)
    drawn = np.array([scene.geoms[i].pos for i in range(scene.ngeom)])
    assert np.abs(drawn - data.xpos[1]).min() < 1.0 and np.allclose(drawn.mean(0)[:2], data.xpos[1][:2], atol=0.5)


@needs_g1
def test_the_same_motion_file_with_other_frames_is_another_run(tmp_path: Path) -> None:
    # The path alone was the run's: a motion edited in place continued (or, ended, refused to train) the old run.
    from mjfleet.errors import UsageError
    from mjfleet.train.plan import open_run_dir, plan_run

    from .helpers import small_train_config

    motion = tmp_path / "mine.csv"
    motion.write_bytes(SHIPPED_MOTION.read_bytes())
    cfg = small_train_config(TASK, num_envs=4, iterations=1, steps=4, log_root=tmp_path / "logs", run_id="r1")
    cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, motion=str(motion)))
    run_dir = open_run_dir(plan_run(cfg, {}, None))
    assert plan_run(cfg, {}, None).run_dir == run_dir  # the same file: the same run
    rows = np.loadtxt(motion, delimiter=",")
    rows[:, 9] += 0.05
    np.savetxt(motion, rows, delimiter=",", fmt="%.9f")
    with pytest.raises(
        UsageError, match=r"other settings: the content of --env\.motion \(sha256 [0-9a-f]{12}; the run"
    ):
        plan_run(cfg, {}, None)
    # Finishing it names the file to put back, not flags to leave out (none was given).
    finish = dataclasses.replace(cfg, finish=run_dir, run_id=None)
    with pytest.raises(UsageError, match=r"finishing trains the run as it began \(the files as they were\), --resume"):
        plan_run(finish, {}, None)


@needs_g1
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--env.anchor-body", "foo_link"], "--env.anchor-body: "),
        (["--env.bodies", "pelvis", "left_knee_link"], "--env.anchor-body torso_link: not among --env.bodies"),
        (["--env.end-effectors", "pelvis", "head_link"], "--env.end-effectors: "),
    ],
)
def test_a_body_flag_naming_no_tracked_body_is_one_line(flags: list[str], words: str, tmp_path: Path) -> None:
    from .helpers import refused_train

    assert words in refused_train([TASK, "--gpu-ids", "None", *flags], tmp_path / "logs")


@needs_g1
def test_without_end_effectors_their_termination_is_off() -> None:
    env = _env(num_envs=2, end_effectors=())
    env.step(torch.zeros(2, env.num_actions))
    assert not env.task.terminations(env)["end_effector_height"].any()


@needs_g1
def test_training_episodes_begun_part_way_report_their_success_apart() -> None:
    # Finishing the last second of a motion is not play's success, which follows it from its start.
    from mjfleet.envs.task import PRIVILEGED_SUCCESS

    env = _env(num_envs=8, sampling="uniform")
    task = env.task
    assert isinstance(task, TrackingTask)
    started = task.training_start(env)
    assert started is not None and torch.equal(started, task._start_frame > 0) and started.any()
    task.frame[:] = task.reference.frames - 2  # every episode ends in the next step (the motion's end, or a fall)
    _, _, dones, _ = env.step(torch.zeros(8, env.num_actions))
    assert dones.all()
    means = env.stats.means(env.stats.keys, *env.stats.pop())
    assert PRIVILEGED_SUCCESS in means and ("Episode/success" in means) == bool((~started).any())
    assert _env(num_envs=1, sampling="start").task.training_start(env) is None


@needs_g1
def test_a_motion_longer_than_an_episode_says_what_a_success_judges(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 3-minute dance judged by 10 s episodes: its success and errors were of the first 10 s, unsaid."""
    rows = np.loadtxt(SHIPPED_MOTION, delimiter=",")
    long = tmp_path / "long.csv"
    np.savetxt(long, np.concatenate([rows] * 3), delimiter=",", fmt="%.6f")  # 18.07 s
    cfg = dataclasses.replace(get_task(TASK).env_cfg(), motion=str(long))
    with caplog.at_level("INFO", logger="mjfleet"):
        cfg.prepare_assets()
    assert "the motion lasts 18 s and episodes 10 s: a success is following its first 10 s" in caplog.text
    assert "(--env.episode-length-s 19 to judge it whole)" in caplog.text  # 543 frames at 30 per second
    caplog.clear()
    with caplog.at_level("INFO", logger="mjfleet"):
        dataclasses.replace(cfg, episode_length_s=19.0).prepare_assets()
        get_task(TASK).env_cfg().prepare_assets()  # the shipped motion: 6 s
    assert "the motion lasts" not in caplog.text


@needs_g1
def test_a_motion_fps_given_with_an_npz_motion_says_it_has_no_effect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An npz says its own frame rate: --env.motion-fps was ignored without a word (and made another run)."""
    rows = np.loadtxt(SHIPPED_MOTION, delimiter=",", ndmin=2)
    npz = tmp_path / "motion.npz"
    np.savez(
        npz, fps=[30], joint_pos=rows[:, 7:], body_pos_w=rows[:, None, :3], body_quat_w=rows[:, None, [6, 3, 4, 5]]
    )
    cfg = get_task(TASK).env_cfg()
    assert isinstance(cfg, TrackingConfig)
    with caplog.at_level("WARNING"):
        dataclasses.replace(cfg, motion=str(npz)).prepare_assets()
        dataclasses.replace(cfg, motion_fps=60.0).prepare_assets()  # a CSV's rate
        assert not caplog.records
        dataclasses.replace(cfg, motion=str(npz), motion_fps=60.0).prepare_assets()
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == "--env.motion-fps 60 has no effect with an .npz motion (its fps, 30, is its frame rate)"


@needs_g1
def test_building_the_task_checks_the_motion_on_the_robot_as_train_does(tmp_path: Path) -> None:
    """``play`` and the viewer build the task without train's checks: a motion in degrees played on with a joint
    error of 79 rad, and a CSV frame rate of 0 was a ZeroDivisionError."""
    rows = np.loadtxt(SHIPPED_MOTION, delimiter=",", ndmin=2)
    rows[:, 7:] = np.degrees(rows[:, 7:])
    degrees = tmp_path / "degrees.csv"
    np.savetxt(degrees, rows, delimiter=",")
    cfg = dataclasses.replace(get_task(TASK).env_cfg(), num_envs=2)
    assert isinstance(cfg, TrackingConfig)
    with pytest.raises(UsageError, match=r"degrees.csv: .* beyond its range .*\(the layout's angles are radians\)$"):
        TrackingTask(dataclasses.replace(cfg, motion=str(degrees)))
    with pytest.raises(UsageError, match=r"^--env.motion-fps must be between 1 and 1000 \(got 0\)$"):
        TrackingTask(dataclasses.replace(cfg, motion_fps=0.0))


@needs_g1
def test_without_state_estimation_the_policy_reads_no_anchor_position_nor_base_velocity() -> None:
    """mjlab's No-State-Estimation variant, the one a robot with an IMU and encoders alone deploys: the critic keeps
    every term, the policy drops the two a robot knows only from motion capture or an estimator."""
    from mjfleet.rl.checkpoint.onnx import policy_metadata
    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    full, blind = _env(num_envs=3), _env(num_envs=3, state_estimation=False)
    actions = torch.rand(3, full.num_actions) - 0.5
    for _ in range(3):
        seen, read = full.step(actions)[0], blind.step(actions)[0]
    assert torch.equal(seen["critic"], read["critic"])
    names = [name for name, _, _ in full.task.policy_terms()]  # type: ignore[attr-defined]
    starts = [0, *itertools.accumulate(size for _, size, _ in full.task.policy_terms())]  # type: ignore[attr-defined]
    kept = [
        seen["policy"][:, starts[i] : starts[i + 1]]
        for i, name in enumerate(names)
        if name not in ("reference_anchor_pos_b", "base_lin_vel")
    ]
    assert (
        torch.equal(read["policy"], torch.cat(kept, dim=-1)) and read["policy"].shape[1] == seen["policy"].shape[1] - 6
    )
    policy = Runner(blind, get_task(TASK).agent_cfg(), DistributedContext(device="cpu"), run_dir=None).learner.policy()
    terms = [t["name"] for t in policy_metadata(blind, policy, 0)["observation_terms"]["policy"]]
    assert terms == [n for n in names if n not in ("reference_anchor_pos_b", "base_lin_vel")]


@needs_g1
def test_where_the_adaptive_sampling_starts_is_what_the_task_logs_each_iteration() -> None:
    """mjlab logs its sampler's entropy and favoured bin; here the tally lived in checkpoints alone, so where the
    motion was hard could not be seen (tests/test_progress.py: the runner logs a task's scalars)."""
    task = _tally(num_envs=4, failed_bin=2, share=1.0)
    summary = task.iteration_scalars(None)  # type: ignore[arg-type]  (the sampler's state alone)
    assert summary["sampling_top_bin"] == 2.0
    assert summary["sampling_top_share"] == pytest.approx(0.9 + 0.1 / task.starts.bins)
    assert 0.0 < summary["sampling_entropy"] < 0.5
    task.starts.failures.zero_()
    assert task.starts.summary()["sampling_entropy"] == pytest.approx(1.0)  # no failures yet: evenly


@needs_g1
def test_the_web_viewer_draws_the_reference_as_a_ghost_that_follows_the_shown_environment() -> None:
    import mujoco

    from mjfleet.viewer.web import WebViewer

    env = _env(num_envs=2, **_clean())
    viewer = WebViewer(env, lambda obs: torch.zeros(2, env.num_actions), host="127.0.0.1", port=0, paused=True)
    try:
        scene = viewer.scene
        assert scene._ghost_frames.keys() == set(scene.bodies)
        for index in (0, 1):
            viewer.session.show_env(index)
            for _ in range(3):
                viewer.session.request_step()
                viewer.session.tick()
            scene.draw()
            pose = env.task.ghost_qpos(env, index)
            assert pose is not None
            data = mujoco.MjData(viewer.session.model)
            data.qpos[:] = pose
            mujoco.mj_kinematics(viewer.session.model, data)
            body = scene.bodies[0]
            assert np.allclose(scene._ghost_frames[body].position, data.xpos[body], atol=1e-5)
    finally:
        viewer.close()


def _mjlab_observation(task: TrackingTask, ours: torch.Tensor, last_actions: torch.Tensor) -> np.ndarray:
    """What BeyondMimic's controller feeds mjlab's tracking policies: mjfleet's terms in mjlab's conventions (the
    anchor orientation's columns row by row) and the actions it last sent."""
    from mjfleet.tasks.tracking.mjlab_layout import _columns

    columns = _columns(task)
    obs = ours.clone()
    ori = columns["reference_anchor_ori_b"]
    obs[:, ori] = ours[:, ori][:, [0, 3, 1, 4, 2, 5]]
    obs[:, columns["actions"]] = last_actions
    return obs.numpy()


@needs_g1
@pytest.mark.parametrize(
    "overrides",
    [{}, {"action_offset": "home"}, {"state_estimation": False}],
    ids=["reference-offset", "home-offset", "no-state-estimation"],
)
def test_the_mjlab_layout_export_drives_the_robot_as_the_policy_does_in_an_mjlab_control_loop(
    overrides: dict[str, Any], tmp_path: Path
) -> None:
    """``model_<it>.mjlab.onnx`` run as BeyondMimic's controller runs mjlab's tracking policies (a first call at the
    motion's start for the first observation's reference, then each call's ``time_step`` one frame ahead of its
    observation, whose reference terms are the last call's outputs; servo targets ``default_joint_pos +
    action_scale * actions``; the last ``actions`` fed back) sends the servo targets the policy sends in mjfleet's
    environment."""
    import onnx
    import onnxruntime as ort

    from mjfleet.rl.checkpoint.onnx import load_metadata
    from mjfleet.rl.runner import Runner
    from mjfleet.runtime.context import DistributedContext

    judged = get_task(TASK).env_cfg().as_judged()
    env = MjEnv(TrackingTask(dataclasses.replace(judged, num_envs=1, **overrides)), seed=0)
    task = env.task
    assert isinstance(task, TrackingTask)
    runner = Runner(env, get_task(TASK).agent_cfg(), DistributedContext(device="cpu"), run_dir=tmp_path)
    assert runner.save_checkpoint() is not None  # writes the export beside the checkpoint's own and as the newest
    (layout,) = task.foreign_exports(env)
    path = tmp_path / "model_0.mjlab.onnx"
    assert (tmp_path / "policy.mjlab.onnx").read_bytes() == path.read_bytes()
    with pytest.raises(UsageError, match="in mjlab's layout, for control loops written for mjlab's policies; play"):
        load_metadata(path)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    default = torch.tensor([float(v) for v in props["default_joint_pos"].split(",")])
    scale = torch.tensor([float(v) for v in props["action_scale"].split(",")])
    assert props["joint_names"].split(",") == [task._model.joint(int(j)).name for j in task._model.actuator_trnid[:, 0]]
    names = props["observation_names"].split(",")
    assert names[:2] == ["command", "motion_anchor_pos_b" if task.cfg.state_estimation else "motion_anchor_ori_b"]
    assert len(props["observation_terms_clip"].split(",")) == len(names)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == list(layout.outputs)
    assert [i.shape for i in session.get_inputs()] == [[1, env.get_observations()["policy"].shape[-1]], [1, 1]]
    torch_policy = runner.get_inference_policy("cpu")
    env.reset_all()
    width, nu = env.get_observations()["policy"].shape[-1], env.num_actions
    outputs = session.run(None, {"obs": np.zeros((1, width), np.float32), "time_step": np.zeros((1, 1), np.float32)})
    sent = torch.zeros(1, nu)
    with torch.inference_mode():
        for _ in range(15):
            obs = env.get_observations()
            frame = int(task.frame[0])
            reference = np.concatenate(outputs[1:3], -1)  # the controller's command term: the last call's outputs
            assert np.array_equal(reference, obs["policy"][:, : 2 * nu].numpy())
            feed = {"obs": _mjlab_observation(task, obs["policy"], sent), "time_step": np.array([[frame + 1.0]])}
            outputs = session.run(None, {name: np.asarray(value, np.float32) for name, value in feed.items()})
            actions, _, _, body_pos, body_quat, _, _ = (torch.from_numpy(o) for o in outputs)
            mine = torch.clamp(torch_policy(obs), -task.cfg.clip_actions, task.cfg.clip_actions)
            targets = task.joint_targets_at_zero() + mine * task.action_scale
            assert torch.allclose(default + scale * actions, targets, atol=2e-5)
            assert torch.equal(body_pos, task.reference.body_pos[[frame + 1]])
            assert torch.equal(body_quat, task.reference.body_quat[[frame + 1]])
            _, _, dones, _ = env.step(mine)
            assert not dones.any()  # the controller runs the motion once, from its start
            sent = actions

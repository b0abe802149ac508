"""ONNX export: every checkpoint writes an ONNX policy and its JSON; onnxruntime gives the torch policy's actions."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from mjfleet.cli import play
from mjfleet.envs.env import MjEnv
from mjfleet.rl.checkpoint.onnx import OPSET, OnnxPolicy, export_policy, metadata_path, policy_metadata
from mjfleet.rl.runner import Runner
from mjfleet.runtime.context import DistributedContext
from mjfleet.tasks.cartpole.config import CartpoleConfig
from mjfleet.tasks.registry import get_task
from mjfleet.train.worker import train_worker

from .helpers import every_task, make_run_dir, rsl_ppo, run_main, small_train_config


def _runner(task_id: str, num_envs: int = 4) -> Runner:
    spec = get_task(task_id)
    env = MjEnv(spec.load_task_class()(dataclasses.replace(spec.env_cfg(), num_envs=num_envs)), seed=1)
    return Runner(env, spec.agent_cfg(), DistributedContext(device="cpu"), run_dir=None)


def test_the_metadata_names_the_file_timestep_when_training_takes_longer_steps() -> None:
    spec = get_task("go1-velocity-flat")
    cfg = spec.env_cfg()
    cfg.num_envs = 2
    cfg.sim.training_contacts = dataclasses.replace(cfg.sim.training_contacts, applies="cpu", timestep_scale=2)
    env = MjEnv(spec.load_task_class()(cfg), seed=1)
    policy = Runner(env, spec.agent_cfg(), DistributedContext(device="cpu"), run_dir=None).learner.policy()
    assert env.sim.physics_dt == pytest.approx(0.01)  # the training simulation's longer step
    meta = policy_metadata(env, policy, 0)
    assert meta["physics_dt"] == pytest.approx(0.005) and meta["control_dt"] == pytest.approx(0.02)


def test_the_metadata_gives_the_control_ranges_mujoco_clips_to() -> None:
    """Saturated actions aim joints past their limits; the simulator clipped them in training, and without the ranges
    a control loop could not."""
    runner = _runner("cartpole-balance", num_envs=2)
    meta = policy_metadata(runner.env, runner.learner.policy(), 0)
    assert meta["ctrl_range"] == [[-1.0, 1.0]]
    model = runner.env.sim.mj_model
    model.actuator_ctrllimited[0] = 0
    assert policy_metadata(runner.env, runner.learner.policy(), 0)["ctrl_range"] == [None]


def test_a_control_loop_that_follows_the_cartpole_metadata_sends_the_control_the_task_sends() -> None:
    """The cart-pole clips actions to 1 before its action scale, inside the environment's wider clip: the metadata
    states the clip that applies, so clip, scale and control range give the task's control at any scale."""
    spec = get_task("cartpole-balance")
    env = MjEnv(spec.load_task_class()(dataclasses.replace(spec.env_cfg(), num_envs=64, action_scale=0.5)), seed=1)
    meta = policy_metadata(
        env, Runner(env, spec.agent_cfg(), DistributedContext(device="cpu"), run_dir=None).learner.policy(), 0
    )
    actions = torch.linspace(-4, 4, env.num_envs)[:, None]
    clip, (lo, hi) = meta["clip_actions"], meta["ctrl_range"][0]
    sent = (actions.clamp(-clip, clip) * meta["action_scale"]).clamp(lo, hi)
    env.task.apply_actions(env, actions.clamp(-env.cfg.clip_actions, env.cfg.clip_actions))
    torch.testing.assert_close(env.sim.ctrl, sent)
    assert meta["clip_actions"] == 1.0


@pytest.mark.parametrize("task_id", every_task())
def test_onnx_matches_torch_on_recorded_observations(task_id: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    runner = _runner(task_id)
    env, policy = runner.env, rsl_ppo(runner).get_policy()
    recorded = []
    with torch.inference_mode():
        obs = env.get_observations()
        for _ in range(6):
            recorded.append(obs.clone())
            policy.update_normalization(obs)  # non-trivial normaliser statistics, as after training
            obs, *_ = env.step(torch.randn(env.num_envs, env.num_actions, generator=env.generator))
    path = export_policy(policy, tmp_path / "model_0.onnx", policy_metadata(env, policy, 0))

    onnx_policy = OnnxPolicy(path)
    onnx_policy.check_compatible(env.get_observations(), env.num_actions)
    torch_policy = runner.get_inference_policy("cpu")
    with torch.inference_mode():
        for obs in recorded:
            expected = torch_policy(obs)
            actual = onnx_policy(obs)
            assert actual.shape == expected.shape == (env.num_envs, env.num_actions)
            assert torch.allclose(actual, expected, atol=1e-5, rtol=0), (actual - expected).abs().max()

    meta = json.loads(metadata_path(path).read_text())
    assert meta["opset"] == OPSET
    assert meta["inputs"][0]["observation_groups"] == [
        {"name": "policy", "size": env.get_observations()["policy"].shape[-1]}
    ]
    assert meta["outputs"][0]["shape"] == ["batch", env.num_actions]
    assert meta["control_dt"] == pytest.approx(env.step_dt)
    assert len(meta["joint_names"]) == env.num_actions
    if task_id.startswith(("go1", "humanoid")):
        assert len(meta["default_joint_pos"]) == env.num_actions
    # A control loop rebuilds the observation from its terms; a robot's drives its position servos.
    terms = meta["observation_terms"]["policy"]
    assert sum(term["size"] for term in terms) == meta["inputs"][0]["shape"][1]
    if not task_id.startswith("cartpole"):
        assert "joint_targets" in meta
        gains = meta["servo_gains"]
        assert len(gains["kp"]) == len(gains["kd"]) == env.num_actions and min(gains["kp"]) > 0
    if "default_joint_pos" in meta and "motion" not in meta:
        # A control loop that follows the sidecar sets the servo targets the simulation sets (from a reset).
        with torch.inference_mode():
            env.reset_all()
            actions = torch.rand(env.num_envs, env.num_actions) * 2 - 1
            default, scale = torch.tensor(meta["default_joint_pos"]), torch.tensor(meta["action_scale"])
            aimed = default + scale * actions.clamp(-meta["clip_actions"], meta["clip_actions"])
            held = env.sim.ctrl.clone()  # the targets a reset left (the home pose's; a start in the hand closes it)
            filtered = "action_filter" in meta
            expected = held + torch.tensor(meta["action_filter"]) * (aimed - held) if filtered else aimed
            env.task.apply_actions(env, actions)
            torch.testing.assert_close(env.sim.ctrl, expected)


@pytest.mark.slow
def test_checkpoints_write_onnx_and_play_runs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = small_train_config(num_envs=16, iterations=2, steps=8, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "onnx")
    train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    for it in (1, 2):
        meta = json.loads((run_dir / f"model_{it}.onnx.json").read_text())
        assert (meta["iteration"], meta["task"]) == (it, "cartpole-balance")
    assert (run_dir / "policy.onnx").read_bytes() == (run_dir / "model_2.onnx").read_bytes()
    assert json.loads((run_dir / "policy.onnx.json").read_text())["iteration"] == 2

    code, out, err = run_main(
        play.main,
        ["cartpole-balance", "--checkpoint", str(run_dir / "model_2.onnx"), "--num-episodes", "4", "--gpu-ids", "None"],
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["checkpoint"] == str(run_dir / "model_2.onnx")
    assert result["agent"] == "policy"
    assert result["episodes"] == 4
    assert result["mean_length"] > 0

    # An export of another task is refused in one line.
    code, _, err = run_main(
        play.main,
        ["go1-velocity-flat", "--checkpoint", str(run_dir / "policy.onnx"), "--num-episodes", "1", "--gpu-ids", "None"],
    )
    assert code == 2
    assert "expects 5 values of observation group 'policy'" in err
    assert "Traceback" not in err

    # One with the same observations plays, and says it was trained on another task (a .pt as its ONNX file).
    monkeypatch.setenv("COLUMNS", "400")  # the warning on one line
    for name in ("policy.onnx", "model_2.pt"):
        argv = ["cartpole-swingup", "--checkpoint", str(run_dir / name), "--num-episodes", "1", "--gpu-ids", "None"]
        code, _, err = run_main(play.main, argv)
        assert code == 0 and f"{run_dir / name} was trained on cartpole-balance; it plays cartpole-swingup" in err
    # ... in the task asked for: the balance run's settings made it a balance (the pole started up).
    _, played, _ = play.parse_args(["cartpole-swingup", "--checkpoint", str(run_dir / "model_2.pt")])
    assert isinstance(played.env, CartpoleConfig) and played.env.swingup

    # The file describes itself (its metadata holds the sidecar's JSON): copied alone, it plays.
    import onnx

    props = {p.key: p.value for p in onnx.load(str(run_dir / "model_2.onnx")).metadata_props}
    assert json.loads(props["mjfleet"]) == json.loads((run_dir / "model_2.onnx.json").read_text())
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "walker.onnx").write_bytes((run_dir / "model_2.onnx").read_bytes())
    argv = ["cartpole-balance", "--checkpoint", str(tmp_path / "alone" / "walker.onnx"), "--num-episodes", "2"]
    code, out, err = run_main(play.main, [*argv, "--gpu-ids", "None"])
    assert code == 0 and json.loads(out)["episodes"] == 2, err

    # A sidecar without what the inputs need (edited by hand) is one line.
    sidecar = run_dir / "model_1.onnx.json"
    sidecar.write_text(json.dumps({"format": json.loads(sidecar.read_text())["format"]}))
    argv = ["cartpole-balance", "--checkpoint", str(run_dir / "model_1.onnx"), "--num-episodes", "1"]
    code, _, err = run_main(play.main, [*argv, "--gpu-ids", "None"])
    assert code == 2 and f"{sidecar} lacks what a policy's inputs need (KeyError" in err and "Traceback" not in err


def test_the_exported_servo_targets_are_of_the_clipped_actions() -> None:
    """The environment clips actions before the task scales them; the graph's ``joint_targets`` do the same, so a
    control loop that sends them sends what the simulation would have."""
    from mjfleet.envs.task import ExportedTables
    from mjfleet.rl.checkpoint.onnx import _WithTables

    tables = ExportedTables(
        "frame", {"row": torch.zeros(3, 1)}, torch.ones(3, 2), torch.tensor([0.5, 0.5]), action_clip=10.0
    )
    actions, targets, _ = _WithTables(torch.nn.Identity(), tables)(torch.tensor([[15.0, -3.0]]), torch.tensor([1]))
    assert actions.tolist() == [[15.0, -3.0]] and targets.tolist() == [[6.0, -0.5]]


def test_play_of_a_run_whose_newest_checkpoint_is_cut_short_plays_the_one_before(tmp_path: Path) -> None:
    """As --finish and restarts do: it was one line and exit 2, though the run held a good checkpoint."""
    run_dir = make_run_dir(tmp_path, "cut")
    train_worker(
        small_train_config(num_envs=8, iterations=2, steps=4, log_root=tmp_path),
        run_dir,
        DistributedContext(device="cpu"),
    )
    newest = run_dir / "model_2.pt"
    newest.write_bytes(newest.read_bytes()[:100])
    argv = ["cartpole-balance", "--checkpoint", str(run_dir), "--num-episodes", "1", "--gpu-ids", "None"]
    code, out, err = run_main(play.main, argv)
    assert code == 0, err
    assert json.loads(out)["checkpoint"] == str(run_dir / "model_1.pt")
    assert "skipping checkpoint: checkpoint" in err and "model_2.pt is corrupt or truncated" in " ".join(err.split())
    code, _, err = run_main(play.main, [*argv[:2], str(newest), *argv[3:]])  # the file itself: it must load
    assert code == 2 and "model_2.pt is corrupt or truncated" in err


def test_an_onnx_file_played_with_another_action_scale_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without its run's settings beside it, an ONNX file plays on the task's defaults: a policy exported at another
    action scale (a CPU default, a flag) would drive the joints several times too far or too little, without a
    word."""
    from mjfleet.rl.evaluation.episodes import load_policy

    spec = get_task("go1-velocity-flat")
    trained = dataclasses.replace(spec.env_cfg(), num_envs=2, action_scale=0.1)
    env = MjEnv(spec.load_task_class()(trained), seed=1)
    policy = Runner(env, spec.agent_cfg(), DistributedContext(device="cpu"), run_dir=None).learner.policy()
    path = export_policy(policy, tmp_path / "model_0.onnx", policy_metadata(env, policy, 0))
    played = MjEnv(spec.load_task_class()(dataclasses.replace(spec.env_cfg(), num_envs=2)), seed=1)
    with caplog.at_level("WARNING"):
        load_policy(path, played, spec.agent_cfg(), "cpu")
    assert "exported with action_scale 0.1, played with 0.25" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_policy(path, env, spec.agent_cfg(), "cpu")  # its own settings: nothing to say
    assert "exported with" not in caplog.text

"""skrl's PPO, SAC and TD3 behind ``train``: real (small) cartpole training on the CPU, its checkpoints, resume, ONNX
export and ``play``, the evaluation environments and ``--stop-when``, and the run's identity."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from mjfleet.cli import play, train
from mjfleet.config_io import plain
from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.rl.checkpoint.onnx import OnnxPolicy, export_policy, policy_metadata
from mjfleet.rl.config import AgentConfig
from mjfleet.rl.learners.fast_td3 import FastTd3
from mjfleet.rl.learners.registry import learner_entry
from mjfleet.rl.learners.skrl.learner import SkrlLearner
from mjfleet.rl.replicas import replica_digest
from mjfleet.rl.runner import Runner
from mjfleet.runs.fingerprint import fingerprint, same_training, training_settings
from mjfleet.runtime.context import DistributedContext
from mjfleet.runtime.stop import StopRequest
from mjfleet.train import run
from mjfleet.train.config import TrainConfig
from mjfleet.train.plan import plan_start
from mjfleet.train.worker import train_worker

from .conftest import make_env
from .helpers import make_run_dir, run_main, small_train_config
from .instruments import instrument

CPU = DistributedContext(device="cpu")
SKRL = ("skrl-ppo", "skrl-sac", "skrl-td3")
OFF_POLICY = ("skrl-sac", "skrl-td3", "fast-td3")
LEARNERS = ("rsl-rl-ppo", *SKRL, "fast-td3")


def skrl_config(learner: str, **overrides: object) -> TrainConfig:
    """:func:`small_train_config` for an skrl learner, its off-policy updates small (a few gradient steps of 64)."""
    cfg = small_train_config(**overrides)  # type: ignore[arg-type]
    cfg.agent.learner = learner  # type: ignore[assignment]
    for c in (cfg.agent.sac, cfg.agent.td3, cfg.agent.fast_td3):
        c.batch_size, c.gradient_steps = 64, 4
    return cfg


def settings_group(learner: str) -> str:
    """The ``--agent.<group>`` an off-policy learner reads (``fast_td3``: ``--agent.fast-td3``)."""
    group = learner_entry(learner).settings
    assert group is not None
    return group


def _runner(learner: str, num_envs: int = 16, eval_envs: int = 0) -> Runner:
    cfg = skrl_config(learner, num_envs=num_envs - eval_envs, steps=4)
    return Runner(make_env(num_envs=num_envs), cfg.agent, CPU, None, eval_envs=eval_envs)


def _play(checkpoint: Path, episodes: int = 8) -> dict[str, float]:
    argv = ["cartpole-balance", "--checkpoint", str(checkpoint), "--gpu-ids", "None", "--num-episodes", str(episodes)]
    code, out, err = run_main(play.main, argv)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.parametrize("learner", [*SKRL, "fast-td3"])
def test_trains_saves_resumes_exports_and_plays(learner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    instrument(monkeypatch, probes=True)
    cfg = skrl_config(learner, num_envs=32, iterations=2, steps=8, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "first")
    first = train_worker(cfg, run_dir, CPU)
    assert [r.iteration for r in first.records] == [1, 2]
    assert all(r.losses and all(map(torch.isfinite, map(torch.tensor, r.losses.values()))) for r in first.records)
    assert [i for i, _ in list_checkpoints(run_dir)] == [1, 2]
    saved = load_checkpoint(run_dir / "model_2.pt")
    state = saved["fast_td3_state" if learner == "fast-td3" else "skrl_state"]
    assert (saved["learner"], saved["iter"], state["timestep"]) == (learner, 2, 16)
    meta = json.loads((run_dir / "model_2.onnx.json").read_text())
    assert (meta["learner"], meta["iteration"], meta["observation_normalization"]) == (learner, 2, True)

    # Everything the learner holds comes back from the checkpoint (the replay buffer aside): the same digest.
    runner = Runner(make_env(num_envs=32), cfg.agent, CPU, None)
    runner.load(run_dir / "model_2.pt")
    assert replica_digest(runner.learner) == first.extras["replica_digest"]

    resumed = train_worker(dataclasses.replace(cfg, resume=run_dir, max_restarts=0), make_run_dir(tmp_path, "r"), CPU)
    assert [r.iteration for r in resumed.records] == [3, 4]

    # play runs the deterministic actor alike from the checkpoint and from its ONNX export.
    from_pt, from_onnx = _play(run_dir / "model_2.pt"), _play(run_dir / "model_2.onnx")
    assert from_pt["episodes"] == from_onnx["episodes"] == 8
    assert from_pt["mean_length"] == pytest.approx(from_onnx["mean_length"])
    assert from_pt["mean_return"] == pytest.approx(from_onnx["mean_return"], rel=1e-4)


def test_a_resumed_skrl_ppo_adapts_its_learning_rate_to_its_own_kl_target(tmp_path: Path) -> None:
    """The scheduler's saved state carried the old run's KL target: --resume with another --agent.algorithm.desired-kl
    went on adapting to the old one, while rsl-rl-lib's PPO reads the run's own."""
    cfg = skrl_config("skrl-ppo", num_envs=16, iterations=1, steps=8, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "first")
    train_worker(cfg, run_dir, CPU)
    other = dataclasses.replace(cfg.agent, algorithm=dataclasses.replace(cfg.agent.algorithm, desired_kl=0.05))
    runner = Runner(make_env(num_envs=16), other, CPU, None)
    runner.load(run_dir / "model_1.pt")
    scheduler = runner.learner.agent.scheduler  # type: ignore[attr-defined]
    assert scheduler.kl_threshold == 0.05
    saved = load_checkpoint(run_dir / "model_1.pt")["skrl_state"]["scheduler"]
    assert saved["kl_threshold"] != 0.05 and scheduler._last_lr == saved["_last_lr"]  # the rate itself continues


@pytest.mark.parametrize("learner", SKRL)
def test_onnx_matches_torch_on_recorded_observations(learner: str, tmp_path: Path) -> None:
    runner = _runner(learner, num_envs=8)
    learner_ = runner.learner
    assert isinstance(learner_, SkrlLearner)
    env = runner.env
    recorded = []
    with torch.inference_mode():
        obs = env.get_observations()
        for _ in range(6):
            recorded.append(obs.clone())
            obs, *_ = env.step(torch.randn(env.num_envs, env.num_actions, generator=env.generator))
    normaliser = learner_.agent.checkpoint_modules["observation_preprocessor"]
    for obs in recorded:
        normaliser(obs["policy"], train=True)  # non-trivial statistics, as after training
    policy = runner.get_inference_policy("cpu")
    path = export_policy(policy, tmp_path / "model_0.onnx", policy_metadata(env, policy, 0))
    onnx_policy = OnnxPolicy(path)
    onnx_policy.check_compatible(env.get_observations(), env.num_actions)
    with torch.inference_mode():
        for obs in recorded:
            expected, actual = policy(obs), onnx_policy(obs)
            assert actual.shape == expected.shape == (env.num_envs, env.num_actions)
            assert torch.allclose(actual, expected, atol=1e-5, rtol=0), (actual - expected).abs().max()


@pytest.mark.parametrize("learner", SKRL)
def test_evaluation_environments_act_as_play_does_and_stay_out_of_the_learners_memory(learner: str) -> None:
    runner = _runner(learner, num_envs=16, eval_envs=4)
    learner_ = runner.learner
    assert isinstance(learner_, SkrlLearner) and learner_.agent.memory is not None
    assert (runner.train_envs, learner_.agent.memory.num_envs) == (12, 12)
    seen: list[tuple[TensorDict, torch.Tensor]] = []
    policies: list[torch.Tensor] = []
    policy = learner_.policy()

    def record(r: Runner) -> None:
        obs = r.env.get_observations().clone()
        seen.append((obs, r.env.actions.clone()))
        with torch.inference_mode():
            policies.append(policy(obs).clone())  # the actor as it is during this rollout (it learns after it)

    runner.step_hooks.append(record)
    runner.learn(1)
    clip = runner.env.cfg.clip_actions
    for ((_, _), (_, actions)), expected in zip(itertools.pairwise(seen), policies, strict=False):
        assert torch.equal(actions[12:], expected[12:].clamp(-clip, clip))  # the actor's mean
        assert not torch.allclose(actions[:12], expected[:12].clamp(-clip, clip))  # sampled (or noisy) around it
    stored = learner_.agent.memory.get_tensor_by_name("observations")
    assert stored.shape[1] == 12  # transitions of the training environments only


@pytest.mark.slow
@pytest.mark.parametrize("learner", LEARNERS)
def test_stop_when_ends_a_run_of_every_learner(learner: str, tmp_path: Path) -> None:
    cfg = skrl_config(learner, num_envs=32, iterations=12, steps=16, log_root=tmp_path, stop_when="length>=0")
    cfg.agent.eval_envs, cfg.agent.eval_episodes = 8, 1
    cfg.stop_when_iterations = 2
    run_dir = make_run_dir(tmp_path, "stop")
    result = train_worker(cfg, run_dir, CPU)
    first = next(r.iteration for r in result.records if r.evaluation_episodes)
    # Two windows in a row: the first full one, then the next an evaluation episode ended in.
    assert first < result.condition_met_at == result.final_iteration < 12
    assert list_checkpoints(run_dir)[-1][0] == result.final_iteration


def test_the_learner_and_its_settings_are_part_of_the_fingerprint() -> None:
    def settings(learner: str, **agent: object) -> dict[str, object]:
        cfg = skrl_config(learner)
        cfg.agent = dataclasses.replace(cfg.agent, **agent)  # type: ignore[arg-type]
        return training_settings(plain(dataclasses.asdict(cfg)))

    prints = {learner: fingerprint(settings(learner)) for learner in ("rsl-rl-ppo", *SKRL)}
    assert len(set(prints.values())) == 4
    sac = settings("skrl-sac")
    assert sac["agent.learner"] == "skrl-sac" and sac["agent.sac.batch_size"] == 64
    assert not any(k.startswith(("agent.td3.", "agent.algorithm.")) for k in sac)  # what SAC does not read
    other_batch = settings("skrl-sac", sac=dataclasses.replace(AgentConfig().sac, batch_size=128))
    assert fingerprint(other_batch) != prints["skrl-sac"]
    # PPO's fingerprint ignores SAC's settings, and a run recorded before learners could be chosen is rsl_rl's PPO.
    ppo = settings("rsl-rl-ppo")
    assert not any(k.startswith(("agent.sac.", "agent.td3.")) for k in ppo)
    assert fingerprint(settings("rsl-rl-ppo", sac=AgentConfig().sac)) == prints["rsl-rl-ppo"]
    older = {k: v for k, v in ppo.items() if k != "agent.learner"}
    assert same_training(older, ppo) and not same_training(older, settings("skrl-ppo"))


def test_resume_with_another_learner_is_refused_in_one_line(tmp_path: Path) -> None:
    cfg = skrl_config("skrl-sac", iterations=1, steps=4, log_root=tmp_path)
    run_dir = make_run_dir(tmp_path, "sac")
    train_worker(cfg, run_dir, CPU)
    with pytest.raises(UsageError, match=r"trained by skrl-sac, this run's learner is skrl-td3; pass --agent.learner"):
        plan_start(dataclasses.replace(skrl_config("skrl-td3"), resume=run_dir))
    runner = Runner(make_env(num_envs=16), skrl_config("skrl-ppo").agent, CPU, None)
    with pytest.raises(UsageError, match=r"was trained by skrl-sac, this run's learner is skrl-ppo"):
        runner.load(run_dir / "model_1.pt")
    # Another entropy setting: the modules differ by the entropy's optimizer, and the line says which flag.
    runner = Runner(make_env(num_envs=16), skrl_config("skrl-sac").agent, CPU, None)
    data = load_checkpoint(run_dir / "model_1.pt")
    del data["skrl"]["entropy_optimizer"]
    with pytest.raises(UsageError, match=r"\(another --agent.sac.\[no-\]learn-entropy\?\)$"):
        runner.learner.load_state_dict(data)


def test_a_checkpoint_without_its_runs_settings_plays_with_its_own_learner(tmp_path: Path) -> None:
    """A lone ``model_<it>.pt`` (copied out of its run) plays with the learner that trained it: the task's default
    learner's networks refused it, naming a flag ``play`` has not."""
    import shutil

    from mjfleet.cli import play

    cfg = skrl_config("skrl-sac")
    run_dir = make_run_dir(tmp_path, "sac")
    train_worker(cfg, run_dir, CPU)
    (tmp_path / "lone").mkdir()
    shutil.copy(run_dir / "model_1.pt", tmp_path / "lone" / "model_1.pt")
    argv = ["cartpole-balance", "--gpu-ids", "None", "--checkpoint", str(tmp_path / "lone" / "model_1.pt")]
    code, out, err = run_main(play.main, [*argv, "--num-episodes", "2"])
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["episodes"] == 2
    assert "replay buffer" not in err  # a training matter, not said when a checkpoint plays


def test_a_lone_checkpoint_plays_with_the_networks_settings_it_was_trained_with(tmp_path: Path) -> None:
    """Its action limit and activation are not in its weights: ``play`` built the task's defaults (a limit of 1,
    elu) around them without a word."""
    from mjfleet.cli.play import _learners_defaults
    from mjfleet.tasks.registry import get_task

    cfg = skrl_config("skrl-td3")
    cfg.agent.td3 = dataclasses.replace(cfg.agent.td3, action_limit=2.5)
    cfg.agent.policy = dataclasses.replace(cfg.agent.policy, activation="tanh", actor_hidden_dims=(16, 8))
    run_dir = make_run_dir(tmp_path, "td3")
    train_worker(cfg, run_dir, CPU)
    spec = get_task("cartpole-balance")
    played = _learners_defaults(spec, run_dir / "model_1.pt", spec.defaults(on_cpu=True)[1])
    assert played.learner == "skrl-td3" and played.td3.action_limit == 2.5
    assert played.policy.activation == "tanh" and played.policy.actor_hidden_dims == (16, 8)


def test_an_skrl_learner_without_skrl_installed_is_one_line_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """skrl is imported when the learner is built: without it the run failed after its directory and simulation
    existed."""
    import importlib.util

    from .helpers import refused_train

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "skrl" else real(name, *a))
    line = refused_train(["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "skrl-sac"], tmp_path / "logs")
    assert "--agent.learner skrl-sac imports skrl, which this Python" in line and "cannot import: uv sync" in line
    assert "uv sync, or pip install the package that provides skrl" in line


def test_settings_out_of_range_are_one_line_naming_the_flag() -> None:
    base = ["cartpole-balance", "--gpu-ids", "None", "--dry-run"]
    for flags, message in (
        (["--agent.sac.batch-size", "0"], "--agent.sac.batch-size must be at least 1 (got 0)"),
        (["--agent.td3.polyak", "1.5"], "--agent.td3.polyak must be above 0 and at most 1 (got 1.5)"),
        (["--agent.td3.policy-delay", "0"], "--agent.td3.policy-delay must be at least 1 (got 0)"),
        (["--agent.sac.reward-scale", "0"], "--agent.sac.reward-scale must be positive (got 0.0)"),
        (["--agent.learner", "skrl-a2c"], "--agent.learner"),
        # A mini-batch larger than the buffer it samples: torch's allocation error after the run existed.
        (
            ["--agent.learner", "skrl-sac", "--env.num-envs", "16", "--agent.sac.buffer-per-env", "10"],
            "--agent.sac.batch-size 512 is larger than the replay buffer it samples from (--env.num-envs *",
        ),
        (
            ["--agent.learner", "skrl-sac", "--agent.sac.batch-size", "2000000000"],
            "--agent.sac.batch-size 2000000000 is larger than the replay buffer it samples from (--env.num-envs *",
        ),
    ):
        code, _, err = run_main(train.main, [*base, *flags])
        assert code == 2, err
        assert message in err and "Traceback" not in err
    code, out, _ = run_main(train.main, ["cartpole-balance", "--help"])
    assert code == 0
    for text in ("--agent.learner", "--agent.sac.buffer-per-env", "--agent.td3.exploration-noise"):
        assert text in out
    # A task without an off-policy recipe says so, and its CPU defaults name what the learner reads (not PPO's).
    humanoid = ["humanoid-velocity-flat", "--gpu-ids", "None", "--agent.learner", "skrl-td3", "-h"]
    code, out, _ = run_main(train.main, humanoid)
    assert code == 0 and "This task has no recipe for an off-policy learner: skrl-td3 takes" in out
    assert "agent.policy.actor_hidden_dims" in out and "agent.algorithm.desired_kl" not in out
    # go1-velocity-flat's recipe is the CPU's alone.
    for device, note in (("None", "Defaults below: this task's recipe"), ("0", "This task has no recipe")):
        go1 = ["go1-velocity-flat", "--gpu-ids", device, "--agent.learner", "fast-td3", "-h"]
        code, out, _ = run_main(train.main, go1)
        assert code == 0 and note in " ".join(out.split()), device


def test_sac_samples_squashed_actions_with_their_log_probability() -> None:
    runner = _runner("skrl-sac", num_envs=8)
    learner_ = runner.learner
    assert isinstance(learner_, SkrlLearner)
    actor = learner_.actor
    limit = 0.5
    actor.limit = limit
    obs = runner.env.get_observations()["policy"]
    torch.manual_seed(0)
    actions, outputs = actor.act({"observations": obs}, role="policy")
    assert actions.abs().max() < limit  # squashed into the bounds, never clipped onto them
    # The log probability is the squashed distribution's: a Gaussian through tanh, scaled by the limit.
    mean, extra = actor.compute({"observations": obs})
    squashed = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, extra["log_std"].exp()),
        [torch.distributions.TanhTransform(), torch.distributions.AffineTransform(0.0, limit)],
    )
    expected = squashed.log_prob(actions.clamp(-limit + 1e-6, limit - 1e-6)).sum(-1, keepdim=True)
    assert torch.allclose(outputs["log_prob"], expected, atol=1e-3), (outputs["log_prob"] - expected).abs().max()
    assert torch.allclose(outputs["mean_actions"], limit * torch.tanh(mean))


@pytest.mark.parametrize(("scale", "expected"), [(None, "1 / step_dt"), (3.0, "3")])
def test_the_replay_buffer_holds_the_rewards_scaled(scale: float | None, expected: str) -> None:
    cfg = skrl_config("skrl-td3", num_envs=8, steps=1)
    cfg.agent.td3.reward_scale = scale
    runner = Runner(make_env(num_envs=8), cfg.agent, CPU, None)
    env_rewards: list[torch.Tensor] = []
    step = runner.env.step

    def recording_step(actions: torch.Tensor) -> tuple[object, ...]:
        result = step(actions)
        env_rewards.append(result[1].clone())
        return result

    runner.env.step = recording_step  # type: ignore[method-assign]
    runner.learn(1)
    learner_ = runner.learner
    assert isinstance(learner_, SkrlLearner) and learner_.agent.memory is not None
    stored = learner_.agent.memory.get_tensor_by_name("rewards")[0, :, 0]
    factor = 1.0 / runner.env.step_dt if scale is None else scale
    assert env_rewards[0].abs().sum() > 0, expected
    assert torch.allclose(stored, env_rewards[0] * factor)


@pytest.mark.slow
@pytest.mark.parametrize("learner", LEARNERS)
def test_finish_continues_an_interrupted_run_of_every_learner_in_place(learner: str, tmp_path: Path) -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8"]
    argv += ["--agent.max-iterations", "3", "--agent.save-interval", "1", "--log-root", str(tmp_path)]
    argv += ["--agent.learner", learner, "--agent.eval-envs", "8"]
    if learner in OFF_POLICY:
        group = settings_group(learner).replace("_", "-")
        argv += [f"--agent.{group}.batch-size", "64", f"--agent.{group}.gradient-steps", "4"]
    stop = StopRequest()
    stop.signals.append(15)  # as by SIGTERM: stop after the current iteration, with a checkpoint
    run(train.parse_args(argv), stop)
    [run_dir] = [p for p in tmp_path.glob("*/*") if p.is_dir()]
    assert [i for i, _ in list_checkpoints(run_dir)] == [1]
    # --finish takes every setting from the run, the learner too, and goes on in place with its checkpoint.
    code, _, err = run_main(train.main, ["cartpole-balance", "--finish", str(run_dir)])
    assert code == 0, err
    assert f"training cartpole-balance with {learner}" in " ".join(err.split())
    assert "finished at iteration 3 of 3 (2 iterations" in " ".join(err.split())
    assert load_checkpoint(run_dir / "model_3.pt").get("learner", "rsl-rl-ppo") == learner


@pytest.mark.parametrize("learner", OFF_POLICY)
def test_a_continued_off_policy_run_warms_its_empty_buffer_up_again(
    learner: str,
) -> None:
    """The replay buffer is not checkpointed: a continued run takes ``learning_starts`` steps again before its first
    update, counted from the step it continues at (not from the run's first)."""
    cfg = skrl_config(learner, num_envs=16, steps=4)
    getattr(cfg.agent, settings_group(learner)).learning_starts = 6
    first = Runner(make_env(num_envs=16), cfg.agent, CPU, None)
    learned = first.learner
    assert isinstance(learned, SkrlLearner | FastTd3)
    first.learn(1)
    assert learned.timestep == 4 and learned.update() == {}  # 4 steps of 6: still warming up
    first.learn(1)
    assert learned.timestep == 8 and learned.update()  # past the warm-up: it learns
    continued = Runner(make_env(num_envs=16), cfg.agent, CPU, None)
    learner_ = continued.learner
    assert isinstance(learner_, SkrlLearner | FastTd3)
    learner_.load_state_dict(learned.state_dict())
    assert f"{learner}: the replay buffer is not in checkpoints and starts empty; 0 steps of random actions and 6" in (
        learner_.continued_notice()
    )
    assert (learner_.timestep, learner_.filled_from) == (8, 8)
    assert learner_.update() == {}  # an empty buffer: the warm-up applies again
    continued.learn(1)
    assert learner_.timestep == 12 and learner_.update() == {}
    continued.learn(1)
    assert learner_.update()


@pytest.mark.parametrize("learner", OFF_POLICY)
def test_random_warm_up_actions_are_new_each_step_within_the_limit_and_follow_the_seed(learner: str) -> None:
    """``random-steps`` explore: every step draws new actions in [-limit, limit] (skrl's own sampling returned the
    same ones every step), from the run's seeded generator."""

    def warm_up_actions(seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        cfg = skrl_config(learner, num_envs=4, steps=3)
        settings = getattr(cfg.agent, settings_group(learner))
        settings.random_steps, settings.action_limit = 10, 0.5
        runner = Runner(make_env(num_envs=4), cfg.agent, CPU, None)
        learner_ = runner.learner
        learner_.train_mode()
        env, taken = runner.env, []
        for _ in range(3):
            with torch.inference_mode():
                actions = learner_.act(env.get_observations())
                obs, rewards, dones, extras = env.step(actions)
                learner_.process_step(obs, rewards, dones, extras)
            taken.append(actions.clone())
        return taken

    first = warm_up_actions(0)
    assert all(float(a.abs().max()) <= 0.5 for a in first)
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])
    assert all(torch.equal(a, b) for a, b in zip(first, warm_up_actions(0), strict=True))


def test_td3_draws_its_exploration_noise_without_reading_it_back() -> None:
    # skrl's TD3 put three statistics of each step's noise into its tracking data (a host sync each on a GPU); while
    # the buffer warmed up nothing cleared them.
    cfg = skrl_config("skrl-td3", num_envs=16, steps=4)
    cfg.agent.td3.learning_starts = 100
    runner = Runner(make_env(num_envs=16), cfg.agent, CPU, None)
    learner_ = runner.learner
    assert isinstance(learner_, SkrlLearner)
    tracked: list[str] = []
    learner_.agent.track_data = lambda tag, value: tracked.append(tag)  # type: ignore[method-assign]
    seen: list[tuple[TensorDict, torch.Tensor]] = []
    runner.step_hooks.append(lambda r: seen.append((r.env.get_observations().clone(), r.env.actions.clone())))
    runner.learn(2)
    assert tracked == [] and not any(learner_.agent.tracking_data.values())
    clip = runner.env.cfg.clip_actions
    policy = learner_.policy()
    with torch.inference_mode():
        for (obs, _), (_, actions) in itertools.pairwise(seen):
            noisy = actions - policy(obs).clamp(-clip, clip)
            assert 0.03 < float(noisy.std()) < 0.3  # the noise of --agent.td3.exploration-noise (0.1)


def _buffer_steps(runner: Runner) -> int:
    """Steps of each environment an off-policy learner's replay buffer holds."""
    learner = runner.learner
    return learner.buffer.capacity if isinstance(learner, FastTd3) else learner.agent.memory.memory_size  # type: ignore[attr-defined]


@pytest.mark.parametrize("learner", OFF_POLICY)
def test_a_played_off_policy_checkpoint_builds_no_replay_buffer_of_the_training_size_nor_final_observations(
    learner: str, tmp_path: Path
) -> None:
    from mjfleet.rl.evaluation.episodes import load_policy

    cfg = skrl_config(learner, num_envs=16, steps=4)
    trained = Runner(make_env(num_envs=16), cfg.agent, CPU, tmp_path)
    trained.learn(1)
    checkpoint = trained.save_checkpoint()
    assert checkpoint is not None and _buffer_steps(trained) == 1000
    built: list[Runner] = []
    real_init = Runner.__init__

    def remember(self: Runner, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]
        built.append(self)

    played_env = make_env(num_envs=64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Runner, "__init__", remember)
        policy = load_policy(checkpoint, played_env, cfg.agent, "cpu")
    (played,) = built
    assert _buffer_steps(played) == 1
    # Nor the observations episodes end in, which only a learner's memory reads: computing them draws the task's
    # observation noise, so play's episodes would differ from the ONNX file's at the same --seed.
    assert trained.env.final_observations and not played_env.final_observations
    trained_actor = trained.get_inference_policy("cpu")
    obs = make_env(num_envs=64).get_observations()
    assert torch.equal(policy(obs), trained_actor(obs))  # the same policy, whatever the buffer


def test_sac_reads_its_statistics_to_the_host_in_one_gradient_step_of_an_update_and_learns_the_same() -> None:
    from mjfleet.rl.learners.skrl.algorithms import SkrlSac

    def trained(update_agent: object) -> tuple[dict[str, torch.Tensor], list[str]]:
        torch.manual_seed(0)
        cfg = skrl_config("skrl-sac", num_envs=16, steps=4)
        runner = Runner(make_env(num_envs=16), cfg.agent, CPU, None)
        learner = runner.learner
        assert isinstance(learner, SkrlSac) and learner.agent.cfg.gradient_steps == 4
        learner._update_agent = update_agent.__get__(learner)  # type: ignore[attr-defined,method-assign]
        tracked: list[str] = []
        real_track = learner.agent.track_data
        learner.agent.track_data = lambda tag, value: (tracked.append(tag), real_track(tag, value))[-1]  # type: ignore[method-assign]
        runner.learn(2)
        modules = {"policy": learner.agent.policy, "critic": learner.agent.critic_1}
        state = {f"{m}.{k}": t.clone() for m, module in modules.items() for k, t in module.state_dict().items()}  # type: ignore[union-attr]
        return state, tracked

    split, split_tracked = trained(SkrlSac._update_agent)
    whole, whole_tracked = trained(SkrlLearner._update_agent)  # one call of every gradient step, tracked
    assert split.keys() == whole.keys() and all(torch.equal(split[k], whole[k]) for k in split)
    assert whole_tracked.count("Loss / Critic loss") == 2 * 4 and split_tracked.count("Loss / Critic loss") == 2


@pytest.mark.parametrize("learner", ["skrl-ppo", "skrl-sac"])
def test_the_standardisers_all_reduce_counts_as_the_learners_synchronisation(
    learner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several workers combine each standardiser update in one all-reduce (4 per gradient step of SAC and TD3): the
    learner's sync time left it out."""
    import torch.distributed as dist
    from skrl import config as skrl_config

    learner_ = _runner(learner).learner
    assert isinstance(learner_, SkrlLearner)
    agent = learner_.agent
    names = ("_observation_preprocessor", "_state_preprocessor", "_value_preprocessor")
    scalers = [getattr(agent, k, None) for k in names]
    scalers = [s for s in scalers if s is not None and hasattr(s, "clock")]
    assert scalers and all(s.clock is learner_.clock for s in scalers)
    monkeypatch.setattr(type(skrl_config.torch), "is_distributed", property(lambda self: True))
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, *args, **kwargs: None)  # one worker's sums
    before = learner_.clock.reductions
    scalers[0](torch.randn(32, scalers[0].running_mean.numel()), train=True)
    assert learner_.clock.reductions == before + 1

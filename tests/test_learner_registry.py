"""The learner registry: every learner is known by one entry, and one registered from a module of its own trains,
checkpoints, continues and plays through ``train`` and ``play`` like the built-in ones."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mjfleet.cli import play, train
from mjfleet.config_io import plain
from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import load_checkpoint
from mjfleet.rl.learners.registry import learner_entry, learner_names, register, unregister
from mjfleet.runs.fingerprint import training_settings

from .helpers import installed_distribution, run_main, small_train_config
from .toy_learner import ENTRY


@pytest.fixture
def toy() -> Iterator[None]:
    register(ENTRY)
    yield
    unregister(ENTRY.name)


def test_the_built_in_learners_and_what_each_reads() -> None:
    assert learner_names() == ("rsl-rl-ppo", "skrl-ppo", "skrl-sac", "skrl-td3", "fast-td3")
    settings = ["algorithm", "algorithm", "sac", "td3", "fast_td3"]
    assert [learner_entry(n).settings for n in learner_names()] == settings
    assert [learner_entry(n).off_policy for n in learner_names()] == [False, False, True, True, True]
    cfg = small_train_config()
    cfg.agent.learner = "skrl-sac"
    flat = training_settings(plain(dataclasses.asdict(cfg)))  # what decides what a run trains
    assert "agent.sac.gamma" in flat and "agent.td3.gamma" not in flat and "agent.algorithm.gamma" not in flat


def test_a_name_registered_twice_is_refused(toy: None) -> None:
    with pytest.raises(ValueError, match="registered already"):
        register(ENTRY.__class__(**{**ENTRY.__dict__, "label": "OTHER"}))


def test_a_learner_whose_class_has_another_name_than_its_entry_is_refused_when_built() -> None:
    """Its checkpoints would name a learner nobody registered: play, --resume and --finish would refuse them."""
    from mjfleet.rl.learners.registry import build_learner
    from mjfleet.runtime.context import DistributedContext

    from .conftest import make_env

    misnamed = dataclasses.replace(ENTRY, name="toy-misnamed")
    register(misnamed)
    try:
        cfg = small_train_config()
        cfg.agent.learner = "toy-misnamed"
        env = make_env("cartpole-balance", num_envs=4)
        with pytest.raises(UsageError, match="builds a ToyPpo named 'toy-ppo': set its class's name = 'toy-misnamed'"):
            build_learner(env, cfg.agent, DistributedContext(device="cpu"), 4)
    finally:
        unregister(misnamed.name)


def test_an_off_policy_learner_that_does_not_ask_for_final_observations_is_refused_when_built() -> None:
    """Its replay buffer would bootstrap every time-out from the next episode's first observation, without a word."""
    from mjfleet.rl.learners.registry import build_learner
    from mjfleet.runtime.context import DistributedContext

    from .conftest import make_env

    replaying = dataclasses.replace(ENTRY, off_policy=True, settings="sac")
    register(replaying)
    try:
        cfg = small_train_config()
        cfg.agent.learner = replaying.name
        env = make_env("cartpole-balance", num_envs=4)
        with pytest.raises(UsageError, match="registered off_policy, but ToyPpo does not ask for the observations"):
            build_learner(env, cfg.agent, DistributedContext(device="cpu"), 4)
    finally:
        unregister(replaying.name)


@pytest.mark.slow
def test_a_learner_of_ones_own_trains_continues_and_plays(toy: None, tmp_path: Path) -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8"]
    argv += ["--agent.max-iterations", "2", "--agent.eval-envs", "0", "--log-root", str(tmp_path)]
    code, out, err = run_main(train.main, [*argv, "--agent.learner", "toy-ppo"])
    assert code == 0, err
    (run_dir,) = (tmp_path / "cartpole_balance").iterdir()
    assert load_checkpoint(run_dir / "model_2.pt")["learner"] == "toy-ppo"
    assert "TOY" in out + err  # the start-up line names its algorithm
    code, _, err = run_main(train.main, [*argv, "--agent.learner", "toy-ppo", "--finish", str(run_dir)])
    assert code == 0, err
    code, out, err = run_main(play.main, ["cartpole-balance", "--checkpoint", str(run_dir), "--gpu-ids", "None",
                                          "--num-episodes", "4"])  # fmt: skip
    assert code == 0, err
    assert 0.0 <= json.loads(out)["success_rate"] <= 1.0
    # Its checkpoint is refused in one line by a run of another learner.
    code, _, err = run_main(train.main, [*argv, "--resume", str(run_dir)])
    assert code == 2 and "trained by toy-ppo, this run's learner is rsl-rl-ppo" in err


def test_an_unknown_learner_is_one_line_listing_the_registered_ones(toy: None, tmp_path: Path) -> None:
    code, _, err = run_main(train.main, ["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "a2c",
                                         "--log-root", str(tmp_path)])  # fmt: skip
    assert code == 2
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "--agent.learner must be one of" in line and "toy-ppo" in line and "skrl-td3" in line


def test_a_package_off_policy_learner_gets_the_replay_buffer_checks_of_the_settings_it_reads(tmp_path: Path) -> None:
    entry = dataclasses.replace(ENTRY, name="toy-sac", off_policy=True, settings="sac")
    register(entry)
    try:
        argv = ["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "toy-sac", "--env.num-envs", "4"]
        argv += ["--agent.sac.buffer-per-env", "8", "--agent.sac.batch-size", "64", "--log-root", str(tmp_path)]
        code, _, err = run_main(train.main, argv)
    finally:
        unregister(entry.name)
    assert code == 2 and "--agent.sac.batch-size 64 is larger than the replay buffer it samples from" in err, err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_settings_group_that_agent_lacks_is_refused_at_registration() -> None:
    # A typo ("algorithmm") trained, and left every PPO setting out of the run's fingerprint.
    with pytest.raises(ValueError, match="reads settings 'algorithmm', which is not a group of --agent"):
        register(dataclasses.replace(ENTRY, name="toy-typo", settings="algorithmm"))
    assert "toy-typo" not in learner_names()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        ("tests.toy_learner:ToyPpo", "builds a ToyPpo named 'toy-ppo': set its class's name = 'toy-class'"),
        ("tests.toy_learner:NoSuchClass", "its build 'tests.toy_learner:NoSuchClass' cannot be imported"),
    ],
)
def test_a_learner_class_registered_wrong_is_one_line_before_the_run_directory(
    tmp_path: Path, build: str, message: str
) -> None:
    entry = dataclasses.replace(ENTRY, name="toy-class", build=build)
    register(entry)
    try:
        argv = ["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "toy-class", "--log-root", str(tmp_path)]
        code, _, err = run_main(train.main, argv)
    finally:
        unregister(entry.name)
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_settings_the_learner_does_not_read_are_named_and_ppos_batch_check_is_ppos(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    argv = ["cartpole-balance", "--gpu-ids", "None", "--dry-run", "--log-root", str(tmp_path)]
    code, _, err = run_main(train.main, [*argv, "--agent.sac.batch-size", "8", "--agent.td3.gamma", "0.9"])
    assert code == 0, err
    said = caplog.text + err
    assert "--agent.sac.batch-size has no effect with --agent.learner rsl-rl-ppo" in said
    assert "--agent.td3.gamma has no effect" in said and "reads --agent.algorithm.* and --agent.policy.*" in said
    caplog.clear()
    sac = [*argv, "--agent.learner", "skrl-sac", "--agent.algorithm.learning-rate", "0.5"]
    code, _, err = run_main(train.main, [*sac, "--env.num-envs", "2", "--agent.num-steps-per-env", "1"])
    assert code == 0, err  # PPO's mini-batches are not SAC's
    assert "--agent.algorithm.learning-rate has no effect with --agent.learner skrl-sac" in caplog.text + err
    code, _, err = run_main(train.main, [*argv, "--env.num-envs", "2", "--agent.num-steps-per-env", "1"])
    assert code == 2
    assert "--env.num-envs x --agent.num-steps-per-env (2) is smaller than --agent.algorithm.num-mini-batches" in err


def test_a_package_names_its_learners_in_the_learners_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A package that adds a learner and no task: nothing imports it, so train finds it by its entry point."""
    from mjfleet.rl.learners import registry

    for name, value in (("good", "tests.toy_learner:ENTRY"), ("broken", "mjfleet_demo_missing_learner:ENTRY")):
        installed_distribution(tmp_path, f"mjfleet-demo-{name}", "mjfleet.learners", {name: value})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_packages_read", False)
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    argv = ["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "toy-ppo", "--env.num-envs", "32"]
    argv += ["--agent.num-steps-per-env", "8", "--agent.max-iterations", "1", "--log-root", str(tmp_path / "runs")]
    code, out, err = run_main(train.main, argv)
    assert code == 0, err
    assert "TOY" in out + err and learner_names()[-1] == "toy-ppo"
    said = caplog.text + err
    assert "package 'mjfleet-demo-broken': its mjfleet.learners entry point 'broken' is not loaded" in said

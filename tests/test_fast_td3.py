"""mjfleet's own FastTD3 learner: its distributional target, its replay buffer, what it stores at an episode's end,
its exploration noise, and an update that reads nothing to the host but its losses. The runner tests it shares with
every learner are in tests/test_skrl_training.py and tests/test_skrl_distributed.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from mjfleet.cli import train
from mjfleet.rl.config import FastTd3Config
from mjfleet.rl.learners.fast_td3 import FastTd3, ReplayBuffer, Support, project
from mjfleet.rl.runner import Runner
from mjfleet.runtime.context import DistributedContext

from .conftest import make_env
from .helpers import run_main
from .test_skrl_training import skrl_config

CPU = DistributedContext(device="cpu")
SUPPORT = Support.symmetric(10.0, 21, "cpu")  # one value apart
VALUES = SUPPORT.values


def test_the_target_distribution_moves_by_the_reward_and_shrinks_by_the_discount() -> None:
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(64, VALUES.numel()), -1) * 0.5  # means well inside the support
    probs = probs / probs.sum(-1, keepdim=True)
    rewards, discounts = torch.rand(64) * 2 - 1, torch.full((64,), 0.9)
    target = project(probs, rewards, discounts, SUPPORT)
    assert torch.allclose(target.sum(-1), torch.ones(64))
    assert (target >= 0).all()
    # Moved values that stay inside the support keep the moved mean exactly.
    assert torch.allclose(SUPPORT.mean(target), rewards + 0.9 * SUPPORT.mean(probs), atol=1e-5)


def test_a_terminated_transitions_target_is_its_reward_alone_and_values_beyond_the_support_are_clipped() -> None:
    probs = torch.softmax(torch.randn(3, VALUES.numel()), -1)
    target = project(probs, torch.tensor([2.0, 2.5, 50.0]), torch.zeros(3), SUPPORT)
    assert torch.allclose(target[0], (VALUES == 2.0).float())  # on an atom: all the mass on it
    assert torch.allclose(target[1], 0.5 * ((VALUES == 2.0).float() + (VALUES == 3.0).float()))
    assert torch.allclose(target[2], (VALUES == 10.0).float())  # clipped to the support's end
    # The support's ends themselves, on an atom: no mass beyond the support.
    ends = project(torch.eye(VALUES.numel())[[0, -1]], torch.zeros(2), torch.ones(2), SUPPORT)
    assert torch.allclose(ends, torch.eye(VALUES.numel())[[0, -1]])


def test_the_replay_buffer_keeps_the_last_steps_and_samples_what_it_holds() -> None:
    buffer = ReplayBuffer(capacity=3, num_envs=2, sizes={"x": 1}, device="cpu")
    for step in range(5):
        buffer.add(x=torch.tensor([[step * 10.0], [step * 10.0 + 1]]))
    assert buffer.rows == 3
    assert sorted(buffer.latest("x", 2).flatten().tolist()) == [30.0, 31.0, 40.0, 41.0]
    sampled = set(buffer.sample(2000)["x"].flatten().tolist())
    assert sampled == {20.0, 21.0, 30.0, 31.0, 40.0, 41.0}  # the two oldest steps were overwritten


def test_a_sample_takes_every_field_from_the_same_stored_transition() -> None:
    buffer = ReplayBuffer(capacity=4, num_envs=3, sizes={"x": 2, "y": 1}, device="cpu")
    for step in range(6):
        x = torch.arange(3.0).unsqueeze(-1) + step * 10.0
        buffer.add(x=x.expand(3, 2) * torch.tensor([1.0, -1.0]), y=x)
    batch = buffer.sample(500)
    assert batch["x"].shape == (500, 2) and batch["y"].shape == (500, 1)
    assert torch.equal(batch["x"][:, 0], batch["y"][:, 0]) and torch.equal(batch["x"][:, 1], -batch["y"][:, 0])
    assert set(batch["y"].flatten().tolist()) == {step * 10.0 + env for step in range(2, 6) for env in range(3)}


def _learner(num_envs: int = 8, **env_overrides: object) -> tuple[Runner, FastTd3]:
    cfg = skrl_config("fast-td3", num_envs=num_envs, steps=4)
    runner = Runner(make_env(num_envs=num_envs, **env_overrides), cfg.agent, CPU, None)
    learner = runner.learner
    assert isinstance(learner, FastTd3)
    learner.train_mode()
    return runner, learner


@pytest.mark.parametrize(("overrides", "terminated"), [({}, False), ({"cart_limit": -1.0}, True)])
def test_an_ended_episode_stores_the_observation_it_ended_in_and_whether_it_terminated(
    overrides: dict[str, object], terminated: bool
) -> None:
    probe = make_env(num_envs=1)
    runner, learner = _learner(num_envs=4, episode_length_s=probe.step_dt, **overrides)  # every episode: one step
    env = runner.env
    assert env.final_observations
    noise = learner.noise.clone()
    obs = env.get_observations()
    next_obs, rewards, dones, extras = env.step(learner.act(obs))
    learner.process_step(next_obs, rewards, dones, extras)
    assert dones.all()
    stored = learner.buffer.data
    final = extras["final_observations"]
    assert torch.equal(stored["next_obs"][0], final["policy"]) and torch.equal(
        stored["next_states"][0], final["critic"]
    )
    assert not torch.allclose(stored["next_obs"][0], next_obs["policy"])  # not the next episode's first
    assert stored["terminated"][0].bool().all().item() is terminated
    assert torch.allclose(stored["rewards"][0].squeeze(-1), rewards / env.step_dt)  # rates, as for skrl's learners
    assert not torch.equal(learner.noise, noise)  # each new episode draws its own exploration noise


def test_the_exploration_noise_of_each_environment_lies_in_its_range_and_stays_within_an_episode() -> None:
    runner, learner = _learner(num_envs=64)
    c = learner.cfg
    assert (learner.noise >= c.noise_min).all() and (learner.noise <= c.noise_max).all()
    assert float(learner.noise.std()) > 0.05  # not one size for all
    before = learner.noise.clone()
    env = runner.env
    obs, rewards, dones, extras = env.step(learner.act(env.get_observations()))
    learner.process_step(obs, rewards, dones, extras)
    running = ~dones.bool()
    assert running.any() and torch.equal(learner.noise[running], before[running])


def test_an_update_reads_only_its_losses_back_to_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU every read of a tensor's value waits for the device: one per update, not one per gradient step. (Adam
    reads its step counters, which torch keeps on the CPU for that reason.)"""
    runner, learner = _learner(num_envs=16)
    runner.learn(1)
    counters = {id(state["step"]) for opt in learner.optimizers() for state in opt.state.values()}
    assert counters
    reads: list[str] = []
    for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
        real = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *args: object, _real: object = real, _name: str = name) -> object:
            if id(self) not in counters:
                reads.append(_name)
            return _real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(torch.Tensor, name, counted)
    losses = learner.update()
    monkeypatch.undo()
    assert learner.cfg.gradient_steps > 1 and reads == ["tolist"], reads
    assert set(losses) == {"critic_loss", "policy_loss"} and all(map(torch.isfinite, torch.tensor([*losses.values()])))


def test_learning_moves_the_critics_and_the_actor_but_not_the_target_critics_alone() -> None:
    runner, learner = _learner(num_envs=16)
    networks = ("actor", "critic_1", "critic_2", "target_critic_1", "target_critic_2")
    before = {name: [p.detach().clone() for p in learner.modules()[name].parameters()] for name in networks}
    runner.learn(1)
    after = {name: [p.detach() for p in learner.modules()[name].parameters()] for name in before}
    for name in networks:
        assert any(not torch.equal(a, b) for a, b in zip(before[name], after[name], strict=True)), name
    # Each target critic follows its critic by polyak: closer to it after the update than before.
    for critic, target in (("critic_1", "target_critic_1"), ("critic_2", "target_critic_2")):
        gap_before = sum(float((a - b).abs().sum()) for a, b in zip(before[critic], before[target], strict=True))
        gap_after = sum(float((a - b).abs().sum()) for a, b in zip(after[critic], after[target], strict=True))
        assert gap_before == 0.0 and gap_after > 0.0  # copies at the start, apart once the critics learn


def test_its_settings_out_of_range_are_one_line_naming_the_flag() -> None:
    base = ["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "fast-td3", "--dry-run"]
    for flags, message in (
        (["--agent.fast-td3.batch-size", "0"], "--agent.fast-td3.batch-size must be at least 1 (got 0)"),
        (
            ["--agent.fast-td3.noise-min", "0.5", "--agent.fast-td3.noise-max", "0.2"],
            "--agent.fast-td3.noise-max must be at least --agent.fast-td3.noise-min (0.5; got 0.2)",
        ),
        (["--agent.fast-td3.atoms", "1"], "--agent.fast-td3.atoms must be at least 2 (got 1)"),
        (["--agent.fast-td3.value-limit", "0"], "--agent.fast-td3.value-limit must be positive (got 0.0)"),
    ):
        code, _, err = run_main(train.main, [*base, *flags])
        assert code == 2, err
        assert message in err and "Traceback" not in err


def test_the_support_defaults_to_the_return_of_three_per_second_held_forever() -> None:
    _, learner = _learner()
    assert learner.support.high == pytest.approx(3.0 / (1.0 - learner.cfg.gamma))
    assert dataclasses.replace(learner.cfg, value_limit=7.0).support_limit() == 7.0


class _Constant(torch.nn.Module):
    """A target critic whose distribution is ``logits`` whatever it is asked."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(states.shape[0], -1)


def test_each_sample_bootstraps_from_the_target_critic_of_the_lower_mean_and_a_termination_from_neither() -> None:
    _, learner = _learner()
    atoms = learner.support.values.numel()
    high, low = torch.full((atoms,), -30.0), torch.full((atoms,), -30.0)
    high[-1], low[0] = 30.0, 30.0  # all the mass on the support's top and bottom value
    learner.target_critic_1, learner.target_critic_2 = _Constant(high), _Constant(low)
    batch = {name: torch.zeros(4, value.shape[-1]) for name, value in learner.buffer.data.items()}
    batch["terminated"] = torch.tensor([[0.0], [0.0], [1.0], [1.0]])
    target = learner.target_distribution(batch)
    expected_low = -learner.cfg.gamma * learner.support.high  # the bottom value, discounted
    assert torch.allclose(learner.support.mean(target[:2]), torch.full((2,), expected_low), atol=1e-3)
    assert torch.allclose(learner.support.mean(target[2:]), torch.zeros(2), atol=1e-6)  # the reward alone
    learner.target_critic_1, learner.target_critic_2 = _Constant(low), _Constant(high)  # the other way round
    assert torch.allclose(
        learner.support.mean(learner.target_distribution(batch)[:2]), torch.full((2,), expected_low), atol=1e-3
    )


@pytest.mark.parametrize("gamma", [0.972, 0.99, 0.903, 0.9])
def test_returns_beyond_the_support_land_on_its_top_value_whatever_its_range(gamma: float) -> None:
    """In float32 a value clipped to the support's top can lie a hair above its index (ceil: one past the last
    atom): 0.972 and 0.903 with the default range did, an index error on the CPU and a device assert on a GPU."""
    limit = FastTd3Config(gamma=gamma).support_limit()
    support = Support.symmetric(limit, 101, "cpu")
    probs = torch.zeros(3, 101)
    probs[:, -1] = 1.0
    target = project(probs, torch.tensor([3.5, 100.0, -100.0]), torch.full((3,), gamma), support)
    assert torch.allclose(target.sum(-1), torch.ones(3))
    assert float(target[0, -1]) == pytest.approx(1.0, abs=1e-4) and float(target[1, -1]) == pytest.approx(1.0, abs=1e-4)
    for limit in torch.arange(0.1, 20.0, 0.1).tolist():  # ranges whose top lands just above its index
        wide = Support.symmetric(limit, 101, "cpu")
        assert torch.allclose(project(probs, torch.full((3,), 2 * limit), torch.ones(3), wide).sum(-1), torch.ones(3))


def test_a_resumed_run_takes_its_own_weight_decay_and_refuses_another_support(tmp_path: Path) -> None:
    _, trained = _learner()
    cfg = skrl_config("fast-td3", num_envs=8, steps=4)
    cfg.agent.fast_td3.weight_decay = 0.01
    continued = Runner(make_env(num_envs=8), cfg.agent, CPU, None).learner
    assert isinstance(continued, FastTd3)
    continued.load_state_dict(trained.state_dict())  # torch's optimizers restore the saved groups' settings
    assert {g["weight_decay"] for opt in continued.optimizers() for g in opt.param_groups} == {0.01}

    argv = ["cartpole-balance", "--gpu-ids", "None", "--agent.learner", "fast-td3", "--env.num-envs", "16"]
    argv += ["--agent.num-steps-per-env", "4", "--agent.max-iterations", "1", "--log-root", str(tmp_path / "logs")]
    argv += ["--agent.fast-td3.batch-size", "32", "--agent.fast-td3.gradient-steps", "2"]
    code, _, err = run_main(train.main, argv)
    assert code == 0, err
    (run_dir,) = (tmp_path / "logs").glob("*/*")
    again = [*argv[:-6], "--resume", str(run_dir / "model_1.pt")]
    code, _, err = run_main(train.main, [*again, "--agent.fast-td3.gamma", "0.97"])  # moves the default range
    assert code == 2 and "its critics learnt returns over [-300, 300], this run's span [-100, 100]" in err, err
    assert "pass --agent.fast-td3.value-limit 300 to continue it" in err and "Traceback" not in err
    code, _, err = run_main(train.main, [*again, "--agent.policy.no-obs-normalization"])
    assert code == 2 and "pass --agent.policy.obs-normalization to continue it" in err, err
    code, _, err = run_main(
        train.main, [*again, "--agent.fast-td3.gamma", "0.97", "--agent.fast-td3.value-limit", "300", "--dry-run"]
    )
    assert code == 0, err

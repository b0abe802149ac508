"""mjfleet's own FastTD3 learner: its distributional target, its replay buffer, what it stores at an episode's end,
its exploration noise, and an update that reads nothing to the host but its losses. The runner tests it shares with
every learner are in tests/test_skrl_training.py and tests/test_skrl_distributed.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mjfleet.cli import train
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

"""The batched environment against rsl-rl-lib's VecEnv contract, auto-reset and divergence recovery."""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from mjfleet.envs.env import MjEnv

from .conftest import make_env


def test_vecenv_contract(balance_env: MjEnv) -> None:
    env = balance_env
    assert isinstance(env, VecEnv)
    assert env.num_envs == 16 and env.num_actions == 1
    assert env.max_episode_length == 250  # 5 s at 2 x 0.01 s per step
    assert env.episode_length_buf.shape == (16,)
    obs = env.get_observations()
    assert isinstance(obs, TensorDict)
    assert set(obs.keys()) >= {"policy", "critic"}
    assert obs["policy"].shape == (16, 5)
    obs, rewards, dones, extras = env.step(torch.zeros(16, 1))
    assert isinstance(obs, TensorDict) and obs["policy"].shape == (16, 5)
    assert rewards.shape == (16,) and rewards.dtype == torch.float32
    assert dones.shape == (16,) and dones.dtype == torch.bool
    assert extras["time_outs"].shape == (16,) and extras["time_outs"].dtype == torch.bool
    assert torch.all(env.episode_length_buf == 1)


def test_time_out_resets_and_reports_episode_statistics() -> None:
    env = make_env(num_envs=8, episode_length_s=0.1)  # 5 control steps
    env.cfg.clip_actions = 0.0  # zero force: the pole cannot fall within 0.1 s
    for _ in range(5):
        _, _, dones, extras = env.step(torch.zeros(8, 1))
    assert torch.all(dones) and torch.all(extras["time_outs"])
    assert torch.all(env.episode_length_buf == 0)  # auto-reset inside step
    ids, values = extras["episodes"]
    assert ids.tolist() == list(range(8))
    assert torch.all(values["Episode/length"] == 5)
    assert torch.all(values["Episode/success"] == 1.0)
    means = env.stats.means(env.stats.keys, *env.stats.pop())
    assert means["Episode/length"] == 5 and means["Episode_Termination/time_out"] == 1.0
    assert set(extras["log"]) >= {"Episode/return", "Episode_Reward/upright"}


def test_termination_is_not_a_time_out() -> None:
    env = make_env(num_envs=4)
    env.sim.qpos[:, 1] = 1.2  # far past the fall threshold
    _, _, dones, extras = env.step(torch.zeros(4, 1))
    assert torch.all(dones) and not torch.any(extras["time_outs"])
    assert torch.all(extras["episodes"][1]["Episode_Termination/pole_fallen"] == 1.0)


def test_nonfinite_world_is_reset_alone_and_counted() -> None:
    env = make_env(num_envs=6)
    env.step(torch.zeros(6, 1))
    healthy_before = env.sim.qpos[[0, 1, 3, 4, 5]].clone()
    env.sim.qvel[2, 1] = float("nan")
    obs, rewards, dones, extras = env.step(torch.zeros(6, 1))
    assert dones.tolist() == [False, False, True, False, False, False]
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(rewards).all()
    assert torch.isfinite(env.sim.qpos).all() and torch.isfinite(env.sim.qvel).all()
    assert extras["episodes"][1]["Episode_Termination/nonfinite"].tolist() == [1.0]
    assert rewards[2] == 0.0
    assert not torch.equal(env.sim.qpos[[0, 1, 3, 4, 5]], healthy_before)  # the others kept simulating
    means = env.stats.means(env.stats.keys, *env.stats.pop())
    assert means["Episode_Termination/nonfinite"] == 1.0


def test_same_seed_same_resets_different_seed_different() -> None:
    a, b, c = make_env(seed=1), make_env(seed=1), make_env(seed=2)
    assert torch.equal(a.sim.qpos, b.sim.qpos)
    assert not torch.equal(a.sim.qpos, c.sim.qpos)


def test_swingup_starts_hanging_down() -> None:
    env = make_env("cartpole-swingup", num_envs=32)
    assert torch.all(torch.cos(env.sim.qpos[:, 1]) < -0.9)
    assert env.task.terminations(env) == {}

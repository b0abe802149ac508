"""The observation an episode ended in: the environment hands it out before its reset when a learner asks
(``extras["final_observations"]``), and the skrl learners store it as the transition's next observation, so a time-out
bootstraps from the state the episode reached, never from the next episode's first."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mjfleet.envs.env import MjEnv
from mjfleet.rl.learners.skrl.learner import SkrlLearner
from mjfleet.rl.runner import Runner
from mjfleet.runtime.context import DistributedContext
from mjfleet.sim.config import Backend

from .conftest import make_env
from .test_skrl_training import skrl_config

STEPS = 3
"""Control steps in the short episodes below."""


def _env(backend: Backend, episode_steps: float, num_envs: int = 4, **overrides: object) -> MjEnv:
    """Cart-poles whose episodes time out after ``episode_steps`` control steps."""
    probe = make_env(num_envs=1)
    sim = dataclasses.replace(probe.cfg.sim, backend=backend)
    return make_env(num_envs=num_envs, episode_length_s=episode_steps * probe.step_dt, sim=sim, **overrides)


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_a_time_out_hands_out_the_state_it_ended_in_not_the_next_episodes_first(backend: Backend) -> None:
    short, long = _env(backend, STEPS), _env(backend, 100 * STEPS)  # the same seed: the same first episodes
    short.final_observations = True
    assert torch.equal(short.get_observations()["policy"], long.get_observations()["policy"])
    zeros = torch.zeros(short.num_envs, short.num_actions)
    for step in range(1, STEPS + 1):
        obs, _, dones, extras = short.step(zeros)
        reached, *_ = long.step(zeros)
        assert torch.equal(dones, torch.full_like(dones, step == STEPS))  # every episode times out at STEPS
        for group in ("policy", "critic"):
            assert torch.allclose(extras["final_observations"][group], reached[group])
    assert extras["time_outs"].all()
    assert not torch.allclose(obs["policy"], reached["policy"])  # the returned observation starts the next episode


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_a_diverged_world_hands_out_its_reset_observation_not_its_broken_state(backend: Backend) -> None:
    """A world whose state blew up ends by a termination; its last state is no observation (NaN, or a speed in the
    thousands), and an off-policy learner would store it and its normaliser read it: its row is the reset one."""
    env = _env(backend, 100 * STEPS)
    env.final_observations = True
    env.sim.qvel[0, 1] = float("nan") if backend == "warp" else 5000.0  # MuJoCo C resets a NaN world itself
    obs, _, dones, extras = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert dones.tolist() == [True, False, False, False] and not extras["time_outs"].any()
    for group in ("policy", "critic"):
        final = extras["final_observations"][group]
        assert torch.isfinite(final).all() and float(final.abs().max()) < 100.0
        assert torch.equal(final[0], obs[group][0]) and torch.equal(final[1:], obs[group][1:])


def test_a_running_episode_hands_out_its_returned_observation_noise_and_all() -> None:
    # The observations before the resets are computed for every row; a row whose episode goes on takes the returned
    # one, not a second draw of its observation noise.
    from mjfleet.tasks.locomotion.config import NoiseConfig

    from .test_locomotion import make_loco_env

    env = make_loco_env("go1-velocity-flat", num_envs=2, noise=NoiseConfig(scale=1.0))
    env.final_observations = True
    env.episode_length_buf[0] = env.max_episode_length - 1  # world 0 times out in this step, world 1 goes on
    obs, _, dones, extras = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert dones.tolist() == [True, False]
    final = extras["final_observations"]["policy"]
    assert torch.equal(final[1], obs["policy"][1]) and not torch.equal(final[0], obs["policy"][0])


def test_the_environment_computes_no_final_observation_unless_asked() -> None:
    env = _env("mujoco", 1)
    _, _, dones, extras = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert dones.all() and "final_observations" not in extras


@pytest.mark.parametrize("learner", ["skrl-sac", "skrl-td3"])
def test_off_policy_memories_store_the_final_observation_and_what_ended_it(learner: str) -> None:
    cfg = skrl_config(learner, num_envs=4, steps=1)
    for name, overrides, terminated in (("time-out", {}, False), ("termination", {"cart_limit": -1.0}, True)):
        env = _env("mujoco", 1, **overrides)  # every episode ends in its first step
        runner = Runner(env, cfg.agent, DistributedContext(device="cpu"), None)
        agent = runner.learner
        assert isinstance(agent, SkrlLearner) and agent.agent.memory is not None and env.final_observations
        agent.train_mode()
        obs = env.get_observations()
        next_obs, rewards, dones, extras = env.step(agent.act(obs))
        agent.process_step(next_obs, rewards, dones, extras)
        memory = agent.agent.memory
        assert dones.all(), name
        final = extras["final_observations"]
        assert torch.equal(memory.get_tensor_by_name("next_observations")[0], final["policy"]), name
        assert torch.equal(memory.get_tensor_by_name("next_states")[0], final["critic"]), name
        assert not torch.allclose(memory.get_tensor_by_name("next_observations")[0], next_obs["policy"]), name
        assert memory.get_tensor_by_name("terminated")[0].all().item() is terminated, name


def test_rsl_rl_ppo_does_not_ask_for_final_observations() -> None:
    cfg = skrl_config("rsl-rl-ppo", num_envs=4, steps=1)
    env = make_env(num_envs=4)
    Runner(env, cfg.agent, DistributedContext(device="cpu"), None)
    assert not env.final_observations

"""What mjfleet relies on in rsl-rl-lib, pinned so that an upgrade fails here, loudly, rather than somewhere subtle.

mjfleet drives the training loop itself (``mjfleet.rl.runner``) and takes from rsl-rl-lib the models, the rollout
storage and PPO, built by ``PPO.construct_algorithm``. ``SyncedPPO`` (``mjfleet.rl.learners.rsl_rl``) times
``reduce_parameters``, relying on it running once per mini-batch between the backward pass and the optimizer step. That
``SyncedPPO`` leaves rsl_rl's distributed results unchanged is checked in ``tests/test_ppo_sync.py``.

If a test here fails after an upgrade: re-read the named rsl_rl code, adapt ``mjfleet.rl.learners.rsl_rl`` / ``runner``,
run ``tests/test_ppo_sync.py``, then update this file (and ``CHECKED`` with pyproject.toml's range).
"""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from rsl_rl.algorithms import PPO
from rsl_rl.models import MLPModel
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict

from mjfleet.rl.config import AgentConfig, AlgorithmConfig, PolicyConfig
from mjfleet.rl.learners.rsl_rl import SyncedPPO

from .pinned import assert_checked_range

CHECKED = "~=5.5.1"
"""The rsl-rl-lib versions these contracts were checked against (pyproject.toml must allow exactly these)."""
NUM_ENVS, STEPS, OBS, ACTIONS = 32, 4, 3, 2


def _cfg(schedule: str = "adaptive", **algorithm: Any) -> dict[str, Any]:
    agent = AgentConfig(
        num_steps_per_env=STEPS,
        policy=PolicyConfig(actor_hidden_dims=(8,), critic_hidden_dims=(8,)),
        algorithm=dataclasses.replace(AlgorithmConfig(), schedule=schedule, **algorithm),  # type: ignore[arg-type]
    )
    return agent.to_rsl_rl()


def _obs(generator: torch.Generator) -> TensorDict:
    obs = torch.randn(NUM_ENVS, OBS, generator=generator)
    return TensorDict({"policy": obs, "critic": obs}, batch_size=[NUM_ENVS])


def _build(cfg: dict[str, Any]) -> PPO:
    torch.manual_seed(0)
    env = SimpleNamespace(num_envs=NUM_ENVS, num_actions=ACTIONS)
    return PPO.construct_algorithm(_obs(torch.Generator().manual_seed(0)), env, cfg, "cpu")  # type: ignore[arg-type]


def _rollout(alg: PPO) -> None:
    data = torch.Generator().manual_seed(1)
    obs = _obs(data)
    for _ in range(STEPS):
        alg.act(obs)
        obs = _obs(data)
        alg.process_env_step(obs, torch.randn(NUM_ENVS, generator=data), torch.zeros(NUM_ENVS, dtype=torch.bool), {})
    alg.compute_returns(obs)


def test_pyproject_allows_the_rsl_rl_lib_versions_these_contracts_were_checked_against() -> None:
    assert_checked_range("rsl-rl-lib", CHECKED)


def test_construct_algorithm_builds_synced_ppo_from_our_config() -> None:
    assert list(inspect.signature(PPO.construct_algorithm).parameters) == ["obs", "env", "cfg", "device"]
    cfg = _cfg()
    assert set(cfg) == {"num_steps_per_env", "obs_groups", "actor", "critic", "algorithm", "multi_gpu"}
    ppo_parameters = set(inspect.signature(PPO.__init__).parameters)
    sent = set(cfg["algorithm"]) - {"class_name"}
    assert sent <= ppo_parameters, f"PPO no longer takes {sorted(sent - ppo_parameters)}"
    alg = _build(cfg)
    assert isinstance(alg, SyncedPPO)
    assert isinstance(alg.actor, MLPModel) and isinstance(alg.critic, MLPModel)
    assert isinstance(alg.storage, RolloutStorage)
    assert alg.storage.num_transitions_per_env == STEPS and alg.storage.num_envs == NUM_ENVS


def test_ppo_attributes_synced_ppo_and_the_runner_read() -> None:
    alg = _build(_cfg())
    for name in ("learning_rate", "optimizer", "actor", "critic", "storage", "device"):
        assert hasattr(alg, name), f"PPO.{name} is gone"
    for name in ("output_std", "as_onnx"):
        assert hasattr(MLPModel, name), f"MLPModel.{name} is gone"


@pytest.mark.parametrize("schedule", ["fixed", "adaptive"])
def test_only_the_adaptive_schedule_moves_the_learning_rate(schedule: str) -> None:
    """The runner logs ``alg.learning_rate``; rsl_rl's update keeps it and the optimizer's in step."""
    alg = _build(_cfg(schedule, desired_kl=1e-6))  # any step overshoots this target
    _rollout(alg)
    alg.update()
    moved = alg.learning_rate != AlgorithmConfig().learning_rate
    assert moved == (schedule == "adaptive")
    assert all(group["lr"] == alg.learning_rate for group in alg.optimizer.param_groups)


def test_reduce_parameters_runs_once_per_mini_batch_between_backward_and_step() -> None:
    alg = _build(_cfg("fixed"))
    events: list[str] = []
    step = alg.optimizer.step

    def reduce_parameters() -> None:
        assert all(p.grad is not None for p in alg.actor.parameters())
        events.append("reduce")

    def optimizer_step(*args: Any, **kwargs: Any) -> Any:
        events.append("step")
        return step(*args, **kwargs)

    alg.is_multi_gpu = True  # rsl_rl calls reduce_parameters only then; no collective runs with it replaced
    alg.reduce_parameters = reduce_parameters  # type: ignore[method-assign]
    alg.optimizer.step = optimizer_step  # type: ignore[method-assign]
    _rollout(alg)
    alg.update()
    assert events == ["reduce", "step"] * (alg.num_learning_epochs * alg.num_mini_batches)


def test_what_the_evaluation_environments_rely_on() -> None:
    """The runner steps its evaluation environments with ``actor(obs)`` (the distribution's mean, as ``play`` runs
    the policy) after ``act`` sampled the training environments' actions, and gives PPO a rollout storage of its own
    built for the training environments alone."""
    assert list(inspect.signature(RolloutStorage.__init__).parameters) == [
        "self",
        "training_type",
        "num_envs",
        "num_transitions_per_env",
        "obs",
        "actions_shape",
        "device",
    ]
    alg = _build(_cfg())
    obs = _obs(torch.Generator().manual_seed(2))
    sampled = alg.act(obs)
    mean, log_prob = alg.actor.output_mean.clone(), alg.transition.actions_log_prob
    deterministic = alg.actor(obs)
    assert torch.equal(deterministic, mean) and not torch.equal(sampled, mean)
    # The deterministic pass leaves the sampled distribution (and the transition recorded from it) alone.
    assert torch.equal(alg.actor.output_mean, mean) and alg.transition.actions_log_prob is log_prob


def test_save_and_load_keep_the_checkpoint_keys() -> None:
    """mjfleet checkpoints are ``PPO.save()`` plus mjfleet's keys; loading must accept them back."""
    alg = _build(_cfg())
    saved = alg.save()
    assert set(saved) == {"actor_state_dict", "critic_state_dict", "optimizer_state_dict"}
    assert {"obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer.count"} <= set(saved["actor_state_dict"])
    other = _build(_cfg())
    other.load({**saved, "iter": 3}, None, True)
    for key, value in saved["actor_state_dict"].items():
        assert torch.equal(other.actor.state_dict()[key], value), key
    assert list(inspect.signature(PPO.load).parameters) == ["self", "loaded_dict", "load_cfg", "strict"]

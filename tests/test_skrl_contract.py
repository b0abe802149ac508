"""What mjfleet relies on in skrl, pinned so that an upgrade fails here, loudly, rather than somewhere subtle.

mjfleet drives skrl's PPO, SAC and TD3 itself (``mjfleet.rl.learners.skrl.algorithms``): it builds each agent with its
memory and models (``mjfleet.rl.learners.skrl.models``), calls ``act``, ``record_transition`` and ``update``, and saves
the agent's ``checkpoint_modules``. skrl's import-time distributed setup is kept from running by
``mjfleet.rl.learners.skrl.distributed``, which then sets the private fields of skrl's torch configuration from
mjfleet's ``DistributedContext``.

If a test here fails after an upgrade: re-read the named skrl code, adapt those three modules, run
``tests/test_skrl_training.py`` (its slow tests included), then update this file (and ``CHECKED`` with
pyproject.toml's range).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mjfleet.rl.learners.skrl import distributed  # noqa: F401  (before skrl, as mjfleet imports it)

# isort: split
import skrl
from skrl.agents.torch import Agent
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.agents.torch.sac import SAC, SAC_CFG
from skrl.agents.torch.td3 import TD3, TD3_CFG
from skrl.memories.torch import RandomMemory
from skrl.models.torch import Model
from skrl.resources.preprocessors.torch import RunningStandardScaler

from mjfleet.rl.config import AgentConfig
from mjfleet.rl.learners.registry import build_learner
from mjfleet.rl.learners.skrl.learner import SkrlLearner
from mjfleet.runtime.context import DistributedContext

from .conftest import make_env
from .pinned import assert_checked_range

CHECKED = "~=2.1.1"
"""The skrl versions these contracts were checked against (pyproject.toml must allow exactly these)."""
REPO = Path(__file__).resolve().parents[1]


def _learner(name: str, **agent: object) -> SkrlLearner:
    cfg = dataclasses.replace(AgentConfig(num_steps_per_env=4), learner=name, **agent)  # type: ignore[arg-type]
    cfg.sac.batch_size = cfg.td3.batch_size = 16
    cfg.sac.gradient_steps = cfg.td3.gradient_steps = 2
    env = make_env(num_envs=8)
    learner = build_learner(env, cfg, DistributedContext(device="cpu"), env.num_envs)
    assert isinstance(learner, SkrlLearner)
    return learner


def _collect(learner: SkrlLearner, steps: int = 4) -> None:
    env = make_env(num_envs=8)
    learner.train_mode()
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(steps):
            actions = learner.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            learner.process_step(obs, rewards, dones, extras)


def test_pyproject_allows_the_skrl_versions_these_contracts_were_checked_against() -> None:
    assert_checked_range("skrl", CHECKED)


def test_import_sets_up_no_process_group_and_the_configuration_takes_mjfleets_ranks() -> None:
    """In a fresh interpreter with ``WORLD_SIZE=2`` set and a gloo group existing (a worker's, as mjfleet's worker
    creates it): importing skrl through ``mjfleet.rl.learners.skrl.distributed`` leaves the group alone,
    ``configure_skrl`` gives skrl the worker's ranks, skrl's gradient all-reduce runs on that group and divides by the
    world size it was given, and skrl imported the plain way still tries to create a second group (so the guard is still
    needed)."""
    code = textwrap.dedent(
        """
        import json, os, sys, tempfile
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
        os.environ.update(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0")
        from mjfleet.rl.learners.skrl.distributed import configure_skrl, skrl
        from mjfleet.runtime.context import DistributedContext
        result = {"after_import": [skrl.config.torch.is_distributed, skrl.config.torch.world_size],
                  "backend": dist.get_backend(), "world_size_env": os.environ["WORLD_SIZE"]}
        configure_skrl(DistributedContext(rank=1, local_rank=1, world_size=2, device="cpu", is_main=False))
        c = skrl.config.torch
        result["configured"] = [c.is_distributed, c.rank, c.world_size, c.local_rank, str(c.device)]
        from skrl.models.torch import DeterministicMixin, Model
        class Net(DeterministicMixin, Model):
            def __init__(self):
                Model.__init__(self, observation_space=1, action_space=1, device="cpu")
                DeterministicMixin.__init__(self)
                self.w = torch.nn.Parameter(torch.ones(1))
            def compute(self, inputs, role=""):
                return self.w * inputs["observations"], {}
        net = Net()
        net.w.grad = torch.full((1,), 4.0)
        net.reduce_parameters()  # all-reduce over the one-member gloo group, then / skrl's world size
        result["reduced_grad"] = net.w.grad.item()
        for name in [m for m in sys.modules if m == "skrl" or m.startswith("skrl.")]:
            del sys.modules[name]
        try:
            import skrl
            result["plain_import"] = "no error"
        except Exception as e:
            result["plain_import"] = f"{type(e).__name__}: {e}"
        print(json.dumps(result))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["after_import"] == [False, 1]  # WORLD_SIZE was hidden from skrl's import...
    assert result["world_size_env"] == "2"  # ...and restored afterwards
    assert result["backend"] == "gloo"
    assert result["configured"] == [True, 1, 2, 1, "cpu"]
    assert result["reduced_grad"] == 2.0
    assert "twice" in result["plain_import"], f"skrl's import no longer initialises a process group: {result}"


def test_the_configuration_fields_mjfleet_sets_are_what_its_properties_read() -> None:
    torch_config = skrl.config.torch
    source = inspect.getsource(type(torch_config))
    for field in ("_is_distributed", "_rank", "_world_size", "_local_rank", "_device"):
        assert f"self.{field}" in source, f"skrl's torch configuration has no {field} any more"
    assert "init_process_group" in source


def test_agent_constructors_and_the_calls_the_learners_make() -> None:
    for agent in (PPO, SAC, TD3):
        assert list(inspect.signature(agent.__init__).parameters) == [
            "self",
            "models",
            "memory",
            "observation_space",
            "state_space",
            "action_space",
            "device",
            "cfg",
        ], agent
        assert list(inspect.signature(agent.act).parameters) == [
            "self",
            "observations",
            "states",
            "timestep",
            "timesteps",
        ]
        assert list(inspect.signature(agent.update).parameters) == ["self", "timestep", "timesteps"]
    assert set(inspect.signature(Agent.record_transition).parameters) == {
        "self",
        "observations",
        "states",
        "actions",
        "rewards",
        "next_observations",
        "next_states",
        "terminated",
        "truncated",
        "infos",
        "timestep",
        "timesteps",
    }
    assert "replacement" in inspect.signature(RandomMemory.__init__).parameters
    assert list(inspect.signature(RunningStandardScaler._parallel_variance).parameters) == [
        "self",
        "input_mean",
        "input_var",
        "input_count",
    ]
    assert {"running_mean", "running_variance", "current_count"} == set(RunningStandardScaler(2).state_dict())
    assert hasattr(Model, "reduce_parameters") and hasattr(Model, "broadcast_parameters")


def test_the_configuration_fields_the_learners_set_exist() -> None:
    fields = {cfg: {f.name for f in dataclasses.fields(cfg)} for cfg in (PPO_CFG, SAC_CFG, TD3_CFG)}
    shared = {"learning_rate", "discount_factor", "grad_norm_clip", "experiment", "observation_preprocessor"}
    assert shared | {"state_preprocessor", "state_preprocessor_kwargs"} <= fields[PPO_CFG] & fields[SAC_CFG]
    assert {
        "rollouts",
        "learning_epochs",
        "mini_batches",
        "gae_lambda",
        "learning_rate_scheduler",
        "value_preprocessor",
        "ratio_clip",
        "value_clip",
        "entropy_loss_scale",
        "value_loss_scale",
        "kl_threshold",
        "time_limit_bootstrap",
    } <= fields[PPO_CFG]
    off_policy = {"gradient_steps", "batch_size", "polyak", "random_timesteps", "learning_starts"}
    assert off_policy | {"learn_entropy", "initial_entropy_value", "target_entropy"} <= fields[SAC_CFG]
    assert (
        off_policy
        | {
            "exploration_noise",
            "policy_delay",
            "smooth_regularization_noise",
            "smooth_regularization_clip",
        }
        <= fields[TD3_CFG]
    )


@pytest.mark.parametrize(
    ("name", "modules"),
    [
        ("skrl-ppo", {"policy", "value", "optimizer", "observation_preprocessor", "state_preprocessor"}),
        (
            "skrl-sac",
            {"policy", "critic_1", "critic_2", "target_critic_1", "target_critic_2", "policy_optimizer"}
            | {"critic_optimizer", "entropy_optimizer", "observation_preprocessor", "state_preprocessor"},
        ),
        (
            "skrl-td3",
            {"policy", "target_policy", "critic_1", "critic_2", "target_critic_1", "target_critic_2"}
            | {"policy_optimizer", "critic_optimizer", "observation_preprocessor", "state_preprocessor"},
        ),
    ],
)
def test_checkpoint_modules_and_what_they_lack(name: str, modules: set[str]) -> None:
    """A checkpoint holds the agent's ``checkpoint_modules`` and, beside them, what they lack to continue a run."""
    agent = _learner(name).agent
    assert set(agent.checkpoint_modules) - {"value_preprocessor"} == modules
    if isinstance(agent, SAC):
        # Its optimizer's state is saved but not the coefficient it optimises: mjfleet saves it.
        assert isinstance(agent.log_entropy_coefficient, torch.Tensor)
        assert all(v is not agent.log_entropy_coefficient for v in agent.checkpoint_modules.values())
    if isinstance(agent, TD3):
        assert agent._update_counter == 0  # the phase of the delayed actor updates, not in checkpoint_modules
    if isinstance(agent, PPO):
        assert "scheduler" not in agent.checkpoint_modules and agent.scheduler is not None


def test_sac_records_losses_only_while_it_writes_them() -> None:
    """The reason mjfleet sets ``write_interval`` for SAC's update alone (see mjfleet.rl.learners.skrl.algorithms)."""
    learner = _learner("skrl-sac")
    _collect(learner)
    learner.agent.update(timestep=4, timesteps=0)
    assert not any(tag.startswith("Loss / ") for tag in learner.agent.tracking_data)
    losses = learner.update()
    assert {"policy_loss", "critic_loss", "entropy_loss", "entropy_coefficient"} == set(losses)


def test_building_an_agent_writes_nothing_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("skrl-ppo", "skrl-sac", "skrl-td3"):
        _collect(_learner(name))
    assert list(tmp_path.iterdir()) == []  # skrl's experiment directory ./runs/... was never created

"""The runner's learner interface around an skrl agent: the part every skrl learner shares
(:mod:`mjfleet.rl.learners.skrl.algorithms` has PPO, SAC and TD3 and why they are built as they are).

Each step of the training environments goes to ``Agent.act`` and ``Agent.record_transition``, each iteration ends in
one ``Agent.update``; checkpoints hold the agent's ``checkpoint_modules`` and what a learner adds to continue a run
(:meth:`SkrlLearner._extra_state`).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from tensordict import TensorDict
from torch import nn

from mjfleet.errors import UsageError
from mjfleet.rl.learners.base import Learner, SyncClock, optimizer_tensors, replay_warm_up_notice
from mjfleet.rl.learners.registry import learner_entry, learner_names
from mjfleet.rl.learners.skrl.models import DeterministicActor, GaussianActor, SkrlPolicy

# isort: split
from skrl.agents.torch import Agent
from skrl.resources.preprocessors.torch import RunningStandardScaler

logger = logging.getLogger(__name__)

TRACKED = ("Loss / ", "Coefficient / ")
"""The ``tracking_data`` entries an update reports, by prefix (``Loss / Critic loss`` becomes ``critic``)."""


class SkrlLearner(Learner):
    """An skrl agent driven by the runner: ``act`` and ``record_transition`` every step, ``update`` every iteration."""

    final_observations = True  # SAC and TD3 bootstrap time-outs from the next observation, PPO its value too
    optimizer_attribute: ClassVar[str] = "policy_optimizer"
    """The agent's attribute holding the actor's optimizer, whose learning rate progress lines report."""
    replays: ClassVar[bool] = False
    """Whether the agent learns from a replay buffer (which checkpoints do not hold)."""

    def __init__(
        self,
        agent: Agent,
        actor: GaussianActor | DeterministicActor,
        clock: SyncClock,
        device: str,
        learning_starts: int = 0,
    ) -> None:
        agent.init()
        self.agent = agent
        """skrl's agent, with its models, memory and preprocessors."""
        self.actor = actor
        """The actor (skrl's ``policy`` model)."""
        normaliser = agent.checkpoint_modules.get("observation_preprocessor")
        self._policy = SkrlPolicy(actor, normaliser if isinstance(normaliser, RunningStandardScaler) else None)
        self.clock = clock
        self.timestep = 0
        """Steps each environment has taken in this run (skrl's ``timestep``: random steps and learning starts count
        them)."""
        self.learning_starts = learning_starts
        self.filled_from = 0
        """The :attr:`timestep` at which the replay buffer started empty: this run's start, or the step a continued
        run resumed at (checkpoints do not hold the buffer). The warm-up, ``random_steps`` of random actions and
        ``learning_starts`` steps before the first update, counts from it, so a continued run fills its buffer
        again before it learns from it."""
        self._step: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # --- collecting ------------------------------------------------------------------------------------------
    def act(self, obs: TensorDict) -> torch.Tensor:
        observations, states = obs["policy"], obs["critic"]
        # ``timesteps`` is read only by skrl's reward shaping and exploration schedules, which these agents lack.
        actions, _ = self.agent.act(observations, states, timestep=self.timestep - self.filled_from, timesteps=0)
        self._step = (observations, states, actions)
        return actions

    def act_deterministic(self, obs: TensorDict) -> torch.Tensor:
        return self._policy(obs)

    def process_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]) -> None:
        assert self._step is not None, "process_step without act"
        observations, states, actions = self._step
        time_outs = extras["time_outs"].bool()
        # An ended episode's next observation is the state it ended in, not the next episode's first (the
        # environment resets inside the step): an off-policy learner bootstraps a time-out from it.
        final = extras.get("final_observations", obs)
        self.agent.record_transition(
            observations=observations,
            states=states,
            actions=actions,
            rewards=rewards.unsqueeze(-1).clone(),  # PPO adds its time-out bootstrap in place
            next_observations=final["policy"],
            next_states=final["critic"],
            terminated=(dones.bool() & ~time_outs).unsqueeze(-1),
            truncated=time_outs.unsqueeze(-1),
            infos={},
            timestep=self.timestep,
            timesteps=0,
        )
        self.timestep += 1
        self._step = None

    def end_rollout(self, obs: TensorDict) -> None:
        """Nothing: skrl's PPO takes the last observations from its last recorded transition."""

    # --- learning --------------------------------------------------------------------------------------------
    def update(self) -> dict[str, float]:
        if self.timestep - self.filled_from < self.learning_starts:
            self.agent.tracking_data.clear()
            return {}
        agent = self.agent
        agent.enable_models_training_mode(True)
        try:
            self._update_agent()
        finally:
            agent.write_interval = 0
            agent.enable_models_training_mode(False)
        losses = {}
        for tag, values in agent.tracking_data.items():
            if tag.startswith(TRACKED) and values:
                # skrl's names as they are (``entropy_loss``, ``value_loss``): rsl-rl-lib's PPO logs other quantities
                # as ``entropy`` (the policy's entropy) and ``value`` (the value error), which must not share a tag.
                name = tag.split(" / ", 1)[1].lower().replace(" ", "_")
                losses[name] = float(sum(values) / len(values))
        agent.tracking_data.clear()
        return losses

    def _update_agent(self) -> None:
        """One ``Agent.update``, its statistics tracked (SAC tracks its losses only while it writes them)."""
        self.agent.write_interval = 1
        self.agent.update(timestep=self.timestep, timesteps=0)

    def train_mode(self) -> None:
        self.agent.enable_training_mode(True)

    def eval_mode(self) -> None:
        self.agent.enable_training_mode(False)
        self.agent.enable_models_training_mode(False)

    def broadcast_parameters(self) -> None:
        for model in self.agent.models.values():
            model.broadcast_parameters()
        for module in self._normalisers():
            for buffer in module.buffers():
                dist.broadcast(buffer, src=0)

    # --- state -----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """skrl's ``checkpoint_modules`` by name (``skrl``), and what they lack to continue a run (``skrl_state``)."""
        modules = {name: module.state_dict() for name, module in self.agent.checkpoint_modules.items()}
        return {"skrl": modules, "skrl_state": {"timestep": self.timestep, **self._extra_state()}}

    def _settings_group(self) -> str:
        """The ``--agent.<group>`` its registry entry reads (a subclass registered under another name has its own)."""
        settings = learner_entry(self.name).settings if self.name in learner_names() else None
        return settings or self.name.removeprefix("skrl-")

    def load_state_dict(self, data: dict[str, Any]) -> None:
        saved, modules = data["skrl"], self.agent.checkpoint_modules
        if set(saved) != set(modules):
            differing = set(saved) ^ set(modules)
            flags = [
                flag
                for flag, names in (
                    ("--agent.policy.[no-]obs-normalization", {"observation_preprocessor", "state_preprocessor"}),
                    (f"--agent.{self._settings_group()}.[no-]learn-entropy", {"entropy_optimizer"}),
                )
                if differing & names
            ]
            raise UsageError(
                f"the checkpoint holds the {self.name} modules {', '.join(sorted(saved))}, this run's are"
                f" {', '.join(sorted(modules))}" + (f" (another {' or '.join(flags)}?)" if flags else "")
            )
        for name, module in modules.items():
            module.load_state_dict(saved[name])
        state = data.get("skrl_state") or {}
        self.timestep = self.filled_from = int(state.get("timestep", 0))
        self._load_extra_state(state)

    def continued_notice(self) -> str:
        if not self.replays:
            return ""
        random_steps = int(getattr(self.agent.cfg, "random_timesteps", 0))
        return replay_warm_up_notice(self.name, random_steps, self.learning_starts)

    def _extra_state(self) -> dict[str, Any]:
        """What the learner keeps beyond skrl's ``checkpoint_modules``."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_extra_state`."""

    def policy(self) -> SkrlPolicy:
        return self._policy

    def modules(self) -> dict[str, nn.Module]:
        return {name: m for name, m in self.agent.checkpoint_modules.items() if isinstance(m, nn.Module)}

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [m for _, m in sorted(self.agent.checkpoint_modules.items()) if isinstance(m, torch.optim.Optimizer)]

    def replica_tensors(self) -> list[torch.Tensor]:
        tensors: list[torch.Tensor] = []
        for _, module in sorted(self.agent.checkpoint_modules.items()):
            if isinstance(module, torch.optim.Optimizer):
                tensors += optimizer_tensors(module)
            else:
                tensors += list(module.state_dict().values())
        for value in self._extra_state().values():
            if isinstance(value, torch.Tensor):
                tensors.append(value)
        return tensors

    def _normalisers(self) -> list[nn.Module]:
        return [m for name, m in self.agent.checkpoint_modules.items() if name.endswith("_preprocessor")]

    # --- reporting -------------------------------------------------------------------------------------------
    @property
    def learning_rate(self) -> float:
        optimizer: torch.optim.Optimizer = getattr(self.agent, self.optimizer_attribute)
        return float(optimizer.param_groups[0]["lr"])

    @property
    def action_std(self) -> float:
        """The Gaussian actor's mean standard deviation (a deterministic actor's learner reports its noise)."""
        assert isinstance(self.actor, GaussianActor)
        return self.actor.action_std

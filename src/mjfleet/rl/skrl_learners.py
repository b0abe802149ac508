"""skrl's PPO, SAC and TD3 (``--agent.learner skrl-ppo|skrl-sac|skrl-td3``) behind the runner's learner interface.

skrl's agents and memories are used as they are. mjfleet builds them from its settings (``--agent.algorithm.*`` for
PPO, ``--agent.sac.*``, ``--agent.td3.*``, the networks from ``--agent.policy.*``: :mod:`mjfleet.rl.skrl_models`),
hands them each step of the training environments (``Agent.act``, ``Agent.record_transition``) and calls
``Agent.update`` once per iteration; mjfleet's loop (:mod:`mjfleet.rl.runner`) takes the place of skrl's trainers, and
with it progress, evaluation, checkpoints and the run's identity. What it adds around the agents, and why:

- the job's process group: :mod:`mjfleet.rl.skrl_distributed`;
- observation (and PPO's value) standardisers that stay identical on every worker
  (:class:`~mjfleet.rl.skrl_models.SyncedStandardScaler`);
- SAC's entropy coefficient learns from the workers' averaged gradient, as the networks do: skrl leaves it to each
  worker, and the replicas would drift apart;
- checkpoints hold every one of the agent's ``checkpoint_modules`` and what they lack for a run to continue where it
  stopped: SAC's entropy coefficient, PPO's learning-rate schedule, TD3's count of critic updates (the phase of its
  delayed actor updates) and the steps taken (random exploration and ``learning_starts`` count them). The replay
  buffer is not kept: a continued run fills it afresh;
- the losses come from the agent's ``tracking_data``, which SAC fills only while its ``write_interval`` is positive:
  it is, for the update alone (while collecting, skrl would add statistics that cost device syncs every step);
- PPO bootstraps time-outs (skrl's ``time_limit_bootstrap``) and never stops an epoch early on the KL divergence: one
  worker stopping while another goes on would leave that one waiting in a collective.

Environments reset inside the step, so the observation after a time-out is the next episode's first: PPO bootstraps
the time-out from it, SAC and TD3 store the transition as not terminated (next observation that one). Terminations
never bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import torch
import torch.distributed as dist
from tensordict import TensorDict
from torch import nn

from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.rl.config import AgentConfig, OffPolicyConfig, PolicyConfig
from mjfleet.rl.learner import Learner
from mjfleet.rl.skrl_distributed import configure_skrl
from mjfleet.rl.skrl_models import (
    Critic,
    DeterministicActor,
    GaussianActor,
    SkrlPolicy,
    SyncClock,
    SyncedStandardScaler,
)
from mjfleet.runtime.context import DistributedContext

# isort: split
from skrl.agents.torch import Agent, ExperimentCfg
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.agents.torch.sac import SAC, SAC_CFG
from skrl.agents.torch.td3 import TD3, TD3_CFG
from skrl.memories.torch import RandomMemory
from skrl.resources.noises.torch import GaussianNoise
from skrl.resources.preprocessors.torch import RunningStandardScaler
from skrl.resources.schedulers.torch import KLAdaptiveLR

TRACKED = ("Loss / ", "Coefficient / ")
"""The ``tracking_data`` entries an update reports, by prefix (``Loss / Critic loss`` becomes ``critic``)."""


class SkrlLearner(Learner):
    """An skrl agent driven by the runner: ``act`` and ``record_transition`` every step, ``update`` every iteration."""

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
        self._on_cuda = torch.device(device).type == "cuda"
        self._device = device
        self._step: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # --- collecting ------------------------------------------------------------------------------------------
    def act(self, obs: TensorDict) -> torch.Tensor:
        observations, states = obs["policy"], obs["critic"]
        # ``timesteps`` is read only by skrl's reward shaping and exploration schedules, which these agents lack.
        actions, _ = self.agent.act(observations, states, timestep=self.timestep, timesteps=0)
        self._step = (observations, states, actions)
        return actions

    def act_deterministic(self, obs: TensorDict) -> torch.Tensor:
        return self._policy(obs)

    def process_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]) -> None:
        assert self._step is not None, "process_step without act"
        observations, states, actions = self._step
        time_outs = extras["time_outs"].bool()
        self.agent.record_transition(
            observations=observations,
            states=states,
            actions=actions,
            rewards=rewards.unsqueeze(-1).clone(),  # PPO adds its time-out bootstrap in place
            next_observations=obs["policy"],
            next_states=obs["critic"],
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
        if self.timestep < self.learning_starts:
            return {}
        agent = self.agent
        agent.enable_models_training_mode(True)
        agent.write_interval = 1  # SAC tracks its losses only while it writes them (see the module docstring)
        try:
            agent.update(timestep=self.timestep, timesteps=0)
        finally:
            agent.write_interval = 0
            agent.enable_models_training_mode(False)
        losses = {}
        for tag, values in agent.tracking_data.items():
            if tag.startswith(TRACKED) and values:
                name = tag.split(" / ", 1)[1].removesuffix(" loss").lower().replace(" ", "_")
                losses[name] = float(sum(values) / len(values))
        agent.tracking_data.clear()
        return losses

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

    def load_state_dict(self, data: dict[str, Any]) -> None:
        saved, modules = data["skrl"], self.agent.checkpoint_modules
        if set(saved) != set(modules):
            raise UsageError(
                f"the checkpoint holds the {self.name} modules {', '.join(sorted(saved))}, this run's are"
                f" {', '.join(sorted(modules))} (another --agent.policy.obs-normalization?)"
            )
        for name, module in modules.items():
            module.load_state_dict(saved[name])
        state = data.get("skrl_state") or {}
        self.timestep = int(state.get("timestep", 0))
        self._load_extra_state(state)

    def _extra_state(self) -> dict[str, Any]:
        """What the learner keeps beyond skrl's ``checkpoint_modules``."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_extra_state`."""

    def policy(self) -> SkrlPolicy:
        return self._policy

    def modules(self) -> dict[str, nn.Module]:
        return {name: m for name, m in self.agent.checkpoint_modules.items() if isinstance(m, nn.Module)}

    def replica_tensors(self) -> list[torch.Tensor]:
        tensors: list[torch.Tensor] = []
        for _, module in sorted(self.agent.checkpoint_modules.items()):
            if isinstance(module, torch.optim.Optimizer):
                for state in module.state_dict()["state"].values():
                    tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
                tensors.append(torch.tensor([g["lr"] for g in module.param_groups], dtype=torch.float64))
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
    def sync_s(self) -> float:
        return self.clock.seconds

    @property
    def reductions(self) -> int:
        return self.clock.reductions

    def reset_sync(self) -> None:
        self.clock.reset()

    def synchronize(self) -> None:
        if self._on_cuda:
            torch.cuda.synchronize(self._device)


class SkrlPpo(SkrlLearner):
    """skrl's PPO from ``--agent.algorithm.*`` (``--agent.learner skrl-ppo``)."""

    name = "skrl-ppo"
    learning_rate_flag = "--agent.algorithm.learning-rate"
    agent: PPO

    @property
    def learning_rate(self) -> float:
        return float(self.agent.optimizer.param_groups[0]["lr"])

    @property
    def action_std(self) -> float:
        assert isinstance(self.actor, GaussianActor)
        return self.actor.action_std

    def _extra_state(self) -> dict[str, Any]:
        return {"scheduler": self.agent.scheduler.state_dict()} if self.agent.scheduler else {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        if self.agent.scheduler and "scheduler" in state:
            self.agent.scheduler.load_state_dict(state["scheduler"])


class SkrlSac(SkrlLearner):
    """skrl's SAC from ``--agent.sac.*`` (``--agent.learner skrl-sac``)."""

    name = "skrl-sac"
    learning_rate_flag = "--agent.sac.learning-rate"
    agent: SAC

    @property
    def learning_rate(self) -> float:
        return float(self.agent.policy_optimizer.param_groups[0]["lr"])

    @property
    def action_std(self) -> float:
        assert isinstance(self.actor, GaussianActor)
        return self.actor.action_std

    def _extra_state(self) -> dict[str, Any]:
        if not self.agent.cfg.learn_entropy:
            return {}
        return {"log_entropy_coefficient": self.agent.log_entropy_coefficient.detach().clone()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        saved = state.get("log_entropy_coefficient")
        if self.agent.cfg.learn_entropy and isinstance(saved, torch.Tensor):
            with torch.no_grad():
                self.agent.log_entropy_coefficient.copy_(saved)
            self.agent._entropy_coefficient = torch.exp(self.agent.log_entropy_coefficient.detach())


class SkrlTd3(SkrlLearner):
    """skrl's TD3 from ``--agent.td3.*`` (``--agent.learner skrl-td3``)."""

    name = "skrl-td3"
    learning_rate_flag = "--agent.td3.learning-rate"
    agent: TD3

    @property
    def learning_rate(self) -> float:
        return float(self.agent.policy_optimizer.param_groups[0]["lr"])

    @property
    def action_std(self) -> float:
        return float(self.agent.cfg.exploration_noise_kwargs.get("std", 0.0))

    def _extra_state(self) -> dict[str, Any]:
        return {"update_counter": int(self.agent._update_counter)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.agent._update_counter = int(state.get("update_counter", 0))


def build_skrl_learner(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> Learner:
    """The skrl learner ``agent_cfg.learner`` names, for the first ``train_envs`` environments of ``env``, its
    buffers on ``ctx.device``."""
    configure_skrl(ctx)
    obs = env.get_observations()
    spaces = _Spaces(_box(obs["policy"].shape[-1]), _box(obs["critic"].shape[-1]))
    clock = SyncClock(on_cuda=ctx.device_kind == "cuda")
    if agent_cfg.learner == "skrl-ppo":
        return _ppo(env, agent_cfg, ctx, train_envs, spaces, clock)
    if agent_cfg.learner == "skrl-sac":
        return _sac(env, agent_cfg, ctx, train_envs, spaces, clock)
    if agent_cfg.learner == "skrl-td3":
        return _td3(env, agent_cfg, ctx, train_envs, spaces, clock)
    raise ValueError(f"not an skrl learner: {agent_cfg.learner}")


@dataclass(frozen=True)
class RewardScale:
    """skrl's ``rewards_shaper`` of the off-policy learners: the rewards times :attr:`factor`
    (``--agent.sac.reward-scale``, ``--agent.td3.reward-scale``)."""

    factor: float

    def __call__(self, rewards: torch.Tensor, timestep: int, timesteps: int) -> torch.Tensor:
        return rewards * self.factor


@dataclass(frozen=True)
class _Spaces:
    """The policy's and the critic's observation spaces (skrl's observations and states)."""

    observations: gymnasium.spaces.Box
    states: gymnasium.spaces.Box


def _quiet() -> ExperimentCfg:
    """skrl's own TensorBoard writer and checkpoints off: the runner writes both (and nothing lands in ``./runs``)."""
    return ExperimentCfg(write_interval=0, checkpoint_interval=0)


def _box(size: int, limit: float = math.inf) -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(-limit, limit, (int(size),))


def _normaliser(agent_cfg: AgentConfig, space: gymnasium.spaces.Box, device: str) -> dict[str, Any]:
    """skrl config entries of an observation standardiser of ``space`` (none without
    ``--agent.policy.obs-normalization``), as ``<role>_preprocessor`` / ``<role>_preprocessor_kwargs`` without the
    role."""
    if not agent_cfg.policy.obs_normalization:
        return {"preprocessor": None, "preprocessor_kwargs": {}}
    return {"preprocessor": SyncedStandardScaler, "preprocessor_kwargs": {"size": space, "device": device}}


def _preprocessors(agent_cfg: AgentConfig, spaces: _Spaces, device: str) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for role, space in (("observation", spaces.observations), ("state", spaces.states)):
        for key, value in _normaliser(agent_cfg, space, device).items():
            entries[f"{role}_{key}"] = value
    return entries


def _ppo(
    env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int, spaces: _Spaces, clock: SyncClock
) -> SkrlPpo:
    p, a = agent_cfg.policy, agent_cfg.algorithm
    actions = _box(env.num_actions, float(env.cfg.clip_actions))
    actor = GaussianActor(
        spaces.observations, actions, ctx.device, p.actor_hidden_dims, p.activation, p.init_std, None, clock
    )
    value = Critic(spaces.states, actions, ctx.device, p.critic_hidden_dims, p.activation, False, clock)
    adaptive = a.schedule == "adaptive"
    cfg = PPO_CFG(
        rollouts=agent_cfg.num_steps_per_env,
        learning_epochs=a.num_learning_epochs,
        mini_batches=a.num_mini_batches,
        discount_factor=a.gamma,
        gae_lambda=a.lam,
        learning_rate=a.learning_rate,
        # rsl_rl's adaptive schedule: the rate falls by 1.5 above twice the target KL and rises by 1.5 below half of
        # it, within [1e-5, 1e-2] (skrl steps it once per epoch, rsl_rl once per mini-batch).
        learning_rate_scheduler=KLAdaptiveLR if adaptive else None,
        learning_rate_scheduler_kwargs=(
            {"kl_threshold": a.desired_kl, "min_lr": 1e-5, "max_lr": 1e-2} if adaptive else {}
        ),
        value_preprocessor=SyncedStandardScaler,
        value_preprocessor_kwargs={"size": 1, "device": ctx.device},
        grad_norm_clip=a.max_grad_norm,
        ratio_clip=a.clip_param,
        value_clip=a.clip_param if a.use_clipped_value_loss else 0.0,
        entropy_loss_scale=a.entropy_coef,
        value_loss_scale=a.value_loss_coef,
        kl_threshold=0.0,
        time_limit_bootstrap=True,
        experiment=_quiet(),
        **_preprocessors(agent_cfg, spaces, ctx.device),
    )
    memory = RandomMemory(memory_size=agent_cfg.num_steps_per_env, num_envs=train_envs, device=ctx.device)
    agent = PPO(
        models={"policy": actor, "value": value},
        memory=memory,
        observation_space=spaces.observations,
        state_space=spaces.states,
        action_space=actions,
        device=ctx.device,
        cfg=cfg,
    )
    return SkrlPpo(agent, actor, clock, ctx.device)


def _replay_buffer(c: OffPolicyConfig, train_envs: int, device: str) -> RandomMemory:
    """``buffer_per_env`` transitions of every training environment, sampled with replacement (a permutation of the
    whole buffer at every gradient step would cost more than the step)."""
    return RandomMemory(memory_size=c.buffer_per_env, num_envs=train_envs, device=device, replacement=True)


def _critics(
    p: PolicyConfig, spaces: _Spaces, actions: gymnasium.spaces.Box, device: str, clock: SyncClock
) -> dict[str, Critic]:
    return {
        name: Critic(spaces.states, actions, device, p.critic_hidden_dims, p.activation, True, clock)
        for name in ("critic_1", "critic_2", "target_critic_1", "target_critic_2")
    }


def _off_policy_cfg(
    c: OffPolicyConfig, agent_cfg: AgentConfig, spaces: _Spaces, device: str, step_dt: float
) -> dict[str, Any]:
    """The entries SAC_CFG and TD3_CFG share."""
    return {
        "rewards_shaper": RewardScale(1.0 / step_dt if c.reward_scale is None else c.reward_scale),
        "gradient_steps": c.gradient_steps,
        "batch_size": c.batch_size,
        "discount_factor": c.gamma,
        "polyak": c.polyak,
        "learning_rate": c.learning_rate,
        "random_timesteps": c.random_steps,
        "learning_starts": c.learning_starts,
        "grad_norm_clip": c.grad_norm_clip,
        "experiment": _quiet(),
        **_preprocessors(agent_cfg, spaces, device),
    }


def _sac(
    env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int, spaces: _Spaces, clock: SyncClock
) -> SkrlSac:
    p, c = agent_cfg.policy, agent_cfg.sac
    actions = _box(env.num_actions, c.action_limit)
    actor = GaussianActor(
        spaces.observations, actions, ctx.device, p.actor_hidden_dims, p.activation, p.init_std, c.action_limit, clock
    )
    cfg = SAC_CFG(
        learn_entropy=c.learn_entropy,
        initial_entropy_value=c.initial_entropy,
        target_entropy=c.target_entropy,
        **_off_policy_cfg(c, agent_cfg, spaces, ctx.device, env.step_dt),
    )
    agent = SAC(
        models={"policy": actor, **_critics(p, spaces, actions, ctx.device, clock)},
        memory=_replay_buffer(c, train_envs, ctx.device),
        observation_space=spaces.observations,
        state_space=spaces.states,
        action_space=actions,
        device=ctx.device,
        cfg=cfg,
    )
    if ctx.is_distributed and c.learn_entropy:
        agent.log_entropy_coefficient.register_hook(_averaged_over_ranks(ctx.world_size, clock))
    return SkrlSac(agent, actor, clock, ctx.device, c.learning_starts)


def _averaged_over_ranks(world_size: int, clock: SyncClock) -> Callable[[torch.Tensor], torch.Tensor]:
    """A gradient hook that replaces a gradient by its mean over the ranks (every rank runs the same backward)."""

    def hook(grad: torch.Tensor) -> torch.Tensor:
        def reduce() -> torch.Tensor:
            total = grad.clone()
            dist.all_reduce(total)
            return total / world_size

        return clock.timed(reduce)

    return hook


def _td3(
    env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int, spaces: _Spaces, clock: SyncClock
) -> SkrlTd3:
    p, c = agent_cfg.policy, agent_cfg.td3
    actions = _box(env.num_actions, c.action_limit)

    def actor() -> DeterministicActor:
        return DeterministicActor(
            spaces.observations, actions, ctx.device, p.actor_hidden_dims, p.activation, c.action_limit, clock
        )

    policy = actor()
    cfg = TD3_CFG(
        exploration_noise=GaussianNoise,
        exploration_noise_kwargs={"mean": 0.0, "std": c.exploration_noise, "device": ctx.device},
        policy_delay=c.policy_delay,
        smooth_regularization_noise=GaussianNoise,
        smooth_regularization_noise_kwargs={"mean": 0.0, "std": c.smooth_noise, "device": ctx.device},
        smooth_regularization_clip=c.smooth_clip,
        **_off_policy_cfg(c, agent_cfg, spaces, ctx.device, env.step_dt),
    )
    agent = TD3(
        models={"policy": policy, "target_policy": actor(), **_critics(p, spaces, actions, ctx.device, clock)},
        memory=_replay_buffer(c, train_envs, ctx.device),
        observation_space=spaces.observations,
        state_space=spaces.states,
        action_space=actions,
        device=ctx.device,
        cfg=cfg,
    )
    return SkrlTd3(agent, policy, clock, ctx.device, c.learning_starts)

"""skrl's PPO, SAC and TD3 (``--agent.learner skrl-ppo|skrl-sac|skrl-td3``) behind the runner's learner interface.

skrl's agents and memories are used as they are. mjfleet builds them from its settings (``--agent.algorithm.*`` for PPO,
``--agent.sac.*``, ``--agent.td3.*``, the networks from ``--agent.policy.*``: :mod:`mjfleet.rl.learners.skrl.models`),
hands them each step of the training environments (``Agent.act``, ``Agent.record_transition``) and calls
``Agent.update`` once per iteration; mjfleet's loop (:mod:`mjfleet.rl.runner`) takes the place of skrl's trainers, and
with it progress, evaluation, checkpoints and the run's identity. What it adds around the agents, and why:

- the job's process group: :mod:`mjfleet.rl.learners.skrl.distributed`;
- observation (and PPO's value) standardisers that stay identical on every worker
  (:class:`~mjfleet.rl.learners.skrl.models.SyncedStandardScaler`);
- SAC's entropy coefficient learns from the workers' averaged gradient, as the networks do: skrl leaves it to each
  worker, and the replicas would drift apart;
- checkpoints hold every one of the agent's ``checkpoint_modules`` and what they lack for a run to continue where it
  stopped: SAC's entropy coefficient, PPO's learning-rate schedule, TD3's count of critic updates (the phase of its
  delayed actor updates) and the steps taken. The replay buffer is not kept: a continued run fills it afresh, and
  its warm-up (``random_steps`` of random actions, ``learning_starts`` steps before the first update) counts again
  from the step it resumed at;
- the losses come from the agent's ``tracking_data``, which SAC fills only while its ``write_interval`` is positive:
  it is for the last gradient step of an update alone (while collecting, and in the other gradient steps, skrl
  would read a dozen statistics to the host each step: device syncs on a GPU; TD3 reads its own in every gradient
  step, which mjfleet leaves as skrl has it);
- TD3's exploration noise is drawn by :class:`SkrlTd3` as skrl draws it, without skrl's three statistics of it read
  back to the host in every step;
- PPO bootstraps time-outs (skrl's ``time_limit_bootstrap``) and never stops an epoch early on the KL divergence: one
  worker stopping while another goes on would leave that one waiting in a collective.

Environments reset inside the step, so the observation they return after an episode ended is the next episode's
first; the learners ask for the observation it ended in instead (``extras["final_observations"]``) and store that as
the transition's next observation: SAC's and TD3's targets bootstrap a time-out from it, PPO adds its value to the
time-out's reward. Terminations never bootstrap.
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

from mjfleet.envs.env import MjEnv
from mjfleet.rl.config import AgentConfig, OffPolicyConfig, PolicyConfig
from mjfleet.rl.learners.base import SyncClock
from mjfleet.rl.learners.skrl.distributed import configure_skrl
from mjfleet.rl.learners.skrl.learner import SkrlLearner
from mjfleet.rl.learners.skrl.models import (
    Critic,
    DeterministicActor,
    GaussianActor,
    Net,
    SyncedStandardScaler,
)
from mjfleet.runtime.context import DistributedContext

# isort: split
from skrl.agents.torch import ExperimentCfg
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.agents.torch.sac import SAC, SAC_CFG
from skrl.agents.torch.td3 import TD3, TD3_CFG
from skrl.memories.torch import RandomMemory
from skrl.resources.noises.torch import GaussianNoise
from skrl.resources.schedulers.torch import KLAdaptiveLR


class SkrlPpo(SkrlLearner):
    """skrl's PPO from ``--agent.algorithm.*`` (``--agent.learner skrl-ppo``)."""

    name = "skrl-ppo"
    learning_rate_flag = "--agent.algorithm.learning-rate"
    optimizer_attribute = "optimizer"
    agent: PPO

    def _extra_state(self) -> dict[str, Any]:
        return {"scheduler": self.agent.scheduler.state_dict()} if self.agent.scheduler else {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        scheduler = self.agent.scheduler
        if scheduler and "scheduler" in state:
            # torch's load_state_dict sets every attribute, the settings too: a resume with another
            # --agent.algorithm.desired-kl went on adapting to the old run's (rsl-rl-lib's reads this run's).
            configured = {name: getattr(scheduler, name) for name in _KL_SCHEDULE_SETTINGS if hasattr(scheduler, name)}
            scheduler.load_state_dict(state["scheduler"])
            for name, value in configured.items():
                setattr(scheduler, name, value)


_KL_SCHEDULE_SETTINGS = ("kl_threshold", "min_lr", "max_lr", "_kl_factor", "_lr_factor")
"""The attributes of skrl's ``KLAdaptiveLR`` that come from this run's settings, not from a checkpoint's state."""


class SkrlSac(SkrlLearner):
    """skrl's SAC from ``--agent.sac.*`` (``--agent.learner skrl-sac``)."""

    name = "skrl-sac"
    replays = True
    learning_rate_flag = "--agent.sac.learning-rate"
    agent: SAC

    def _update_agent(self) -> None:
        """The gradient steps of an update, all but the last with skrl's statistics off: each statistic it tracks is a
        read to the host (about a dozen per gradient step, each a device sync on a GPU); the losses reported are the
        last step's. The same computation as one call of all the steps."""
        agent, steps = self.agent, self.agent.cfg.gradient_steps
        try:
            if steps > 1:
                agent.write_interval, agent.cfg.gradient_steps = 0, steps - 1
                agent.update(timestep=self.timestep, timesteps=0)
            agent.write_interval, agent.cfg.gradient_steps = 1, 1
            agent.update(timestep=self.timestep, timesteps=0)
        finally:
            agent.cfg.gradient_steps = steps

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
    replays = True
    learning_rate_flag = "--agent.td3.learning-rate"
    agent: TD3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # skrl's TD3 reads three statistics of its noise to the host in every step (device syncs on a GPU, and a
        # list that grows while no update clears it): the noise is drawn here instead, as skrl draws it.
        self._noise, self.agent._exploration_noise = self.agent._exploration_noise, None

    @property
    def action_std(self) -> float:
        """TD3's exploration noise (its actor is deterministic)."""
        return float(self.agent.cfg.exploration_noise_kwargs.get("std", 0.0))

    def act(self, obs: TensorDict) -> torch.Tensor:
        actions = super().act(obs)
        if self._noise is not None and self.timestep - self.filled_from >= self.agent.cfg.random_timesteps:
            # In place: the transition stores this tensor.
            actions.add_(self._noise.sample(actions.shape)).clamp_(self.agent._min_actions, self.agent._max_actions)
        return actions

    def _extra_state(self) -> dict[str, Any]:
        return {"update_counter": int(self.agent._update_counter)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.agent._update_counter = int(state.get("update_counter", 0))


def _spaces_and_clock(env: MjEnv, ctx: DistributedContext) -> tuple[_Spaces, SyncClock]:
    """What every skrl learner is built with: the observation spaces and the clock of its gradient all-reduces (and
    skrl's distributed setup, once)."""
    configure_skrl(ctx)
    obs = env.get_observations()
    spaces = _Spaces(_box(obs["policy"].shape[-1]), _box(obs["critic"].shape[-1]))
    return spaces, SyncClock(ctx.device)


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


def _normaliser(agent_cfg: AgentConfig, space: gymnasium.spaces.Box, device: str, clock: SyncClock) -> dict[str, Any]:
    """skrl config entries of an observation standardiser of ``space`` (none without
    ``--agent.policy.obs-normalization``), as ``<role>_preprocessor`` / ``<role>_preprocessor_kwargs`` without the
    role."""
    if not agent_cfg.policy.obs_normalization:
        return {"preprocessor": None, "preprocessor_kwargs": {}}
    kwargs = {"size": space, "device": device, "clock": clock}
    return {"preprocessor": SyncedStandardScaler, "preprocessor_kwargs": kwargs}


def _preprocessors(agent_cfg: AgentConfig, spaces: _Spaces, device: str, clock: SyncClock) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for role, space in (("observation", spaces.observations), ("state", spaces.states)):
        for key, value in _normaliser(agent_cfg, space, device, clock).items():
            entries[f"{role}_{key}"] = value
    return entries


def build_ppo(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> SkrlPpo:
    """``--agent.learner skrl-ppo`` for the first ``train_envs`` environments of ``env``, its buffers on
    ``ctx.device``."""
    spaces, clock = _spaces_and_clock(env, ctx)
    p, a = agent_cfg.policy, agent_cfg.algorithm
    actions = _box(env.num_actions, float(env.cfg.clip_actions))
    actor = GaussianActor(spaces.observations, actions, _actor_net(p, ctx.device, clock), p.init_std, None)
    value = Critic(spaces.states, actions, _critic_net(p, ctx.device, clock), of_actions=False)
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
        value_preprocessor_kwargs={"size": 1, "device": ctx.device, "clock": clock},
        grad_norm_clip=a.max_grad_norm,
        ratio_clip=a.clip_param,
        value_clip=a.clip_param if a.use_clipped_value_loss else 0.0,
        entropy_loss_scale=a.entropy_coef,
        value_loss_scale=a.value_loss_coef,
        kl_threshold=0.0,
        time_limit_bootstrap=True,
        experiment=_quiet(),
        **_preprocessors(agent_cfg, spaces, ctx.device, clock),
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
    net = _critic_net(p, device, clock)
    names = ("critic_1", "critic_2", "target_critic_1", "target_critic_2")
    return {name: Critic(spaces.states, actions, net, of_actions=True) for name in names}


def _actor_net(p: PolicyConfig, device: str, clock: SyncClock) -> Net:
    return Net(p.actor_hidden_dims, p.activation, device, clock)


def _critic_net(p: PolicyConfig, device: str, clock: SyncClock) -> Net:
    return Net(p.critic_hidden_dims, p.activation, device, clock)


def _off_policy_cfg(
    c: OffPolicyConfig, agent_cfg: AgentConfig, spaces: _Spaces, device: str, step_dt: float, clock: SyncClock
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
        **_preprocessors(agent_cfg, spaces, device, clock),
    }


def build_sac(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> SkrlSac:
    """``--agent.learner skrl-sac`` for the first ``train_envs`` environments of ``env``, its buffers on
    ``ctx.device``."""
    spaces, clock = _spaces_and_clock(env, ctx)
    p, c = agent_cfg.policy, agent_cfg.sac
    actions = _box(env.num_actions, c.action_limit)
    actor = GaussianActor(spaces.observations, actions, _actor_net(p, ctx.device, clock), p.init_std, c.action_limit)
    cfg = SAC_CFG(
        learn_entropy=c.learn_entropy,
        initial_entropy_value=c.initial_entropy,
        target_entropy=c.target_entropy,
        **_off_policy_cfg(c, agent_cfg, spaces, ctx.device, env.step_dt, clock),
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


def build_td3(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> SkrlTd3:
    """``--agent.learner skrl-td3`` for the first ``train_envs`` environments of ``env``, its buffers on
    ``ctx.device``."""
    spaces, clock = _spaces_and_clock(env, ctx)
    p, c = agent_cfg.policy, agent_cfg.td3
    actions = _box(env.num_actions, c.action_limit)

    def actor() -> DeterministicActor:
        return DeterministicActor(spaces.observations, actions, _actor_net(p, ctx.device, clock), c.action_limit)

    policy = actor()
    cfg = TD3_CFG(
        exploration_noise=GaussianNoise,
        exploration_noise_kwargs={"mean": 0.0, "std": c.exploration_noise, "device": ctx.device},
        policy_delay=c.policy_delay,
        smooth_regularization_noise=GaussianNoise,
        smooth_regularization_noise_kwargs={"mean": 0.0, "std": c.smooth_noise, "device": ctx.device},
        smooth_regularization_clip=c.smooth_clip,
        **_off_policy_cfg(c, agent_cfg, spaces, ctx.device, env.step_dt, clock),
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

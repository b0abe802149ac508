"""TD3 with FastTD3's ingredients (``--agent.learner fast-td3``): mjfleet's own off-policy learner, in one file.

FastTD3 (Seo et al., 2025) trains humanoids and quadrupeds with TD3 on thousands of parallel environments; what it
adds to TD3, and what skrl's TD3 lacks, is kept here:

- **distributional twin critics** (C51): each critic gives a categorical distribution over ``atoms`` values evenly
  spaced over [-value_limit, value_limit]; its target is the target critic's distribution at the next state, shifted
  by the reward, shrunk by the discount and projected back onto those values; the loss is the cross-entropy. Of the
  two target distributions, each sample takes the one whose expected value is lower (clipped double Q), for both
  critics; the actor maximises the lower of the two critics' expected values;
- **exploration noise of each environment's own size**: its standard deviation is drawn from [noise_min, noise_max]
  whenever the environment's episode starts, so the buffer holds cautious and bold behaviour alike;
- **no target actor** (target critics only, moved by ``polyak`` at every gradient step), **AdamW** with weight decay;
- **no reads to the host during an update**: the losses are summed on the device and read once at its end (skrl's
  TD3 reads a dozen statistics in every gradient step: a device sync each on a GPU).

Time-outs bootstrap from the observation the episode ended in (``extras["final_observations"]``), terminations
never. Observations are stored raw and normalised when used, by running statistics (rsl-rl-lib's
``EmpiricalNormalization``, kept identical on every worker) updated once per iteration from that iteration's
transitions. With several workers each samples from its own buffer and the gradients are averaged.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from rsl_rl.modules import MLP, EmpiricalNormalization
from tensordict import TensorDict
from torch import nn

from mjfleet.envs.env import MjEnv
from mjfleet.rl.config import AgentConfig, FastTd3Config
from mjfleet.rl.learners.base import Learner, SyncClock, optimizer_tensors, replay_warm_up_notice
from mjfleet.runtime.context import DistributedContext

__all__ = [
    "Actor",
    "DistributionalCritic",
    "FastTd3",
    "FastTd3Policy",
    "ReplayBuffer",
    "Support",
    "build_fast_td3",
    "project",
]


class Actor(nn.Module):
    """An MLP of the (normalised) policy observations, squashed into [-limit, limit] by ``limit * tanh``; its last
    layer starts near zero, so the first actions are the task's zero action plus noise."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: Sequence[int], activation: str, limit: float) -> None:
        super().__init__()
        self.mlp = MLP(obs_dim, num_actions, list(hidden), activation)
        last = self.mlp[-1]
        assert isinstance(last, nn.Linear)
        nn.init.normal_(last.weight, 0.0, 0.01)
        nn.init.zeros_(last.bias)
        self.limit = limit

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.limit * torch.tanh(self.mlp(obs))


class DistributionalCritic(nn.Module):
    """An MLP of the (normalised) critic observations and the actions: the logits of the return's distribution over
    the support's values."""

    def __init__(self, state_dim: int, num_actions: int, hidden: Sequence[int], activation: str, atoms: int) -> None:
        super().__init__()
        self.mlp = MLP(state_dim + num_actions, atoms, list(hidden), activation)

    def forward(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat((states, actions), dim=-1))


@dataclass(frozen=True)
class Support:
    """The values the critics' distributions are over: ``atoms`` values evenly spaced over [low, high]."""

    values: torch.Tensor
    low: float
    high: float

    @classmethod
    def symmetric(cls, limit: float, atoms: int, device: str) -> Support:
        return cls(torch.linspace(-limit, limit, atoms, device=device), -limit, limit)

    def mean(self, probs: torch.Tensor) -> torch.Tensor:
        """The expected value of each row's distribution."""
        return (probs * self.values).sum(-1)


def project(probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor, support: Support) -> torch.Tensor:
    """C51's target: the distribution ``probs`` over ``support`` moved to ``rewards + discounts * support`` (per row;
    ``discounts`` is 0 where nothing is bootstrapped), clipped to the support's ends and spread back onto its two
    nearest values in proportion to their distances. Each row's mass stays 1 and its mean is the moved mean wherever
    the moved values lie inside the support."""
    atoms = support.values.numel()
    step = (support.high - support.low) / (atoms - 1)
    moved = (rewards.unsqueeze(-1) + discounts.unsqueeze(-1) * support.values).clamp(support.low, support.high)
    # Clipped to the support's index range: in float32 a value clipped to the top can land a hair above its index.
    position = ((moved - support.low) / step).clamp(0, atoms - 1)
    # Each value lies between the atoms ``lower`` and ``lower + 1``: one on an atom gives it all its mass (weight 0 on
    # its upper neighbour); one on the top atom lies between the last two, all its mass on the top.
    lower = position.floor().clamp(max=atoms - 2)
    upper_weight = position - lower
    index = lower.long()
    target = torch.zeros_like(probs)
    target.scatter_add_(-1, index, probs * (1.0 - upper_weight))
    target.scatter_add_(-1, index + 1, probs * upper_weight)
    return target


class ReplayBuffer:
    """The last ``capacity`` steps of each of ``num_envs`` environments, on one device; sampled uniformly with
    replacement over every stored (step, environment). Every field is a view of one storage tensor, so a sample is
    one gather of whole rows."""

    def __init__(self, capacity: int, num_envs: int, sizes: dict[str, int], device: str) -> None:
        self.capacity, self.num_envs, self.device = capacity, num_envs, device
        self.storage = torch.zeros(capacity, num_envs, sum(sizes.values()), device=device)
        self.columns: dict[str, slice] = {}
        start = 0
        for name, size in sizes.items():
            self.columns[name] = slice(start, start + size)
            start += size
        self.data = {name: self.storage[..., columns] for name, columns in self.columns.items()}
        """Each field's ``(capacity, num_envs, size)`` view of the storage."""
        self.next_row = 0
        self.rows = 0
        """Steps stored (at most ``capacity``)."""

    def add(self, **step: torch.Tensor) -> None:
        for name, value in step.items():
            self.data[name][self.next_row] = value.reshape(self.num_envs, -1)
        self.next_row = (self.next_row + 1) % self.capacity
        self.rows = min(self.rows + 1, self.capacity)

    def latest(self, name: str, steps: int) -> torch.Tensor:
        """The last ``steps`` steps' ``name`` of every environment, flattened to rows."""
        index = (self.next_row - 1 - torch.arange(min(steps, self.rows), device=self.device)) % self.capacity
        return self.data[name][index].flatten(0, 1)

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        # Stored rows are the first ``rows * num_envs`` of the flattened storage, whichever step was written last.
        index = torch.randint(0, self.rows * self.num_envs, (batch_size,), device=self.device)
        rows = self.storage.view(-1, self.storage.shape[-1]).index_select(0, index)
        return {name: rows[:, columns] for name, columns in self.columns.items()}


class FastTd3Policy(nn.Module):
    """The deterministic actor with its observation normaliser: what the evaluation environments, ``play`` and the
    ONNX export run."""

    obs_groups: tuple[str, ...] = ("policy",)

    def __init__(self, actor: Actor, normaliser: nn.Module, obs_dim: int, obs_normalization: bool) -> None:
        super().__init__()
        self.actor, self.normaliser = actor, normaliser
        self.obs_dim = obs_dim
        self.obs_normalization = obs_normalization

    def forward(self, obs: TensorDict) -> torch.Tensor:
        return self.actor(self.normaliser(obs["policy"]))

    def as_onnx(self, verbose: bool) -> nn.Module:
        return nn.Sequential(copy.deepcopy(self.normaliser), copy.deepcopy(self.actor))


class FastTd3(Learner):
    """See the module's docstring."""

    name = "fast-td3"
    learning_rate_flag = "--agent.fast-td3.learning-rate"
    final_observations = True

    def __init__(self, env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> None:
        c, p = agent_cfg.fast_td3, agent_cfg.policy
        self.cfg: FastTd3Config = c
        self.ctx, self.device, self.num_envs = ctx, ctx.device, train_envs
        self.clock = SyncClock(ctx.device)
        obs = env.get_observations()
        obs_dim, state_dim, num_actions = obs["policy"].shape[-1], obs["critic"].shape[-1], env.num_actions
        self.num_actions = num_actions
        self.reward_scale = 1.0 / env.step_dt if c.reward_scale is None else c.reward_scale
        limit = c.support_limit()
        self.support = Support.symmetric(limit, c.atoms, ctx.device)

        self.actor = Actor(obs_dim, num_actions, p.actor_hidden_dims, p.activation, c.action_limit).to(ctx.device)
        self.critic_1, self.critic_2 = (
            DistributionalCritic(state_dim, num_actions, p.critic_hidden_dims, p.activation, c.atoms).to(ctx.device)
            for _ in range(2)
        )
        self.target_critic_1 = copy.deepcopy(self.critic_1).requires_grad_(False)
        self.target_critic_2 = copy.deepcopy(self.critic_2).requires_grad_(False)
        self._critic_parameters = [*self.critic_1.parameters(), *self.critic_2.parameters()]
        self._target_parameters = [*self.target_critic_1.parameters(), *self.target_critic_2.parameters()]
        self.obs_normaliser: nn.Module = nn.Identity()
        self.critic_normaliser: nn.Module = nn.Identity()
        if p.obs_normalization:
            self.obs_normaliser = EmpiricalNormalization(obs_dim).to(ctx.device)
            self.critic_normaliser = EmpiricalNormalization(state_dim).to(ctx.device)
        # Fused: one kernel for all parameters, not a dozen operations for each (a small gradient step is mostly such).
        self.actor_optimizer = torch.optim.AdamW(
            self.actor.parameters(), c.learning_rate, weight_decay=c.weight_decay, fused=True
        )
        self.critic_optimizer = torch.optim.AdamW(
            self._critic_parameters, c.learning_rate, weight_decay=c.weight_decay, fused=True
        )
        self._policy = FastTd3Policy(self.actor, self.obs_normaliser, obs_dim, p.obs_normalization)
        sizes = {"obs": obs_dim, "states": state_dim, "actions": num_actions, "rewards": 1}
        sizes |= {"next_obs": obs_dim, "next_states": state_dim, "terminated": 1}
        self.buffer = ReplayBuffer(c.buffer_per_env, train_envs, sizes, ctx.device)
        self.noise = self._noise(train_envs)
        """Each training environment's exploration noise (standard deviation), drawn at its episode's start."""
        self.updates = 0
        """Critic updates so far (the actor's delayed updates count from them)."""
        self.timestep = 0
        """Steps each environment has taken in this run (random steps and learning starts count them)."""
        self.filled_from = 0
        """The :attr:`timestep` at which the replay buffer started empty (this run's start, or where a continued run
        resumed: checkpoints do not hold the buffer)."""
        self._new_steps = 0
        self._step: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def _noise(self, rows: int) -> torch.Tensor:
        c = self.cfg
        return c.noise_min + (c.noise_max - c.noise_min) * torch.rand(rows, 1, device=self.device)

    # --- collecting ----------------------------------------------------------------------------------------------
    def act(self, obs: TensorDict) -> torch.Tensor:
        observations, states = obs["policy"], obs["critic"]
        limit = self.cfg.action_limit
        with torch.no_grad():
            if self.timestep - self.filled_from < self.cfg.random_steps:
                actions = limit * (2.0 * torch.rand(observations.shape[0], self.num_actions, device=self.device) - 1)
            else:
                actions = self.actor(self.obs_normaliser(observations))
                actions = (actions + torch.randn_like(actions) * self.noise).clamp(-limit, limit)
        self._step = (observations, states, actions)
        return actions

    def act_deterministic(self, obs: TensorDict) -> torch.Tensor:
        with torch.no_grad():
            return self._policy(obs)

    def process_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]) -> None:
        assert self._step is not None, "process_step without act"
        observations, states, actions = self._step
        final = extras.get("final_observations", obs)
        ended = dones.bool()
        self.buffer.add(
            obs=observations,
            states=states,
            actions=actions,
            rewards=rewards * self.reward_scale,
            next_obs=final["policy"],
            next_states=final["critic"],
            terminated=(ended & ~extras["time_outs"].bool()).float(),
        )
        self.noise = torch.where(ended.unsqueeze(-1), self._noise(self.num_envs), self.noise)
        self.timestep += 1
        self._new_steps += 1
        self._step = None

    def end_rollout(self, obs: TensorDict) -> None:
        """Nothing: every transition is in the buffer."""

    # --- learning --------------------------------------------------------------------------------------------
    def update(self) -> dict[str, float]:
        new_steps, self._new_steps = self._new_steps, 0
        if isinstance(self.obs_normaliser, EmpiricalNormalization) and new_steps:
            self.obs_normaliser.update(self.buffer.latest("obs", new_steps))
            assert isinstance(self.critic_normaliser, EmpiricalNormalization)
            self.critic_normaliser.update(self.buffer.latest("states", new_steps))
        if self.cfg.learning_starts > self.timestep - self.filled_from:
            return {}
        c = self.cfg
        losses = torch.zeros(2, device=self.device)
        actor_updates = 0
        for _ in range(c.gradient_steps):
            batch = self.buffer.sample(c.batch_size)
            obs, states = self.obs_normaliser(batch["obs"]), self.critic_normaliser(batch["states"])
            losses[0] += self._update_critics(states, batch)
            self.updates += 1
            if self.updates % c.policy_delay == 0:
                losses[1] += self._update_actor(obs, states)
                actor_updates += 1
            with torch.no_grad():
                for target, param in zip(self._target_parameters, self._critic_parameters, strict=True):
                    target.lerp_(param, c.polyak)
        counts = torch.tensor([max(c.gradient_steps, 1), max(actor_updates, 1)], device=self.device)
        critic_loss, policy_loss = (losses / counts).tolist()  # the update's one read to the host
        return {"critic_loss": critic_loss, **({"policy_loss": policy_loss} if actor_updates else {})}

    @torch.no_grad()
    def target_distribution(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Both critics' target for the sampled transitions: each target critic's distribution at the next state and
        the actor's smoothed action there, moved by the reward and the discount; per sample the one with the lower
        mean (clipped double Q)."""
        c = self.cfg
        next_obs = self.obs_normaliser(batch["next_obs"])
        next_states = self.critic_normaliser(batch["next_states"])
        next_actions = self.actor(next_obs)
        smoothing = (torch.randn_like(next_actions) * c.smooth_noise).clamp(-c.smooth_clip, c.smooth_clip)
        next_actions = (next_actions + smoothing).clamp(-c.action_limit, c.action_limit)
        rewards = batch["rewards"].squeeze(-1)
        discounts = c.gamma * (1.0 - batch["terminated"].squeeze(-1))
        targets = [
            project(F.softmax(target(next_states, next_actions), dim=-1), rewards, discounts, self.support)
            for target in (self.target_critic_1, self.target_critic_2)
        ]
        lower = self.support.mean(targets[0]) <= self.support.mean(targets[1])
        return torch.where(lower.unsqueeze(-1), targets[0], targets[1])

    def _update_critics(self, states: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        target = self.target_distribution(batch)
        loss = sum(
            -(target * F.log_softmax(critic(states, batch["actions"]), dim=-1)).sum(-1).mean()
            for critic in (self.critic_1, self.critic_2)
        )
        assert isinstance(loss, torch.Tensor)
        self._step_optimizer(self.critic_optimizer, loss, self._critic_parameters)
        return loss.detach()

    def _update_actor(self, obs: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        actions = self.actor(obs)
        critics = (self.critic_1, self.critic_2)
        for critic in critics:
            critic.requires_grad_(False)  # the actor's loss trains the actor alone
        try:
            values = [self.support.mean(F.softmax(critic(states, actions), dim=-1)) for critic in critics]
            loss = -torch.minimum(values[0], values[1]).mean()
        finally:
            for critic in critics:
                critic.requires_grad_(True)
        self._step_optimizer(self.actor_optimizer, loss, list(self.actor.parameters()))
        return loss.detach()

    def _step_optimizer(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, params: list[nn.Parameter]) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.ctx.is_distributed:
            self._average_gradients(params)
        if self.cfg.grad_norm_clip > 0:
            nn.utils.clip_grad_norm_(params, self.cfg.grad_norm_clip)
        optimizer.step()

    def _average_gradients(self, params: Iterable[nn.Parameter]) -> None:
        """Every worker's gradients replaced by their mean over the workers (one all-reduce)."""
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.clock.timed(lambda: dist.all_reduce(flat))
        flat /= self.ctx.world_size
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def train_mode(self) -> None:
        for module in self._modules().values():
            module.train()

    def eval_mode(self) -> None:
        for module in self._modules().values():
            module.eval()

    def broadcast_parameters(self) -> None:
        for module in self._modules().values():
            for tensor in module.state_dict().values():
                dist.broadcast(tensor, src=0)

    # --- state -----------------------------------------------------------------------------------------------
    def _modules(self) -> dict[str, nn.Module]:
        return {
            "actor": self.actor,
            "critic_1": self.critic_1,
            "critic_2": self.critic_2,
            "target_critic_1": self.target_critic_1,
            "target_critic_2": self.target_critic_2,
            "obs_normaliser": self.obs_normaliser,
            "critic_normaliser": self.critic_normaliser,
        }

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer}

    def state_dict(self) -> dict[str, Any]:
        """The networks, normalisers and optimizers (``fast_td3``), and the counts a continued run goes on from
        (``fast_td3_state``). Not the replay buffer."""
        saved = {name: m.state_dict() for name, m in {**self._modules(), **self._optimizers()}.items()}
        return {"fast_td3": saved, "fast_td3_state": {"timestep": self.timestep, "updates": self.updates}}

    def load_state_dict(self, data: dict[str, Any]) -> None:
        saved = data["fast_td3"]
        for name, module in {**self._modules(), **self._optimizers()}.items():
            module.load_state_dict(saved[name])
        for optimizer in self._optimizers().values():
            for group in optimizer.param_groups:  # torch restores the saved run's; the learning rate is the runner's
                group["weight_decay"] = self.cfg.weight_decay
        state = data.get("fast_td3_state") or {}
        self.timestep = self.filled_from = int(state.get("timestep", 0))
        self.updates = int(state.get("updates", 0))

    def continued_notice(self) -> str:
        return replay_warm_up_notice(self.name, self.cfg.random_steps, self.cfg.learning_starts)

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return list(self._optimizers().values())

    def policy(self) -> FastTd3Policy:
        return self._policy

    def modules(self) -> dict[str, nn.Module]:
        return self._modules()

    def replica_tensors(self) -> list[torch.Tensor]:
        tensors: list[torch.Tensor] = []
        for module in self._modules().values():
            tensors += list(module.state_dict().values())
        for optimizer in self._optimizers().values():
            tensors += optimizer_tensors(optimizer)
        return tensors

    @property
    def learning_rate(self) -> float:
        return float(self.actor_optimizer.param_groups[0]["lr"])

    @property
    def action_std(self) -> float:
        """The training environments' mean exploration noise."""
        return float(self.noise.mean())


def build_fast_td3(env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> FastTd3:
    """``--agent.learner fast-td3`` for the first ``train_envs`` environments of ``env``, its buffer on
    ``ctx.device``."""
    learner = FastTd3(env, agent_cfg, ctx, train_envs)
    if ctx.is_distributed:
        learner.broadcast_parameters()
    return learner

"""rsl-rl-lib's PPO (``--agent.learner rsl-rl-ppo``, the default) behind the runner's learner interface, with the time
its ranks spend in the gradient all-reduce measured.

Its distributed update is rsl_rl's own: with the adaptive schedule that is three collectives per mini-batch (the KL's
all-reduce, rank 0's learning rate broadcast, the gradient all-reduce). Sending the KL in the gradient buffer instead
saved two of them, but only by rebinding the rollout storage's mini-batch generators, which rsl_rl's ``update`` reads
through the instance; on the CPU that saved too little to keep a dependency on how ``update`` is put together, and
there is no GPU measurement that would justify it (docs/notes/performance_log.md, "rsl_rl's own distributed update").
"""

from __future__ import annotations

import contextlib
import io
import logging
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from rsl_rl.algorithms import PPO
from rsl_rl.models import MLPModel
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict

from mjfleet.rl.learners.base import Learner, SyncClock

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.config import AgentConfig
    from mjfleet.runtime.context import DistributedContext

logger = logging.getLogger(__name__)


class SyncedPPO(PPO):
    """:class:`rsl_rl.algorithms.PPO` that measures :meth:`reduce_parameters`, the gradient all-reduce that rsl_rl
    runs once per mini-batch between the backward pass and the optimizer step in distributed training."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = SyncClock(str(self.device))
        """Times :meth:`reduce_parameters` (the learner's clock)."""

    def reduce_parameters(self) -> None:
        """rsl_rl's gradient all-reduce, timed: waiting for the slowest rank is part of it (multi-worker runs only)."""
        self.clock.timed(super().reduce_parameters)


class RslRlPpo(Learner):
    """rsl-rl-lib builds the models, storage and :class:`SyncedPPO` (``PPO.construct_algorithm``); every call goes to
    them unchanged, so training is rsl_rl's, bit for bit.

    With evaluation environments (``train_envs`` below ``env.num_envs``) PPO gets a rollout storage of its own for the
    training environments alone: the evaluation environments' actions are not samples of the policy distribution,
    and their transitions must not enter returns, advantages, the surrogate loss or the observation normaliser.
    """

    name = "rsl-rl-ppo"
    learning_rate_flag = "--agent.algorithm.learning-rate"

    def __init__(self, env: MjEnv, agent_cfg: AgentConfig, ctx: DistributedContext, train_envs: int) -> None:
        multi_gpu = None
        if ctx.is_distributed:
            # The worker created the one process group (runtime.context.process_group); a second would deadlock.
            assert dist.is_initialized(), "a distributed learner needs the process group of its worker"
            multi_gpu = {"global_rank": ctx.rank, "local_rank": ctx.local_rank, "world_size": ctx.world_size}
        # rsl_rl prints model summaries with bare print; keep them in the debug log instead.
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            alg = PPO.construct_algorithm(env.get_observations(), env, agent_cfg.to_rsl_rl(multi_gpu), ctx.device)
        logger.debug(captured.getvalue())
        assert isinstance(alg, SyncedPPO), type(alg)
        if train_envs < env.num_envs:
            alg.storage = RolloutStorage(
                "rl",
                train_envs,
                agent_cfg.num_steps_per_env,
                env.get_observations().to(ctx.device)[:train_envs],
                [env.num_actions],
                ctx.device,
            )
        self.clock = alg.clock
        self.alg: SyncedPPO = alg
        """rsl_rl's algorithm (its storage, optimizer and actor, for code written for rsl_rl)."""

    def act(self, obs: TensorDict) -> torch.Tensor:
        return self.alg.act(obs)

    def act_deterministic(self, obs: TensorDict) -> torch.Tensor:
        return self.alg.get_policy()(obs)

    def process_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]) -> None:
        self.alg.process_env_step(obs, rewards, dones, extras)

    def end_rollout(self, obs: TensorDict) -> None:
        self.alg.compute_returns(obs)

    def update(self) -> dict[str, float]:
        return self.alg.update()

    def train_mode(self) -> None:
        self.alg.train_mode()

    def eval_mode(self) -> None:
        self.alg.eval_mode()

    def broadcast_parameters(self) -> None:
        self.alg.broadcast_parameters()

    def state_dict(self) -> dict[str, Any]:
        """``PPO.save()``: the models (with their observation normalisers) and the optimizer."""
        return self.alg.save()

    def load_state_dict(self, data: dict[str, Any]) -> None:
        self.alg.load(data, None, strict=True)
        if "learning_rate" in data:
            self.alg.learning_rate = float(data["learning_rate"])
            for group in self.alg.optimizer.param_groups:
                group["lr"] = self.alg.learning_rate

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.alg.optimizer]

    def set_learning_rates(self, rates: list[list[float]]) -> None:
        super().set_learning_rates(rates)
        self.alg.learning_rate = rates[0][0]  # where rsl_rl's adaptive schedule adapts it from

    def policy(self) -> MLPModel:
        return self.alg.get_policy()

    def modules(self) -> dict[str, torch.nn.Module]:
        # The state dicts include the observation normalisers' running statistics, not just parameters.
        return {"actor": self.alg.actor, "critic": self.alg.critic}

    def replica_tensors(self) -> list[torch.Tensor]:
        alg = self.alg
        tensors: list[torch.Tensor] = []
        for model in (alg.actor, alg.critic):
            tensors += list(model.state_dict().values())
        for state in alg.optimizer.state_dict()["state"].values():
            tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
        tensors.append(torch.tensor([alg.learning_rate], dtype=torch.float64))
        return tensors

    @property
    def learning_rate(self) -> float:
        return self.alg.learning_rate

    @property
    def action_std(self) -> float:
        return float(self.alg.get_policy().output_std.detach().mean())

"""The networks of mjfleet's skrl learners, built on skrl's model classes, and what runs them across workers.

skrl leaves the networks to its user: a model is a ``torch.nn.Module`` deriving from skrl's ``Model`` and one of its
mixins (``GaussianMixin`` samples around the mean a model computes, ``DeterministicMixin`` returns it), with a
``compute`` of its own. These are MLPs from ``--agent.policy.*`` (hidden sizes, activation by rsl-rl-lib's names);
their layers are called ``mlp`` as rsl-rl-lib's are, so a checkpoint's hidden sizes read the same way
(:func:`mjfleet.rl.checkpoint.files.hidden_dims`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import torch
import torch.distributed as dist
from rsl_rl.utils import resolve_nn_activation
from tensordict import TensorDict
from torch import nn

from mjfleet.rl.learners.base import SyncClock
from mjfleet.rl.learners.skrl import distributed  # noqa: F401  (imports skrl without its own process group)

# isort: split
from skrl import config as skrl_config
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
from skrl.resources.preprocessors.torch import RunningStandardScaler


def mlp(inputs: int, hidden: Sequence[int], outputs: int, activation: str) -> nn.Sequential:
    """Linear layers of the ``hidden`` sizes with ``activation`` between them (rsl-rl-lib's names: ``elu``, ...)."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(inputs, width), resolve_nn_activation(activation)]
        inputs = width
    layers.append(nn.Linear(inputs, outputs))
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class Net:
    """What every model here is built from, besides its spaces."""

    hidden: Sequence[int]
    """Hidden layer sizes."""
    activation: str
    """Activation between them (rsl-rl-lib's names)."""
    device: str
    """Where the model lives."""
    clock: SyncClock
    """Times the model's gradient all-reduces."""


def squashed(mean: torch.Tensor, limit: float | None) -> torch.Tensor:
    """The actor's output as its action mean: ``limit * tanh`` for actors with bounded actions (SAC, TD3)."""
    return mean if limit is None else limit * torch.tanh(mean)


class UniformWarmUp:
    """An actor's ``random_act`` (the off-policy learners' ``random-steps``): actions drawn uniformly from [-limit,
    limit] by torch's generator, seeded with the run. skrl's own samples through gymnasium's batched space, which
    copies one generator state on every call: the same actions every step."""

    limit: float | None
    num_actions: int
    device: torch.device

    def random_act(self, inputs: dict[str, Any], *, role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
        limit = 1.0 if self.limit is None else self.limit
        rows = inputs["observations"].shape[0]
        return limit * (2.0 * torch.rand(rows, self.num_actions, device=self.device) - 1.0), {}


class GaussianActor(UniformWarmUp, GaussianMixin, Model):
    """PPO's and SAC's actor: an MLP of the policy observations gives the mean, a learned log standard deviation per
    action (independent of the observation, as in skrl's examples) the spread.

    With ``limit`` (SAC) the Gaussian's samples are squashed by ``limit * tanh`` into [-limit, limit], and the log
    probability skrl's SAC reads is that of the squashed action (the Gaussian's, corrected by the squashing's
    log-determinant). Clipping the samples instead would leave the clipped ones without a gradient from the critic
    while the entropy bonus keeps widening the Gaussian: on cartpole the policy drifts to random full-scale actions.
    The deterministic action is ``limit * tanh`` of the mean."""

    def __init__(
        self,
        observation_space: gymnasium.Space,
        action_space: gymnasium.Space,
        net: Net,
        init_std: float,
        limit: float | None,
    ) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=net.device)
        GaussianMixin.__init__(self, clip_actions=False, clip_log_std=True, reduction="sum")
        self.mlp = mlp(self.num_observations, net.hidden, self.num_actions, net.activation)
        self.log_std_parameter = nn.Parameter(torch.full((self.num_actions,), math.log(init_std)))
        self.limit = limit
        self.clock = net.clock

    def compute(  # pyright: ignore[reportIncompatibleMethodOverride]  (skrl's mixins pass role by position)
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return self.mlp(inputs["observations"]), {"log_std": self.log_std_parameter}

    def act(self, inputs: dict[str, Any], *, role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
        """skrl's Gaussian sample and log probability, squashed where the actor has a ``limit`` (for sampling only:
        ``taken_actions`` are read as unsquashed, which skrl's SAC never passes)."""
        actions, outputs = super().act(inputs, role=role)
        if self.limit is None:
            return actions, outputs
        tanh = torch.tanh(actions)
        correction = torch.log(self.limit * (1.0 - tanh.square()) + 1e-6).sum(dim=-1, keepdim=True)
        outputs["log_prob"] = outputs["log_prob"] - correction
        outputs["mean_actions"] = squashed(outputs["mean_actions"], self.limit)
        return self.limit * tanh, outputs

    def reduce_parameters(self) -> None:
        self.clock.timed(super().reduce_parameters)

    @property
    def action_std(self) -> float:
        """Mean standard deviation of the Gaussian the actions are drawn from (with ``limit``: before the squash, after
        which the actions spread less, the more so near the limits)."""
        return float(self.log_std_parameter.detach().clamp(self._g_min_log_std, self._g_max_log_std).exp().mean())


class DeterministicActor(UniformWarmUp, DeterministicMixin, Model):
    """TD3's actor: an MLP of the policy observations, squashed into [-limit, limit]."""

    def __init__(
        self,
        observation_space: gymnasium.Space,
        action_space: gymnasium.Space,
        net: Net,
        limit: float,
    ) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=net.device)
        DeterministicMixin.__init__(self, clip_actions=False)
        self.mlp = mlp(self.num_observations, net.hidden, self.num_actions, net.activation)
        self.limit: float | None = limit
        self.clock = net.clock

    def compute(  # pyright: ignore[reportIncompatibleMethodOverride]  (skrl's mixins pass role by position)
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return squashed(self.mlp(inputs["observations"]), self.limit), {}

    def reduce_parameters(self) -> None:
        self.clock.timed(super().reduce_parameters)


class Critic(DeterministicMixin, Model):
    """A critic of the critic observations (``states`` to skrl): PPO's value, or with ``of_actions`` SAC's and TD3's
    Q-function of the critic observations and the actions taken."""

    def __init__(
        self,
        state_space: gymnasium.Space,
        action_space: gymnasium.Space,
        net: Net,
        of_actions: bool,
    ) -> None:
        Model.__init__(self, state_space=state_space, action_space=action_space, device=net.device)
        DeterministicMixin.__init__(self, clip_actions=False)
        self.of_actions = of_actions
        self.mlp = mlp(self.num_states + (self.num_actions if of_actions else 0), net.hidden, 1, net.activation)
        self.clock = net.clock

    def compute(  # pyright: ignore[reportIncompatibleMethodOverride]  (skrl's mixins pass role by position)
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        x = inputs["states"]
        if self.of_actions:
            x = torch.cat((x, inputs["taken_actions"]), dim=-1)
        return self.mlp(x), {}

    def reduce_parameters(self) -> None:
        self.clock.timed(super().reduce_parameters)


class SyncedStandardScaler(RunningStandardScaler):
    """skrl's running standardiser of observations (or values) whose statistics stay identical on every worker.

    skrl updates it from each worker's batch alone, so the workers' normalisers, and with them their actors, would
    drift apart. Here each update first combines the batch's count, mean and variance over all workers (one
    all-reduce, in float64), and every worker applies that same update, timed by the learner's ``clock`` as its
    gradients' all-reduces are.
    """

    def __init__(self, *args: Any, clock: SyncClock | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock

    def _parallel_variance(
        self, input_mean: torch.Tensor, input_var: torch.Tensor, input_count: int | torch.Tensor
    ) -> None:
        if skrl_config.torch.is_distributed:
            n = torch.as_tensor(input_count, dtype=torch.float64, device=input_mean.device).reshape(1)
            mean, var = input_mean.double(), input_var.double()
            # Per worker: the count, the sum and the sum of squares (torch.var is the unbiased estimate).
            packed = torch.cat((n, mean * n, (n - 1) * var + n * mean.square()))
            if self.clock is not None:
                self.clock.timed(lambda: dist.all_reduce(packed))
            else:
                dist.all_reduce(packed)
            size = mean.numel()
            total, sums, squares = packed[0], packed[1 : 1 + size], packed[1 + size :]
            input_mean = sums / total
            input_var = (squares - total * input_mean.square()) / (total - 1)
            input_count = total
        super()._parallel_variance(input_mean, input_var, input_count)  # type: ignore[arg-type]


class SkrlPolicy(nn.Module):
    """The deterministic actor of an skrl learner with its observation normaliser: called with observation groups it
    returns the actor's mean (what the evaluation environments and ``play`` take); :meth:`as_onnx` is the same on the
    policy observations' tensor, for the export."""

    obs_groups: tuple[str, ...] = ("policy",)

    def __init__(self, actor: GaussianActor | DeterministicActor, normaliser: RunningStandardScaler | None) -> None:
        super().__init__()
        self.actor = actor
        self.normaliser = normaliser
        self.obs_dim: int = int(actor.num_observations)
        self.obs_normalization = normaliser is not None

    def forward(self, obs: TensorDict) -> torch.Tensor:
        x = obs["policy"]
        if self.normaliser is not None:
            x = self.normaliser(x)
        return squashed(self.actor.mlp(x), self.actor.limit)

    def as_onnx(self, verbose: bool) -> nn.Module:
        return _OnnxActor(self)


class _OnnxActor(nn.Module):
    """A copy of :class:`SkrlPolicy` on the concatenated observation tensor (exporting it leaves training alone)."""

    def __init__(self, policy: SkrlPolicy) -> None:
        super().__init__()
        self.normaliser = copy.deepcopy(policy.normaliser) if policy.normaliser is not None else nn.Identity()
        self.mlp = copy.deepcopy(policy.actor.mlp)
        self.limit = policy.actor.limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return squashed(self.mlp(self.normaliser(x)), self.limit)

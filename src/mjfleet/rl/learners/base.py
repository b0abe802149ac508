"""The one small interface every learner sits behind: what the runner's loop, checkpoints, exports and replica checks
need of an algorithm, whichever library's it is.

The runner (:mod:`mjfleet.rl.runner`) owns the loop: it steps the environments, hands each learner the training
environments' part of every step, asks it for an update once per iteration, and owns progress, evaluation, checkpoints
and the replica check for all learners alike. A learner owns its models, optimizers, normalisers and buffers.
``rsl-rl-ppo`` is :class:`mjfleet.rl.learners.rsl_rl.RslRlPpo`; the skrl learners are in
:mod:`mjfleet.rl.learners.skrl.algorithms`; :mod:`mjfleet.rl.learners.registry` knows every learner by the name
``--agent.learner`` gives it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch
from tensordict import TensorDict


class ExportablePolicy(Protocol):
    """The deterministic actor with its observation normaliser: called with observation groups it returns the actions
    ``play`` takes; :meth:`as_onnx` is the same computation on the concatenated observation tensor, for the export
    (:mod:`mjfleet.rl.checkpoint.onnx`). rsl-rl-lib's ``MLPModel`` is one."""

    @property
    def obs_groups(self) -> Sequence[str]:
        """The observation groups it reads, concatenated in this order."""
        ...

    @property
    def obs_dim(self) -> int:
        """Values of the concatenated observation."""
        ...

    @property
    def obs_normalization(self) -> bool:
        """Whether it normalises observations with running statistics (part of the export)."""
        ...

    def __call__(self, obs: TensorDict) -> torch.Tensor: ...

    def as_onnx(self, verbose: bool) -> torch.nn.Module:
        """A module on the concatenated observation tensor, for ``torch.onnx.export``."""
        ...

    def to(self, device: str | torch.device | None) -> Any: ...


@dataclass
class SyncClock:
    """Time spent in gradient all-reduces, and how many, since :meth:`reset`: every learner's (the runner's
    ``sync_s``, and where a rank is inside an update)."""

    device: str = "cpu"
    """Where the collectives run: on a GPU they are only queued, and are timed between waits for it."""
    seconds: float = 0.0
    reductions: int = 0

    @property
    def on_cuda(self) -> bool:
        return torch.device(self.device).type == "cuda"

    def reset(self) -> None:
        self.seconds, self.reductions = 0.0, 0

    def wait(self) -> None:
        """Wait for the GPU to finish the work queued so far; nothing on the CPU."""
        if self.on_cuda:
            torch.cuda.synchronize(self.device)

    def timed(self, reduce: Callable[[], Any]) -> Any:
        """Run ``reduce`` (a collective) and count it. On a GPU the collective is only queued: it is timed between two
        waits for the device, or the backward pass before it and the all-reduce itself would count in the wrong
        place."""
        self.reductions += 1
        self.wait()
        start = time.perf_counter()
        result = reduce()
        self.wait()
        self.seconds += time.perf_counter() - start
        return result


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """An optimizer's part of :meth:`Learner.replica_tensors`: its state's tensors and its groups' learning rates."""
    tensors: list[torch.Tensor] = []
    for state in optimizer.state_dict()["state"].values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    tensors.append(torch.tensor([g["lr"] for g in optimizer.param_groups], dtype=torch.float64))
    return tensors


def replay_warm_up_notice(name: str, random_steps: int, learning_starts: int) -> str:
    """:meth:`Learner.continued_notice` of a learner with a replay buffer, which checkpoints do not hold."""
    return (
        f"{name}: the replay buffer is not in checkpoints and starts empty; {random_steps} steps of random actions"
        f" and {learning_starts} steps before the first update count from here"
    )


class Learner(ABC):
    """A learning algorithm as the runner drives it.

    One iteration: :meth:`act` on the training environments' observations, the runner steps the environments and hands
    the step to :meth:`process_step`, ``num_steps_per_env`` times; then :meth:`end_rollout` and :meth:`update`. The
    evaluation environments' actions come from :meth:`act_deterministic` and their steps never reach the learner.
    """

    name: ClassVar[str]
    """The ``--agent.learner`` value that selects it (recorded in checkpoints)."""
    learning_rate_flag: ClassVar[str]
    """The flag of its learning rate (the first thing to lower when training diverges)."""
    clock: SyncClock
    """Times the learner's gradient all-reduces (set by the learner when it is built)."""
    final_observations: ClassVar[bool] = False
    """Whether :meth:`process_step` needs ``extras["final_observations"]``, the observations episodes ended in
    (:attr:`mjfleet.envs.env.MjEnv.final_observations`): an off-policy learner bootstraps a time-out from it."""

    @abstractmethod
    def act(self, obs: TensorDict) -> torch.Tensor:
        """Actions of the training environments, sampled from the policy (and remembered for :meth:`process_step`)."""

    @abstractmethod
    def act_deterministic(self, obs: TensorDict) -> torch.Tensor:
        """The actor's deterministic actions (its mean): what the evaluation environments and ``play`` take."""

    @abstractmethod
    def process_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]) -> None:
        """Record the step of the training environments that followed :meth:`act`: the observations after it (of the
        reset environments where episodes ended), rewards, ``dones``, ``extras["time_outs"]`` and, for a learner that
        asks (:attr:`final_observations`), ``extras["final_observations"]``."""

    @abstractmethod
    def end_rollout(self, obs: TensorDict) -> None:
        """The iteration's rollout ended with the training environments at ``obs`` (PPO computes its returns)."""

    @abstractmethod
    def update(self) -> dict[str, float]:
        """Learn from what was recorded; returns the mean of each loss by name."""

    @abstractmethod
    def train_mode(self) -> None:
        """Prepare for collecting and updating (called as training starts)."""

    @abstractmethod
    def eval_mode(self) -> None:
        """Prepare for acting only (``play``)."""

    @abstractmethod
    def broadcast_parameters(self) -> None:
        """Make every rank's parameters rank 0's (a collective)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds of the learner: tensors and plain data only (checkpoints load with
        ``weights_only=True``)."""

    @abstractmethod
    def load_state_dict(self, data: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s part of a checkpoint (every rank does)."""

    def continued_notice(self) -> str:
        """What a run continued from a checkpoint should know of what the checkpoint did not restore ('' if
        nothing); said when training continues, not when a checkpoint is played."""
        return ""

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizers whose learning rates the learner's settings give (a new run from a checkpoint takes those
        instead of the checkpoint's: :meth:`set_learning_rates`); none where it has none to set."""
        return []

    def set_learning_rates(self, rates: list[list[float]]) -> None:
        """Give :meth:`optimizers`' parameter groups these learning rates (as read from them, in order)."""
        for optimizer, groups in zip(self.optimizers(), rates, strict=True):
            for group, rate in zip(optimizer.param_groups, groups, strict=True):
                group["lr"] = rate

    @abstractmethod
    def policy(self) -> ExportablePolicy:
        """The deterministic actor with its observation normaliser (what ``play`` runs and the ONNX export holds)."""

    @abstractmethod
    def modules(self) -> dict[str, torch.nn.Module]:
        """The modules whose state must stay finite, by the name an error names them with."""

    @abstractmethod
    def replica_tensors(self) -> list[torch.Tensor]:
        """Everything the ranks must agree on, in a fixed order: parameters, normaliser statistics, optimizer state,
        learning rates (:mod:`mjfleet.rl.replicas` digests them)."""

    @property
    @abstractmethod
    def learning_rate(self) -> float:
        """The current learning rate (the actor's, where networks have their own)."""

    @property
    @abstractmethod
    def action_std(self) -> float:
        """Mean standard deviation of the actions' exploration noise."""

    @property
    def sync_s(self) -> float:
        """Seconds spent in gradient all-reduces since :meth:`reset_sync` (the gradient sync's share of an update)."""
        return self.clock.seconds

    @property
    def reductions(self) -> int:
        """Gradient all-reduces entered since :meth:`reset_sync` (where a rank is inside an update)."""
        return self.clock.reductions

    def reset_sync(self) -> None:
        """Start counting :attr:`sync_s` and :attr:`reductions` afresh (before each update)."""
        self.clock.reset()

    def synchronize(self) -> None:
        """Wait for this rank's device (a GPU) to finish the work queued so far; nothing on the CPU."""
        self.clock.wait()

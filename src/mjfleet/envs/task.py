# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""The contract between a task (its MDP) and the generic batched environment."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import mujoco
import numpy as np
import torch

from mjfleet.envs.config import EnvConfig

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv

CfgT = TypeVar("CfgT", bound=EnvConfig)

TERMINATION_NONFINITE = "nonfinite"
"""Termination reason of a world whose physics diverged (NaN/Inf); it is reset instead of crashing the run."""
ENV_TERMINATIONS = ("time_out", TERMINATION_NONFINITE)
"""Termination reasons the environment adds to every task's own."""


@dataclasses.dataclass(frozen=True)
class VideoMarker:
    """A translucent sphere that videos draw in a world (a target, a goal): not part of the simulation."""

    pos: tuple[float, float, float]
    """Its centre in the world frame (metres)."""
    radius: float
    """Its radius (metres): e.g. the distance within which the task counts success."""
    rgba: tuple[float, float, float, float]
    """Its colour and opacity."""


@dataclasses.dataclass(frozen=True)
class ExportedTables:
    """Tables an exported policy carries as constants and reads at an index the control loop counts (a motion's
    frame): the ONNX graph takes the index as a second input and outputs each table's row at it, so that the loop
    needs no other file."""

    index: str
    """Name of the index input (one integer per batch row); indices beyond the tables read their last row."""
    tables: dict[str, torch.Tensor]
    """Output name -> table (rows, ...): the output is the table's row at the index."""
    zero_targets: torch.Tensor | None = None
    """(rows, actions): the servo targets of an action of zero in the step that starts at each index; with it the
    graph also outputs ``joint_targets``, the row at the index plus ``action_scale`` times the actions."""
    action_scale: torch.Tensor | None = None
    """(actions,): targets per unit of action, for ``joint_targets``."""
    action_clip: float | None = None
    """The environment clips each action to ``[-action_clip, action_clip]`` before the task scales it
    (``--env.clip-actions``): ``joint_targets`` are of the clipped actions, as the simulation's are."""


@dataclasses.dataclass(frozen=True)
class ForeignExport:
    """The policy exported in another framework's layout, for control loops written for that framework's policies
    (written beside mjfleet's own export as ``model_<iteration>.<name>.onnx``, the newest as ``policy.<name>.onnx``)."""

    name: str
    """The layout's name, part of the file name (e.g. ``mjlab``)."""
    wrap: Callable[[torch.nn.Module], torch.nn.Module]
    """Turns the deterministic actor (observation normaliser included; mjfleet's observation in, actions out) into
    the graph: the other layout's inputs in, its outputs out."""
    inputs: tuple[tuple[str, torch.Tensor], ...]
    """The graph's inputs by name, each with an example value: the graph's fixed shapes."""
    outputs: tuple[str, ...]
    """The graph's output names, in the order the wrapped module returns them."""
    metadata: dict[str, str]
    """The file's ``metadata_props``: what the other framework's control loops read there."""


class Task(ABC, Generic[CfgT]):
    """One MDP: its model, resets, actions, observations, reward terms and terminations, side by side.

    :meth:`MjEnv.step <mjfleet.envs.env.MjEnv.step>` calls, in this order: :meth:`apply_actions`, the physics
    step, :meth:`after_step`, :meth:`terminations`, the reward terms, :meth:`reset` of the finished environments,
    then :meth:`observations`. :meth:`after_step` is the one place that updates per-step task state;
    :meth:`terminations`, the reward terms and :meth:`observations` only read the simulation and that state, and
    change neither (observation noise may draw from ``env.generator``).

    Reward terms are methods named ``reward_<name>`` returning one value per environment; :meth:`reward_weights`
    gives one weight per term (by default the task config's ``rewards`` dataclass, i.e. ``--env.rewards.<name>``).
    The environment computes only terms with a non-zero weight and scales the weighted sum by the control step, so
    returns are per-second integrals independent of the decimation.
    """

    forward_after_reset: ClassVar[bool] = False
    """Recompute kinematics after resets, for tasks whose observations read derived quantities (body poses,
    sensors) rather than only ``qpos``/``qvel``."""

    batched_model_fields: ClassVar[tuple[str, ...]] = ()
    """``mujoco_warp.Model`` fields that get one copy per world (domain randomization), e.g. ``("geom_friction",)``;
    write them through ``env.sim.model_field(name)`` in :meth:`setup` or :meth:`reset`. Captured graphs read the
    arrays in place, so new values take effect without re-capturing."""

    video_camera: ClassVar[str | None] = None
    """Named model camera for videos; None tracks the first body with a free camera."""

    def __init__(self, cfg: CfgT) -> None:
        self.cfg = cfg

    @abstractmethod
    def build_model(self) -> mujoco.MjModel:
        """Return the host MuJoCo model."""

    def setup(self, env: MjEnv) -> None:
        """Allocate task buffers and look up ids once the simulation exists (``env.reward_weights`` is known)."""

    @property
    @abstractmethod
    def num_actions(self) -> int:
        """Action dimension."""

    def reward_weights(self) -> dict[str, float]:
        """Weight of each reward term ``reward_<name>`` by name; terms weighted 0 are never computed.

        Like :meth:`termination_names` and :meth:`metric_names`, a function of the config alone where it can be:
        ``--stop-when`` is checked against these names before the task is built (:func:`declared_stat_keys`).

        The default reads every field of the config's ``rewards`` dataclass (none: no reward terms).
        """
        rewards = getattr(self.cfg, "rewards", None)
        if rewards is None:
            return {}
        return {name: float(weight) for name, weight in dataclasses.asdict(rewards).items()}

    @abstractmethod
    def termination_names(self) -> tuple[str, ...]:
        """Names of the conditions :meth:`terminations` returns, in its key order; fixed for the task's life so
        every rank logs the same ``Episode_Termination/<name>`` keys."""

    @abstractmethod
    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        """Write the initial state of the listed environments into ``env.sim`` and reset their task state."""

    def training_start(self, env: MjEnv) -> torch.Tensor | None:
        """Which environments' current episodes began from a start that only training episodes have (a cube in
        the hand), ``(num_envs,)`` bools; None: no such start. Evaluation rows set aside after the first reset
        restart where it is true (:meth:`MjEnv.split_evaluation`). A task that has such starts says so in
        :meth:`has_training_starts` too."""
        return None

    def has_training_starts(self) -> bool:
        """Whether training episodes may begin from a start only training has (:meth:`training_start`), known from
        the config alone: only then is ``Episode/success_privileged`` logged, and offered to ``--stop-when`` on the
        training episodes. By default: whether the task overrides :meth:`training_start`; a task whose config can turn
        them off says so."""
        return type(self).training_start is not Task.training_start

    @abstractmethod
    def apply_actions(self, env: MjEnv, actions: torch.Tensor) -> None:
        """Turn (clipped) policy actions into ``env.sim.ctrl``."""

    def after_step(self, env: MjEnv) -> None:
        """Update task state from the new physics state, before terminations and rewards read it (e.g. counters,
        contact state, command resampling)."""

    @abstractmethod
    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        """Boolean terminal conditions, keyed by :meth:`termination_names` (time-outs: :meth:`time_outs`).

        Pure: reward terms that depend on termination read ``env.terminated``, which the environment fills from
        these conditions before computing rewards.
        """

    def time_out_names(self) -> tuple[str, ...]:
        """Names of the conditions :meth:`time_outs` returns, in its key order (none by default); fixed for the
        task's life, like :meth:`termination_names`, and distinct from every termination name."""
        return ()

    def time_outs(self, env: MjEnv) -> dict[str, torch.Tensor]:
        """Boolean conditions that end an episode without failing it, keyed by :meth:`time_out_names` (e.g. a robot
        leaving a finite terrain). Like the episode-length limit, the environment's own time-out, they are reported
        to the learner as time-outs: the value after them is bootstrapped, not zero. A termination in the same step
        takes precedence."""
        return {}

    def longest_episode_steps(self) -> int | None:
        """Control steps after which :meth:`time_outs` ends every episode at the latest, where the task knows it
        (a tracking motion's last frame, reached from its first); None: only the episode length bounds an episode.
        Read after :meth:`setup`."""
        return None

    @abstractmethod
    def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        """Observation groups; ``policy`` is required, ``critic`` may add privileged state."""

    def episode_metrics(self, env: MjEnv, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Task statistics of the episodes ending in ``env_ids`` (logged as ``Metrics/<name>``)."""
        return {}

    def metric_names(self) -> tuple[str, ...]:
        """Names returned by :meth:`episode_metrics`, fixed so every rank logs the same keys."""
        return ()

    @abstractmethod
    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        """Whether each episode ending in ``env_ids`` counts as a success (``time_outs`` is for those ids)."""

    def command_ranges(self) -> dict[str, tuple[float, float]]:
        """Commands a person may steer live (the viewer's sliders), by name, with their ranges; none by default."""
        return {}

    def hold_commands(self, env: MjEnv, values: dict[str, float] | None) -> None:
        """Set the named commands (keys of :meth:`command_ranges`) of every environment and keep them, through
        resets, until the next call; ``None`` hands them back to the task's own schedule. Called between steps."""
        if values:
            raise KeyError(f"{type(self).__name__} has no commands to hold: {sorted(values)}")

    def ghost_qpos(self, env: MjEnv, world: int) -> np.ndarray | None:
        """A pose of the model (``qpos``) that videos draw as a translucent ghost over world ``world``, e.g. the
        reference a tracking task follows; none by default."""
        return None

    def video_markers(self, env: MjEnv, world: int) -> list[VideoMarker]:
        """What videos draw in world ``world`` besides the model, e.g. the target a policy reaches for; none by
        default."""
        return []

    def iteration_scalars(self, env: MjEnv) -> dict[str, float]:
        """Numbers about the task's own state, read once per iteration on the first worker and logged as
        ``Task/<name>`` (TensorBoard, W&B), e.g. where a tracking task's adaptive sampling starts its episodes; none
        by default. Each is read to the host: keep them few."""
        return {}

    def export_metadata(self) -> dict[str, Any]:
        """What a control loop needs beyond the observation layout to run an exported policy of this task (JSON
        values), written into the ONNX file's sidecar; nothing by default."""
        return {}

    def export_tables(self) -> ExportedTables | None:
        """Tables the exported policy carries and reads at an index the control loop counts (e.g. a motion's
        frames); none by default."""
        return None

    def foreign_exports(self, env: MjEnv) -> list[ForeignExport]:
        """The policy's exports in other frameworks' layouts, written at every checkpoint beside mjfleet's own (e.g.
        the tracking task's in mjlab's); none by default."""
        return []

    def export_index(self, env: MjEnv) -> torch.Tensor:
        """Each environment's current index into :meth:`export_tables` (what a control loop feeds the exported
        policy)."""
        raise NotImplementedError(f"{type(self).__name__} exports no tables")

    def state_dict(self) -> dict[str, Any]:
        """Task state a resumed run continues from (e.g. curriculum levels), saved per rank in checkpoints.

        Tensors and plain data only, so checkpoints load with ``weights_only=True``.
        """
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (possibly from a run with another number of environments)."""


PRIVILEGED_SUCCESS = "Episode/success_privileged"
"""The success of training episodes that began from a start only training has (:meth:`Task.training_start`: a cube
in the hand): reported apart, so that ``Episode/success`` and every stop condition read episodes that start as
``play``'s do. Logged only where such episodes ended."""


def episode_stat_keys(task: Task[Any]) -> list[str]:
    """The statistics logged for each finished episode, known from the task's config alone (the launcher checks
    ``--stop-when`` against them before any simulation exists)."""
    keys = ["Episode/return", "Episode/length", "Episode/success"]
    keys += [PRIVILEGED_SUCCESS] if task.has_training_starts() else []
    keys += [f"Episode_Reward/{k}" for k, w in task.reward_weights().items() if w != 0.0]
    ends = (*task.termination_names(), *task.time_out_names(), *ENV_TERMINATIONS)
    keys += [f"Episode_Termination/{k}" for k in ends]
    keys += [f"Metrics/{k}" for k in task.metric_names()]
    return keys


def evaluated_stat_keys(task_class: type[Task[Any]], cfg: EnvConfig) -> list[str]:
    """The training names of the statistics the evaluation episodes log: those of the settings a policy is judged
    under (:meth:`EnvConfig.as_judged`), less the successes from starts only training has."""
    return [key for key in declared_stat_keys(task_class, cfg.as_judged()) if key != PRIVILEGED_SUCCESS]


def declared_stat_keys(task_class: type[Task[Any]], cfg: EnvConfig) -> list[str]:
    """:func:`episode_stat_keys` without building the task (no model, no terrain): the names come from the config.

    Only :class:`Task`'s own ``__init__`` runs (it stores the config); a task whose names need more than its config
    is built after all, so the answer is the same either way.
    """
    declared = task_class.__new__(task_class)
    Task.__init__(declared, cfg)
    try:
        return episode_stat_keys(declared)
    except AttributeError:
        return episode_stat_keys(task_class(cfg))

# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""MuJoCo C backend: N worlds stepped on a persistent thread pool by ``mujoco.batch``, on the CPU."""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence

import mujoco
import numpy as np
import torch
from mujoco import batch

from mjfleet.sim.config import SimConfig, resolve_threads
from mjfleet.sim.simulation import SENSOR_DISABLE_BIT, Simulation, sensors_last_substep_only

__all__ = ["MujocoSimulation"]

_DIVERGED = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)
"""MuJoCo C resets a world whose state turns NaN/Inf/huge to its defaults and counts one of these warnings; the
world is reported by :meth:`MujocoSimulation.nonfinite_worlds` as the Warp backend reports a NaN state."""


def _from_numpy(array: np.ndarray) -> torch.Tensor:
    with warnings.catch_warnings():  # outputs are read-only arrays; the tensor is only ever read
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


SENSOR_OUTPUTS = frozenset({"sensordata", "cacc", "cfrc_int", "cfrc_ext"})
"""Fields the sensor pass fills: the sensors, and the accelerations and forces MuJoCo computes for the sensors that
need them (``mj_rnePostConstraint``; zero where no sensor of the model needs them, on either backend). A task that
reads any of them gets the last substep with sensors on."""


class MujocoSimulation(Simulation):
    """``num_worlds`` MuJoCo C simulations of one model on ``threads`` threads (the caller's included).

    Each world's state is a float64 row of a ``mujoco.batch.Batch``; ``step`` runs ``decimation`` ``mj_step``
    calls per world in one call into C. The torch views are float32 tensors, like the Warp backend's, so tasks
    and policies see one dtype: a view's values are copied into the float64 rows before each call and back after
    it, between preallocated tensors (no allocation per step; microseconds for a thousand worlds, against
    milliseconds of physics). Derived fields are bound on first use and copied out after every call; a bound
    field is filled at once by a forward pass over every world.

    Batched model fields are float32 tensors too, pushed into the batch's per-world model arrays by
    :meth:`model_fields_changed`.
    """

    backend = "mujoco"

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        num_worlds: int,
        device: str,
        cfg: SimConfig | None = None,
        batched_model_fields: Sequence[str] = (),
    ) -> None:
        super().__init__(mj_model, num_worlds, device, cfg)
        if self.device.type != "cpu":
            raise ValueError(f"the mujoco backend runs on the CPU only, not {device}")
        self.threads = resolve_threads(self.cfg)
        """Threads stepping the worlds, the calling thread included."""
        self._batch = batch.Batch(mj_model, num_worlds, nthread=self.threads)
        # name -> (float32 view, float64 rows); inputs are pushed before a call, everything is pulled after it.
        self._inputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._outputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._fields: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.batched_fields = tuple(batched_model_fields)
        for name in batched_model_fields:
            rows = torch.from_numpy(self._batch.expand(name))
            dtype = torch.float32 if rows.dtype.is_floating_point else rows.dtype
            self._fields[name] = (rows.to(dtype), rows)
        first, last = min(int(w) for w in _DIVERGED), max(int(w) for w in _DIVERGED)
        assert last - first + 1 == len(_DIVERGED)
        # (num_worlds, warnings, (last info, count)), live: a view, so the counts stay current
        self._warning_counts = self._batch.warning[:, first : last + 1, 1]
        self._warning_counts[:] = 0
        self._diverged = torch.zeros(num_worlds, dtype=torch.bool)
        # Per-world option flags, toggled around the substeps whose sensors nobody reads (bit-identical results):
        # every substep until a task reads a field of the sensor pass (SENSOR_OUTPUTS), then all but the last one.
        self._disableflags: np.ndarray | None = None
        self._flags = int(mj_model.opt.disableflags)
        if sensors_last_substep_only(mj_model, self.cfg):
            self._disableflags = self._batch.expand("opt.disableflags")

    # --- views -------------------------------------------------------------------------------------------------
    def view(self, name: str) -> torch.Tensor:
        """float32 view of an ``MjData`` field, ``(num_worlds, ...)``; state fields are written back to the
        physics before the next call, derived fields are those of the last call."""
        pair = self._inputs.get(name) or self._outputs.get(name)
        if pair is not None:
            return pair[0]
        try:
            rows = self._batch.bind(name)
        except ValueError as e:
            raise KeyError(f"the mujoco backend has no MjData field {name!r}") from e
        source = _from_numpy(rows)
        dtype = torch.float32 if source.dtype.is_floating_point else source.dtype
        pair = (source.to(dtype), source)
        if rows.flags.writeable:
            self._inputs[name] = pair
        else:
            self._outputs[name] = pair
            self._call(lambda: self._batch.forward())  # a newly bound output is empty until the next call
        return pair[0]

    def model_field(self, name: str) -> torch.Tensor:
        """float32 per-world values of a batched model field, ``(num_worlds, ...)``; after writing rows, call
        :meth:`model_fields_changed`."""
        pair = self._fields.get(name)
        if pair is None:
            raise KeyError(f"model field {name!r} is not batched; name it in the task's batched_model_fields")
        return pair[0]

    def model_fields_changed(self, world_ids: torch.Tensor, fields: Collection[str] | None = None) -> None:
        """Push the batched model fields of ``world_ids`` (those named in ``fields``, or all) into the per-world
        models."""
        for name, (values, rows) in self._fields.items():
            if fields is None or name in fields:
                rows[world_ids] = values[world_ids].to(rows.dtype)

    # --- stepping ----------------------------------------------------------------------------------------------
    def _call(self, fn: object) -> None:
        for view, rows in self._inputs.values():
            rows.copy_(view)
        fn()  # type: ignore[operator]
        for view, rows in self._inputs.values():
            view.copy_(rows)
        for view, rows in self._outputs.values():
            view.copy_(rows)
        # MuJoCo's reset of a diverged world sets its warning counts back to 0 and then counts this one: every world
        # with a count diverged during this call; the counts are cleared so that the next divergence shows as well.
        diverged = self._warning_counts.sum(axis=-1) != 0
        if diverged.any():
            self._diverged |= torch.from_numpy(diverged)
            self._warning_counts[diverged] = 0

    def step(self) -> None:
        """Advance every world by ``decimation`` physics steps (one call into the thread pool, or two when the
        sensors are left out of all but the last substep)."""
        self._call(self._substeps)

    def _substeps(self) -> None:
        flags = self._disableflags
        if flags is None:
            self._batch.step(nstep=self.cfg.decimation)
            return
        flags[:] = self._flags | SENSOR_DISABLE_BIT
        if not SENSOR_OUTPUTS & self._outputs.keys():  # no reader: one call into the pool, no sensor computed
            self._batch.step(nstep=self.cfg.decimation)
            flags[:] = self._flags  # a later forward (a reset, a newly bound view) computes everything
            return
        self._batch.step(nstep=self.cfg.decimation - 1)
        flags[:] = self._flags
        self._batch.step(nstep=1)

    def forward(self, world_ids: torch.Tensor | None = None) -> None:
        """``mj_forward`` of ``world_ids`` (None: every world)."""
        ids = None if world_ids is None else world_ids.detach().cpu().numpy()
        self._call(lambda: self._batch.forward(ids))

    # --- resets ------------------------------------------------------------------------------------------------
    def reset_worlds(
        self, world_ids: torch.Tensor, qpos: torch.Tensor | None = None, qvel: torch.Tensor | None = None
    ) -> None:
        super().reset_worlds(world_ids, qpos, qvel)
        self._diverged[world_ids] = False

    def _set_rows(self, name: str, world_ids: torch.Tensor, value: float | torch.Tensor) -> None:
        pair = self._inputs.get(name)
        rows = pair[0] if pair is not None else _from_numpy(self._batch.bind(name))
        # Not viewed by anyone: the physics rows are set without mirroring the field from now on.
        rows[world_ids] = value.to(rows.dtype) if isinstance(value, torch.Tensor) else value

    def nonfinite_worlds(self) -> torch.Tensor:
        """Worlds with a NaN/Inf state, or that MuJoCo found diverged (and reset) since their last reset."""
        return super().nonfinite_worlds() | self._diverged

# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""MuJoCo Warp backend: model and data for N worlds on one device, zero-copy torch views, graph-captured steps."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from mjfleet.sim.config import SimConfig
from mjfleet.sim.graph import StepGraph
from mjfleet.sim.simulation import SENSOR_DISABLE_BIT, STATE_FIELDS, Simulation, sensors_last_substep_only
from mjfleet.sim.warp_runtime import init_warp

__all__ = ["WarpSimulation"]

logger = logging.getLogger(__name__)

# Module-load timings are noise for users; warnings still show.
wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)


class WarpSimulation(Simulation):
    """Owns ``mujoco_warp`` model and data for ``num_worlds`` worlds on one device.

    The torch views share memory with the Warp arrays: writing ``sim.ctrl[:] = a`` is seen by the next physics
    step without a copy, and batched model fields are read in place by the captured graph.

    Invariant: the captured graph holds the Warp arrays' pointers, so views are written in place and the arrays
    are never reassigned.
    """

    backend = "warp"

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        num_worlds: int,
        device: str,
        cfg: SimConfig | None = None,
        batched_model_fields: Sequence[str] = (),
    ) -> None:
        """Put the model on ``device`` and allocate data for ``num_worlds`` worlds.

        Args:
            mj_model: The host model.
            num_worlds: Number of parallel worlds.
            device: ``"cpu"`` or ``"cuda:N"``.
            cfg: Physics settings.
            batched_model_fields: Model fields that get one copy per world (for domain randomization), e.g.
                ``("geom_friction", "body_mass")``; read and write them through :meth:`model_field`.
        """
        super().__init__(mj_model, num_worlds, device, cfg)
        init_warp(str(self.device))
        self.wp_device = wp.get_device(str(self.device))
        self._streams: dict[int, wp.Stream] = {}
        """Warp handles of the torch streams work was issued on, by CUDA stream handle."""
        with self.scope():
            self.model = mjw.put_model(mj_model, batch_sizes={f: num_worlds for f in batched_model_fields})
            self.batched_fields = tuple(batched_model_fields)
            if not self.cfg.solver_notices:
                self.model.opt.warn_overflow &= ~(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
            self.data = mjw.make_data(mj_model, nworld=num_worlds, nconmax=self.cfg.nconmax, njmax=self.cfg.njmax)
        self._views: dict[str, torch.Tensor] = {}
        self._sensors_last_only = sensors_last_substep_only(mj_model, self.cfg)
        self._sensorless: mjw.Model | None = None
        self._step_graph = StepGraph(self._physics_steps, self.scope, enabled=self.cfg.use_graph)
        self._forward_graph = StepGraph(self._forward, self.scope, enabled=self.cfg.use_graph)

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Pin Warp work to this simulation's device and, on CUDA, order it with torch's *current* stream.

        The stream is looked up on every call, not once: work issued under ``torch.cuda.stream(s)`` (a torch write to
        ``ctrl``, then a graph launch) must run in that order on ``s``, or the physics could read stale controls.
        Torch's default stream is CUDA's legacy stream, on which no graph can be captured; there Warp keeps its own
        stream for the device, a blocking stream, which the legacy stream orders against implicitly both ways.
        """
        with wp.ScopedDevice(self.wp_device):
            stream = self._current_stream()
            if stream is None:
                yield
            else:
                with wp.ScopedStream(stream):
                    yield

    def _current_stream(self) -> wp.Stream | None:
        if self.device.type != "cuda":
            return None
        torch_stream = torch.cuda.current_stream(self.device)
        if torch_stream.cuda_stream == 0:
            return None  # the legacy default stream: Warp's own (blocking) stream, see scope()
        stream = self._streams.get(torch_stream.cuda_stream)
        if stream is None:
            stream = self._streams[torch_stream.cuda_stream] = wp.stream_from_torch(torch_stream)
        return stream

    # --- views -------------------------------------------------------------------------------------------------
    def view(self, name: str) -> torch.Tensor:
        """Zero-copy torch view of a ``mujoco_warp.Data`` field, shape ``(num_worlds, ...)``."""
        tensor = self._views.get(name)
        if tensor is None:
            tensor = wp.to_torch(getattr(self.data, name))
            self._views[name] = tensor
        return tensor

    def model_field(self, name: str) -> torch.Tensor:
        """Zero-copy torch view of a batched ``mujoco_warp.Model`` field, ``(num_worlds, ...)``: as MuJoCo C's, an
        unbatched one is refused (Warp shares it between worlds: a row written would be every world's, or out of
        range)."""
        if name not in self.batched_fields:
            raise KeyError(f"model field {name!r} is not batched; name it in the task's batched_model_fields")
        return wp.to_torch(getattr(self.model, name))

    @property
    def graph_active(self) -> bool:
        """Whether the physics step currently replays a captured graph."""
        return self._step_graph.active

    # --- stepping ----------------------------------------------------------------------------------------------
    def _physics_steps(self) -> None:
        first = self._sensorless_model() if self._sensors_last_only else self.model
        for _ in range(self.cfg.decimation - 1):
            mjw.step(first, self.data)
        mjw.step(self.model, self.data)

    def _sensorless_model(self) -> mjw.Model:
        """The model with sensors disabled, sharing every array."""
        if self._sensorless is None:
            opt = self.model.opt
            self._sensorless = dataclasses.replace(
                self.model, opt=dataclasses.replace(opt, disableflags=opt.disableflags | SENSOR_DISABLE_BIT)
            )
        return self._sensorless

    def _forward(self) -> None:
        mjw.forward(self.model, self.data)

    def step(self) -> None:
        """Advance every world by ``decimation`` physics steps."""
        self._step_graph.launch()

    def forward(self, world_ids: torch.Tensor | None = None) -> None:
        """Recompute derived quantities from the current state without stepping (every world: one graph), then put
        back what the other worlds' views read: after a step their derived fields are the last substep's, as on the
        MuJoCo C backend, whichever worlds reset."""
        if world_ids is None or world_ids.numel() == self.num_worlds:
            self._forward_graph.launch()
            return
        ids = world_ids.to(self.device)
        # Whole copies and integer indices: no mask, hence no host sync; the state fields forward never writes.
        kept = {name: view.clone() for name, view in self._views.items() if name not in STATE_FIELDS}
        self._forward_graph.launch()
        for name, before in kept.items():
            view = self._views[name]
            fresh = view[ids]
            view.copy_(before)
            view[ids] = fresh

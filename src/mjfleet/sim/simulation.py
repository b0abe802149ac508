# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""MuJoCo Warp model and data for N worlds on one device, with zero-copy torch views."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from mjfleet.sim.config import SimConfig
from mjfleet.sim.graph import StepGraph
from mjfleet.sim.warp_runtime import init_warp

__all__ = ["SimConfig", "Simulation"]

logger = logging.getLogger(__name__)

# Module-load timings are noise for users; warnings still show.
wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)


class Simulation:
    """Owns ``mujoco_warp`` model and data for ``num_worlds`` worlds on one device.

    Tasks read and write the state through the torch views below (``qpos``, ``qvel``, ``ctrl``, ...), which share
    memory with the Warp arrays: writing ``sim.ctrl[:] = a`` is seen by the next physics step without a copy.

    Invariant: the captured graph holds the Warp arrays' pointers, so views are written in place and the arrays
    are never reassigned.
    """

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
        self.cfg = cfg or SimConfig()
        self.mj_model = mj_model
        self.num_worlds = num_worlds
        self.device = torch.device(device)
        init_warp(str(self.device))
        self.wp_device = wp.get_device(str(self.device))
        self._streams: dict[int, wp.Stream] = {}
        """Warp handles of the torch streams work was issued on, by CUDA stream handle."""
        with self.scope():
            self.model = mjw.put_model(mj_model, batch_sizes={f: num_worlds for f in batched_model_fields})
            if not self.cfg.solver_notices:
                self.model.opt.warn_overflow &= ~(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
            self.data = mjw.make_data(mj_model, nworld=num_worlds, nconmax=self.cfg.nconmax, njmax=self.cfg.njmax)
        self._views: dict[str, torch.Tensor] = {}
        self._init_qpos = torch.as_tensor(mj_model.qpos0, dtype=torch.float32, device=self.device)
        self._step_graph = StepGraph(self._physics_steps, self.scope, enabled=self.cfg.use_graph)
        self._forward_graph = StepGraph(self._forward, self.scope, enabled=self.cfg.use_graph)

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Pin Warp work to this simulation's device and, on CUDA, to torch's *current* stream.

        The stream is looked up on every call, not once: work issued under ``torch.cuda.stream(s)`` (a torch write to
        ``ctrl``, then a graph launch) must run in that order on ``s``, or the physics could read stale controls.
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
        """Zero-copy torch view of a ``mujoco_warp.Model`` field (leading dim 1, or ``num_worlds`` if batched)."""
        return wp.to_torch(getattr(self.model, name))

    @property
    def qpos(self) -> torch.Tensor:
        """Generalized positions, ``(num_worlds, nq)``."""
        return self.view("qpos")

    @property
    def qvel(self) -> torch.Tensor:
        """Generalized velocities, ``(num_worlds, nv)``."""
        return self.view("qvel")

    @property
    def ctrl(self) -> torch.Tensor:
        """Actuator controls, ``(num_worlds, nu)``."""
        return self.view("ctrl")

    @property
    def qacc(self) -> torch.Tensor:
        """Generalized accelerations of the last step, ``(num_worlds, nv)``."""
        return self.view("qacc")

    @property
    def xpos(self) -> torch.Tensor:
        """Body positions in the world frame, ``(num_worlds, nbody, 3)``."""
        return self.view("xpos")

    @property
    def xquat(self) -> torch.Tensor:
        """Body orientations (w, x, y, z), ``(num_worlds, nbody, 4)``."""
        return self.view("xquat")

    @property
    def sensordata(self) -> torch.Tensor:
        """Sensor readings, ``(num_worlds, nsensordata)``."""
        return self.view("sensordata")

    @property
    def actuator_force(self) -> torch.Tensor:
        """Actuator forces of the last step, ``(num_worlds, nu)``."""
        return self.view("actuator_force")

    @property
    def time(self) -> torch.Tensor:
        """Simulation time per world, ``(num_worlds,)``."""
        return self.view("time")

    @property
    def physics_dt(self) -> float:
        """One physics step, in seconds."""
        return float(self.mj_model.opt.timestep)

    @property
    def control_dt(self) -> float:
        """One environment step (``decimation`` physics steps), in seconds."""
        return self.physics_dt * self.cfg.decimation

    @property
    def graph_active(self) -> bool:
        """Whether the physics step currently replays a captured graph."""
        return self._step_graph.active

    # --- stepping ----------------------------------------------------------------------------------------------
    def _physics_steps(self) -> None:
        for _ in range(self.cfg.decimation):
            mjw.step(self.model, self.data)

    def _forward(self) -> None:
        mjw.forward(self.model, self.data)

    def step(self) -> None:
        """Advance every world by ``decimation`` physics steps."""
        self._step_graph.launch()

    def forward(self) -> None:
        """Recompute derived quantities (kinematics, sensors) from the current ``qpos``/``qvel`` without stepping."""
        self._forward_graph.launch()

    def recapture(self) -> None:
        """Drop captured graphs; the next call captures again (needed after changing model options on the host)."""
        self._step_graph.reset()
        self._forward_graph.reset()

    # --- resets ------------------------------------------------------------------------------------------------
    def reset_worlds(
        self, world_ids: torch.Tensor, qpos: torch.Tensor | None = None, qvel: torch.Tensor | None = None
    ) -> None:
        """Reset the listed worlds to ``qpos``/``qvel`` (default: the model's ``qpos0`` and zero velocity).

        Warm-starts, controls, activations, applied forces and time are cleared so nothing from the previous
        episode (or a diverged state) leaks into the next one. Other worlds are untouched.
        """
        if world_ids.numel() == 0:
            return
        self.qpos[world_ids] = self._init_qpos if qpos is None else qpos
        self.qvel[world_ids] = 0.0 if qvel is None else qvel
        self.ctrl[world_ids] = 0.0
        self.view("qacc_warmstart")[world_ids] = 0.0
        self.view("xfrc_applied")[world_ids] = 0.0
        self.view("qfrc_applied")[world_ids] = 0.0
        self.time[world_ids] = 0.0
        if self.mj_model.na:
            self.view("act")[world_ids] = 0.0

    def nonfinite_worlds(self) -> torch.Tensor:
        """Boolean mask of worlds whose state holds NaN or Inf (a diverged simulation), ``(num_worlds,)``."""
        finite = torch.isfinite(self.qpos).all(dim=-1) & torch.isfinite(self.qvel).all(dim=-1)
        return ~finite

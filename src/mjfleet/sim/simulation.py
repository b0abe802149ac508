# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""N worlds of one MuJoCo model with zero-copy torch views: the interface both physics backends implement."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection

import mujoco
import numpy as np
import torch

from mjfleet.sim.config import SimConfig

__all__ = ["SimConfig", "Simulation", "sensors_last_substep_only"]

DERIVED_FIELDS = ("xpos", "xquat", "cvel", "site_xpos", "subtree_com", "sensordata", "actuator_force", "qacc")
"""Quantities computed from the state by the physics step (or :meth:`Simulation.forward`), readable through
:meth:`Simulation.view` on every backend."""


SENSOR_DISABLE_BIT = int(mujoco.mjtDisableBit.mjDSBL_SENSOR)


STATE_FIELDS = frozenset(
    (
        "qpos", "qvel", "ctrl", "act", "time", "qacc_warmstart", "xfrc_applied", "qfrc_applied", "history",
        "mocap_pos", "mocap_quat", "eq_active", "plugin_state", "userdata", "plastic",
    )
)  # fmt: skip
"""The fields of a world's state (what a step or a reset writes, and :meth:`Simulation.forward` only reads)."""

_RESET_FIELDS = {
    "history": "nhistory",
    "mocap_pos": "nmocap",
    "mocap_quat": "nmocap",
    "eq_active": "neq",
    "plugin_state": "npluginstate",
    "userdata": "nuserdata",
    "plastic": "nplastic",
}
"""State fields beyond the positions, velocities, controls and forces that a reset restores, by the model size that
says whether the model has any."""


def sensors_last_substep_only(mj_model: mujoco.MjModel, cfg: SimConfig) -> bool:
    """Whether sensors are computed on the last physics substep of an env step only.

    ``sensordata`` is read after the step, and like every derived field it holds the last substep's values, so
    sensors on earlier substeps are work nobody sees (each of the go1's 13 contact sensors scans every contact
    of its world). The exception is a sensor whose output depends on earlier evaluations: history buffers (delay,
    interval sampling) and plugins; then every substep computes them as MuJoCo would.
    """
    return (
        not cfg.sensors_every_substep
        and cfg.decimation > 1
        and mj_model.nsensor > 0
        and not mj_model.opt.disableflags & SENSOR_DISABLE_BIT
        and mj_model.nhistory == 0
        and not mj_model.sensor_interval.any()
        and not mj_model.sensor_delay.any()
        and bool((mj_model.sensor_plugin < 0).all())
    )


class Simulation(ABC):
    """``num_worlds`` worlds of one MuJoCo model on one device, stepped ``decimation`` physics steps at a time.

    Tasks read and write the state through torch views (``qpos``, ``qvel``, ``ctrl``, ...; float32, shape
    ``(num_worlds, ...)``): ``sim.ctrl[:] = a`` is seen by the next physics step. Views are written in place and
    never reassigned. Derived quantities (positions, velocities, forces, sensors) are those of the last step or
    :meth:`forward`; ask for them through the named properties and methods here (``site_lin_vel``,
    ``actuator_force``, ...), which each backend provides from its own data, never through the engine.

    Backends: :class:`~mjfleet.sim.warp_backend.WarpSimulation` (MuJoCo Warp) and
    :class:`~mjfleet.sim.mujoco_backend.MujocoSimulation` (MuJoCo C); :func:`~mjfleet.sim.factory.create_simulation`
    picks one from ``SimConfig.backend``.
    """

    backend: str = ""
    """``"warp"`` or ``"mujoco"``."""

    def __init__(self, mj_model: mujoco.MjModel, num_worlds: int, device: str, cfg: SimConfig | None) -> None:
        self.cfg = cfg or SimConfig()
        self.mj_model = mj_model
        self.num_worlds = num_worlds
        self.batched_fields: tuple[str, ...] = ()
        """The model fields with one copy per world (:meth:`model_field`), set by the backend."""
        self.device = torch.device(device)
        self._init_qpos = torch.as_tensor(mj_model.qpos0, dtype=torch.float32, device=self.device)
        fresh = mujoco.MjData(mj_model)  # as mj_resetData leaves it
        self._reset_values = {
            name: torch.as_tensor(np.asarray(getattr(fresh, name), dtype=np.float64), device=self.device)
            for name, size in _RESET_FIELDS.items()
            if getattr(mj_model, size)
        }
        """The state that a reset sets back to the model's own (delay histories, mocap poses, equality constraints'
        activity, plugin state, user data, the rest angles of yielding springs), where the model has any."""
        self._site_body = torch.as_tensor(mj_model.site_bodyid, dtype=torch.long, device=self.device)
        self._body_root = torch.as_tensor(mj_model.body_rootid, dtype=torch.long, device=self.device)

    # --- views -------------------------------------------------------------------------------------------------
    @abstractmethod
    def view(self, name: str) -> torch.Tensor:
        """Torch view of an ``MjData`` field, shape ``(num_worlds, ...)``: state fields (``qpos``, ``qvel``,
        ``ctrl``, ``act``, ``time``, ``qacc_warmstart``, ``xfrc_applied``, ``qfrc_applied``) and the derived
        :data:`DERIVED_FIELDS`; the Warp backend also serves any other ``mujoco_warp.Data`` field."""

    @abstractmethod
    def model_field(self, name: str) -> torch.Tensor:
        """Per-world values of a model field named in ``batched_model_fields``, ``(num_worlds, ...)``; write rows
        in place, then call :meth:`model_fields_changed` with the worlds written."""

    def world_model(self, world: int, model: mujoco.MjModel) -> None:
        """Write world ``world``'s own values of the batched fields (a randomized size, mass, ...) into ``model``, a
        copy of :attr:`mj_model` that draws that world."""
        for name in self.batched_fields:
            target = getattr(model, name)
            target[...] = self.model_field(name)[world].detach().cpu().numpy().reshape(target.shape)

    def model_fields_changed(  # noqa: B027 (optional hook)
        self, world_ids: torch.Tensor, fields: Collection[str] | None = None
    ) -> None:
        """Make writes to :meth:`model_field` rows of ``world_ids`` take effect, of the fields named in ``fields``
        (None: every batched field; a no-op where the physics reads the tensors in place, as with Warp)."""

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

    # --- derived quantities by name ----------------------------------------------------------------------------
    def site_pos(self, sites: torch.Tensor) -> torch.Tensor:
        """World positions of the sites ``sites`` (ids), ``(num_worlds, len(sites), 3)``."""
        return self.view("site_xpos")[:, sites]

    def site_lin_vel(self, sites: torch.Tensor) -> torch.Tensor:
        """World-frame linear velocities of the sites ``sites`` (ids), ``(num_worlds, len(sites), 3)``."""
        bodies = self._site_body[sites]
        cvel = self.view("cvel")[:, bodies]  # angular, then linear velocity at the subtree's centre of mass
        offset = self.view("site_xpos")[:, sites] - self.view("subtree_com")[:, self._body_root[bodies]]
        return cvel[..., 3:] + torch.cross(cvel[..., :3], offset, dim=-1)

    # --- timing ------------------------------------------------------------------------------------------------
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
        """Whether the physics step currently replays a captured graph (Warp only)."""
        return False

    # --- stepping ----------------------------------------------------------------------------------------------
    @abstractmethod
    def step(self) -> None:
        """Advance every world by ``decimation`` physics steps."""

    @abstractmethod
    def forward(self, world_ids: torch.Tensor | None = None) -> None:
        """Recompute derived quantities from the current state without stepping, for ``world_ids`` (None: all;
        a backend may recompute more worlds than asked)."""

    # --- resets ------------------------------------------------------------------------------------------------
    def reset_worlds(
        self, world_ids: torch.Tensor, qpos: torch.Tensor | None = None, qvel: torch.Tensor | None = None
    ) -> None:
        """Reset the listed worlds to ``qpos``/``qvel`` (default: the model's ``qpos0`` and zero velocity).

        Warm-starts, controls, activations, applied forces and time are cleared, and delay histories, mocap poses,
        equality constraints' activity, plugin state and user data set back to the model's, so nothing from the
        previous episode (or a diverged state) leaks into the next one. Other worlds are untouched.
        """
        if world_ids.numel() == 0:
            return
        self.qpos[world_ids] = self._init_qpos if qpos is None else qpos
        self.qvel[world_ids] = 0.0 if qvel is None else qvel
        self.ctrl[world_ids] = 0.0
        self.time[world_ids] = 0.0
        names = ["qacc_warmstart", "xfrc_applied", "qfrc_applied"] + (["act"] if self.mj_model.na else [])
        for name in names:
            self._set_rows(name, world_ids, 0.0)
        for name, value in self._reset_values.items():
            self._set_rows(name, world_ids, value)

    def _set_rows(self, name: str, world_ids: torch.Tensor, value: float | torch.Tensor) -> None:
        try:
            rows = self.view(name)
        except (KeyError, AttributeError):  # a field this backend does not have (Warp: plugin state)
            return
        rows[world_ids] = value.to(rows.dtype) if isinstance(value, torch.Tensor) else value

    def nonfinite_worlds(self) -> torch.Tensor:
        """Boolean mask of diverged worlds, ``(num_worlds,)``: a NaN or Inf in the state, or a velocity beyond
        ``cfg.divergence_speed``."""
        finite = torch.isfinite(self.qpos).all(dim=-1) & torch.isfinite(self.qvel).all(dim=-1)
        if self.cfg.divergence_speed is not None:
            finite &= self.qvel.abs().amax(dim=-1) <= self.cfg.divergence_speed
        return ~finite

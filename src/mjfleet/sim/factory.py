# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Build the simulation of the backend ``SimConfig.backend`` selects."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import mujoco

from mjfleet.errors import UsageError
from mjfleet.sim.config import SimConfig, resolve_backend
from mjfleet.sim.contacts import with_contact_model
from mjfleet.sim.simulation import Simulation


def create_simulation(
    mj_model: mujoco.MjModel,
    num_worlds: int,
    device: str,
    cfg: SimConfig | None = None,
    batched_model_fields: Sequence[str] = (),
) -> Simulation:
    """``num_worlds`` worlds of ``mj_model`` on ``device`` with the backend of ``cfg`` (``auto``: Warp on CUDA,
    MuJoCo C on the CPU) and its training contact model where it applies on ``device``; ``batched_model_fields`` get
    one copy per world (see :meth:`Simulation.model_field`)."""
    cfg = cfg or SimConfig()
    contacts = cfg.training_contacts
    if contacts.active(on_gpu=device.startswith("cuda")):
        mj_model = with_contact_model(mj_model, contacts)
        if contacts.timestep_scale != 1:
            if contacts.timestep_scale < 1 or cfg.decimation % contacts.timestep_scale:
                raise UsageError(
                    f"--env.sim.training-contacts.timestep-scale {contacts.timestep_scale} must divide"
                    f" --env.sim.decimation {cfg.decimation}"
                )
            cfg = dataclasses.replace(cfg, decimation=cfg.decimation // contacts.timestep_scale)
    backend = resolve_backend(cfg, device)
    if backend == "mujoco":
        if not device.startswith("cpu"):
            raise UsageError(f"--env.sim.backend mujoco runs on the CPU; use --gpu-ids None or warp on {device}")
        from mjfleet.sim.mujoco_backend import MujocoSimulation

        return MujocoSimulation(mj_model, num_worlds, device, cfg, batched_model_fields)
    from mjfleet.sim.warp_backend import WarpSimulation

    return WarpSimulation(mj_model, num_worlds, device, cfg, batched_model_fields)

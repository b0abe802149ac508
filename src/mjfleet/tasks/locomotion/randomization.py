# pyright: reportAttributeAccessIssue=false
"""Domain randomization: per-world friction, base mass, centre of mass and actuator gains (batched model fields),
encoder biases, and pushes."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from mjfleet.sim.simulation import Simulation
from mjfleet.tasks.locomotion.config import RandomizationConfig

BATCHED_FIELDS = (
    "geom_friction",
    "body_mass",
    "body_subtreemass",
    "body_ipos",
    "actuator_gainprm",
    "actuator_biasprm",
)
"""Model fields with one copy per world. ``body_subtreemass`` is derived from ``body_mass`` (it enters the
centre-of-mass computation of every step), so it is batched and recomputed alongside."""


def movable_centre_of_mass(model: mujoco.MjModel, body: str, cfg: RandomizationConfig) -> None:
    """Let ``--env.randomization.com-offset`` move ``body``'s centre of mass on every backend: MuJoCo C skips the
    inertial offset of a body whose centre of mass the compiler found at the body's origin (``body_sameframe``) and
    would ignore the drawn offsets, where MuJoCo Warp applies them. Call before the simulation is built; nothing
    changes where the offset is not randomized."""
    index = int(model.body(body).id)
    if cfg.com_offset is not None and model.body_sameframe[index] == mujoco.mjtSameFrame.mjSAMEFRAME_BODY:
        model.body_sameframe[index] = mujoco.mjtSameFrame.mjSAMEFRAME_BODYROT  # same axes, offset computed


def _uniform(bounds: tuple[float, float], count: int, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    low, high = bounds
    return low + (high - low) * torch.rand(count, device=device, generator=gen)


def subtree_matrix(model: mujoco.MjModel) -> np.ndarray:
    """``(nbody, nbody)`` 0/1 matrix: entry ``[b, j]`` is 1 when body ``j`` is in the subtree of body ``b``."""
    inside = np.eye(model.nbody)
    for j in range(model.nbody - 1, 0, -1):  # children come after their parents
        inside[model.body_parentid[j]] += inside[j]
    return (inside > 0).astype(np.float32)


class DomainRandomizer:
    """Draws per-world physics parameters and writes them into the simulation's batched model fields in place.

    New values act from the next step on (Warp's captured graph reads the arrays where they are; the MuJoCo C
    backend takes the rows it is told were written). Only
    ``body_subtreemass`` is recomputed after a mass change; MuJoCo Warp's ``set_const`` would also refresh
    ``dof_invweight0``/``body_invweight0`` (which scale the constraint regularisation), but for a few kilograms on
    the base their change is small and the task stays within the simulation's torch views.
    """

    def __init__(
        self, cfg: RandomizationConfig, sim: Simulation, base_body: int, generator: torch.Generator, num_joints: int = 0
    ) -> None:
        self.cfg = cfg
        self.generator = generator
        self.base_body = base_body
        self.sim = sim
        dev = sim.device
        self.friction_field = sim.model_field("geom_friction")
        self.mass_field = sim.model_field("body_mass")
        self.subtreemass_field = sim.model_field("body_subtreemass")
        self.ipos_field = sim.model_field("body_ipos")
        self.gain_field = sim.model_field("actuator_gainprm")
        self.bias_field = sim.model_field("actuator_biasprm")
        self._friction0 = self.friction_field[0, :, 0].clone()
        self._mass0 = self.mass_field[0].clone()
        self._base_ipos0 = self.ipos_field[0, base_body].clone()
        self._kp0 = self.gain_field[0, :, 0].clone()
        self._kv0 = -self.bias_field[0, :, 2].clone()
        self._subtree = torch.as_tensor(subtree_matrix(sim.mj_model), device=dev)
        n = sim.num_worlds
        self.friction = self.friction_field[:, :, 0].max(dim=-1).values.clone()
        """Sliding friction of each world (the largest geom friction when friction is not randomized)."""
        self.added_mass = torch.zeros(n, device=dev)
        """Mass added to the base of each world (kg)."""
        self.encoder_bias = torch.zeros(n, num_joints, device=dev)
        """What each world's encoders add to its ``num_joints`` actuated joints' angles (rad): a task adds it to the
        angles the policy reads (:meth:`encoder_readings`) and subtracts it from the servo targets
        (:meth:`aim_servos`)."""
        self.biased = cfg.encoder_bias is not None
        """Whether the encoders are biased (otherwise :attr:`encoder_bias` stays zero and is not applied)."""
        # Pushing a field rounds its rows through float32: the centre of mass only where it is randomized, so the
        # physics without it stays that of the file.
        self._pushed = tuple(f for f in BATCHED_FIELDS if f != "body_ipos" or cfg.com_offset is not None)

    def encoder_readings(self, angles: torch.Tensor) -> torch.Tensor:
        """What each world's encoders read for the actuated joints' ``angles`` (their biases added)."""
        return angles + self.encoder_bias if self.biased else angles

    def aim_servos(self, ctrl: torch.Tensor) -> None:
        """Turn servo targets taken in the encoders' frame into the joint angles they reach (in place)."""
        if self.biased:
            ctrl.sub_(self.encoder_bias)

    def apply(self, env_ids: torch.Tensor) -> None:
        """Draw and write new parameters for the listed worlds (the items the config enables)."""
        cfg, g, n, dev = self.cfg, self.generator, env_ids.numel(), self.friction.device
        if n == 0:
            return
        if cfg.friction is not None:
            mu = _uniform(cfg.friction, n, dev, g)
            # Every geom of the world gets mu, so the contact friction (MuJoCo takes the larger geom's, or the
            # foot's by priority) is mu whichever geoms touch.
            self.friction_field[env_ids, :, 0] = mu.unsqueeze(-1)
            self.friction[env_ids] = mu
        if cfg.added_base_mass is not None:
            extra = _uniform(cfg.added_base_mass, n, dev, g)
            mass = self._mass0.expand(n, -1).clone()
            mass[:, self.base_body] += extra
            self.mass_field[env_ids] = mass
            self.subtreemass_field[env_ids] = mass @ self._subtree.T
            self.added_mass[env_ids] = extra
        if cfg.com_offset is not None:
            half = torch.as_tensor(cfg.com_offset, dtype=torch.float32, device=dev)
            offset = (torch.rand(n, 3, device=dev, generator=g) * 2 - 1) * half
            self.ipos_field[env_ids, self.base_body] = self._base_ipos0 + offset
        if cfg.encoder_bias is not None:
            joints = self.encoder_bias.shape[1]
            low, high = cfg.encoder_bias
            self.encoder_bias[env_ids] = low + (high - low) * torch.rand(n, joints, device=dev, generator=g)
        if cfg.kp_scale is not None:
            kp = self._kp0 * _uniform(cfg.kp_scale, n, dev, g).unsqueeze(-1)
            # A position servo is force = kp * ctrl - kp * q - kv * qdot: gain and bias stiffness move together.
            self.gain_field[env_ids, :, 0] = kp
            self.bias_field[env_ids, :, 1] = -kp
        if cfg.kd_scale is not None:
            kv = self._kv0 * _uniform(cfg.kd_scale, n, dev, g).unsqueeze(-1)
            self.bias_field[env_ids, :, 2] = -kv
        self.sim.model_fields_changed(env_ids, self._pushed)


class Pushes:
    """Random horizontal shoves of the base at random intervals per environment."""

    def __init__(self, cfg: RandomizationConfig, num_envs: int, dt: float, device: torch.device, gen: torch.Generator):
        self.cfg = cfg
        self.dt = dt
        self.generator = gen
        self.enabled = cfg.push_velocity > 0.0
        self.time_left = _uniform(cfg.push_interval_s, num_envs, device, gen)
        """Seconds until each environment's next push."""

    def reset(self, env_ids: torch.Tensor) -> None:
        """Restart the listed environments' timers."""
        if self.enabled:
            interval = _uniform(self.cfg.push_interval_s, env_ids.numel(), self.time_left.device, self.generator)
            self.time_left[env_ids] = interval

    def step(self, qvel: torch.Tensor) -> None:
        """Advance the timers; add a random horizontal velocity to the free-joint velocity of environments due."""
        if not self.enabled:
            return
        n, dev, g = qvel.shape[0], qvel.device, self.generator
        self.time_left -= self.dt
        due = self.time_left <= 0.0
        kick = (torch.rand(n, 2, device=dev, generator=g) * 2.0 - 1.0) * self.cfg.push_velocity
        qvel[:, :2] += kick * due.unsqueeze(-1)
        self.time_left = torch.where(due, _uniform(self.cfg.push_interval_s, n, dev, g), self.time_left)

# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Apply a :class:`~mjfleet.sim.config.ContactModel` to a compiled model: a copy with cheaper contact physics."""

from __future__ import annotations

import copy

import mujoco
import numpy as np

from mjfleet.errors import UsageError
from mjfleet.sim.config import ContactModel

_CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}


def with_contact_model(m: mujoco.MjModel, contacts: ContactModel) -> mujoco.MjModel:
    """A copy of ``m`` with the changes ``contacts`` names (``m`` itself when it names none)."""
    if contacts.describe() == ContactModel().describe():
        return m
    m = copy.copy(m)
    if contacts.cone != "file":
        m.opt.cone = _CONES[contacts.cone]
    if contacts.impratio is not None:
        m.opt.impratio = contacts.impratio
    if contacts.max_condim is not None:
        np.minimum(m.geom_condim, contacts.max_condim, out=m.geom_condim)
        np.minimum(m.pair_dim, contacts.max_condim, out=m.pair_dim)
    if not contacts.joint_friction:
        m.dof_frictionloss[:] = 0.0
    if not contacts.self_collisions:
        _no_self_collisions(m)
    if contacts.timestep_scale != 1:
        m.opt.timestep *= contacts.timestep_scale  # the simulation divides the decimation by as much
    return m


def _no_self_collisions(m: mujoco.MjModel) -> None:
    """Geoms of one kinematic tree stop colliding with each other; every other pair keeps its filter.

    Each tree with colliding geoms on more than one body gets a collision bit of its own that no geom used: its
    geoms' ``contype`` becomes that bit and their ``conaffinity`` the bits of the other such trees, and every other
    geom that collided with the tree gains the bit in its ``conaffinity``. (A pair collides when either geom's
    ``contype`` meets the other's ``conaffinity``.)
    """
    colliding = (m.geom_contype | m.geom_conaffinity) != 0
    roots = m.body_rootid[m.geom_bodyid]
    trees = [
        int(r) for r in np.unique(roots[colliding]) if r and np.unique(m.geom_bodyid[colliding & (roots == r)]).size > 1
    ]
    if not trees:
        return
    used = int(np.bitwise_or.reduce(np.concatenate([m.geom_contype, m.geom_conaffinity])))
    free = [1 << b for b in range(31) if not used & (1 << b)]
    if len(free) < len(trees):
        raise ValueError(f"no collision bits left to separate {len(trees)} kinematic trees")
    ctype, caff = m.geom_contype.copy(), m.geom_conaffinity.copy()
    bits = dict(zip(trees, free, strict=False))
    for tree, bit in bits.items():
        members = colliding & (roots == tree)
        met = ((ctype[:, None] & caff[None, members]) | (caff[:, None] & ctype[None, members])) != 0
        some, every = met.any(axis=1), met.all(axis=1)
        # One bit for the whole tree: a geom that met only some of its geoms would meet them all.
        partial = np.flatnonzero(colliding & ~members & some & ~every)
        if partial.size:
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(partial[0])) or f"#{int(partial[0])}"
            raise UsageError(
                f"geom {name} collides with some of a robot's geoms and not others: the training contact model cannot"
                " take the robot's self-collisions out by collision bits (--env.sim.training-contacts.self-collisions"
                " keeps them)"
            )
        m.geom_conaffinity[colliding & ~members & some] |= bit
    for tree, bit in bits.items():
        m.geom_contype[colliding & (roots == tree)] = bit

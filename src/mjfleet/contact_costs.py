# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""Where a task's physics time goes on the CPU: the cost of one physics step, its contacts, constraint rows and
solver iterations, under the robot file's contact model and with each of its features changed on its own."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from mujoco import batch

from mjfleet.envs.env import MjEnv
from mjfleet.sim.config import ContactModel, as_shipped
from mjfleet.sim.contacts import with_contact_model
from mjfleet.tasks.spec import TaskSpec

CHEAP = ContactModel(
    applies="always", cone="pyramidal", impratio=1.0, max_condim=3, joint_friction=False, self_collisions=False
)
"""Every change at once: the cheapest contact model this table measures."""


@dataclass
class CostRow:
    """One contact model's physics on the states of one kind of rollout."""

    states: str
    """Which rollout the states come from: ``standing`` (zero actions) or ``untrained`` (the actions of an untrained
    policy, Gaussian with standard deviation 1, as in the first iterations of training)."""
    model: str
    """The contact model: ``file`` (as shipped, after the task's own changes) or what was changed."""
    us_per_step: float
    """Microseconds per physics step of one world on one thread."""
    contacts: float
    """Mean contacts per world and physics step."""
    rows: float
    """Mean constraint rows (``nefc``: contacts' normal and friction rows, joint friction, limits) per world."""
    iterations: float
    """Mean solver iterations per world and physics step."""


def variants(task_model: ContactModel) -> list[tuple[str, ContactModel]]:
    """The file's contact model, each feature changed on its own, the task's training contact model where it has one,
    and every change at once."""
    one = ContactModel(applies="always")
    rows = [
        ("file", dataclasses.replace(one)),
        ("pyramidal cones", dataclasses.replace(one, cone="pyramidal")),
        ("impratio 1", dataclasses.replace(one, impratio=1.0)),
        ("condim <= 3", dataclasses.replace(one, max_condim=3)),
        ("no joint friction", dataclasses.replace(one, joint_friction=False)),
        ("no self-collisions", dataclasses.replace(one, self_collisions=False)),
    ]
    if task_model.applies != "never" and task_model.describe() != CHEAP.describe():
        rows.append((f"the task's ({task_model.describe()})", dataclasses.replace(task_model, applies="always")))
    rows.append((f"all ({CHEAP.describe()})", CHEAP))
    return rows


def rollout_states(
    spec: TaskSpec, num_envs: int, steps: int, untrained: bool, seed: int = 0
) -> tuple[mujoco.MjModel, np.ndarray]:
    """The task's model as shipped and ``num_envs`` physics states (qpos, qvel, act, ctrl) after ``steps`` env steps,
    at the task's CPU defaults (the action scale an untrained policy flails with)."""
    cfg = dataclasses.replace(spec.env_defaults(on_cpu=True), num_envs=num_envs)
    cfg.sim = dataclasses.replace(as_shipped(cfg.sim), backend="mujoco", threads=1)
    env = MjEnv(spec.load_task_class()(cfg), device="cpu", seed=seed)
    generator = torch.Generator().manual_seed(seed)
    actions = torch.zeros(num_envs, env.num_actions)
    for _ in range(steps):
        if untrained:
            actions = torch.randn(num_envs, env.num_actions, generator=generator)
        env.step(actions)
    sim = env.sim
    fields = [sim.view(name).double().numpy() for name in ("qpos", "qvel", "act", "ctrl")]
    return sim.mj_model, np.concatenate(fields, axis=1)


def measure(m: mujoco.MjModel, states: np.ndarray, steps: int) -> tuple[float, float, float, float]:
    """CPU microseconds per world-step, contacts, constraint rows and solver iterations over ``steps`` physics steps
    of every world from ``states``, on one thread."""
    n = states.shape[0]
    b = batch.Batch(m, n, nthread=1)
    sizes = np.cumsum([0, m.nq, m.nv, m.na, m.nu])
    for i, name in enumerate(("qpos", "qvel", "act", "ctrl")):
        if sizes[i + 1] > sizes[i]:
            b.bind(name)[:] = states[:, sizes[i] : sizes[i + 1]]
    ncon, nefc, niter = b.bind("ncon"), b.bind("nefc"), b.bind("solver_niter")
    b.forward()
    contacts = rows = iterations = 0.0
    elapsed = 0.0
    for _ in range(steps):
        # This thread's CPU time (one thread steps every world): not the time another process had the core.
        start = time.thread_time()
        b.step(nstep=1)
        elapsed += time.thread_time() - start
        contacts += float(ncon.mean())
        rows += float(nefc.mean())
        iterations += float(niter[:, 0].mean())
    return elapsed / (steps * n) * 1e6, contacts / steps, rows / steps, iterations / steps


def contact_costs(spec: TaskSpec, num_envs: int = 256, steps: int = 100, repeats: int = 3) -> list[CostRow]:
    """Every variant of :func:`variants` on standing robots and on an untrained policy's states; each cost is the
    least of ``repeats`` measurements taken in turn with the others' (the one least disturbed by other load), the
    counts are the same in every repeat."""
    task_model = spec.env_defaults(on_cpu=True).sim.training_contacts
    out = []
    for untrained in (False, True):
        # 50 env steps: past the spawn, robots stand (zero actions) or flail and fall (untrained).
        m, states = rollout_states(spec, num_envs, 50, untrained)
        label = "untrained" if untrained else "standing"
        models = [(name, with_contact_model(m, variant)) for name, variant in variants(task_model)]
        best: dict[str, tuple[float, float, float, float]] = {}
        for _ in range(repeats):
            for name, model in models:
                cost, *counts = measure(model, states, steps)
                if name not in best or cost < best[name][0]:
                    best[name] = (cost, *counts)  # type: ignore[assignment]
        out += [CostRow(label, name, *best[name]) for name, _ in models]
    return out

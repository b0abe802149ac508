"""The mjlab half of ``scripts/compare_mjlab.sh``; runs in a separate environment with mjlab installed.

Times mjlab's Go1 flat velocity task the way mjlab's nightly throughput benchmark defines its two figures (zero
actions; "physics" is ``sim.step()`` x decimation, "env" is ``env.step()``; both in env-steps/s), and exports the
physics model it steps -- the scene MJCF, the options mjlab sets on the compiled model, the allocation sizes and the
settled state the physics timing starts from -- so that mjfleet can step the same model (``model_side.py``).
Writes ``mjlab.json`` and ``scene/`` into ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import mjlab.tasks  # noqa: F401  (registers the tasks)
import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp
from mjlab.asset_zoo.robots.unitree_go1.go1_constants import GO1_XML
from mjlab.envs import ManagerBasedRlEnv
from mjlab.tasks.registry import load_env_cfg

TASK = "Mjlab-Velocity-Flat-Unitree-Go1"
# Compiled-model arrays that decide the physics; the exported MJCF must reproduce them exactly.
CHECKED_FIELDS = (
    "body_mass",
    "body_inertia",
    "dof_armature",
    "dof_damping",
    "dof_frictionloss",
    "jnt_range",
    "geom_type",
    "geom_size",
    "geom_contype",
    "geom_conaffinity",
    "geom_condim",
    "geom_priority",
    "geom_friction",
    "geom_solref",
    "geom_solimp",
    "actuator_gainprm",
    "actuator_biasprm",
    "actuator_forcerange",
    "actuator_ctrlrange",
)
log = logging.getLogger("mjlab_side")


def rate(fn: Callable[[], None], calls: int, num_envs: int, sync: Callable[[], None]) -> float:
    """Env-steps/s of the fastest of 3 timed runs: the rule of mjfleet's ``best_rate``, restated because mjfleet
    cannot be imported beside mjlab's pins of mujoco and mujoco-warp."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return calls * num_envs / best


def option_values(model: mujoco.MjModel) -> dict[str, object]:
    """Every scalar or array field of ``model.opt`` as JSON values."""
    values: dict[str, object] = {}
    for name in dir(model.opt):
        if name.startswith("_"):
            continue
        value = getattr(model.opt, name)
        if isinstance(value, (int, float)):
            values[name] = value
        elif isinstance(value, np.ndarray):
            values[name] = value.tolist()
    return values


def copy_mesh_files(scene: Path) -> None:
    """mjlab's export writes in-memory assets only; the Go1's meshes are files next to its MJCF."""
    root = ET.parse(scene / "scene.xml").getroot()
    compiler = root.find("compiler")
    meshdir = scene / (compiler.get("meshdir", "") if compiler is not None else "")
    for element in root.iter():
        name = element.get("file")
        if name and not (meshdir / name).exists():
            meshdir.mkdir(parents=True, exist_ok=True)
            shutil.copy(GO1_XML.parent / "assets" / name, meshdir / name)


def bare_physics_rate(
    env: ManagerBasedRlEnv, steps: int, num_envs: int, device: str, sync: Callable[[], None]
) -> float:
    """The same model and state stepped by MuJoCo Warp alone: no per-world model fields (mjlab's randomized
    friction and centres of mass), no mjlab wrapper; a graph on CUDA and eager launches on the CPU, as mjlab does."""
    model = env.sim.mj_model
    data = mujoco.MjData(model)
    for name in ("qpos", "qvel", "ctrl"):
        getattr(data, name)[:] = getattr(env.sim.data, name)[0].cpu().numpy()
    mujoco.mj_forward(model, data)
    with wp.ScopedDevice(device):
        wp_model = mjw.put_model(model)
        wp_data = mjw.put_data(model, data, nworld=num_envs, nconmax=env.cfg.sim.nconmax, njmax=env.cfg.sim.njmax)

        graph = None
        if device.startswith("cuda"):
            mjw.step(wp_model, wp_data)  # compile before capturing
            with wp.ScopedCapture() as capture:
                mjw.step(wp_model, wp_data)
            graph = capture.graph

        def physics() -> None:
            for _ in range(env.cfg.decimation):
                if graph is None:
                    mjw.step(wp_model, wp_data)
                else:
                    wp.capture_launch(graph)

        physics()
        sync()
        return rate(physics, steps, num_envs, sync)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200, help="timed env steps per run (best of 3 runs)")
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    cfg = load_env_cfg(TASK)
    cfg.scene.num_envs = args.num_envs
    env = ManagerBasedRlEnv(cfg=cfg, device=args.device)
    sync = (lambda: torch.cuda.synchronize(args.device)) if args.device.startswith("cuda") else (lambda: None)
    actions = torch.zeros(args.num_envs, sum(env.action_manager.action_term_dim), device=args.device)
    env.reset()
    for _ in range(args.warmup_steps):
        env.step(actions)
    sync()
    data = env.sim.data
    state = {name: getattr(data, name)[0].cpu().numpy().tolist() for name in ("qpos", "qvel", "ctrl")}
    ncon = int(env.sim.wp_data.nacon.numpy()[0])
    nefc = env.sim.wp_data.nefc.numpy()

    def physics() -> None:
        for _ in range(env.cfg.decimation):
            env.sim.step()

    physics_rate = rate(physics, args.steps, args.num_envs, sync)
    bare_rate = bare_physics_rate(env, args.steps, args.num_envs, args.device, sync)
    env.reset()
    sync()
    env_rate = rate(lambda: env.step(actions), args.steps, args.num_envs, sync)

    # Export, then check that the MJCF compiles to the model mjlab steps (options are set on the compiled model).
    args.out.mkdir(parents=True, exist_ok=True)
    env.scene.write(args.out / "scene")
    copy_mesh_files(args.out / "scene")
    model = env.sim.mj_model
    exported = mujoco.MjModel.from_xml_path(str(args.out / "scene" / "scene.xml"))
    sizes = {name: int(getattr(model, name)) for name in ("nq", "nv", "nu", "nbody", "ngeom", "nsensor")}
    mismatched = [
        name
        for name in CHECKED_FIELDS
        if getattr(exported, name).shape != getattr(model, name).shape
        or not np.allclose(getattr(exported, name), getattr(model, name))
    ]
    mismatched += [name for name in sizes if int(getattr(exported, name)) != sizes[name]]
    if mismatched:
        raise SystemExit(f"the exported MJCF does not reproduce mjlab's model: {', '.join(mismatched)} differ")
    wp_model = mjw.put_model(model)
    report = {
        "task": TASK,
        "device": args.device,
        "gpu": torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else None,
        "versions": {
            name: importlib.metadata.version(name) for name in ("mjlab", "mujoco", "mujoco-warp", "warp-lang", "torch")
        },
        "num_envs": args.num_envs,
        "steps": args.steps,
        "decimation": env.cfg.decimation,
        "cuda_graph": bool(env.sim.use_cuda_graph),
        "physics_sps": physics_rate,
        "env_sps": env_rate,
        "bare_physics_sps": bare_rate,
        "options": option_values(model),
        "wp_options": {"contact_sensor_maxmatch": cfg.sim.contact_sensor_maxmatch},
        "nconmax": int(env.sim.wp_data.naconmax) // args.num_envs,
        "njmax": int(env.sim.wp_data.njmax),
        "sizes": sizes,
        "collision_pairs": int(wp_model.nxn_geom_pair_filtered.shape[0]),
        "contacts_per_world": ncon / args.num_envs,
        "constraints_per_world": [int(nefc.min()), int(nefc.max())],
        "state": state,
    }
    (args.out / "mjlab.json").write_text(json.dumps(report, indent=1))
    log.info(
        "mjlab %s, %s, %d envs: physics %.0f env-steps/s, env step %.0f env-steps/s (%s)",
        report["versions"]["mjlab"],
        args.device,
        args.num_envs,
        physics_rate,
        env_rate,
        args.out / "mjlab.json",
    )


if __name__ == "__main__":
    main()

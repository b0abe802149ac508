# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""The mjfleet half of ``scripts/compare_mjlab.sh``: step the model mjlab exported, then mjfleet's own Go1 task.

Reads ``mjlab.json`` and ``scene/`` (written by ``mjlab_side.py``), compiles the scene with mjfleet's MuJoCo, applies
the options mjlab set on its compiled model and its allocation sizes, starts every world from mjlab's settled state
and times raw physics (``decimation`` steps per env step) on mjfleet's backends. Then it times mjfleet's
``go1-velocity-flat`` (raw physics and full env step) at the same size and prints one table, which names what
differs between the rows. Run with ``uv run python scripts/mjlab_compare/model_side.py DIR``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import logging
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from mjfleet.benchmark import best_rate, device_sync, machine_description, measure_steps, threads_text
from mjfleet.console import configure_logging
from mjfleet.envs.env import MjEnv
from mjfleet.sim.config import SimConfig
from mjfleet.sim.factory import create_simulation
from mjfleet.sim.warp_backend import WarpSimulation
from mjfleet.sim.warp_runtime import scoped_device
from mjfleet.tasks.registry import get_task

log = logging.getLogger("mjfleet.mjlab_compare")


def apply_options(model: mujoco.MjModel, options: dict[str, Any]) -> list[str]:
    """Set ``model.opt`` fields to mjlab's values; returns the fields this MuJoCo does not have."""
    unknown = []
    for name, value in options.items():
        if not hasattr(model.opt, name):
            unknown.append(name)
            continue
        current = getattr(model.opt, name)
        if isinstance(current, np.ndarray):
            current[...] = value
        else:
            setattr(model.opt, name, value)
    return unknown


def load_model(scene: Path, report: dict[str, Any]) -> mujoco.MjModel:
    """mjlab's scene compiled here, with its options; stops when the sizes differ from the model mjlab stepped."""
    model = mujoco.MjModel.from_xml_path(str(scene / "scene.xml"))
    unknown = apply_options(model, report["options"])
    if unknown:
        log.warning("options this MuJoCo does not have (left at their defaults): %s", ", ".join(unknown))
    differ = [name for name, size in report["sizes"].items() if int(getattr(model, name)) != size]
    if differ:
        raise SystemExit(f"{scene}: sizes differ from mjlab's model: {', '.join(differ)}")
    return model


def physics_rate(
    model: mujoco.MjModel, report: dict[str, Any], num_envs: int, device: str, steps: int, sim_cfg: SimConfig
) -> tuple[float, str]:
    """Env-steps/s of raw physics from mjlab's settled state, and the backend's label."""
    with scoped_device(device):
        sim = create_simulation(model, num_envs, device, sim_cfg)
        for name in ("qpos", "qvel", "ctrl"):
            getattr(sim, name)[:] = torch.tensor(report["state"][name], dtype=torch.float32, device=device)
        maxmatch = report.get("wp_options", {}).get("contact_sensor_maxmatch")
        if sim.backend == "warp" and maxmatch is not None:
            sim.model.opt.contact_sensor_maxmatch = maxmatch  # type: ignore[attr-defined]
        rate = best_rate(sim.step, steps, num_envs, device_sync(device))
    if sim.backend == "mujoco":
        return rate, f"MuJoCo C ({threads_text(sim.threads)})"  # type: ignore[attr-defined]
    return rate, f"MuJoCo Warp {'graph' if sim_cfg.use_graph else 'eager'}"


def standing_contacts(task: str, device: str, num_envs: int = 64) -> str:
    """Collision pairs, contacts and constraint rows per world of a task's robots after 20 zero-action steps."""
    spec = get_task(task)
    cfg = dataclasses.replace(spec.env_cfg(), num_envs=num_envs)
    cfg.sim = dataclasses.replace(cfg.sim, backend="warp")
    with scoped_device(device):
        env = MjEnv(spec.load_task_class()(cfg), device=device, seed=0)
        actions = torch.zeros(num_envs, env.num_actions, device=device)
        for _ in range(20):
            env.step(actions)
        sim = env.sim
        assert isinstance(sim, WarpSimulation)
        return describe(
            task,
            sim.mj_model.opt,
            int(sim.model.nxn_geom_pair_filtered.shape[0]),
            float(sim.data.nacon.numpy()[0]) / num_envs,
            int(sim.data.nefc.numpy().max()),
            cfg.sim.nconmax,
            cfg.sim.njmax,
        )


def describe(
    name: str, opt: Any, pairs: int, contacts: float, rows: int, nconmax: int | None, njmax: int | None
) -> str:
    """One line of what decides a model's physics cost."""
    return (
        f"{name}: {pairs} collision pairs after filtering, {contacts:.1f} contacts and {rows} constraint rows per"
        f" world when standing, cone {'elliptic' if opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC else 'pyramidal'},"
        f" impratio {opt.impratio:g}, solver iterations {opt.iterations}/{opt.ls_iterations} (line search),"
        f" nconmax {nconmax}, njmax {njmax}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("export", type=Path, help="the folder mjlab_side.py wrote")
    parser.add_argument("--num-envs", type=int, help="default: mjlab's")
    parser.add_argument("--steps", type=int, help="timed env steps per run, best of 3 (default: mjlab's)")
    parser.add_argument("--device", help="default: cuda:0 when CUDA is there, else cpu")
    parser.add_argument("--skip-task", action="store_true", help="only mjlab's model, not go1-velocity-flat")
    args = parser.parse_args()
    configure_logging()
    report = json.loads((args.export / "mjlab.json").read_text())
    num_envs = args.num_envs or report["num_envs"]
    steps = args.steps or report["steps"]
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    model = load_model(args.export / "scene", report)

    versions = report["versions"]
    ours = {name: importlib.metadata.version(name) for name in ("mujoco", "mujoco-warp", "warp-lang", "torch")}
    table = Table(
        title=f"Go1 flat, {num_envs} envs, env-steps/s (decimation {report['decimation']}), {steps} timed steps"
    )
    for column in ("model", "engine", "raw physics", "env step", "env/raw"):
        table.add_column(column, justify="left" if column in ("model", "engine") else "right")
    same_run = report["device"] == device and report["num_envs"] == num_envs
    if same_run:
        launches = "graph" if report["cuda_graph"] else "eager"
        engine = f"mjlab {versions['mjlab']}: MuJoCo Warp {versions['mujoco-warp']} {launches}"
        table.add_row(
            "mjlab Go1",
            engine,
            f"{report['physics_sps']:,.0f}",
            f"{report['env_sps']:,.0f}",
            f"{report['env_sps'] / report['physics_sps']:.0%}",
        )
        if "bare_physics_sps" in report:
            table.add_row(
                "mjlab Go1 model",
                f"MuJoCo Warp {versions['mujoco-warp']} {launches}, no mjlab, no per-world fields",
                f"{report['bare_physics_sps']:,.0f}",
                "",
                "",
            )
    else:
        log.warning("mjlab was timed on %s at %d envs: its own row is left out", report["device"], report["num_envs"])
    settings = SimConfig(decimation=report["decimation"], nconmax=report["nconmax"], njmax=report["njmax"])
    backends = [("warp", True), ("warp", False)] + ([("mujoco", True)] if device == "cpu" else [])
    for backend, graph in backends:
        rate, label = physics_rate(
            model, report, num_envs, device, steps, dataclasses.replace(settings, backend=backend, use_graph=graph)
        )
        table.add_row("mjlab Go1 model", f"mjfleet: {label}", f"{rate:,.0f}", "", "")
    if not args.skip_task:
        spec = get_task("go1-velocity-flat")
        for backend in ("warp", "mujoco") if device == "cpu" else ("warp",):
            for row in measure_steps(spec, num_envs, device, steps, backend=backend):
                table.add_row(
                    "mjfleet go1-velocity-flat",
                    f"mjfleet: {row.backend}",
                    f"{row.raw:,.0f}",
                    f"{row.env:,.0f}",
                    f"{row.ratio:.0%}",
                )
    console = Console(width=160)
    console.print(f"{device}: {machine_description(device)}")
    console.print(
        f"mjlab side: mjlab {versions['mjlab']}, mujoco {versions['mujoco']}, mujoco-warp {versions['mujoco-warp']},"
        f" warp {versions['warp-lang']}, torch {versions['torch']}; mjfleet side: mujoco {ours['mujoco']},"
        f" mujoco-warp {ours['mujoco-warp']}, warp {ours['warp-lang']}, torch {ours['torch']}"
    )
    console.print(table)
    console.print(
        describe(
            "mjlab Go1",
            model.opt,
            report["collision_pairs"],
            report["contacts_per_world"],
            report["constraints_per_world"][1],
            report["nconmax"],
            report["njmax"],
        )
    )
    if not args.skip_task:
        console.print(standing_contacts("go1-velocity-flat", device))


if __name__ == "__main__":
    main()

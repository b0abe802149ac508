"""Training throughput of an mjfleet task beside mjlab's on this machine, one after the other, at the same size:

- ``--task lift``: ``yam-lift-cube`` and ``Mjlab-Lift-Cube-Yam``, Menagerie's I2RT YAM (mjlab ships its own copy;
  mjfleet reads the mujoco-menagerie cache or ``MENAGERIE_ROOT``), 5 ms physics steps, 4 per policy step;
- ``--task tracking``: ``unitree-g1-tracking`` and ``Mjlab-Tracking-Flat-Unitree-G1``, both following the motion
  mjfleet ships (mjlab's side reads it as the npz its own ``csv_to_npz`` makes of the same CSV), mjlab at 5 ms
  physics steps, mjfleet at its CPU training's 10 ms;
- ``--task cartpole``: ``cartpole-balance`` and ``Mjlab-Cartpole-Balance``, mjfleet's at mjlab's 5 physics steps
  of 10 ms per policy step (its own default: 2) so that both simulate as much.

The same number of environments and steps per iteration on both sides (24; the cart-poles' 32). Each side trains
``--iterations`` iterations of PPO with its own defaults otherwise (mjfleet's ``--gpu-ids None`` CPU defaults;
mjlab's CPU path, MuJoCo Warp on the CPU) and no evaluation environments (mjfleet's ``--agent.eval-envs 0``: mjlab
has none), plus a row of mjfleet with mjlab's network sizes where they differ, and one on the file's timestep where
mjfleet trains on a longer one on the CPU (the tracking task: 10 ms, 2 per policy step, against mjlab's 5 ms). The
first iteration (compilation, caches) is left out of the rates. Run through ``scripts/compare_mjlab.sh --lift``,
``--tracking`` or ``--cartpole``, which make mjlab's environment, or directly::

    uv run python scripts/mjlab_compare/train_beside.py --task lift --mjlab-python .mjlab-venv/bin/python --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

TASKS = {
    "lift": ("Mjlab-Lift-Cube-Yam", "yam-lift-cube"),
    "tracking": ("Mjlab-Tracking-Flat-Unitree-G1", "unitree-g1-tracking"),
    "cartpole": ("Mjlab-Cartpole-Balance", "cartpole-balance"),
}
"""mjlab's task and mjfleet's, by ``--task``."""
MJLAB_NETWORKS = {"lift": ("512", "256", "128"), "tracking": ("512", "256", "128"), "cartpole": ("64", "64")}
"""mjlab 1.6.0's actor and critic hidden sizes (its ``rl_cfg.py`` of each task)."""
STEPS = {"lift": 24, "tracking": 24, "cartpole": 32}
"""Steps per environment per iteration: mjlab's and mjfleet's defaults agree."""
MATCHED_PHYSICS = {"cartpole": ["--env.sim.decimation", "5"]}
"""mjfleet settings that make its physics per policy step mjlab's."""

_MJLAB_FIELDS = {
    "steps_per_s": re.compile(r"Steps per second:\s*([\d.]+)"),
    "collect_s": re.compile(r"Collection time:\s*([\d.]+)s"),
    "learn_s": re.compile(r"Learning time:\s*([\d.]+)s"),
}


@dataclass
class Side:
    """One row: who trained, with what, and its iterations' rates after the first."""

    label: str
    networks: str
    iterations: int
    steps_per_s: float
    collect_s: float
    learn_s: float
    wall_s: float


def mjlab_iterations(log: str) -> list[dict[str, float]]:
    """Per iteration of an mjlab (rsl_rl) training log: steps/s and the collection and learning seconds."""
    blocks = re.split(r"Learning iteration \d+/\d+", log)[1:]
    rows = []
    for block in blocks:
        row = {}
        for name, pattern in _MJLAB_FIELDS.items():
            match = pattern.search(block)
            if match is None:
                break
            row[name] = float(match.group(1))
        else:
            rows.append(row)
    return rows


def mjfleet_iterations(progress: Path) -> list[dict[str, float]]:
    """Per iteration of an mjfleet run's ``progress.jsonl``: steps/s and the collection and learning seconds."""
    rows = []
    for line in progress.read_text().splitlines():
        r = json.loads(line)
        rows.append({"steps_per_s": r["env_steps_per_s"], "collect_s": r["collect_s"], "learn_s": r["learn_s"]})
    return rows


def summarise(label: str, networks: str, rows: list[dict[str, float]], wall_s: float) -> Side:
    """The median of every iteration after the first."""
    kept = rows[1:]
    if not kept:
        raise SystemExit(f"train_beside.py: {label} logged {len(rows)} iteration(s); need 2 or more")

    def median(key: str) -> float:
        return statistics.median(r[key] for r in kept)

    return Side(label, networks, len(kept), median("steps_per_s"), median("collect_s"), median("learn_s"), wall_s)


def _default_networks(task: str) -> str:
    """mjfleet's actor sizes of ``task`` on the CPU."""
    from mjfleet.tasks.registry import get_task

    return "-".join(map(str, get_task(task).agent_defaults(on_cpu=True).policy.actor_hidden_dims))


def _training_timestep_scale(task: str) -> int:
    """How many times the file's timestep ``task`` trains on, on the CPU."""
    from mjfleet.tasks.registry import get_task

    return get_task(task).env_defaults(on_cpu=True).sim.training_contacts.timestep_scale


def mjlab_motion(mjlab_python: str, out: Path, env: dict[str, str]) -> Path:
    """mjfleet's shipped motion as mjlab's npz, made by mjlab's own ``csv_to_npz`` (which writes ``/tmp/motion.npz``
    and then tries to upload it to W&B: offline, that last step fails, harmlessly)."""
    from mjfleet.tasks.tracking.config import SHIPPED_MOTION

    made = Path("/tmp/motion.npz")
    made.unlink(missing_ok=True)
    command = [mjlab_python, "-m", "mjlab.scripts.csv_to_npz", "--input-file", str(SHIPPED_MOTION)]
    command += ["--output-name", SHIPPED_MOTION.stem, "--device", "cpu"]
    with (out / "mjlab-csv-to-npz.log").open("w") as log:
        offline = {**env, "WANDB_MODE": "offline"}  # its offline W&B run folder goes into ``out``
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=offline, cwd=out, check=False)
    if not made.is_file():
        raise SystemExit(f"train_beside.py: mjlab's csv_to_npz wrote no {made}; see {out / 'mjlab-csv-to-npz.log'}")
    motion = out / f"{SHIPPED_MOTION.stem}.npz"
    motion.write_bytes(made.read_bytes())
    return motion


def run(command: list[str], log: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"train_beside.py: {' '.join(command[:4])} ... exited {done.returncode}; see {log}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="lift")
    parser.add_argument("--mjlab-python", required=True, help="the Python of the environment mjlab is installed in")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=5, help="per side; the first is left out of the rates")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WANDB_MODE": "disabled", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    n, iterations = str(args.num_envs), str(args.iterations)
    mjlab_task, mjfleet_task = TASKS[args.task]

    mjlab_log = out / "mjlab-train.log"
    mjlab = [args.mjlab_python, "-m", "mjlab.scripts.train", mjlab_task, "--gpu-ids", "None"]
    mjlab += ["--env.scene.num-envs", n, "--agent.max-iterations", iterations, "--agent.logger", "tensorboard"]
    if args.task == "tracking":
        mjlab += ["--env.commands.motion.motion-file", str(mjlab_motion(args.mjlab_python, out, env))]
    wall = run([*mjlab, "--log-root", str(out / "mjlab-runs")], mjlab_log, env)
    theirs = MJLAB_NETWORKS[args.task]
    sides = [summarise(f"mjlab {mjlab_task}", "-".join(theirs), mjlab_iterations(mjlab_log.read_text()), wall)]

    same_networks = ["--agent.policy.actor-hidden-dims", *theirs, "--agent.policy.critic-hidden-dims", *theirs]
    variants = [("its defaults", [])]
    if _default_networks(mjfleet_task) != "-".join(theirs):
        variants.append(("mjlab's networks", same_networks))
    if _training_timestep_scale(mjfleet_task) != 1:
        # mjlab steps the file's timestep: the row that does too shows what the longer training step adds.
        variants.append(("the file's timestep", ["--env.sim.training-contacts.timestep-scale", "1"]))
    for label, extra in variants:
        root = out / f"mjfleet-runs-{len(sides)}"
        train = [sys.executable, "-m", "mjfleet.cli.train", mjfleet_task, "--gpu-ids", "None", "--env.num-envs", n]
        train += ["--agent.eval-envs", "0", "--agent.max-iterations", iterations, "--log-root", str(root), *extra]
        train += MATCHED_PHYSICS.get(args.task, [])
        wall = run(train, out / f"mjfleet-train-{len(sides)}.log", env)
        progress = next(root.rglob("progress.jsonl"))
        networks = "-".join(theirs) if extra == same_networks else _default_networks(mjfleet_task)
        sides.append(summarise(f"mjfleet {mjfleet_task} ({label})", networks, mjfleet_iterations(progress), wall))

    (out / "train_beside.json").write_text(json.dumps([asdict(s) for s in sides], indent=2) + "\n")
    steps = STEPS[args.task]
    table = Table(title=f"PPO training on the CPU, {args.num_envs} environments x {steps} steps per iteration")
    for column in ("", "networks", "iterations timed", "env-steps/s", "collect s", "learn s", "vs mjlab"):
        table.add_column(column, justify="left" if not column or column == "networks" else "right")
    base = sides[0].steps_per_s
    for s in sides:
        table.add_row(
            s.label,
            s.networks,
            str(s.iterations),
            f"{s.steps_per_s:,.0f}",
            f"{s.collect_s:.2f}",
            f"{s.learn_s:.2f}",
            f"{s.steps_per_s / base:.1f}x",
        )
    Console(width=140).print(table)


if __name__ == "__main__":
    main()

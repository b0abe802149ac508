"""Training throughput of mjfleet's ``yam-lift-cube`` beside mjlab's ``Mjlab-Lift-Cube-Yam`` on this machine, one after
the other, at the same size: Menagerie's I2RT YAM (mjlab ships its own copy; mjfleet reads the mujoco-menagerie cache
or ``MENAGERIE_ROOT``), 5 ms physics steps, 4 per policy step, the same number of environments and 24 steps per
iteration.

Each side trains ``--iterations`` iterations of PPO with its own defaults otherwise (mjfleet's ``--gpu-ids None`` CPU
defaults; mjlab's CPU path, MuJoCo Warp on the CPU) and no evaluation environments (mjfleet's
``--agent.eval-envs 0``: mjlab has none), plus a row of mjfleet with mjlab's network sizes. The first
iteration (compilation, caches) is left out of the rates. Run through ``scripts/compare_mjlab.sh --lift``, which
makes mjlab's environment, or directly::

    uv run python scripts/mjlab_compare/lift_train.py --mjlab-python .mjlab-venv/bin/python --out DIR
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

MJLAB_TASK = "Mjlab-Lift-Cube-Yam"
MJFLEET_TASK = "yam-lift-cube"
MJLAB_NETWORKS = ("512", "256", "128")
"""mjlab 1.6.0's actor and critic hidden sizes for its YAM lift task (``rl_cfg.py``)."""

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
        raise SystemExit(f"lift_train.py: {label} logged {len(rows)} iteration(s); need 2 or more")

    def median(key: str) -> float:
        return statistics.median(r[key] for r in kept)

    return Side(label, networks, len(kept), median("steps_per_s"), median("collect_s"), median("learn_s"), wall_s)


def _default_networks() -> str:
    """mjfleet's actor sizes of the lift task on the CPU."""
    from mjfleet.tasks.registry import get_task

    return "-".join(map(str, get_task(MJFLEET_TASK).agent_defaults(on_cpu=True).policy.actor_hidden_dims))


def run(command: list[str], log: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"lift_train.py: {' '.join(command[:4])} ... exited {done.returncode}; see {log}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mjlab-python", required=True, help="the Python of the environment mjlab is installed in")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=5, help="per side; the first is left out of the rates")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WANDB_MODE": "disabled", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    n, iterations = str(args.num_envs), str(args.iterations)

    mjlab_log = out / "mjlab-train.log"
    mjlab = [args.mjlab_python, "-m", "mjlab.scripts.train", MJLAB_TASK, "--gpu-ids", "None"]
    mjlab += ["--env.scene.num-envs", n, "--agent.max-iterations", iterations, "--agent.logger", "tensorboard"]
    wall = run([*mjlab, "--log-root", str(out / "mjlab-runs")], mjlab_log, env)
    sides = [summarise(f"mjlab {MJLAB_TASK}", "512-256-128", mjlab_iterations(mjlab_log.read_text()), wall)]

    same_networks = ["--agent.policy.actor-hidden-dims", *MJLAB_NETWORKS]
    same_networks += ["--agent.policy.critic-hidden-dims", *MJLAB_NETWORKS]
    for label, extra in (("its defaults", []), ("mjlab's networks", same_networks)):
        root = out / f"mjfleet-runs-{len(sides)}"
        train = [sys.executable, "-m", "mjfleet.cli.train", MJFLEET_TASK, "--gpu-ids", "None", "--env.num-envs", n]
        train += ["--agent.eval-envs", "0", "--agent.max-iterations", iterations, "--log-root", str(root), *extra]
        wall = run(train, out / f"mjfleet-train-{len(sides)}.log", env)
        progress = next(root.rglob("progress.jsonl"))
        networks = "-".join(MJLAB_NETWORKS) if extra else _default_networks()
        sides.append(summarise(f"mjfleet {MJFLEET_TASK} ({label})", networks, mjfleet_iterations(progress), wall))

    (out / "lift_train.json").write_text(json.dumps([asdict(s) for s in sides], indent=2) + "\n")
    table = Table(title=f"PPO training on the CPU, {args.num_envs} environments x 24 steps per iteration")
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

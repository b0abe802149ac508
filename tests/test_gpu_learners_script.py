"""``scripts/gpu_learners.sh`` without a GPU: its ``--dry-run`` (one scripts/gpu_time_to_walk.sh sweep per learner,
with the learner's flags) and its usage errors. Nothing runs and no figure is produced here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_learners.sh"
BASH = shutil.which("bash") or "/bin/bash"


def _script(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with a PATH of python3 and what it needs to print its plan (no uv)."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir(parents=True)
        (bin_dir / "python3").symlink_to(sys.executable)
        for tool in ("dirname", "date", "awk"):
            (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    base = {"PATH": str(bin_dir), "HOME": str(tmp_path), "MJFLEET_LEARNERS_OUT": str(tmp_path / "out")}
    return subprocess.run(
        [BASH, str(SCRIPT), *args], env={**base, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def test_script_parses_has_help_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    assert os.access(SCRIPT, os.X_OK)
    subprocess.run([BASH, "-n", str(SCRIPT)], check=True, timeout=30)
    done = _script(tmp_path, "--help")
    assert done.returncode == 0 and "MJFLEET_LEARNERS_SAC_ARGS" in done.stdout and "--dry-run" in done.stdout
    assert _script(tmp_path, "--bogus").returncode == 2
    unknown = _script(tmp_path, "--dry-run", MJFLEET_LEARNERS="rsl-rl-ppo skrl-a2c")
    assert unknown.returncode == 2 and "unknown learner 'skrl-a2c'" in unknown.stderr
    assert "(registered: skrl-sac skrl-td3 fast-td3 rsl-rl-ppo skrl-ppo)" in unknown.stderr  # the off-policy ones first
    assert _script(tmp_path, "--dry-run", MJFLEET_LEARNERS_LIMIT_S="soon").returncode == 2


def test_dry_run_prints_one_sweep_per_learner_with_its_flags(tmp_path: Path) -> None:
    done = _script(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out").exists(), "--dry-run runs and creates nothing"
    lines = done.stdout.splitlines()
    out = tmp_path / "out"
    # 5 learners x 3 tasks x (300 s per train + 45 s per play); the off-policy learners first.
    learners = ("skrl-sac", "skrl-td3", "fast-td3", "rsl-rl-ppo", "skrl-ppo")
    tasks = ("go1-velocity-flat", "unitree-go1-velocity-flat", "unitree-g1-velocity-flat")
    assert any(line.startswith(f"plan: 5 learners ({' '.join(learners)}) x 3 tasks") for line in lines)
    assert any("at most 5175 s" in line for line in lines)
    trains = [line for line in lines if " -m mjfleet.cli.train " in line]
    plays = [line for line in lines if " -m mjfleet.cli.play " in line]
    assert len(trains) == len(plays) == 15
    python = tmp_path / "bin" / "python3"
    order = []
    for train in trains:
        learner = train.split("--agent.learner ")[1].split()[0]
        task = train.split(" -m mjfleet.cli.train ")[1].split()[0]
        order.append((learner, task))
        assert train.startswith(f"+ {python} -m mjfleet.cli.train {task} --gpu-ids 0 --env.num-envs 4096")
        assert "--stop-when 'success>=0.95'" in train
        assert train.endswith(f"--log-root {out}/{learner}/runs/{task}-4096")
    assert order == [(learner, task) for learner in learners for task in tasks]
    sac = [t for t in trains if "skrl-sac" in t]
    assert all("--agent.sac.batch-size 8192 --agent.sac.gradient-steps 32" in t for t in sac)
    fast = [t for t in trains if "fast-td3" in t]
    assert all("--agent.fast-td3.batch-size 32768 --agent.fast-td3.gradient-steps 64" in t for t in fast)
    assert not any("--agent.sac." in t or "--agent.td3." in t or "--agent.policy." in t for t in trains if "-ppo " in t)
    summaries = [line for line in lines if "scripts/gpu_walk_summary.py" in line]
    assert summaries == [f"+ {python} scripts/gpu_walk_summary.py {out}/{learner}" for learner in learners]


def test_a_task_with_an_off_policy_recipe_keeps_it(tmp_path: Path) -> None:
    env = {"MJFLEET_LEARNERS": "skrl-sac rsl-rl-ppo", "MJFLEET_LEARNERS_TASKS": "cartpole-balance go1-velocity-flat"}
    done = _script(tmp_path, "--dry-run", **env)
    assert done.returncode == 0, done.stderr
    trains = [line for line in done.stdout.splitlines() if " -m mjfleet.cli.train " in line]
    out = tmp_path / "out"
    [legged] = [t for t in trains if "skrl-sac" in t and " go1-velocity-flat " in t]
    # go1-velocity-flat's recipe is for the CPU alone: on a GPU it takes the starting points
    assert "--agent.sac.batch-size 8192" in legged and legged.endswith(f"{out}/skrl-sac/runs/go1-velocity-flat-4096")
    [cartpole] = [t for t in trains if "skrl-sac" in t and " cartpole-balance " in t]
    assert "--agent.sac." not in cartpole  # its own recipe, not the legged robots' starting points
    assert cartpole.endswith(f"--agent.learner skrl-sac --log-root {out}/skrl-sac-recipe/runs/cartpole-balance-4096")
    ppo = [t for t in trains if "rsl-rl-ppo" in t]
    assert len(ppo) == 2 and all(f"{out}/rsl-rl-ppo/runs/" in t for t in ppo)  # one sweep: PPO has no settings here


def test_settings_and_learners_can_be_replaced(tmp_path: Path) -> None:
    env = {"MJFLEET_LEARNERS": "skrl-td3", "MJFLEET_LEARNERS_TD3_ARGS": "--agent.td3.policy-delay 3"}
    env["MJFLEET_LEARNERS_TASKS"] = "go1-velocity-flat"
    done = _script(tmp_path, "--dry-run", **env)
    assert done.returncode == 0, done.stderr
    [train] = [line for line in done.stdout.splitlines() if " -m mjfleet.cli.train " in line]
    assert " go1-velocity-flat " in train
    assert "--agent.learner skrl-td3 --agent.td3.policy-delay 3 --log-root" in train

"""Small training configurations for tests."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import psutil

from mjfleet.rl.learners.rsl_rl import SyncedPPO
from mjfleet.rl.runner import Runner
from mjfleet.runs.directory import create_run_dir, next_run_dir
from mjfleet.tasks.registry import all_tasks, get_task
from mjfleet.train.config import TrainConfig


def missing_files(task_id: str) -> str | None:
    """Why ``task_id`` cannot run here (its MuJoCo Menagerie files are not on disk), or None when it can."""
    from mjfleet.tasks.locomotion.sources import menagerie_available, resolve_robot
    from mjfleet.tasks.manipulation.sources import resolve_arm

    cfg = get_task(task_id).env_cfg()
    robot, arm = getattr(cfg, "robot", None), getattr(cfg, "arm", None)
    menagerie = resolve_robot(robot).menagerie if isinstance(robot, str) else None
    menagerie = resolve_arm(arm).menagerie if isinstance(arm, str) else menagerie
    if menagerie is None or menagerie_available(menagerie):
        return None
    return (
        f"Menagerie files of {menagerie} are not on disk (MENAGERIE_ROOT: scripts/menagerie_from_mjlab.py builds a"
        " tree for tests, as CI does)"
    )


def installed_distribution(root: Path, name: str, group: str, entry_points: dict[str, str]) -> None:
    """The metadata of an installed distribution ``name`` under ``root`` (put ``root`` on ``sys.path``), declaring
    ``entry_points`` (name -> ``module:attribute``) in ``group``, as ``pip install`` of a package would."""
    dist = root / f"{name.replace('-', '_')}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[{group}]\n{lines}")


def rsl_ppo(runner: Runner) -> SyncedPPO:
    """rsl-rl-lib's algorithm inside a runner whose learner is ``rsl-rl-ppo`` (for tests of what is rsl_rl's own:
    its storage, optimizer, actor)."""
    from mjfleet.rl.learners.rsl_rl import RslRlPpo

    assert isinstance(runner.learner, RslRlPpo), f"the runner's learner is {runner.learner.name}"
    return runner.learner.alg


def every_task() -> list[object]:
    """Every registered task id as a test parameter; one whose Menagerie files are not on disk is skipped with the
    reason, never dropped."""
    import pytest

    params = []
    for task_id in sorted(all_tasks()):
        why = missing_files(task_id)
        params.append(pytest.param(task_id, marks=pytest.mark.skip(reason=why)) if why else task_id)
    return params


ONE_PASS_UPDATE = ["--agent.algorithm.num-learning-epochs", "1", "--agent.algorithm.num-mini-batches", "1"]
"""For tests of the run machinery, not of learning: PPO's update is one gradient step per iteration (the defaults
take 20), so a launched test spends its time on what it tests."""


def small_train_config(
    task_id: str = "cartpole-balance",
    num_envs: int = 64,
    iterations: int = 3,
    steps: int = 16,
    seed: int = 0,
    log_root: Path | None = None,
    full_update: bool = False,
    **overrides: object,
) -> TrainConfig:
    """A real but small training configuration (CPU, no random episode starts and no evaluation environments unless
    asked; PPO's update one gradient step, as ``ONE_PASS_UPDATE``, unless ``full_update`` for a test of learning)."""
    spec = get_task(task_id)
    agent = spec.agent_cfg()
    algorithm = agent.algorithm
    if not full_update:
        algorithm = dataclasses.replace(algorithm, num_learning_epochs=1, num_mini_batches=1)
    agent = dataclasses.replace(
        agent, max_iterations=iterations, num_steps_per_env=steps, save_interval=1, eval_envs=0, algorithm=algorithm
    )
    env = dataclasses.replace(spec.env_cfg(), num_envs=num_envs)
    cfg = TrainConfig(env=env, agent=agent, task=task_id, seed=seed, gpu_ids=None, init_at_random_ep_len=False)
    if log_root is not None:
        cfg.log_root = log_root
    return dataclasses.replace(cfg, **overrides)  # type: ignore[arg-type]


def make_run_dir(log_root: Path, experiment: str, run_name: str = "") -> Path:
    """A new run directory ``<log_root>/<experiment>/<timestamp>[_<run_name>]``, named and created as a run does."""
    return create_run_dir(next_run_dir(log_root, experiment, run_name))


# --- process accounting for launch tests ---------------------------------------------------------------------------
TOKEN_ENV = "MJFLEET_TEST_TOKEN"
"""Tests put a fresh token in this variable; every process they start inherits it."""


LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")
"""Variables a launcher sets; a test that starts one clears them (and SLURM's, torchrun's) from its own."""


def launcher_free_env(token: str, **extra: str) -> dict[str, str]:
    """This process's environment without any launcher's variables, tagged with ``token``, plus ``extra``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in LAUNCHER_VARS
    }
    return {**env, TOKEN_ENV: token, "COLUMNS": "250", **extra}


def processes_with_token(token: str) -> list[int]:
    """Live processes (not zombies) other than this one whose environment carries ``token``."""
    found = []
    for proc in psutil.process_iter(["environ", "status"]):
        environ = proc.info["environ"] or {}  # None where it may not be read
        if proc.pid != os.getpid() and environ.get(TOKEN_ENV) == token and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc.pid)
    return found


def assert_no_processes_left(token: str, wait_s: float = 10.0, context: str = "") -> None:
    """Wait up to ``wait_s`` for every process tagged with ``token`` to exit."""
    deadline = time.monotonic() + wait_s
    while processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with_token(token) == [], context or "launch processes were left behind"


def run_main(main: Callable[[list[str]], None], argv: list[str]) -> tuple[int, str, str]:
    """A console entry point run in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
    return int(code or 0), out.getvalue(), err.getvalue()  # type: ignore[call-overload]


def refused_train(argv: list[str], log_root: Path) -> str:
    """``train argv`` refused as a user's mistake: exit code 2, no traceback, nothing under ``log_root``; its one
    ``error:`` line."""
    from mjfleet.cli import train

    code, _, err = run_main(train.main, [*argv, "--log-root", str(log_root)])
    assert code == 2, err
    assert "Traceback" not in err and not log_root.exists()
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    return line


def load_script(path: Path) -> ModuleType:
    """A script under ``scripts/`` imported as a module (scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where dataclasses look a class's module up
    spec.loader.exec_module(module)
    return module

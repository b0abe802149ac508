"""Log lines a user copies from: whole on a terminal when they hold a command, never wrapped or padded elsewhere."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from rich.console import Console

from mjfleet.cli import train
from mjfleet.console import UNWRAPPED, _TerminalHandler

from .helpers import run_main


def test_a_run_logged_to_a_file_keeps_each_line_whole_and_unpadded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redirected (a file, a pipe, a scheduler's log), lines were wrapped and padded to 160 columns: the printed
    commands broke across lines and did not run when copied."""
    monkeypatch.setenv("COLUMNS", "40")
    log_root = tmp_path / "a-log-root-whose-path-is-long-enough-to-wrap-any-narrow-terminal"
    argv = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "16", "--agent.max-iterations", "1"]
    code, _, err = run_main(train.main, [*argv, "--log-root", str(log_root)])
    assert code == 0, err
    lines = err.splitlines()
    assert not [line for line in lines if line != line.rstrip()], "padded lines"
    # The start says which physics trains and what steps beside the environments PPO trains on.
    (start,) = [line for line in lines if "training cartpole-balance with" in line]
    assert "on cpu (MuJoCo C): 16 envs x " in start and " evaluation envs " in start and start.endswith(", 1 iteration")
    (watch,) = [line for line in lines if "watch it: " in line]
    checkpoint = watch.split("--checkpoint ", 1)[1]
    assert Path(checkpoint).is_file() and watch.startswith("[") and " INFO     watch it: " in watch


def test_a_terminal_shows_a_command_on_one_soft_wrapped_line() -> None:
    out = io.StringIO()
    handler = _TerminalHandler(console=Console(file=out, width=40, force_terminal=True, color_system=None))
    command = "watch it: uv run play cartpole-balance --checkpoint logs/rsl_rl/cartpole_balance/run/model_20.pt"
    logger = logging.getLogger("mjfleet.test_console")
    logger.addHandler(handler)
    try:
        logger.warning("%s", command, extra=UNWRAPPED)
        logger.warning("%s", command)  # any other record: rich's columns, folded to the width
    finally:
        logger.removeHandler(handler)
    whole, *folded = out.getvalue().splitlines()
    assert whole.endswith(f"WARNING  {command}")
    assert len(folded) > 1 and all(len(line) <= 40 for line in folded)


def test_the_cpu_defaults_line_names_the_training_contacts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same setting (``applies cpu``) gives the CPU other physics than the GPU: the line of CPU defaults left
    it out, and only the worker's start said it (not a --dry-run)."""
    from .helpers import missing_files

    if why := missing_files("unitree-go1-velocity-flat"):
        pytest.skip(why)
    monkeypatch.setenv("COLUMNS", "400")
    code, _, err = run_main(train.main, ["unitree-go1-velocity-flat", "--gpu-ids", "None", "--dry-run"])
    assert code == 0, err
    (line,) = [line for line in err.splitlines() if "defaults of unitree-go1-velocity-flat on the CPU" in line]
    assert "; training contacts: pyramidal" in line and "(GPU: the robot file's)" in line

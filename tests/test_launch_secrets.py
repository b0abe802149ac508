"""Secrets stay off command lines: torchrunx exports the variables it copies inside its agents' ``sh -c`` command,
which every user of a machine can read; W&B's key and any copied ``*KEY*``/``*TOKEN*``/``*SECRET*`` variable travel
inside the launched function instead. A real 2-worker run, with every process's command line read while it runs."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from mjfleet.launch.launcher import split_environment

from .helpers import ONE_PASS_UPDATE, TOKEN_ENV, assert_no_processes_left

BIN = Path(sys.executable).parent


def test_secrets_are_split_from_what_torchrunx_exports() -> None:
    env = {"WANDB_API_KEY": "k", "WANDB_MODE": "offline", "MJFLEET_SERVICE_TOKEN": "t", "MJFLEET_X": "1", "HOME": "/h"}
    names, secrets = split_environment(("MJFLEET*", "PATH"), env)
    assert names == ("MJFLEET_X",)
    assert secrets == {"WANDB_API_KEY": "k", "WANDB_MODE": "offline", "MJFLEET_SERVICE_TOKEN": "t"}
    (escaped,) = split_environment(("A*",), {"A[1]": "v", "A1": "w"})[0][:1]
    assert fnmatch.fnmatch("A[1]", escaped) and not fnmatch.fnmatch("A1", escaped)  # each name stands for itself


def _command_lines() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_no_secret_appears_in_any_command_line_of_a_two_worker_run(tmp_path: Path) -> None:
    key, token, tag = uuid.uuid4().hex, uuid.uuid4().hex, uuid.uuid4().hex
    env = {**os.environ, TOKEN_ENV: tag, "WANDB_API_KEY": key, "MJFLEET_SERVICE_TOKEN": token, "WANDB_MODE": "offline"}
    argv = [str(BIN / "train"), "cartpole-balance", "--gpu-ids", "None", "--cpu-workers", "2"]
    argv += ["--env.num-envs", "32", "--agent.num-steps-per-env", "8", "--agent.max-iterations", "10", *ONE_PASS_UPDATE]
    proc = subprocess.Popen([*argv, "--log-root", str(tmp_path)], env=env, stderr=subprocess.PIPE, text=True)
    leaks: list[str] = []
    agents_seen = threading.Event()

    def watch() -> None:
        while proc.poll() is None:
            for line in _command_lines():
                if key in line or token in line:
                    leaks.append(line)
                if "-m torchrunx" in line:
                    agents_seen.set()
            time.sleep(0.05)  # every process lives for seconds; a busier loop would take a core from the run

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, err = proc.communicate(timeout=300)
    watcher.join(timeout=10)
    assert proc.returncode == 0, err[-3000:]
    assert agents_seen.is_set(), "the agents ran while command lines were read"
    assert leaks == []
    assert_no_processes_left(tag)

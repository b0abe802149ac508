"""The examples for other launchers (examples/torchrun.sh, examples/slurm/*.sbatch, examples/kubernetes/*.yaml) stay
runnable: valid shell and YAML, torchrun options torchrun accepts, and ``train`` arguments that the real parser
accepts and that no external launcher refuses. Nothing is launched here; test_external_launch.py runs the jobs."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from mjfleet.cli.train import parse_args
from mjfleet.train.config import TrainConfig, validate
from mjfleet.train.external import ExternalJob, Launcher, check_external_options

EXAMPLES = Path(__file__).parents[1] / "examples"
TORCHRUN_SH = EXAMPLES / "torchrun.sh"
SRUN_SBATCH = EXAMPLES / "slurm" / "train_srun.sbatch"
OWN_SBATCH = EXAMPLES / "slurm" / "train.sbatch"
PYTORCHJOB = EXAMPLES / "kubernetes" / "pytorchjob.yaml"

PLACEHOLDERS = {
    "TASK": "cartpole-balance",
    "GPU_IDS": "None",
    "NPROC": "2",
    "NNODES": "2",
    "RDZV_HOST": "node1",
    "RDZV_PORT": "29400",
    "RUN_ID": "job-1",
    "TORCHRUN_OPTS": "",
    "SLURM_JOB_ID": "12345",
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "4",
    "MASTER_ADDR": "mjfleet-go1-master-0",
    "MASTER_PORT": "23456",
    "RUN_NAME": "go1-rough-a",
}
"""Values for the shell variables the examples' command lines use; a variable not listed here fails the test."""
SHELL_OPERATORS = ("||", "&&", ";", "|", "&")


def _words(line: str) -> list[str]:
    """One shell command line as words, with the known variables filled in (``"$@"``, ``"${@:2}"`` pass nothing)."""
    words = []
    for word in shlex.split(line, comments=True):
        if word in ("$@", "${@:2}"):  # the arguments the script was given
            continue

        def value(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            assert name in PLACEHOLDERS, f"unknown variable ${name} in: {line}"
            return PLACEHOLDERS[name]

        word = re.sub(r"\$\{(\w+)\}|\$(\w+)", value, word)
        if word:
            words.append(word)
    return words


def _commands(shell: str) -> list[list[str]]:
    """Every command of a shell text that runs ``train``, as words (continuation lines joined, comments skipped)."""
    found = []
    for line in shell.replace("\\\n", " ").splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        if _train_at(shlex.split(line, comments=True)) is not None:
            found.append(_words(line))
    return found


def _train_at(words: list[str]) -> int | None:
    """Where ``words`` run ``train``: as the command (after ``exec``), as torchrun's program after ``--no_python``,
    or as the program of ``srun`` or ``uv run``; None when they do not (e.g. a test of the file)."""

    def is_train(i: int) -> bool:
        return i < len(words) and (words[i] == "train" or words[i].endswith("/train"))

    first = 1 if words[:1] == ["exec"] else 0
    if is_train(first):
        return first
    if "--no_python" in words and is_train(words.index("--no_python") + 1):
        return words.index("--no_python") + 1
    for wrapper in (["srun"], ["uv", "run"]):
        if words[first : first + len(wrapper)] == wrapper:
            after = first + len(wrapper)
            program = next((i for i in range(after, len(words)) if not words[i].startswith("-")), len(words))
            return program if is_train(program) else None
    return None


def _split(command: list[str]) -> tuple[list[str], list[str]]:
    """``(what comes before train, train's arguments)``, the arguments ending at a shell operator."""
    at = _train_at(command)
    assert at is not None
    args = command[at + 1 :]
    end = next((i for i, w in enumerate(args) if w in SHELL_OPERATORS), len(args))
    return command[:at], args[:end]


def _train_config(args: list[str]) -> TrainConfig:
    """The real parser and checks on an example's ``train`` arguments, the task replaced by a small one."""
    assert args and not args[0].startswith("-"), f"train's first argument must be the task: {args}"
    cfg = parse_args(["cartpole-balance", *args[1:]])
    validate(cfg)
    return cfg


def _torchrun_options(before: list[str]) -> argparse.Namespace:
    """torchrun's own parser on the options an example gives it (so a misspelt option fails here)."""
    from torch.distributed.run import get_args_parser

    at = before.index("torchrun")
    options = get_args_parser().parse_args([*before[at + 1 :], "train"])
    assert options.no_python and options.training_script == "train"
    return options


def _under(launcher: Launcher) -> ExternalJob:
    """Rank 0 of a job of 8 ranks on two nodes that ``launcher`` started."""
    return ExternalJob(launcher, 0, 0, 8, 4, 0, "node1", 29500, 0, launcher == "torchrun")


def _pod_scripts() -> dict[str, str]:
    job = yaml.safe_load(PYTORCHJOB.read_text())
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    scripts = {}
    for role, spec in job["spec"]["pytorchReplicaSpecs"].items():
        (container,) = spec["template"]["spec"]["containers"]
        assert container["name"] == "pytorch"  # the container the operator gives MASTER_ADDR, PET_* to
        scripts[role] = "\n".join([*container.get("command", []), *container.get("args", [])])
        run_name = {e["name"]: e["value"] for e in container.get("env", [])}.get("RUN_NAME")
        assert run_name == PLACEHOLDERS["RUN_NAME"], role  # one name, the same in every pod
    assert set(scripts) == {"Master", "Worker"}
    return scripts


@pytest.mark.slow
@pytest.mark.parametrize("script", [TORCHRUN_SH, SRUN_SBATCH], ids=lambda p: p.name)
def test_example_scripts_are_valid_bash(script: Path) -> None:
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, check=False).returncode == 0


def test_torchrun_example_runs_train_on_one_node_and_on_several() -> None:
    commands = _commands(TORCHRUN_SH.read_text())
    assert len(commands) == 2  # one node, several nodes
    for command in commands:
        cfg = _train_config(_split(command)[1])
        assert cfg.gpu_ids is None  # GPU_IDS=None: CPU ranks
        check_external_options(cfg, _under("torchrun"))
    one, several = (_torchrun_options(_split(command)[0]) for command in commands)
    assert one.standalone and one.nproc_per_node == "2"
    assert (several.rdzv_backend, several.rdzv_endpoint, several.rdzv_id) == ("c10d", "node1:29400", "job-1")
    assert several.nnodes == "2"


def test_srun_example_starts_one_rank_per_task_that_a_requeue_continues() -> None:
    text = SRUN_SBATCH.read_text()
    for directive in ("--requeue", "--signal=TERM@", "--ntasks-per-node=", "--gpus-per-task=1"):
        assert f"#SBATCH {directive}" in text
    assert "#SBATCH --signal=B:" not in text  # the tasks must get the signal, not only the batch script
    (command,) = _commands(text)
    before, args = _split(command)
    assert before[0] == "srun" and "uv" not in before  # uv run would pass SIGTERM on a second time
    cfg = _train_config(args)
    check_external_options(cfg, _under("srun"))
    assert cfg.run_id is None  # the SLURM job is the run's identity
    assert 'scontrol requeue "${SLURM_JOB_ID}"' in text


def test_own_launcher_sbatch_names_its_run_after_the_job() -> None:
    text = OWN_SBATCH.read_text()
    assert "#SBATCH --requeue" in text
    (command,) = _commands(text)
    cfg = _train_config(_split(command)[1])
    assert cfg.hostnames == ("slurm",) and cfg.run_id == PLACEHOLDERS["SLURM_JOB_ID"]


def test_pytorchjob_pods_run_torchrun_with_the_operators_variables() -> None:
    for role, script in _pod_scripts().items():
        assert "torchrun" in script and "--no_python train" in script, role
        (command,) = _commands(script)
        before, args = _split(command)
        assert before[before.index("torchrun") - 1] == "exec"  # torchrun is the container's first process: it
        options = _torchrun_options(before)  # gets the pod's SIGTERM and passes it to the ranks
        assert options.rdzv_backend == "c10d" and options.rdzv_id == PLACEHOLDERS["RUN_NAME"]
        assert options.rdzv_endpoint == "mjfleet-go1-master-0:23456"
        assert (options.nnodes, options.nproc_per_node) == ("2", "4")
        cfg = _train_config(args)
        check_external_options(cfg, _under("torchrun"))
        assert cfg.log_root == Path("/runs/rsl_rl")

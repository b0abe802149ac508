"""``--hostnames slurm`` / ``auto``: the launch plan inside a SLURM job, with a fake ``scontrol`` on PATH.

Nothing is launched: the plan (hosts, workers per host, world size) and the ``--dry-run`` report are checked.
"""

from __future__ import annotations

import os
import shlex
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from mjfleet.cli import train
from mjfleet.cli.train import parse_args
from mjfleet.errors import UsageError
from mjfleet.train import api, own_launcher, prepare

from .helpers import ONE_PASS_UPDATE, run_main, small_train_config

SLURM_VARS = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_GPUS_ON_NODE")


def _scontrol(bin_dir: Path, stdout: str = "node-a\nnode-b\n", stderr: str = "", code: int = 0) -> Path:
    """A fake ``scontrol`` that records its arguments next to itself and answers as given."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > "{bin_dir}/args"\n'
        f"printf '%s' '{stdout}'\n"
        f"printf '%s' '{stderr}' >&2\n"
        f"exit {code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.fixture
def outside_slurm(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*SLURM_VARS, "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def in_job(outside_slurm: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Inside a two-node SLURM job whose ``scontrol`` lists node-a and node-b; returns the fake's directory."""
    bin_dir = _scontrol(tmp_path / "bin")
    outside_slurm.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    outside_slurm.setenv("SLURM_JOB_ID", "4242")
    outside_slurm.setenv("SLURM_JOB_NODELIST", "node-[a-b]")
    # The plan resolves every host name before anything starts; the fake nodes are names of this machine here, and
    # count as two machines where the plan asks (two names of one machine cannot each take its GPUs).
    real = socket.gethostbyname
    outside_slurm.setattr(socket, "gethostbyname", lambda name: "127.0.0.1" if name.startswith("node-") else real(name))
    outside_slurm.setattr(own_launcher, "remote_hosts", lambda hosts: [h for h in hosts if h.startswith("node-")])
    return bin_dir


def _gpus_on_launcher(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Pretend the launching node has ``count`` GPUs (the selection is computed there)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(api, "local_gpu_count", lambda: count)


TINY = ["--gpu-ids", "None", "--env.num-envs", "8", "--agent.num-steps-per-env", "4", *ONE_PASS_UPDATE]


# --- plans ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyword", ["slurm", "auto", "SLURM"])
def test_cpu_workers_on_every_node_of_the_job(keyword: str, in_job: Path, tmp_path: Path) -> None:
    plan = prepare(small_train_config(log_root=tmp_path, cpu_workers=2, hostnames=(keyword,))).launch_plan
    assert plan is not None
    assert plan.hostnames == ("node-a", "node-b")
    assert (plan.workers_per_host, plan.world_size) == (2, 4)
    assert (in_job / "args").read_text().split() == ["show", "hostnames", "node-[a-b]"]


def test_workers_per_host_beats_cpu_workers(in_job: Path, tmp_path: Path) -> None:
    cfg = small_train_config(log_root=tmp_path, cpu_workers=2, hostnames=("slurm",), workers_per_host=3)
    plan = prepare(cfg).launch_plan
    assert plan is not None and (plan.workers_per_host, plan.world_size) == (3, 6)


def test_auto_outside_a_job_is_this_machine_only(outside_slurm: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plan = prepare(small_train_config(log_root=tmp_path, cpu_workers=2, hostnames=("auto",))).launch_plan
    assert plan is not None and plan.hostnames == ("localhost",) and plan.world_size == 2


def test_no_hostnames_inside_a_job_stays_on_this_machine(in_job: Path, tmp_path: Path) -> None:
    plan = prepare(small_train_config(log_root=tmp_path, cpu_workers=2)).launch_plan
    assert plan is not None and plan.hostnames == ("localhost",)
    assert not (in_job / "args").exists(), "scontrol is not asked unless --hostnames says so"


def test_gpu_all_takes_the_gpus_slurm_gave_each_node(
    in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpus_on_launcher(monkeypatch, 8)
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "4")
    plan = prepare(small_train_config(log_root=tmp_path, gpu_ids="all", hostnames=("slurm",))).launch_plan
    assert plan is not None and plan.device_kind == "cuda"
    assert (plan.hostnames, plan.workers_per_host, plan.world_size) == (("node-a", "node-b"), 4, 8)
    assert plan.cuda_visible_devices == "0,1,2,3"

    # Without SLURM_GPUS_ON_NODE, or with explicit GPUs, the selection decides.
    monkeypatch.delenv("SLURM_GPUS_ON_NODE")
    plan = prepare(small_train_config(log_root=tmp_path, gpu_ids="all", hostnames=("slurm",))).launch_plan
    assert plan is not None and plan.workers_per_host == 8
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "4")
    plan = prepare(small_train_config(log_root=tmp_path, gpu_ids=(0, 1), hostnames=("auto",))).launch_plan
    assert plan is not None and (plan.workers_per_host, plan.world_size) == (2, 4)


def test_more_gpus_per_node_than_the_launcher_sees_leaves_each_nodes_numbering(
    in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpus_on_launcher(monkeypatch, 2)
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "4")
    plan = prepare(small_train_config(log_root=tmp_path, gpu_ids="all", hostnames=("slurm",))).launch_plan
    assert plan is not None and (plan.workers_per_host, plan.cuda_visible_devices) == (4, None)


def test_a_gpu_less_salloc_shell_outside_the_job_nodes_says_where_to_run(
    in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # salloc's shell runs on the login node unless the cluster says otherwise: the job's nodes are other machines.
    real = socket.gethostbyname
    monkeypatch.setattr(
        socket, "gethostbyname", lambda n: {"node-a": "192.0.2.41", "node-b": "192.0.2.42"}.get(n) or real(n)
    )
    _gpus_on_launcher(monkeypatch, 0)
    with pytest.raises(UsageError, match=r"is none of the hosts \(node-a, node-b\).*run train on node-a"):
        prepare(small_train_config(log_root=tmp_path, gpu_ids="all", hostnames=("slurm",)))


def test_dry_run_shows_the_job_nodes(in_job: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    argv = ["cartpole-balance", *TINY, "--cpu-workers", "2", "--hostnames", "slurm", "--log-root", str(logs)]
    code, out, err = run_main(train.main, [*argv, "--dry-run"])
    assert code == 0, err
    assert "launch plan: 4 workers (2 CPU processes on each of 2 hosts (node-a, node-b))" in " ".join(out.split())
    assert not logs.exists(), "--dry-run creates nothing"


# --- errors the user can cause: one line, exit code 2 ---------------------------------------------------------------


def _one_line_error(argv: list[str], tmp_path: Path) -> str:
    command = ["cartpole-balance", *TINY, "--log-root", str(tmp_path / "logs"), *argv, "--dry-run"]
    code, _, err = run_main(train.main, command)
    assert code == 2 and err.count("\n") == 1, err
    assert "Traceback" not in err
    return " ".join(err.split())


def test_slurm_outside_an_allocation(outside_slurm: pytest.MonkeyPatch, tmp_path: Path) -> None:
    err = _one_line_error(["--hostnames", "slurm"], tmp_path)
    assert "--hostnames slurm needs a SLURM allocation (SLURM_JOB_ID is not set)" in err


def test_scontrol_missing(in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    err = _one_line_error(["--hostnames", "slurm"], tmp_path)
    assert "scontrol is not on PATH" in err and "node-[a-b]" in err


def test_scontrol_failing(in_job: Path, tmp_path: Path) -> None:
    _scontrol(in_job, stdout="", stderr="scontrol: error: Invalid node name specified\n", code=1)
    err = _one_line_error(["--hostnames", "auto"], tmp_path)
    assert "--hostnames auto: 'scontrol show hostnames node-[a-b]' failed (exit code 1)" in err
    assert "Invalid node name specified" in err


def test_scontrol_listing_no_nodes(in_job: Path, tmp_path: Path) -> None:
    _scontrol(in_job, stdout="\n")
    assert "listed no nodes" in _one_line_error(["--hostnames", "slurm"], tmp_path)


def test_no_node_list(in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_NODELIST")
    assert "SLURM_JOB_NODELIST is not set" in _one_line_error(["--hostnames", "slurm"], tmp_path)


def test_one_launcher_per_job(in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    err = _one_line_error(["--hostnames", "slurm"], tmp_path)
    assert "this is SLURM task 1 of 2; start one launcher per job" in err


def test_keyword_mixed_with_host_names(in_job: Path, tmp_path: Path) -> None:
    err = _one_line_error(["--hostnames", "slurm", "node-c"], tmp_path)
    assert "--hostnames slurm stands for a whole list of hosts: give it alone" in err


def test_gpu_all_in_a_job_without_gpus(in_job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus_on_launcher(monkeypatch, 2)
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "0")
    argv = ["cartpole-balance", "--gpu-ids", "all", "--hostnames", "slurm", "--log-root", str(tmp_path), "--dry-run"]
    code, _, err = run_main(train.main, argv)
    assert code == 2 and err.count("\n") == 1
    assert "the SLURM job has no GPUs on this node (SLURM_GPUS_ON_NODE=0)" in " ".join(err.split())


# --- the example batch script ---------------------------------------------------------------------------------------

SBATCH = Path(__file__).parents[1] / "examples" / "slurm" / "train.sbatch"


@pytest.mark.slow
def test_example_sbatch_runs_one_launcher_with_a_valid_command(in_job: Path, tmp_path: Path) -> None:
    text = SBATCH.read_text()
    assert subprocess.run(["bash", "-n", str(SBATCH)], check=False).returncode == 0
    assert "#SBATCH --ntasks-per-node=1" in text and "srun" not in text.split("set -euo pipefail")[1]
    joined = text.replace("\\\n", " ")
    (command,) = [line for line in joined.splitlines() if line.startswith("exec uv run")]
    words = shlex.split(command.replace('"${TASK}"', "cartpole-balance").replace('"${@:2}"', ""))  # no more arguments
    argv = words[words.index("train") + 1 :]
    assert argv[:5] == ["cartpole-balance", "--gpu-ids", "all", "--hostnames", "slurm"]
    cfg = parse_args([*argv, "--log-root", str(tmp_path / "logs")])
    assert cfg.hostnames == ("slurm",) and cfg.max_restarts == 2


def test_hostnames_auto_outside_slurm_trains_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("SLURM_JOB_ID", "SLURM_JOBID"):
        monkeypatch.delenv(var, raising=False)
    assert prepare(small_train_config(log_root=tmp_path, hostnames=("auto",))).launch_plan is None

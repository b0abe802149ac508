"""Under torchrun and SLURM a run continues only itself: real torchrun processes on the CPU (gloo). A sweep inside
one SLURM job gives one run per member and a requeue continues its own; a fixed ``--rdzv-id`` with another seed is
another run; a re-created pod (torchrun as PID 1 of a new PID namespace, the same host name) is a new run while
restarts inside one torchrun continue; rank 0 alone fetches a ``wandb:`` checkpoint; a diverged run is not trained
again by torchrun's restarts."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from mjfleet.rl.checkpoint.files import list_checkpoints

from .helpers import ONE_PASS_UPDATE, assert_no_processes_left, launcher_free_env
from .instruments import instrument_env

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SMALL = ["cartpole-balance", "--gpu-ids", "None", "--env.num-envs", "32", "--agent.num-steps-per-env", "8"]
SMALL += ["--no-init-at-random-ep-len", "--agent.save-interval", "1", *ONE_PASS_UPDATE]


@pytest.fixture
def token() -> str:
    return uuid.uuid4().hex


_env = launcher_free_env


def _standalone(*args: str, procs: int = 1) -> list[str]:
    return [
        str(BIN / "torchrun"),
        "--standalone",
        f"--nproc_per_node={procs}",
        *args,
        "--no_python",
        str(BIN / "train"),
    ]


def _runs(log_root: Path) -> list[Path]:
    folder = log_root / "cartpole_balance"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_sweep_in_one_slurm_job_gives_one_run_each_and_a_requeue_continues_its_own(
    tmp_path: Path, token: str
) -> None:
    log_root = tmp_path / "logs"
    job = _env(token, SLURM_JOB_ID="4242")
    member = [*SMALL, "--agent.max-iterations", "3", "--log-root", str(log_root)]
    # The sweep's members run side by side; seed 1 is preempted after its second iteration (SIGTERM: a checkpoint,
    # exit 143).
    members = [
        subprocess.Popen(
            [*_standalone(), *member, "--seed", "1"],
            env={**job, **instrument_env(fault="sigterm@0:1")},
            stderr=subprocess.PIPE,
            text=True,
        ),
        subprocess.Popen([*_standalone(), *member, "--seed", "2"], env=job, stderr=subprocess.PIPE, text=True),
    ]
    first, second = [proc.communicate(timeout=300)[1] for proc in members]
    assert "stopped by SIGTERM at iteration 2 of 3" in _flat(first), first[-3000:]
    assert members[1].returncode == 0, second[-3000:]
    runs = _runs(log_root)
    assert len(runs) == 2, runs
    [one] = [run for run in runs if list_checkpoints(run)[-1][0] == 2]
    [two] = [run for run in runs if run != one]
    assert [c for c, _ in list_checkpoints(two)] == [1, 2, 3]  # seed 2 trained, in a run of its own
    # The requeued job runs seed 1 again: it continues its own run, not seed 2's.
    requeued = subprocess.run(
        [*_standalone(), *member, "--seed", "1"], env=job, capture_output=True, text=True, timeout=300
    )
    assert requeued.returncode == 0, requeued.stderr[-3000:]
    assert _runs(log_root) == runs
    assert f"continuing run {one} (run id slurm-4242 from SLURM_JOB_ID) at iteration 3" in _flat(requeued.stderr)
    assert list_checkpoints(one)[-1][0] == 3
    assert_no_processes_left(token)


def test_a_fixed_rdzv_id_with_another_seed_is_another_run(tmp_path: Path, token: str) -> None:
    log_root = tmp_path / "logs"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rdzv = [str(BIN / "torchrun"), "--nnodes=1", "--nproc_per_node=1", "--rdzv-backend=c10d"]
    rdzv += [f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=fixed-{token[:8]}", "--no_python", str(BIN / "train")]
    for seed in ("1", "2"):
        done = subprocess.run(
            [*rdzv, *SMALL, "--agent.max-iterations", "2", "--seed", seed, "--log-root", str(log_root)],
            env=_env(token),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    assert len(_runs(log_root)) == 2
    assert_no_processes_left(token)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--uts", "--mount-proc", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare with PID and UTS namespaces (root)")
def test_a_recreated_pod_is_a_new_run_and_restarts_inside_one_torchrun_continue(tmp_path: Path, token: str) -> None:
    log_root = tmp_path / "logs"

    def pod(port: int, fault: str) -> subprocess.CompletedProcess[str]:
        torchrun = [str(BIN / "torchrun"), "--nnodes=1", "--nproc_per_node=1", "--max-restarts=1"]
        torchrun += ["--master-addr=127.0.0.1", f"--master-port={port}", "--no_python", str(BIN / "train")]
        command = [*torchrun, *SMALL, "--agent.max-iterations", "3", "--log-root", str(log_root)]
        # torchrun as PID 1 of a fresh PID namespace with a fixed host name: what a re-created pod looks like.
        script = f"hostname pod-a && exec {' '.join(command)}"
        env = {**_env(token), **(instrument_env(fault=fault) if fault else {})}
        return subprocess.run(
            ["unshare", "--pid", "--fork", "--uts", "--mount-proc", "sh", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    # The first pod's rank dies after iteration 1; torchrun restarts it, and the restart continues the same run.
    first = pod(29611 + os.getpid() % 1000, "kill@0:1")
    assert first.returncode == 0, first.stderr[-3000:]
    [run_dir] = _runs(log_root)
    assert "resumed from" in first.stderr and list_checkpoints(run_dir)[-1][0] == 3
    second = pod(29611 + os.getpid() % 1000, "")
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(_runs(log_root)) == 2  # the same pod name and PID 1, another torchrun: a new run
    assert_no_processes_left(token)


def test_two_ranks_resuming_from_wandb_fetch_it_once(tmp_path: Path, token: str) -> None:
    log_root = tmp_path / "logs"
    source = subprocess.run(
        [str(BIN / "train"), *SMALL, "--agent.max-iterations", "1", "--log-root", str(tmp_path / "source")],
        env=_env(token),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert source.returncode == 0, source.stderr[-3000:]
    [source_run] = _runs(tmp_path / "source")
    files = tmp_path / "wandb" / "offline-run-20260101_000000-abc123" / "files"
    files.mkdir(parents=True)
    shutil.copy(source_run / "model_1.pt", files / "model_1.pt")
    counter = tmp_path / "fetches"
    wrapper = tmp_path / "counting_train.py"
    wrapper.write_text(
        textwrap.dedent(
            """
            import os, sys
            from mjfleet.train import plan as start
            from mjfleet.cli.train import main

            fetch = start.fetch
            def counted(*args, **kwargs):
                with open(os.environ["FETCH_COUNTER"], "a") as f:
                    f.write(os.environ["RANK"] + "\\n")
                return fetch(*args, **kwargs)
            start.fetch = counted
            main(sys.argv[1:])
            """
        )
    )
    env = _env(token, MJFLEET_WANDB_DIR=str(tmp_path / "wandb"), FETCH_COUNTER=str(counter))
    command = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", str(wrapper)]
    command += [*SMALL, "--agent.max-iterations", "1", "--resume", "wandb:me/proj/abc123", "--log-root", str(log_root)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert counter.read_text().split() == ["0"]  # rank 0 alone fetched it; rank 1 loaded the same file
    assert "resumed from" in done.stderr and list_checkpoints(_runs(log_root)[0])[-1][0] == 2
    assert_no_processes_left(token)


def test_a_diverged_run_is_not_trained_again_by_torchruns_restarts(tmp_path: Path, token: str) -> None:
    log_root = tmp_path / "logs"
    command = [*_standalone("--max-restarts=2"), *SMALL, "--agent.max-iterations", "6", "--log-root", str(log_root)]
    done = subprocess.run(
        command, env={**_env(token), **instrument_env(fault="nan@0:2")}, capture_output=True, text=True, timeout=300
    )
    said = _flat(done.stderr)
    assert done.returncode != 0
    assert "training diverged at iteration 3" in said, said[-3000:]
    assert said.count("continuing it would fail the same way") == 2, said[-3000:]  # each restart refused at once
    assert said.count("it 2/6") == 1  # nothing trained twice
    assert len(re.findall(r"exitcode\s*:\s*3\b", done.stderr)) >= 1  # torchrun saw the workers' exit code 3
    [run_dir] = _runs(log_root)
    assert [c for c, _ in list_checkpoints(run_dir)] == [1, 2]
    assert_no_processes_left(token)

"""``train`` started by another launcher: real torchrun and emulated srun jobs on the CPU with gloo (no mocks of
torch.distributed). Each process is one rank of the job; rank 0 alone makes the run directory; a restarted,
stopped or requeued job continues its own run."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import torch

from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.train import run

from .helpers import ONE_PASS_UPDATE, assert_no_processes_left, launcher_free_env, small_train_config
from .instruments import instrument_env
from .twohost import namespace_host, unavailable

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SMALL = [
    "cartpole-balance",
    "--gpu-ids",
    "None",
    "--env.num-envs",
    "64",
    "--agent.num-steps-per-env",
    "16",
    "--seed",
    "0",
    "--no-init-at-random-ep-len",
    *ONE_PASS_UPDATE,
]


@pytest.fixture
def token() -> str:
    return uuid.uuid4().hex


_env = launcher_free_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(*args: str) -> list[str]:
    return [str(BIN / "torchrun"), *args, "--no_python", str(BIN / "train")]


def _runs(log_root: Path) -> list[Path]:
    """The run directories so far (none before rank 0 made the first: the experiment's folder comes a moment
    earlier)."""
    experiment = log_root / "cartpole_balance"
    return sorted(p for p in experiment.iterdir() if p.is_dir()) if experiment.is_dir() else []


def _train_workers(launcher: psutil.Process) -> dict[int, psutil.Process]:
    """The launcher's ``train`` processes by global rank."""
    found = {}
    for child in launcher.children(recursive=True):
        try:
            if any(part.endswith("/train") for part in child.cmdline()):
                found[int(child.environ()["RANK"])] = child
        except (psutil.Error, KeyError, ValueError):
            continue
    return found


def _wait_for(condition: Callable[[], object], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


def test_torchrun_restarts_continue_the_run_from_its_last_checkpoint(tmp_path: Path, token: str) -> None:
    """Two ranks under torchrun train one run (rank 0 alone writes and speaks; rank 1's data enters every update);
    a killed rank restarts both, and they continue that run from its last checkpoint."""
    log_root = tmp_path / "logs"
    launcher = subprocess.Popen(
        [
            *_torchrun("--standalone", "--nproc_per_node=2", "--max-restarts=1"),
            *SMALL,
            "--agent.max-iterations",
            "24",
            "--agent.save-interval",
            "4",
            "--log-root",
            str(log_root),
        ],
        env=_env(token),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        parent = psutil.Process(launcher.pid)
        _wait_for(lambda: any(list_checkpoints(run) for run in _runs(log_root)))
        _train_workers(parent)[1].kill()
        _, err = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 0, err[-3000:]
    assert "torchrun started 2 ranks on 1 node (node 0: " in err
    [run_dir] = _runs(log_root)  # the restarted workers found their run
    assert list_checkpoints(run_dir)[-1][0] == 24
    resumed = re.search(r"resumed from \S+model_(\d+)\.pt at iteration (\d+)", err)
    assert resumed is not None, err[-3000:]
    start = int(resumed.group(2))
    assert start >= 4 and start % 4 == 0
    assert f"it {start + 1}/24" in err  # iteration numbers continue
    assert err.count("it 24/24") == 1  # rank 0 speaks for the job
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # rank 0 alone writes: before the restart and after
    assert "replicas identical on all 2 ranks at iteration 24" in err
    assert_no_processes_left(token)

    # One process with the same seed trains other weights: rank 1's data entered every update.
    alone = run(small_train_config(iterations=4, log_root=tmp_path / "alone"))[0]
    assert alone.last_checkpoint is not None
    both = load_checkpoint(run_dir / "model_4.pt")["actor_state_dict"]
    one = load_checkpoint(Path(alone.last_checkpoint))["actor_state_dict"]
    assert both.keys() == one.keys()
    assert any(not torch.equal(both[k], one[k]) for k in both)


def test_torchrun_sigterm_checkpoints_and_the_same_job_continues(tmp_path: Path, token: str) -> None:
    iterations = 100  # 30 of these small iterations could all end within the second the signal waited (a fast CPU)
    log_root = tmp_path / "logs"
    port = _free_port()
    command = [
        *_torchrun(
            "--nnodes=1",
            "--nproc_per_node=2",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}",
            f"--rdzv-id={token}",
        ),
        *SMALL,
        "--agent.max-iterations",
        str(iterations),
        "--agent.save-interval",
        "100",
        "--log-root",
        str(log_root),
    ]
    first = subprocess.Popen(command, env=_env(token), stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: any(any(run.glob("events*")) for run in _runs(log_root)))
        time.sleep(0.2)  # into the training loop; the run is long enough that the signal comes before its end
        first.send_signal(signal.SIGTERM)  # torchrun forwards it to every worker
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    # torchrun itself reports the signal as a failure; the workers stopped cleanly with a checkpoint.
    stopped = re.search(r"stopped by SIGTERM at iteration (\d+) of", err)
    assert stopped is not None, err[-3000:]
    [run_dir] = _runs(log_root)
    assert list_checkpoints(run_dir)[-1][0] == int(stopped.group(1)) < iterations
    assert_no_processes_left(token)

    again = subprocess.run(command, env=_env(token), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _runs(log_root) == [run_dir]
    assert f"run id torchrun-{token} from TORCHELASTIC_RUN_ID" in " ".join(again.stderr.split())
    assert f"it {int(stopped.group(1)) + 1}/{iterations}" in again.stderr
    assert list_checkpoints(run_dir)[-1][0] == iterations


def _fake_scontrol(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True)
    script = bin_dir / "scontrol"
    script.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\necho localhost\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def _srun(tmp_path: Path, token: str, job: int, iterations: int, restart: int = 0) -> list[subprocess.Popen[str]]:
    """What ``srun --ntasks 2`` on one node starts: two ``train`` processes with SLURM's task variables."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        _fake_scontrol(bin_dir)
    procs = []
    for task in range(2):
        env = _env(
            token,
            PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            SLURM_JOB_ID=str(job),
            SLURM_STEP_ID="0",
            SLURM_STEP_NUM_TASKS="2",
            SLURM_STEP_TASKS_PER_NODE="2",
            SLURM_STEP_NODELIST="node1",
            SLURM_PROCID=str(task),
            SLURM_LOCALID=str(task),
            SLURM_NODEID="0",
            SLURM_RESTART_COUNT=str(restart),
        )
        argv = [*SMALL, "--agent.max-iterations", str(iterations), "--log-root", str(tmp_path / "logs")]
        procs.append(subprocess.Popen([str(BIN / "train"), *argv], env=env, stderr=subprocess.PIPE, text=True))
    return procs


def test_srun_tasks_train_one_run_and_a_requeued_job_continues_it(tmp_path: Path, token: str) -> None:
    log_root = tmp_path / "logs"
    iterations = 100  # as in the torchrun test: 30 small iterations could end before the signal
    job = 10000 + os.getpid() % 20000  # its port, 15000 + job % 20000, differs between concurrent test runs
    ranks = _srun(tmp_path, token, job, iterations=iterations)
    try:
        _wait_for(lambda: any(any(run.glob("events*")) for run in _runs(log_root)))
        time.sleep(0.2)
        ranks[1].send_signal(signal.SIGTERM)  # one rank evicted: every rank stops, as stopped (143)
        errs = [proc.communicate(timeout=120)[1] for proc in ranks]
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
    assert [proc.returncode for proc in ranks] == [143, 143], errs[0][-3000:]
    [run_dir] = _runs(log_root)
    stopped = re.search(r"stopped by SIGTERM at iteration (\d+) of", errs[0])
    assert stopped is not None and list_checkpoints(run_dir)[-1][0] == int(stopped.group(1)) < iterations
    assert (tmp_path / "bin" / "calls").read_text().splitlines() == ["show hostnames node1"] * 2  # once per rank

    ranks = _srun(tmp_path, token, job, iterations=iterations, restart=1)  # the requeued job: the same command
    errs = [proc.communicate(timeout=300)[1] for proc in ranks]
    assert [proc.returncode for proc in ranks] == [0, 0], errs[0][-3000:]
    assert _runs(log_root) == [run_dir]
    assert f"run id slurm-{job}.0 from SLURM_JOB_ID" in " ".join(errs[0].split())
    assert f"it {int(stopped.group(1)) + 1}/{iterations}" in errs[0]
    assert list_checkpoints(run_dir)[-1][0] == iterations
    assert_no_processes_left(token)


def _node(command: list[str], address: str, is_host: bool) -> list[str]:
    """``command`` for one node: torchrun recognises its own host names, not every address of the machine, and
    would announce this machine's name (which resolves to loopback here), so both are given."""
    return [command[0], f"--rdzv-conf=is_host={str(is_host).lower()}", f"--local-addr={address}", *command[1:]]


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_torchrun_on_two_nodes_meets_through_c10d(tmp_path: Path, token: str) -> None:
    """One torchrun here and one inside the namespace host (no SSH: each node starts its own torchrun)."""
    log_root = tmp_path / "logs"
    with namespace_host(tmp_path / "host") as host:
        port = _free_port()
        command = [
            *_torchrun(
                "--nnodes=2",
                "--nproc_per_node=1",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint={host.local_address}:{port}",
                f"--rdzv-id={token}",
            ),
            *SMALL,
            "--agent.max-iterations",
            "3",
            "--log-root",
            str(log_root),
        ]
        env = _env(token, GLOO_SOCKET_IFNAME=host.ifname)
        here = subprocess.Popen(_node(command, host.local_address, True), env=env, stderr=subprocess.PIPE, text=True)
        there = subprocess.Popen(
            ["ip", "netns", "exec", host.name, *_node(command, host.address, False)],
            env={**env, "HOSTNAME": host.name},
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            errs = [proc.communicate(timeout=180)[1] for proc in (here, there)]
        finally:
            for proc in (here, there):
                if proc.poll() is None:
                    proc.kill()
        assert [here.returncode, there.returncode] == [0, 0], "\n".join(e[-2000:] for e in errs)
    log = " ".join("".join(errs).split())
    assert "torchrun started 2 ranks on 2 nodes (node 0: " in log and f"node 1: {host.name}" in log
    assert "replicas identical on all 2 ranks at iteration 3" in log
    [run_dir] = _runs(log_root)
    assert list_checkpoints(run_dir)[-1][0] == 3


def test_a_hung_rank_is_named_by_the_ranks_that_waited_for_it(tmp_path: Path, token: str) -> None:
    """torch's collective timeout names nobody; the waiting ranks read where each rank last arrived."""
    command = [*_torchrun("--standalone", "--nproc_per_node=2"), *SMALL, "--agent.max-iterations", "20"]
    command += ["--collective-timeout-s", "8", "--log-root", str(tmp_path / "logs")]
    env = {**_env(token), **instrument_env(fault="hang@1:2")}
    launcher = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    said = ""
    try:
        assert launcher.stderr is not None
        deadline = time.monotonic() + 240
        while "last seen at" not in said and time.monotonic() < deadline and (line := launcher.stderr.readline()):
            said += line
    finally:
        # The hung rank would keep torchrun waiting for its grace period; torchrun's ranks have sessions of their own.
        for proc in [*psutil.Process(launcher.pid).children(recursive=True), psutil.Process(launcher.pid)]:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        launcher.wait(timeout=60)
    flat = " ".join(said.split())
    assert "rank 1 did not arrive within 8 s (--collective-timeout-s): rank 1: alive but still at iteration 2" in flat
    assert_no_processes_left(token)


def _read_until(launcher: subprocess.Popen[str], marker: str, timeout_s: float) -> str:
    """stderr of ``launcher`` up to the line holding ``marker`` (or its end, or the timeout)."""
    assert launcher.stderr is not None
    said = ""
    deadline = time.monotonic() + timeout_s
    while marker not in said and time.monotonic() < deadline and (line := launcher.stderr.readline()):
        said += line
    return said


def _kill_tree(launcher: subprocess.Popen[str]) -> None:
    for proc in [*psutil.Process(launcher.pid).children(recursive=True), psutil.Process(launcher.pid)]:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    launcher.wait(timeout=60)


def freeze_rank_1(command: list[str], env: dict[str, str], after: str, startup_s: float) -> tuple[str, float]:
    """Start the job, SIGSTOP its rank 1 at a random moment of the iterations after the line holding ``after``, and
    read until the others say who did not arrive: what the job said, and seconds from the freeze to that line."""
    launcher = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        said = _read_until(launcher, after, startup_s)
        assert after in said, said[-3000:]
        time.sleep(random.uniform(0.0, 1.5))  # anywhere in the next iterations
        _train_workers(psutil.Process(launcher.pid))[1].suspend()
        started = time.monotonic()
        said += _read_until(launcher, "did not arrive", 120)
        return said, time.monotonic() - started
    finally:
        _kill_tree(launcher)


def test_a_rank_frozen_at_a_random_moment_is_named_with_where_it_froze(tmp_path: Path, token: str) -> None:
    """SIGSTOP one rank anywhere in an iteration (mid-rollout, mid-update): the other rank's watch names it, where it
    was, and the job ends as one that lost a peer."""
    command = [*_torchrun("--standalone", "--nproc_per_node=2"), *SMALL, "--agent.max-iterations", "200"]
    command += ["--collective-timeout-s", "6", "--log-root", str(tmp_path / "logs")]
    env = _env(token)
    said, waited = freeze_rank_1(command, env, after="it 2/200", startup_s=240)
    flat = " ".join(said.split())
    assert re.search(
        r"rank 1 did not arrive within 6 s \(--collective-timeout-s\): rank 1: no sign of life for \d+ s \(stopped,"
        r" frozen or gone\), last at iteration \d+, (collecting \(step \d+ of 16\)|its update|after its update)",
        flat,
    ), said
    assert waited < 40, waited
    assert_no_processes_left(token)


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("timeout@0:2", 1),  # another library's "timed out": this rank's own failure
        ("kill@1:2", 138),  # a rank gone: the rank that waited for it lost a peer
    ],
)
def test_a_rank_exits_138_only_for_a_lost_peer(tmp_path: Path, token: str, fault: str, code: int) -> None:
    """Two ranks started as a launcher of one's own would (torchrun's variables, no agent that kills the others), so
    that each rank's own exit code can be read."""
    port = _free_port()
    ranks = []
    for rank in range(2):
        env = {**_env(token), **instrument_env(fault=fault), "RANK": str(rank), "LOCAL_RANK": str(rank)}
        env.update({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        argv = [str(BIN / "train"), *SMALL, "--agent.max-iterations", "6", "--log-root", str(tmp_path / "logs")]
        ranks.append(subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True))
    errs = [proc.communicate(timeout=300)[1] for proc in ranks]
    # Rank 0: the one that raised (timeout@0), or the one that waited for the killed rank 1 (kill@1).
    assert ranks[0].returncode == code, errs[0][-3000:]
    assert_no_processes_left(token)


def test_a_slow_rank_0_plan_does_not_trip_the_collective_timeout(tmp_path: Path, token: str) -> None:
    """Rank 0's planning may download for longer than --collective-timeout-s; the other ranks wait for it on the
    job's store. Rank 0 here is made to plan 9 s late, with a collective timeout of 5 s."""
    port = _free_port()
    slow = (
        "import sys, time; import mjfleet.train.as_rank as r; plan = r.plan_this_start;"
        " r.plan_this_start = lambda *a, **k: (time.sleep(9), plan(*a, **k))[1];"
        " from mjfleet.cli.train import main; sys.argv[0] = 'train'; main()"
    )
    ranks = []
    for rank in range(2):
        env = {**_env(token), "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        args = [*SMALL, "--agent.max-iterations", "2", "--collective-timeout-s", "5", "--log-root", str(tmp_path)]
        start = [sys.executable, "-c", slow] if rank == 0 else [str(BIN / "train")]
        ranks.append(subprocess.Popen([*start, *args], env=env, stderr=subprocess.PIPE, text=True))
    errs = [proc.communicate(timeout=300)[1] for proc in ranks]
    assert [proc.returncode for proc in ranks] == [0, 0], "\n".join(e[-2000:] for e in errs)
    assert "finished at iteration 2 of 2" in " ".join(errs[0].split())
    assert_no_processes_left(token)

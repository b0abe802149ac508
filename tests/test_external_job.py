"""Reading another launcher's job (torchrun, srun) and refusing what does not fit: pure functions and the ``train``
command in this process (nothing is launched; every refusal happens before a process group or run directory)."""

from __future__ import annotations

import socket
import zlib
from pathlib import Path

import pytest

from mjfleet.cli import train
from mjfleet.errors import UsageError
from mjfleet.train.external import (
    SLURM_PORT_BASE,
    SLURM_PORT_SPAN,
    ExternalJob,
    detect_external_job,
    duplicate_gpus,
    external_device,
    tasks_on_node,
)

from .helpers import run_main

TORCHRUN = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "0",
    "MASTER_ADDR": "node-a",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "job-7",
    "TORCHELASTIC_RESTART_COUNT": "2",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
}
SRUN = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NODELIST": "node-[a-b]",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
}
LAUNCHER_VARS = (*TORCHRUN, *SRUN, "SLURM_JOBID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT", "SLURM_NTASKS")


def _job(**overrides: object) -> ExternalJob:
    fields: dict[str, object] = dict(
        launcher="torchrun",
        rank=0,
        local_rank=0,
        world_size=2,
        local_world_size=2,
        node_rank=0,
        master_addr="127.0.0.1",
        master_port=29500,
        restart_count=0,
        agent_store=True,
    )
    fields.update(overrides)
    return ExternalJob(**fields)  # type: ignore[arg-type]


def test_nothing_started_this_process() -> None:
    assert detect_external_job({}) is None
    # An sbatch script with two tasks that runs train once (mjfleet's own launcher): not a rank of anything.
    assert detect_external_job({"SLURM_JOB_ID": "1", "SLURM_NTASKS": "2", "SLURM_PROCID": "0"}) is None


def test_torchrun_variables_make_a_rank() -> None:
    job = detect_external_job(TORCHRUN)
    assert job == ExternalJob("torchrun", 1, 1, 4, 2, 0, "node-a", 29500, 2, True, key="torchrun-job-7")
    assert not job.hosts_store  # the agent hosts it
    # torchrun --max-restarts 3, its third start: one restart left, after which a failure ends the job.
    restarting = detect_external_job({**TORCHRUN, "TORCHELASTIC_MAX_RESTARTS": "3"})
    assert restarting is not None and (restarting.max_restarts, restarting.restarts_left) == (3, 1)
    assert job is not None and job.restarts_left == 0
    # A launcher that sets only RANK and WORLD_SIZE (a Kubernetes PyTorchJob pod running train directly).
    pod = detect_external_job({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "master-0", "MASTER_PORT": "23456"})
    assert pod is not None and (pod.local_rank, pod.local_world_size, pod.node_rank) == (0, 1, 0)
    assert pod.hosts_store


def test_srun_tasks_make_a_rank_meeting_on_the_first_node() -> None:
    asked: list[str] = []

    def expand(nodelist: str, flag: str) -> tuple[str, ...]:
        asked.append(nodelist)
        return ("node-a", "node-b")

    job = detect_external_job(SRUN, expand)
    port = SLURM_PORT_BASE + zlib.crc32(b"slurm-4242.0") % SLURM_PORT_SPAN
    assert job == ExternalJob("srun", 3, 1, 4, 2, 1, "node-a", port, 0, False, key="slurm-4242.0")
    assert 15000 <= port < 32768  # below Linux's ephemeral ports
    assert asked == ["node-[a-b]"]
    given = detect_external_job({**SRUN, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"}, expand)
    assert given is not None and (given.master_addr, given.master_port) == ("10.0.0.1", 1234)
    assert asked == ["node-[a-b]"]  # nothing expanded when MASTER_ADDR is given
    other_step = detect_external_job({**SRUN, "SLURM_STEP_ID": "1"}, expand)
    assert other_step is not None and other_step.master_port != port  # two steps of one job meet apart
    assert tasks_on_node("2(x3),1", 3) == 1 and tasks_on_node("4", 0) == 4 and tasks_on_node("x", 0) is None


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 is set but RANK is not"),
        ({"RANK": "0"}, "RANK=0 is set but WORLD_SIZE is not"),
        ({"LOCAL_RANK": "0"}, "LOCAL_RANK=0 is set but RANK is not"),
        (
            {k: v for k, v in TORCHRUN.items() if k != "LOCAL_WORLD_SIZE"},
            "LOCAL_RANK=1 is set but LOCAL_WORLD_SIZE is not: every rank needs how many ranks share its node",
        ),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 is out of range for WORLD_SIZE=2"),
        ({"RANK": "one", "WORLD_SIZE": "2"}, "RANK='one' is not an integer"),
        ({**TORCHRUN, "LOCAL_RANK": "2"}, "LOCAL_RANK=2 is out of range for LOCAL_WORLD_SIZE=2"),
        ({**TORCHRUN, "LOCAL_WORLD_SIZE": "8"}, "LOCAL_WORLD_SIZE=8 must be between 1 and WORLD_SIZE=4"),
        ({"RANK": "1", "WORLD_SIZE": "2"}, "MASTER_ADDR and MASTER_PORT are not set"),
        ({**TORCHRUN, "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a port number"),
        ({**SRUN, "SLURM_PROCID": "4"}, "SLURM_PROCID=4 is out of range for SLURM_STEP_NUM_TASKS=4"),
    ],
)
def test_contradicting_variables_are_refused(env: dict[str, str], says: str) -> None:
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        detect_external_job(env, lambda nodelist, flag: ("node-a",))


def test_each_rank_takes_the_gpu_of_its_local_rank() -> None:
    job = _job(rank=3, local_rank=1, world_size=4)
    picked = external_device(job, "auto", 2, {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert (picked.devices, picked.labels) == (("cuda:1",), ("3",))
    assert external_device(job, None, 2, {}).devices == ("cpu",)
    cpu = external_device(job, "auto", 0, {})
    assert cpu.devices == ("cpu",) and cpu.notice is not None
    # srun --gpus-per-task 1: each task sees its own GPU as cuda:0.
    assert external_device(_job(launcher="srun", local_rank=1), "auto", 1, {}).devices == ("cuda:0",)


def test_gpu_choices_that_belong_to_the_launcher_are_refused() -> None:
    with pytest.raises(UsageError, match=r"--nproc_per_node 1\b"):
        external_device(_job(local_rank=1), "auto", 1, {})  # two ranks, one GPU: NCCL's "Duplicate GPU"
    with pytest.raises(UsageError, match="--gpu-ids all: under torchrun every process is one rank"):
        external_device(_job(), "all", 2, {})
    with pytest.raises(UsageError, match="--gpu-ids 0 1"):
        external_device(_job(), (0, 1), 2, {})
    with pytest.raises(UsageError, match="2 ranks run on this node"):
        external_device(_job(), (1,), 2, {})
    assert external_device(_job(local_world_size=1, world_size=1), (1,), 2, {}).devices == ("cuda:1",)


def test_two_ranks_on_one_gpu_are_named() -> None:
    assert duplicate_gpus([("a", "GPU-1"), ("a", "GPU-2"), ("b", "GPU-1")]) is None
    said = duplicate_gpus([("a", "GPU-1"), ("a", "GPU-1")])
    assert said is not None and said.startswith("ranks 0 and 1 share one GPU on a")
    assert duplicate_gpus([("a", ""), ("a", "")]) is None  # CPU ranks


@pytest.fixture
def launched_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in LAUNCHER_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--cpu-workers", "2"], "--cpu-workers is for mjfleet's own launcher, but torchrun started this process"),
        (["--hostnames", "a", "b"], "--hostnames is for mjfleet's own launcher"),
        (["--max-restarts", "2"], "torchrun --max-restarts restarts the job"),
        (["--agent-timeout-s", "5"], "--agent-timeout-s is for mjfleet's own launcher"),
        (["--workers-per-gpu", "2"], "--workers-per-gpu is for mjfleet's own launcher"),
        (["--launcher", "torchrunx"], "--launcher torchrunx is for mjfleet's own launcher"),
        (["--gpu-ids", "all"], "--gpu-ids all: under torchrun every process is one rank"),
    ],
)
def test_own_launcher_options_under_torchrun_are_one_line_exit_2(
    launched_env: pytest.MonkeyPatch, tmp_path: Path, flags: list[str], says: str
) -> None:
    for name, value in TORCHRUN.items():
        launched_env.setenv(name, value)
    code, _, err = run_main(train.main, ["cartpole-balance", "--log-root", str(tmp_path), *flags])
    assert code == 2, err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 is set but RANK is not"),
        ({"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "x", "MASTER_PORT": "1"}, "RANK=3 is out of range"),
    ],
)
def test_bad_rank_variables_are_one_line_exit_2(
    launched_env: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], says: str
) -> None:
    for name, value in env.items():
        launched_env.setenv(name, value)
    code, _, err = run_main(train.main, ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path)])
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def _rank_of_two(env: pytest.MonkeyPatch, rank: int) -> int:
    """Make this process rank ``rank`` of a job of two meeting at a local port nothing listens on; that port."""
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in {
        "RANK": str(rank),
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }.items():
        env.setenv(name, value)
    return port


def test_a_master_nobody_answers_is_one_line_and_the_code_a_launcher_retries(
    launched_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Rank 0 late or rescheduled (a pod of a PyTorchJob): the launcher retries 138, never 2.
    port = _rank_of_two(launched_env, rank=1)
    argv = ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path), "--rendezvous-timeout-s", "1"]
    code, _, err = run_main(train.main, argv)
    assert code == 138, err
    assert f"nobody answers at MASTER_ADDR=127.0.0.1 MASTER_PORT={port} after 1 s" in err
    assert "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_ranks_that_do_not_all_join_end_after_the_rendezvous_timeout(
    launched_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Rank 0 alone of two: it waited for the collective timeout (750 s by default), naming the rendezvous one.
    import time

    _rank_of_two(launched_env, rank=0)
    argv = ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path), "--rendezvous-timeout-s", "2"]
    began = time.monotonic()
    code, _, err = run_main(train.main, argv)
    assert code == 138, err
    assert time.monotonic() - began < 30
    assert "not every rank of the 2 joined within 2 s (--rendezvous-timeout-s): 1 arrived" in err


def test_dry_run_under_torchrun_names_the_rank(launched_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in TORCHRUN.items():
        launched_env.setenv(name, value)
    code, out, err = run_main(
        train.main, ["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path), "--dry-run"]
    )
    assert code == 0, err
    assert "rank 1 of 4 (torchrun; node 0, local rank 1 of 2) on cpu" in out
    # mjlab's recipe flag is accepted as it is written there.
    code, _, err = run_main(train.main, ["cartpole-balance", "--gpu-ids", "None", "--distributed", "True", "--dry-run"])
    assert code == 0, err


@pytest.mark.parametrize(
    ("error", "code", "says"),
    [
        # NCCL's own error: the traceback is the report, with the remedies named after it.
        ("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error", 1, "hint:"),
        # A lost peer: one line, and the code a launcher retries.
        ("peer", 138, "lost another rank of the job: DistNetworkError: Connection closed by peer"),
        # Another library's timeout is this rank's own failure: not the code a launcher retries.
        ("timeout", 1, "rank 0 failed"),
        # Bad input found once the ranks met (rank 0's refusal, shared): its one line, and the rank exits at once too.
        ("usage", 2, "error: --run-id exp trains other settings"),
    ],
)
def test_a_failing_rank_exits_at_once_with_a_code_its_launcher_can_act_on(
    launched_env: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    error: str,
    code: int,
    says: str,
) -> None:
    for name, value in {**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0"}.items():
        launched_env.setenv(name, value)

    def fails(*args: object, **kwargs: object) -> None:
        import torch.distributed as dist

        if error == "peer":
            raise dist.DistNetworkError("Connection closed by peer [127.0.0.1]:41234")
        if error == "timeout":
            raise TimeoutError("HTTPSConnectionPool(host='api.wandb.ai', port=443): Read timed out.")
        if error == "usage":
            raise UsageError("--run-id exp trains other settings")
        raise RuntimeError(error)

    exited_at_once: list[int] = []

    def exit_now(code: int) -> None:  # the real one ends the process at once, pytest with it
        exited_at_once.append(code)
        raise SystemExit(code)

    launched_env.setattr(train, "run", fails)
    launched_env.setattr(train, "hard_exit", exit_now)
    with pytest.raises(SystemExit) as exited:
        train.main(["cartpole-balance", "--gpu-ids", "None", "--log-root", str(tmp_path)])
    assert exited.value.code == code
    assert exited_at_once == [code]  # not through the interpreter's exit: NCCL or gloo teardown can hang there
    err = " ".join(capsys.readouterr().err.split())
    assert says in err
    if error.startswith("NCCL"):
        assert "NCCL_P2P_DISABLE" in err and "NCCL_DEBUG=INFO" in err
    elif code == 1:
        assert "Read timed out" in err and "NCCL_P2P_DISABLE" not in err
    else:
        assert "Traceback" not in err


def test_a_rank_that_reaches_another_jobs_store_refuses(tmp_path: Path) -> None:
    import datetime

    import torch.distributed as dist

    from mjfleet.train import as_rank

    owner = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
        "127.0.0.1", 0, 2, is_master=True, timeout=datetime.timedelta(seconds=5), wait_for_workers=False
    )
    owner.set(as_rank.JOB_KEY, "slurm-1.0")  # another job's rank 0 holds this port
    job = _job(rank=1, master_port=owner.port, agent_store=False, key="slurm-2.0")
    with pytest.raises(UsageError, match=r"is the rendezvous store of another job \(slurm-1\.0\), not of this one"):
        as_rank._job_store(job, timeout_s=5)
    mine = _job(rank=1, master_port=owner.port, agent_store=False, key="slurm-1.0")
    assert as_rank._job_store(mine, timeout_s=5) is not None


def test_distributed_without_a_launcher_says_it_is_ignored(launched_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, _, err = run_main(
        train.main,
        ["cartpole-balance", "--gpu-ids", "None", "--distributed", "True", "--log-root", str(tmp_path), "--dry-run"],
    )
    assert code == 0, err
    assert "--distributed is ignored: no launcher started this process as one rank of a job" in " ".join(err.split())


def test_rank_0_whose_store_port_is_taken_says_so_in_one_line() -> None:
    import socket

    from mjfleet.train import as_rank

    with socket.socket() as taken:  # another process listens on the port the job names
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        job = _job(rank=0, master_port=port, agent_store=False, key="slurm-1.0")
        with pytest.raises(UsageError, match=rf"MASTER_PORT={port} is taken on this host \(127\.0\.0\.1\) by another"):
            as_rank._job_store(job, timeout_s=5)


def test_ranks_that_would_train_some_on_a_gpu_and_some_on_the_cpu_refuse_together() -> None:
    """``--gpu-ids auto`` where one host has no GPU: its rank would join with gloo, the others with NCCL, and the
    group would never form (a wait of the collective timeout, then a message about the network)."""
    import torch.distributed as dist

    from mjfleet.train import as_rank

    store = dist.HashStore()  # pyright: ignore[reportPrivateImportUsage]
    store.add("on_gpu", 1)  # the other rank, which arrived first, found a GPU
    store.add("arrived", 1)
    with pytest.raises(UsageError, match=r"1 of the job's 2 ranks train on a GPU and the others on the CPU; this one"):
        as_rank._wait_for_ranks(store, 2, timeout_s=5, on_gpu=False)
    agreed = dist.HashStore()  # pyright: ignore[reportPrivateImportUsage]
    agreed.add("arrived", 1)
    as_rank._wait_for_ranks(agreed, 2, timeout_s=5, on_gpu=False)  # both on the CPU

"""The NCCL remedies a failure report names (mjfleet.runtime.nccl.nccl_hint), on the errors NCCL really gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from mjfleet.launch.diagnosis import build_failure
from mjfleet.launch.launcher import LaunchPlan
from mjfleet.launch.worker_logs import write_report
from mjfleet.runtime.nccl import nccl_hint

# As torch and NCCL print them (paths and versions vary).
SHM = (
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
    "3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
    "Last error:\nError while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)"
)
INTERNAL = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, internal"
    " error - please report this issue to the NCCL developers, NCCL version 2.20.5\n"
    "ncclInternalError: Internal check failed.\nLast error:\nP2P is disabled between connected GPUs 0 and 1"
)
DUPLICATE_GPU = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970,"
    " invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
    "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
    "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"
)
WATCHDOG = (
    "[rank1]:[E1125 15:24:14.123456 1234 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation"
    " timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600023"
    " milliseconds before timing out."
)


@pytest.mark.parametrize(
    "error",
    [
        SHM,
        INTERNAL,
        WATCHDOG,
        "RuntimeError: NCCL Error 2: unhandled system error",  # torch 1.x
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "node1:812:901 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these"
        " two devices'",
    ],
)
def test_nccl_failures_name_the_workstation_remedies(error: str) -> None:
    hint = nccl_hint(error)
    assert hint is not None
    remedies = ("NCCL_P2P_DISABLE=1", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE=1", "NCCL_IB_DISABLE=1", "NCCL_DEBUG=INFO")
    for remedy in remedies:
        assert remedy in hint, hint
    assert "\n" not in hint and len(hint) < 400


def test_two_ranks_on_one_gpu_get_their_own_advice() -> None:
    hint = nccl_hint(DUPLICATE_GPU)
    assert hint is not None
    assert "two ranks on one GPU" in hint and "NCCL_P2P_DISABLE" not in hint  # no transport setting helps there


@pytest.mark.parametrize(
    "error",
    [
        "RuntimeError: Connection closed by peer [10.0.0.2]:41234",  # gloo
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "InjectedFaultError: injected fault on rank 1 at iteration 2",
        "UsageError: NCCL_SOCKET_IFNAME=eth9: no interface eth9 on this machine",  # names NCCL, is no NCCL failure
        "node1:812:812 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",  # NCCL_DEBUG=INFO output
        "",
    ],
)
def test_other_errors_get_no_hint(error: str) -> None:
    assert nccl_hint(error) is None


def _failure(tmp_path: Path, error: str, traceback: list[str]) -> str:
    write_report(tmp_path, {"kind": "started", "rank": 1, "pid": 101, "time": 1.0})
    report = {"kind": "failure", "rank": 1, "time": 2.0, "error": error, "traceback": traceback}
    write_report(tmp_path, {**report, "peer_failure": False, "retryable": True})
    plan = LaunchPlan(device_kind="cuda", workers_per_host=2)
    return str(build_failure(RuntimeError("exit code 1"), plan, tmp_path, None))


def test_the_failure_report_of_an_nccl_error_ends_with_the_hint(tmp_path: Path) -> None:
    error, *rest = SHM.splitlines()
    message = _failure(tmp_path, error, ["Traceback (most recent call last):", *rest])
    assert message.startswith("worker rank 1 (localhost, local rank 1) failed: torch.distributed.DistBackendError")
    assert message.splitlines()[-1].startswith("  hint: NCCL failed; on workstation GPUs try NCCL_P2P_DISABLE=1")


def test_the_failure_report_of_other_errors_has_no_hint(tmp_path: Path) -> None:
    message = _failure(tmp_path, "ValueError: bad observation shape", ["Traceback (most recent call last):"])
    assert "hint:" not in message and "NCCL" not in message

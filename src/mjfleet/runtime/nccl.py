"""What NCCL (the GPU process groups' backend) failures look like, and their known remedies.

Here rather than in the launcher: a process group fails the same way however its ranks were started.
"""

from __future__ import annotations

import re

# What NCCL failures look like in a Python error or traceback: torch's "NCCL error in: ...", NCCL's own result
# names (ncclSystemError, ncclInternalError, ...), its process-group classes (the watchdog's timeouts) and warnings.
# A bare "NCCL" is not enough: NCCL_DEBUG=INFO makes every log line mention it.
_NCCL_ERROR_RE = re.compile(
    r"NCCL (?:error|failure|WARN)|\bnccl[A-Z]\w*(?:Error|Usage|Argument)\b|ProcessGroupNCCL|WorkNCCL",
    re.IGNORECASE,
)
_NCCL_DUPLICATE_GPU_RE = re.compile(r"Duplicate GPU detected", re.IGNORECASE)


def nccl_hint(error_text: str) -> str | None:
    """The known remedies when ``error_text`` (an error line or traceback) is an NCCL failure; None otherwise.

    For every path that reports a worker's error: the launcher's failure report, and any other. Workstation GPUs fail
    in NCCL's transports (peer-to-peer over PCIe, shared memory, InfiniBand probing) more often than in training code.
    """
    if _NCCL_DUPLICATE_GPU_RE.search(error_text):
        return (
            "NCCL refuses two ranks on one GPU: start at most as many ranks per node as it has visible GPUs, so"
            " that each rank gets its own cuda:<LOCAL_RANK>"
        )
    if not _NCCL_ERROR_RE.search(error_text):
        return None
    return (
        "NCCL failed; on workstation GPUs try NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=NVL) where peer-to-peer over"
        " PCIe hangs or is unsupported, NCCL_SHM_DISABLE=1 where /dev/shm is small (containers),"
        " NCCL_IB_DISABLE=1 without working InfiniBand; NCCL_DEBUG=INFO shows what NCCL tried"
        " (docs/distributed.md, NCCL on workstation GPUs)"
    )

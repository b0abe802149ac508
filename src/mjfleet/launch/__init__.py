"""Device selection and multi-worker launching (torchrunx) for training.

Importing this package is cheap: torch and torchrunx are imported only when a launch or a
process group needs them.
"""

from mjfleet.launch.context import (
    DistributedContext,
    destroy_process_group,
    init_process_group,
    process_group,
)
from mjfleet.launch.devices import DeviceSelection, GpuRequest, parse_gpu_ids, select_devices, visible_gpus
from mjfleet.launch.launcher import LaunchPlan, WorkerFailure, launch, resolve_worker_log_dir
from mjfleet.launch.worker import run_worker

__all__ = [
    "DeviceSelection",
    "DistributedContext",
    "GpuRequest",
    "LaunchPlan",
    "WorkerFailure",
    "destroy_process_group",
    "init_process_group",
    "launch",
    "parse_gpu_ids",
    "process_group",
    "resolve_worker_log_dir",
    "run_worker",
    "select_devices",
    "visible_gpus",
]

"""Train as one rank of a job another launcher started (torchrun, srun): meet the other ranks, agree on one run
directory, then the same :func:`~mjfleet.train.worker.train_worker` as every other way of starting workers."""

from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path

import torch
import torch.distributed as dist

from mjfleet.errors import UsageError
from mjfleet.rl.records import WorkerResult
from mjfleet.runtime.context import DistributedContext, process_group
from mjfleet.runtime.stop import StopRequest
from mjfleet.train.api import Prepared, open_run_dir
from mjfleet.train.external import ExternalJob, duplicate_gpus, this_host, wait_for_rendezvous
from mjfleet.train.start import StartPoint
from mjfleet.train.worker import train_worker

logger = logging.getLogger("mjfleet.train")


def train_as_rank(prepared: Prepared, stop: StopRequest | None) -> WorkerResult:
    """Join the job's process group and train this rank; rank 0 alone creates (or reopens) the run directory."""
    job = prepared.external
    assert job is not None
    cfg = prepared.cfg
    ctx = DistributedContext(
        rank=job.rank,
        local_rank=job.local_rank,
        world_size=job.world_size,
        local_world_size=job.local_world_size,
        node_rank=job.node_rank,
        device=prepared.selection.devices[0],
        is_main=job.rank == 0,
    )
    os.environ.update(job.rendezvous_env())
    wait_for_rendezvous(job, cfg.rendezvous_timeout_s)
    with process_group(ctx, cfg.collective_timeout_s, _store(job, cfg.collective_timeout_s)):
        placements = _roll_call(ctx)
        run_dir, start = _agree_on_run(prepared, ctx)
        if ctx.is_main:
            if prepared.selection.notice:
                logger.info(prepared.selection.notice)
            hosts = sorted({host for host, _ in placements})
            logger.info(
                "%s started %d rank%s on %d node%s (%s); this is %s on %s",
                job.launcher,
                job.world_size,
                "s" if job.world_size > 1 else "",
                len(hosts),
                "s" if len(hosts) > 1 else "",
                ", ".join(hosts),
                job.describe(),
                ctx.device,
            )
        return train_worker(cfg, run_dir, ctx, start, stop.poll if stop is not None else None)


def _store(job: ExternalJob, timeout_s: float) -> object | None:
    """The job's rendezvous store, its keys under a prefix of this start: torchrun's agent keeps its store across
    restarts, and the restarted ranks would otherwise read the dead ranks' addresses from it."""
    if job.world_size == 1 or job.master_addr is None or job.master_port is None:
        return None
    store = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage] (public, documented)
        job.master_addr,
        job.master_port,
        job.world_size,
        is_master=job.hosts_store,
        timeout=datetime.timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )
    return dist.PrefixStore(f"mjfleet/start-{job.restart_count}", store)  # pyright: ignore[reportPrivateImportUsage]


def _roll_call(ctx: DistributedContext) -> list[tuple[str, str]]:
    """Every rank's ``(host, GPU UUID)``; refuses (on every rank alike) two NCCL ranks on one GPU before NCCL does.

    Travels through the store-backed gloo group: NCCL itself would fail on a shared GPU with a less clear message.
    """
    uuid = str(torch.cuda.get_device_properties(ctx.device).uuid) if ctx.device_kind == "cuda" else ""
    mine = (this_host(), uuid)
    if not ctx.is_distributed:
        return [mine]
    gathered: list[tuple[str, str] | None] = [None] * ctx.world_size
    if ctx.backend == "nccl":
        group = dist.new_group(backend="gloo")
        assert isinstance(group, dist.ProcessGroup)
        dist.all_gather_object(gathered, mine, group=group)
        dist.destroy_process_group(group)
    else:
        dist.all_gather_object(gathered, mine)
    placements = [p for p in gathered if p is not None]
    problem = duplicate_gpus(placements) if ctx.backend == "nccl" else None
    if problem is not None:
        raise UsageError(problem)
    return placements


def _agree_on_run(prepared: Prepared, ctx: DistributedContext) -> tuple[Path, StartPoint]:
    """Rank 0 creates the run directory (or reopens the one its identity continues) and sends it to every rank,
    with where training starts; a problem rank 0 finds there stops every rank with the same message."""
    payload: tuple[str, Path | StartPoint | str, StartPoint | None]
    if ctx.is_main:
        try:
            payload = ("ok", open_run_dir(prepared), prepared.start)
        except UsageError as e:
            payload = ("error", str(e), None)
    else:
        payload = ("", "", None)
    if ctx.is_distributed:
        box: list[object] = [payload]
        dist.broadcast_object_list(box, src=0, device=torch.device(ctx.device) if ctx.backend == "nccl" else None)
        payload = box[0]  # type: ignore[assignment]
    status, run_dir, start = payload
    if status != "ok":
        raise UsageError(str(run_dir))
    assert isinstance(run_dir, Path) and isinstance(start, StartPoint)
    return run_dir, start

"""Train as one rank of a job another launcher started (torchrun, srun): meet the other ranks, agree on one run
directory, then the same :func:`~mjfleet.train.worker.train_worker` as every other way of starting workers."""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from mjfleet.errors import UsageError
from mjfleet.rl.records import WorkerResult
from mjfleet.runtime.context import DistributedContext, destroy_process_group, init_process_group
from mjfleet.runtime.stop import StopRequest
from mjfleet.train.external import ExternalJob, duplicate_gpus, this_host, wait_for_rendezvous
from mjfleet.train.plan import Prepared, open_run_dir
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
    # Exported although the group gets its own store: without them srun's ranks never met (tried; torch reads them).
    os.environ.update(job.rendezvous_env())
    wait_for_rendezvous(job, cfg.rendezvous_timeout_s)
    with _joined(ctx, job, cfg.collective_timeout_s, cfg.rendezvous_timeout_s):
        placements = _roll_call(ctx)
        run_dir, start = _agree_on_run(prepared, ctx)
        if ctx.is_main:
            if prepared.selection.notice:
                logger.info(prepared.selection.notice)
            nodes = {node: host for host, _, node in sorted(placements, key=lambda p: p[2], reverse=True)}
            logger.info(
                "%s started %d rank%s on %d node%s (%s); this is %s on %s",
                job.launcher,
                job.world_size,
                "s" if job.world_size > 1 else "",
                len(nodes),
                "s" if len(nodes) > 1 else "",
                ", ".join(f"node {node}: {host}" for node, host in sorted(nodes.items())),
                job.describe(),
                ctx.device,
            )
        return train_worker(cfg, run_dir, ctx, start, stop.poll if stop is not None else None)


@contextlib.contextmanager
def _joined(ctx: DistributedContext, job: ExternalJob, timeout_s: float, rendezvous_s: float) -> Iterator[None]:
    """The job's process group; ranks that do not all arrive within ``rendezvous_s`` (one failed to start, or was
    refused its input) end every waiting rank with one line instead of a wait of ``timeout_s``."""
    try:
        created = init_process_group(ctx, timeout_s, _store(job, rendezvous_s))
    except (dist.DistError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(
            f"not every rank of the {job.world_size} joined within {rendezvous_s:g} s (--rendezvous-timeout-s): {first}"
        ) from None
    yield
    if created:  # on an error the group stays: tearing it down first would hide this rank's error from the others
        destroy_process_group()


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


def _roll_call(ctx: DistributedContext) -> list[tuple[str, str, int]]:
    """Every rank's ``(host, GPU UUID, node rank)``; refuses (on every rank alike) two NCCL ranks on one GPU before
    NCCL does.

    Travels through the store-backed gloo group: NCCL itself would fail on a shared GPU with a less clear message.
    """
    uuid = str(torch.cuda.get_device_properties(ctx.device).uuid) if ctx.device_kind == "cuda" else ""
    mine = (this_host(), uuid, ctx.node_rank)
    if not ctx.is_distributed:
        return [mine]
    gathered: list[tuple[str, str, int] | None] = [None] * ctx.world_size
    if ctx.backend == "nccl":
        group = dist.new_group(backend="gloo")
        assert isinstance(group, dist.ProcessGroup)
        dist.all_gather_object(gathered, mine, group=group)
        dist.destroy_process_group(group)
    else:
        dist.all_gather_object(gathered, mine)
    placements = [p for p in gathered if p is not None]
    problem = duplicate_gpus([(host, gpu) for host, gpu, _ in placements]) if ctx.backend == "nccl" else None
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

# pyright: reportPrivateImportUsage=false
# (torch.distributed's Store, TCPStore and PrefixStore are public and documented but not re-exported in its stubs.)
"""Train as one rank of a job another launcher started (torchrun, srun): meet the other ranks, let rank 0 plan the
start and share it, then the same :func:`~mjfleet.train.worker.train_worker` as every other way of starting
workers."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import pickle
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from mjfleet.errors import FatalTrainingError, PeerFailed, RanksMissing, UsageError, exception_line
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.runs.lock import release_run
from mjfleet.runtime.context import DistributedContext, process_group
from mjfleet.runtime.peers import is_own_failure
from mjfleet.runtime.stop import StopRequest
from mjfleet.runtime.watch import group_timeout
from mjfleet.train.external import ExternalJob, duplicate_gpus, this_host, wait_for_rendezvous
from mjfleet.train.plan import Prepared, RunFailedBefore, RunStart, open_run_dir, plan_this_start, report_nothing_left
from mjfleet.train.worker import train_worker

logger = logging.getLogger("mjfleet.train")


def train_as_rank(
    prepared: Prepared, stop: StopRequest | None, started: Callable[[Path], object] | None = None
) -> WorkerResult | None:
    """Join the job's process group and train this rank; rank 0 alone plans the start and creates (or reopens) the
    run directory. None: the run this start continues had already ended."""
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
    store = _job_store(job, cfg.rendezvous_timeout_s)
    with _joined(ctx, job, group_timeout(cfg.collective_timeout_s), cfg.rendezvous_timeout_s, store) as group_store:
        placements = _roll_call(ctx)
        run = _agree_on_run(prepared, ctx, _invocation(job, store), group_store)
        if started is not None:
            started(run.run_dir)
        if run.nothing_left:
            if ctx.is_main:
                report_nothing_left(run, prepared.cfg.env)
            return None
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
        try:
            return train_worker(cfg, run.run_dir, ctx, run.start, stop.poll if stop is not None else None, group_store)
        finally:
            release_run(run.run_dir)  # rank 0's (the others hold none)


@contextlib.contextmanager
def _joined(
    ctx: DistributedContext, job: ExternalJob, timeout_s: float, rendezvous_s: float, store: dist.Store | None
) -> Iterator[dist.Store | None]:
    """The job's process group (:func:`~mjfleet.runtime.context.process_group`: destroyed on a normal exit, left
    alone on an error, which tearing it down first would hide from the other ranks), yielding its store (None for
    one rank); ranks that do not all arrive within ``rendezvous_s`` (one failed to start, or was refused its input)
    end every waiting rank with one line instead of a wait of ``timeout_s``."""
    prefixed: dist.Store | None = None
    if store is not None:
        # torchrun's agent keeps its store across restarts: the restarted ranks would otherwise read the dead
        # ranks' addresses from it.
        prefixed = dist.PrefixStore(f"mjfleet/{job.key}/start-{job.restart_count}", store)
    if prefixed is not None:
        _wait_for_ranks(prefixed, job.world_size, rendezvous_s, on_gpu=ctx.device_kind == "cuda")
    with contextlib.ExitStack() as group:
        try:
            group.enter_context(process_group(ctx, timeout_s, prefixed))
        except (dist.DistError, RuntimeError) as e:  # every rank had arrived: the group itself failed (NCCL, ...)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise PeerFailed(
                f"the {job.world_size} ranks met but could not set up their process group: {first}"
            ) from None
        yield prefixed


def _wait_for_ranks(store: dist.Store, world_size: int, timeout_s: float, on_gpu: bool) -> None:
    """Return once every rank has arrived at ``store``; :class:`RanksMissing` after ``timeout_s`` (the group's own
    setup would wait for the collective timeout instead); :class:`UsageError` on every rank where some train on a GPU
    and others on the CPU (``--gpu-ids auto`` on hosts of which some have none: NCCL and gloo ranks never meet)."""
    store.add("on_gpu", int(on_gpu))  # before arriving: every count is in once all have arrived
    arrived = store.add("arrived", 1)
    deadline = time.monotonic() + timeout_s
    while arrived < world_size:
        if time.monotonic() >= deadline:
            raise RanksMissing(
                f"not every rank of the {world_size} joined within {timeout_s:g} s (--rendezvous-timeout-s):"
                f" {arrived} arrived"
            )
        time.sleep(0.05)
        arrived = store.add("arrived", 0)
    gpu_ranks = store.add("on_gpu", 0)
    if 0 < gpu_ranks < world_size:
        raise UsageError(
            f"{gpu_ranks} of the job's {world_size} ranks train on a GPU and the others on the CPU; this one, on"
            f" {this_host()}, on {'a GPU' if on_gpu else 'the CPU (no GPU visible)'}: give every host a GPU, or"
            " --gpu-ids None to train all on the CPU"
        )


def _job_store(job: ExternalJob, timeout_s: float) -> dist.Store | None:
    """The job's rendezvous store (rank 0's, or torchrun's own), checked to belong to this job: two jobs that chose
    one address and port would otherwise wait for each other's ranks until the rendezvous timeout."""
    if job.master_addr is None or job.master_port is None or (job.world_size == 1 and not job.agent_store):
        return None
    try:
        store = dist.TCPStore(
            job.master_addr,
            job.master_port,
            job.world_size,
            is_master=job.hosts_store,
            timeout=datetime.timedelta(seconds=timeout_s),
            wait_for_workers=False,
        )
    except dist.DistNetworkError as e:
        if not (job.hosts_store and is_own_failure(e)):
            raise
        raise UsageError(
            f"MASTER_PORT={job.master_port} is taken on this host ({job.master_addr}) by another process: give this"
            " job a port of its own (MASTER_PORT)"
        ) from None
    owner = store.compare_set(JOB_KEY, "", job.key).decode()
    if owner != job.key:
        raise UsageError(
            f"MASTER_ADDR={job.master_addr} MASTER_PORT={job.master_port} is the rendezvous store of another job"
            f" ({owner}), not of this one ({job.key}): give this job a port of its own (MASTER_PORT)"
        )
    return store


JOB_KEY = "mjfleet/job"
"""The store key that names the job owning it (see :func:`_job_store`)."""
PLAN_KEY = "plan"
"""Rank 0's plan of the start, in the job's store (per start: the store is prefixed with the restart count)."""
INVOCATION_KEY = "mjfleet/invocation"
"""Under torchrun's static rendezvous: a token of this torchrun invocation, kept in its store across restarts."""


def _invocation(job: ExternalJob, store: dist.Store | None) -> str | None:
    """The token that tells this torchrun invocation from the next under a static rendezvous (whose run id is
    ``none`` for all of them): the first rank of its first start leaves one in torchrun's store, which its restarts
    find and a new invocation (a new store) does not."""
    if not job.static_rendezvous or store is None or not job.agent_store:
        return None
    return store.compare_set(INVOCATION_KEY, "", uuid.uuid4().hex[:12]).decode()


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


PLAN_WAIT_S = 3600.0
"""How long the other ranks wait for rank 0's plan. Planning may download (Menagerie's files, a ``wandb:``
checkpoint), so they wait on the job's store, not in a collective that ``--collective-timeout-s`` would end."""


def _agree_on_run(
    prepared: Prepared, ctx: DistributedContext, invocation: str | None, store: dist.Store | None
) -> RunStart:
    """Rank 0 plans the start (resolves ``--resume``, downloads a ``wandb:`` checkpoint, brings the task's files,
    finds the run to continue) and creates or reopens the run directory; every rank gets the result. A problem rank
    0 finds there stops every rank with the same message, none left waiting."""
    payload: tuple[str, RunStart | str]
    if ctx.is_main:
        try:
            run = plan_this_start(prepared.cfg, prepared.external, invocation)
            if not run.nothing_left:  # shared with the ranks below: a run started meanwhile may have taken its name
                run = dataclasses.replace(run, run_dir=open_run_dir(run, movable=True))
            payload = ("ok", run)
        except UsageError as e:
            payload = ("usage", str(e))
        except FatalTrainingError as e:
            payload = ("fatal", str(e))
        except Exception as e:
            payload = ("error", exception_line(e))
            _share(payload, ctx, store)
            raise
    else:
        payload = ("", "")
    status, value = _share(payload, ctx, store)
    if status == "ok":
        assert isinstance(value, RunStart)
        return value
    message = str(value)
    if status == "usage":
        raise UsageError(message)
    if status == "fatal":
        raise RunFailedBefore(message)
    raise PeerFailed(f"rank 0 could not plan the run: {message}")


def _share(
    payload: tuple[str, RunStart | str], ctx: DistributedContext, store: dist.Store | None
) -> tuple[str, RunStart | str]:
    """Rank 0's ``payload`` on every rank: through the job's store (waiting up to :data:`PLAN_WAIT_S`), else in a
    collective."""
    if not ctx.is_distributed:
        return payload
    if store is not None:
        if ctx.is_main:
            store.set(PLAN_KEY, pickle.dumps(payload))  # pyright: ignore[reportArgumentType]
            return payload
        store.wait([PLAN_KEY], datetime.timedelta(seconds=PLAN_WAIT_S))
        return pickle.loads(store.get(PLAN_KEY))
    box: list[object] = [payload]
    dist.broadcast_object_list(box, src=0, device=torch.device(ctx.device) if ctx.backend == "nccl" else None)
    return box[0]  # type: ignore[return-value]

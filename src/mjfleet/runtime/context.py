"""Who am I inside a launched run: rank, device, and the process group.

torchrunx (with ``backend=None``) only sets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/
``LOCAL_WORLD_SIZE``/``GROUP_RANK``/``MASTER_ADDR``/``MASTER_PORT``; the worker initialises the
process group itself, exactly once, through :func:`init_process_group`.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Literal

from mjfleet.errors import UsageError

logger = logging.getLogger(__name__)

DEFAULT_PG_TIMEOUT_S = 600.0

PG_TIMEOUT_ENV = "MJFLEET_PG_TIMEOUT_S"
"""Process-group (collective) timeout in seconds, set for launched workers by the launcher."""

MASTER_ADDR_ENV = "MJFLEET_MASTER_ADDR"
"""Routable address of the first host, set by the launcher when hosts are remote; it replaces torchrunx's
``MASTER_ADDR`` (the first agent's ``getfqdn()``, often ``localhost``, which other hosts resolve to themselves)."""

DEVICE_KIND_ENV = "MJFLEET_DEVICE_KIND"
"""Set by :func:`mjfleet.launch.launcher.launch` so workers know whether they train on GPUs."""

WORKERS_PER_DEVICE_ENV = "MJFLEET_WORKERS_PER_DEVICE"
"""Set by the launcher when several workers share each GPU (``--workers-per-gpu``): ``LOCAL_RANK`` k uses
``cuda:<k // N>``."""


def env_int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    """An integer variable of ``env``; ``default`` when unset (None: it must be set). One-line UsageError otherwise."""
    value = env.get(name, "").strip()
    if not value:
        if default is None:
            raise UsageError(f"{name} is not set")
        return default
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not an integer") from None


@dataclass(frozen=True)
class Ranks:
    """A process's place among the processes of a job, as a launcher's variables say it."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0

    @classmethod
    def from_torchrun_env(cls, env: Mapping[str, str]) -> Ranks:
        """``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` (torchrun's, torchrunx's and
        most launchers'; all unset: one process), checked against each other. Raises :class:`UsageError`."""
        if not any(env.get(name, "").strip() for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
            return cls()
        for name, other in (("WORLD_SIZE", "RANK"), ("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "RANK")):
            if env.get(name, "").strip() and not env.get(other, "").strip():
                raise UsageError(
                    f"{name}={env[name]} is set but {other} is not: a launcher that starts train as one of several"
                    f" processes sets RANK and WORLD_SIZE together (torchrun does); unset {name} to train on its own"
                )
        rank, world = env_int(env, "RANK"), env_int(env, "WORLD_SIZE")
        local_rank = env_int(env, "LOCAL_RANK", 0)
        if world > 1 and env.get("LOCAL_RANK", "").strip() and not env.get("LOCAL_WORLD_SIZE", "").strip():
            # Each rank would guess its node's rank count from its own LOCAL_RANK, and ranks of one node would choose
            # their GPUs (or refuse) differently: one refusing while the others wait for it.
            raise UsageError(
                f"LOCAL_RANK={env['LOCAL_RANK']} is set but LOCAL_WORLD_SIZE is not: every rank needs how many ranks"
                " share its node to choose its GPU as the others do; set LOCAL_WORLD_SIZE (torchrun sets both)"
            )
        local_world = env_int(env, "LOCAL_WORLD_SIZE", 1)
        check_ranks(rank, world, local_rank, local_world, ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
        return cls(rank, local_rank, world, local_world, env_int(env, "GROUP_RANK", rank // local_world))


def check_ranks(rank: int, world: int, local_rank: int, local_world: int, names: tuple[str, str, str, str]) -> None:
    """Raise :class:`UsageError` unless the four numbers (named by ``names``, in the same order) fit together."""
    rank_name, world_name, lr, lw = names
    if world < 1:
        raise UsageError(f"{world_name}={world} must be at least 1")
    if not 0 <= rank < world:
        raise UsageError(f"{rank_name}={rank} is out of range for {world_name}={world} (ranks are 0..{world - 1})")
    if not 1 <= local_world <= world:
        raise UsageError(f"{lw}={local_world} must be between 1 and {world_name}={world}")
    if not 0 <= local_rank < local_world:
        raise UsageError(f"{lr}={local_rank} is out of range for {lw}={local_world}")


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the run; a single-process context when not launched."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    device: str = "cpu"
    is_main: bool = True
    workers_per_device: int = 1
    """Workers sharing this worker's GPU (``--workers-per-gpu``); above 1 the collectives use gloo (NCCL refuses
    two ranks on one device)."""

    @classmethod
    def from_env(
        cls,
        device_kind: Literal["cpu", "cuda"] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> DistributedContext:
        """Build from torchrunx's environment; ``device_kind`` defaults to ``$MJFLEET_DEVICE_KIND``."""
        if env is None:
            env = os.environ
        if device_kind is None:
            kind = env.get(DEVICE_KIND_ENV, "cpu")
            if kind not in ("cpu", "cuda"):
                raise RuntimeError(f"{DEVICE_KIND_ENV}={kind!r} must be 'cpu' or 'cuda'")
            device_kind = "cuda" if kind == "cuda" else "cpu"
        ranks = Ranks.from_torchrun_env(env)
        per_device = env_int(env, WORKERS_PER_DEVICE_ENV, 1) if device_kind == "cuda" else 1
        if per_device < 1:
            raise RuntimeError(f"{WORKERS_PER_DEVICE_ENV}={per_device} must be at least 1")
        return cls(
            rank=ranks.rank,
            local_rank=ranks.local_rank,
            world_size=ranks.world_size,
            local_world_size=ranks.local_world_size,
            node_rank=ranks.node_rank,
            device=f"cuda:{ranks.local_rank // per_device}" if device_kind == "cuda" else "cpu",
            is_main=ranks.rank == 0,
            workers_per_device=per_device,
        )

    @property
    def is_distributed(self) -> bool:
        """True when more than one worker takes part."""
        return self.world_size > 1

    @property
    def device_kind(self) -> Literal["cpu", "cuda"]:
        """``"cuda"`` or ``"cpu"``."""
        return "cuda" if self.device.startswith("cuda") else "cpu"

    @property
    def backend(self) -> Literal["nccl", "gloo"]:
        """The process group's backend: NCCL where every rank has its own GPU, else gloo.

        NCCL refuses two ranks of one communicator on the same device, so workers that share a GPU use gloo, which
        all-reduces and broadcasts CUDA tensors by staging them through host memory (the only collectives on CUDA
        tensors that training uses; ``all_gather_object`` travels on the CPU with gloo).
        """
        return "nccl" if self.device_kind == "cuda" and self.workers_per_device == 1 else "gloo"

    def seed(self, base_seed: int) -> int:
        """Per-worker seed: the base seed offset by the global rank."""
        return base_seed + self.rank


def egl_device_id(ctx: DistributedContext) -> str | None:
    """``MUJOCO_EGL_DEVICE_ID`` for this worker's GPU, or None on the CPU.

    MuJoCo's EGL backend orders EGL devices by ``CUDA_VISIBLE_DEVICES`` and reads the id as a
    *visible* index first, so the worker's ``cuda:k`` index is right; a physical id could name
    another visible GPU (e.g. ``CUDA_VISIBLE_DEVICES=1,0``).
    """
    if ctx.device_kind != "cuda":
        return None
    _, _, suffix = ctx.device.partition(":")
    return suffix if suffix.isdigit() else "0"


EGL_DEVICE_SET_ENV = "MJFLEET_EGL_DEVICE_ID_SET"
"""Marks a ``MUJOCO_EGL_DEVICE_ID`` that mjfleet set (not the user): launched workers, which inherit ``MUJOCO*`` and
``MJFLEET*`` from a launcher that trained in-process before (bench, scripts), replace it with their own GPU's."""


def configure_worker_device(ctx: DistributedContext, env: MutableMapping[str, str] | None = None) -> None:
    """Bind this process to its GPU and point MuJoCo's EGL renderer at the same GPU (:func:`set_egl_device`)."""
    if ctx.device_kind != "cuda":
        return
    set_egl_device(ctx, os.environ if env is None else env)
    import torch

    torch.cuda.set_device(ctx.device)


def set_egl_device(ctx: DistributedContext, env: MutableMapping[str, str]) -> None:
    """Set ``MUJOCO_EGL_DEVICE_ID`` to this worker's GPU unless the user set it explicitly."""
    egl = egl_device_id(ctx)
    if egl is None:
        return
    if "MUJOCO_EGL_DEVICE_ID" not in env or env.get(EGL_DEVICE_SET_ENV) == "1":
        env["MUJOCO_EGL_DEVICE_ID"] = egl
        env[EGL_DEVICE_SET_ENV] = "1"


def init_process_group(ctx: DistributedContext, timeout_s: float | None = None, store: object | None = None) -> bool:
    """Initialise ``torch.distributed`` once (:attr:`DistributedContext.backend`); True if this call did.

    Does nothing for single-process runs or when a group already exists. Uses ``MASTER_ADDR`` and
    ``MASTER_PORT`` from the environment (set by torchrunx), or ``store`` (a ``torch.distributed.Store``) where
    given. ``timeout_s`` defaults to the launch plan's ``worker_timeout_s`` (``$MJFLEET_PG_TIMEOUT_S``), else 600.
    """
    import torch
    import torch.distributed as dist

    if timeout_s is None:
        timeout_s = float(os.environ.get(PG_TIMEOUT_ENV) or DEFAULT_PG_TIMEOUT_S)

    configure_worker_device(ctx)
    if not ctx.is_distributed:
        return False
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build")
    if dist.is_initialized():
        logger.debug("process group already initialised; leaving it as is")
        return False
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)] if store is None else []
    if missing:
        raise RuntimeError(f"cannot join the process group: {', '.join(missing)} not set")
    backend = ctx.backend
    logger.debug(
        "init %s process group: rank %d/%d via %s:%s",
        backend,
        ctx.rank,
        ctx.world_size,
        os.environ.get("MASTER_ADDR", "the given store"),
        os.environ.get("MASTER_PORT", "-"),
    )
    dist.init_process_group(
        backend=backend,
        init_method="env://" if store is None else None,
        store=store,  # type: ignore[arg-type]
        rank=ctx.rank,
        world_size=ctx.world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
        # Binding NCCL to the device up front avoids guessing and a lazy first-collective init.
        device_id=torch.device(ctx.device) if backend == "nccl" else None,
    )
    return True


@contextlib.contextmanager
def process_group(
    ctx: DistributedContext, timeout_s: float | None = None, store: object | None = None
) -> Iterator[bool]:
    """``init_process_group`` on entry; destroy the group on *normal* exit only.

    On an exception the group is left alone: destroying it first would make the healthy peers fail
    with "connection closed" before this rank reports the real error, and the launch wrapper
    hard-exits the process anyway. Yields whether this call created the group.
    """
    created = init_process_group(ctx, timeout_s, store)
    yield created
    if created:
        destroy_process_group()


def default_store() -> object | None:
    """The store of the default process group (the one every rank of the job shares), or None without one."""
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        return dist.distributed_c10d._get_default_store()  # stable for years; no public accessor
    except Exception:  # an older or newer torch without it: no watch, the group's own timeout still applies
        return None


def destroy_process_group() -> None:
    """Tear down the default process group if one exists; never raises."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # Teardown runs in finally blocks; it must not mask the real error.
        logger.warning("destroying the process group failed", exc_info=True)

"""Turn ``--gpu-ids`` into the devices a run trains on.

GPU indices are always relative to ``CUDA_VISIBLE_DEVICES`` (what ``torch.cuda`` numbers them),
so ``--gpu-ids 0`` under ``CUDA_VISIBLE_DEVICES=2,3`` means physical GPU 2.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias

import tyro

from mjfleet.errors import UsageError

logger = logging.getLogger(__name__)

GpuRequest: TypeAlias = Literal["auto", "all"] | tuple[int, ...] | None
"""Parsed ``--gpu-ids``: ``"auto"``, ``"all"``, explicit indices, or ``None`` for the CPU."""

DeviceKind: TypeAlias = Literal["cpu", "cuda"]

_CPU_WORDS = frozenset({"none", "cpu", "null"})
_KEYWORDS = frozenset({"auto", "all"}) | _CPU_WORDS
_INT_RE = re.compile(r"[+-]?\d+")


def parse_gpu_ids(tokens: Sequence[str]) -> GpuRequest:
    """Parse the tokens given after ``--gpu-ids`` (e.g. ``("0", "1")``, ``("[0, 1]",)``, ``("None",)``)."""
    if isinstance(tokens, str):
        tokens = (tokens,)
    text = " ".join(t.strip() for t in tokens).strip()
    if not text:
        raise UsageError("--gpu-ids needs a value: GPU indices (e.g. 0 1), 'all', 'auto', or 'None' for the CPU")
    words = [w.lower() for w in re.split(r"[\s,]+", text.strip("[]() ")) if w]
    keywords = [w for w in words if w in _KEYWORDS]
    if keywords:
        if len(words) != 1:
            raise UsageError(f"--gpu-ids {text!r}: {keywords[0]!r} cannot be combined with other values")
        word = keywords[0]
        if word in _CPU_WORDS:
            return None
        return "auto" if word == "auto" else "all"

    # Shells and tyro split "[0, 1]" into "[0," and "1]", so brackets are stripped per word.
    words = [w.strip("[]()") for w in words]
    words = [w for w in words if w]
    if not words:
        raise UsageError(f"--gpu-ids {text!r} lists no GPUs; use 'None' to run on the CPU")
    ids: list[int] = []
    for word in words:
        if not _INT_RE.fullmatch(word):
            raise UsageError(f"--gpu-ids: {word!r} is not a GPU index (expected integers, 'all', 'auto' or 'None')")
        gpu = int(word)
        if gpu < 0:
            raise UsageError(f"--gpu-ids: GPU index {gpu} is negative")
        if gpu in ids:
            raise UsageError(f"--gpu-ids: GPU {gpu} is listed more than once")
        ids.append(gpu)
    return tuple(ids)


def describe_gpu_request(request: GpuRequest) -> str:
    """``--gpu-ids`` as the user would type it: ``0 1``, ``all``, ``auto``, ``None``."""
    if request is None:
        return "None"
    return " ".join(map(str, request)) if isinstance(request, tuple) else request


def _is_gpu_request(value: Any) -> bool:
    if value is None or value in ("auto", "all"):
        return True
    return isinstance(value, tuple) and all(isinstance(i, int) for i in value)


def _parse_words(words: list[str]) -> GpuRequest:
    return parse_gpu_ids(words)  # looked up when called: tests count the calls


def _words(request: GpuRequest) -> list[str]:
    return describe_gpu_request(request).split()


GpuIds: TypeAlias = Annotated[
    GpuRequest,
    tyro.constructors.PrimitiveConstructorSpec(
        nargs="*",
        metavar="{INDEX [INDEX ...]|all|auto|None}",
        instance_from_str=_parse_words,
        is_instance=_is_gpu_request,
        str_from_instance=_words,
    ),
]
"""A config field of type :data:`GpuRequest` that the command line fills through :func:`parse_gpu_ids` (``0 1``,
``[0, 1]``, ``all``, ``auto``, ``None``): parsed once, where it is declared."""


def _cuda_visible_entries(env: Mapping[str, str]) -> list[str] | None:
    """Entries of ``CUDA_VISIBLE_DEVICES``, or None when it is unset."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [e.strip() for e in value.split(",") if e.strip()]


def visible_gpus(env: Mapping[str, str] | None = None, device_count: int | None = None) -> list[str]:
    """Labels of this process's GPUs: entry i is what ``CUDA_VISIBLE_DEVICES`` names for ``cuda:i``."""
    if env is None:
        env = os.environ
    if device_count is None:
        import torch  # Imported lazily: torch is slow to import and device parsing must stay cheap.

        device_count = torch.cuda.device_count()
    entries = _cuda_visible_entries(env)
    if entries is None:
        return [str(i) for i in range(device_count)]
    labels = entries[:device_count]
    # CUDA stops at the first invalid entry, so a short list is padded with plain indices.
    labels += [str(i) for i in range(len(labels), device_count)]
    return labels


def _describe_gpu(index: int, label: str) -> str:
    """``"0"``, ``"0 (physical 2)"`` or ``"0 (MIG-...)"``."""
    if label == str(index):
        return str(index)
    return f"{index} (physical {label})" if label.isdigit() else f"{index} ({label})"


def _no_gpu_reason(env: Mapping[str, str]) -> str:
    value = env.get("CUDA_VISIBLE_DEVICES")
    return "no CUDA GPUs are visible" + ("" if value is None else f" (CUDA_VISIBLE_DEVICES={value!r})")


@dataclass(frozen=True)
class DeviceSelection:
    """Devices chosen for a run.

    ``devices`` are what each worker (by ``LOCAL_RANK``) trains on. ``cuda_visible_devices`` is the
    value to export to *launched workers* so worker k sees selected GPU k as ``cuda:k``; it is ``""``
    for CPU runs so CPU workers do not create CUDA contexts. Do not apply it to the current process.
    """

    kind: DeviceKind
    devices: tuple[str, ...]
    cuda_visible_devices: str
    labels: tuple[str, ...] = ()
    notice: str | None = None

    @property
    def num_gpus(self) -> int:
        """GPUs selected (0 for CPU runs)."""
        return len(self.devices) if self.kind == "cuda" else 0

    def describe(self) -> str:
        """Human-readable device list, e.g. ``"cuda:0 (physical 2), cuda:1 (physical 3)"``."""
        if self.kind == "cpu":
            return "cpu"
        parts = []
        for device, label in zip(self.devices, self.labels, strict=True):
            index = int(device.split(":")[1])
            described = _describe_gpu(index, label)
            parts.append(f"cuda:{described}")
        return ", ".join(parts)


def select_devices(request: GpuRequest, *, device_count: int, env: Mapping[str, str]) -> DeviceSelection:
    """Resolve a :data:`GpuRequest` against the GPUs visible to this process."""
    labels = visible_gpus(env, device_count)
    if request is None:
        return DeviceSelection(kind="cpu", devices=("cpu",), cuda_visible_devices="")
    if request == "auto":
        if device_count == 0:
            value = env.get("CUDA_VISIBLE_DEVICES")
            reason = "" if value is None else f" (CUDA_VISIBLE_DEVICES={value!r})"
            return DeviceSelection(
                kind="cpu",
                devices=("cpu",),
                cuda_visible_devices="",
                notice=f"CUDA not available{reason}; running on the CPU",
            )
        indices: tuple[int, ...] = (0,)
    elif request == "all":
        if device_count == 0:
            raise UsageError(f"--gpu-ids all: {_no_gpu_reason(env)}; use --gpu-ids None for the CPU")
        indices = tuple(range(device_count))
    else:
        if not request:
            raise UsageError("--gpu-ids lists no GPUs; use --gpu-ids None to run on the CPU")
        if device_count == 0:
            raise UsageError(
                f"--gpu-ids {' '.join(map(str, request))}: {_no_gpu_reason(env)}; use --gpu-ids None to run on the CPU"
            )
        bad = [i for i in request if not 0 <= i < device_count]
        if bad:
            visible = ", ".join(_describe_gpu(i, label) for i, label in enumerate(labels))
            which = f"GPU {bad[0]} is" if len(bad) == 1 else f"GPUs {', '.join(map(str, bad))} are"
            raise UsageError(f"{which} out of range; visible GPUs: {visible}")
        if len(set(request)) != len(request):
            raise UsageError("--gpu-ids lists a GPU more than once")
        indices = request
    chosen = tuple(labels[i] for i in indices)
    return DeviceSelection(
        kind="cuda",
        devices=tuple(f"cuda:{i}" for i in indices),
        cuda_visible_devices=",".join(chosen),
        labels=chosen,
    )


def local_gpu_count() -> int:
    """CUDA GPUs this process can use (imports torch)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def trains_on_cpu(request: GpuRequest, gpu_count: int | None = None) -> bool:
    """Whether ``--gpu-ids`` puts a run on this machine's CPU: ``None``, or ``auto`` where no CUDA GPU is visible
    (``gpu_count``: this machine's GPUs, counted here only when needed and not given)."""
    if request != "auto":
        return request is None
    return (local_gpu_count() if gpu_count is None else gpu_count) == 0


def select_local_devices(request: GpuRequest) -> DeviceSelection:
    """:func:`select_devices` against this machine's GPUs; CPU requests never import torch to count them."""
    count = 0 if request is None else local_gpu_count()
    return select_devices(request, device_count=count, env=os.environ)

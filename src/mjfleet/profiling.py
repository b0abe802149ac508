"""Where a training iteration's time goes, part by part (``bench <task> --profile``).

The runner, the environments and the evaluation name their parts with :func:`part`; while :data:`PROFILE` is off
(always, outside ``bench --profile``) a part costs one attribute read. While it is on, each part's wall time is added
to its name, less the parts timed inside it, so the parts of an iteration add up to the iteration. On a GPU every part
waits for the device at its start and end, so that queued kernels count where they were launched.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType

import torch

_OFF = nullcontext()


class Profile:
    """Exclusive wall time per named part, summed per iteration."""

    def __init__(self) -> None:
        self.enabled = False
        self.iterations: list[dict[str, float]] = []
        """One mapping of part name to seconds per finished iteration."""
        self._current: dict[str, float] = {}
        self._inner: list[float] = []
        self._device: torch.device | None = None
        self._began = 0.0

    def start(self, device: torch.device | str) -> None:
        """Time the parts from now on (the iterations recorded so far are dropped)."""
        self.enabled, self.iterations, self._current, self._inner = True, [], {}, []
        self._device = torch.device(device)
        self._began = time.perf_counter()

    def stop(self) -> None:
        self.enabled = False

    def sync(self) -> None:
        if self._device is not None and self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def end_iteration(self) -> None:
        """Close the current iteration: its parts, and as ``other`` whatever no part timed."""
        if not self.enabled:
            return
        self.sync()
        now = time.perf_counter()
        parts = self._current
        parts["other"] = parts.get("other", 0.0) + max(0.0, now - self._began - sum(parts.values()))
        self.iterations.append(parts)
        self._current, self._began = {}, now

    def part(self, name: str) -> AbstractContextManager[None]:
        return _Part(self, name) if self.enabled else _OFF

    def _add(self, name: str, elapsed: float) -> None:
        inner = self._inner.pop()
        self._current[name] = self._current.get(name, 0.0) + elapsed - inner
        if self._inner:
            self._inner[-1] += elapsed


class _Part:
    __slots__ = ("_began", "_name", "_profile")

    def __init__(self, profile: Profile, name: str) -> None:
        self._profile, self._name, self._began = profile, name, 0.0

    def __enter__(self) -> None:
        self._profile.sync()
        self._profile._inner.append(0.0)
        self._began = time.perf_counter()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._profile.sync()
        self._profile._add(self._name, time.perf_counter() - self._began)


PROFILE = Profile()
"""The process's profile: off unless ``bench --profile`` turns it on."""


def part(name: str) -> AbstractContextManager[None]:
    """``with part("update"): ...`` times the block as part ``name`` while :data:`PROFILE` is on."""
    return PROFILE.part(name)

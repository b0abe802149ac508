"""Name the rank a job waits for, wherever it stopped: a thread of every rank keeps the rank's sign of life and its
place in the training loop in the job's store, reads every other rank's, and ends the job when this rank has waited
as long as ``--collective-timeout-s`` allows.

torch's own collective timeout names nobody, and a rank frozen inside an iteration (a stopped process, a host gone
to swap) looks on time to any record written once per iteration. The thread needs no collective to return (NCCL's
watchdog may abort the process before a Python ``except`` runs): it reads the store on its own clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)

Position = tuple[tuple[int, ...], str]
"""Where a rank is in its loop: a key every rank passes through in the same order (later keys compare greater), and
the same place in words."""


class Store(Protocol):
    """The part of ``torch.distributed.Store`` the watch uses."""

    def set(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> bytes: ...

    def check(self, keys: list[str]) -> bool: ...


def group_timeout(collective_timeout_s: float) -> float:
    """The process group's own timeout where a watch runs: a little longer, so the watch, which names the late
    rank, ends the job first."""
    return collective_timeout_s + max(10.0, 0.25 * collective_timeout_s)


@dataclass
class _Seen:
    """What this rank last read of another."""

    beat_changed: float
    """When its sign of life last changed, on this rank's clock."""
    beat: int = -1
    key: tuple[int, ...] = ()
    where: str = "its start"


class RankWatch:
    """One rank's watch (see the module docstring); a context manager that runs its thread.

    Args:
        store: The job's store (every rank's the same).
        rank: This rank.
        world_size: Ranks in the job.
        timeout_s: This rank may stand still this long (``--collective-timeout-s``) before the watch ends the job.
        position: Where this rank is now (read by the thread; the loop keeps it current).
        on_hang: Called once, from the thread, with the line naming the late ranks (it ends the job).
        clock: Seconds on this rank's own clock (no two hosts' clocks are compared).
    """

    def __init__(
        self,
        store: Store,
        rank: int,
        world_size: int,
        timeout_s: float,
        position: Callable[[], Position],
        on_hang: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.rank, self.world_size, self.timeout_s = store, rank, world_size, timeout_s
        self.position, self.on_hang, self.clock = position, on_hang, clock
        self.period_s = min(5.0, max(0.2, timeout_s / 10))
        """Seconds between two looks (and two signs of life)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = {r: _Seen(beat_changed=clock()) for r in range(world_size)}
        self._beat = 0
        self._own: tuple[tuple[int, ...], float] = ((), clock())

    def __enter__(self) -> RankWatch:
        self._thread = threading.Thread(target=self._run, name=f"rank-watch-{self.rank}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.period_s + 1)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                line = self.look()
            except Exception:  # the store lives with rank 0 or the launcher's agent, which may be gone as well
                logger.debug("rank watch: the store cannot be read", exc_info=True)
                continue
            if line is not None:
                self.on_hang(line)
                return

    def look(self) -> str | None:
        """Publish this rank's sign of life and place, read the others'; the line naming the late ranks once this
        rank has stood still for :attr:`timeout_s`, else None."""
        now = self.clock()
        key, where = self.position()
        self._beat += 1
        self.store.set(f"watch/{self.rank}", f"{self._beat} {'.'.join(map(str, key))} {where}")
        if key != self._own[0]:
            self._own = (key, now)
        for rank in range(self.world_size):
            name = f"watch/{rank}"
            if rank == self.rank or not self.store.check([name]):
                continue
            beat, dotted, text = self.store.get(name).decode().split(" ", 2)
            seen = self._seen[rank]
            if int(beat) != seen.beat:
                seen.beat, seen.beat_changed = int(beat), now
            seen.key = tuple(int(k) for k in dotted.split(".")) if dotted else ()
            seen.where = text
        waited = now - self._own[1]
        if waited < self.timeout_s:
            return None
        return self._blame(key, where, waited, now)

    def _blame(self, key: tuple[int, ...], where: str, waited: float, now: float) -> str | None:
        silent = {r: s for r, s in self._seen.items() if r != self.rank and now - s.beat_changed >= self.timeout_s / 2}
        behind = {r: s for r, s in self._seen.items() if r != self.rank and r not in silent and s.key < key}
        waited_for = f"within {self.timeout_s:g} s (--collective-timeout-s)"
        here = f"rank {self.rank} waited {waited:.0f} s at {where}"
        parts = [
            f"rank {r}: no sign of life for {now - s.beat_changed:.0f} s (stopped, frozen or gone), last at {s.where}"
            for r, s in silent.items()
        ]
        parts += [f"rank {r}: alive but still at {s.where}" for r, s in behind.items()]
        if parts:
            late = sorted([*silent, *behind])
            ranks = f"rank{'s' if len(late) > 1 else ''} {', '.join(map(str, late))}"
            return f"{ranks} did not arrive {waited_for}: {'; '.join(parts)}; {here}"
        ahead = [r for r, s in self._seen.items() if r != self.rank and s.key > key]
        if ahead:
            # The others wait for this rank and their watches name it (with what they waited in); this rank speaks
            # only if they could not.
            if waited < 1.5 * self.timeout_s:
                return None
            return f"rank {self.rank} did not move on {waited_for}: it stands at {where} while the others went on"
        return f"no rank moved on {waited_for}: every rank stands at {where} (the collective itself did not complete)"

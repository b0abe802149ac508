"""Whether an error says that another rank of the job is gone: torch.distributed's own errors, nothing else.

Another library's message that happens to say "timed out" (an HTTP client's, a download's) is this rank's own
failure; so is a rendezvous store whose port another process holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import TracebackType

_DIST_ERRORS = frozenset({"DistError", "DistNetworkError", "DistBackendError", "DistStoreError"})
"""torch.distributed's error classes (``torch.distributed.DistError`` and its subclasses)."""

_OWN_FAILURE = re.compile(r"address already in use|EADDRINUSE", re.IGNORECASE)
"""torch.distributed errors about this rank's own setup (its store's port taken), not another rank."""

_DISTRIBUTED = ("/torch/distributed/", "\\torch\\distributed\\")
"""Where a collective's own Python code lies: a gloo or NCCL error (a ``RuntimeError``) is raised from there."""


def is_own_failure(exc: BaseException) -> bool:
    """True when ``exc`` (or an error it was raised from) is torch.distributed's about this rank's own setup: the
    port of the store it hosts is taken."""
    return any(_OWN_FAILURE.search(str(error)) for error in _chain(exc))


def is_peer_failure(exc: BaseException) -> bool:
    """True when ``exc`` (or an error it was raised from) is torch.distributed's about the job's other ranks: a
    ``DistError`` (a lost connection, the store, the backend), or an error raised inside torch.distributed itself
    (a collective's timeout or closed connection, which gloo reports as a ``RuntimeError``)."""
    for error in _chain(exc):
        if _OWN_FAILURE.search(str(error)):
            return False
        if {cls.__name__ for cls in type(error).__mro__} & _DIST_ERRORS:
            return True
        if isinstance(error, RuntimeError) and _raised_in_distributed(error):
            return True
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _raised_in_distributed(error: BaseException) -> bool:
    """Whether the innermost Python frame of ``error``'s traceback is torch.distributed's."""
    tb: TracebackType | None = error.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and any(part in last.tb_frame.f_code.co_filename for part in _DISTRIBUTED)

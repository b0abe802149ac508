"""Capture a sequence of Warp launches once and replay it, with an eager fallback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import warp as wp

logger = logging.getLogger(__name__)


class StepGraph:
    """Runs ``fn`` (a function that only issues Warp launches) through a captured graph.

    The first call runs eagerly so every kernel module is compiled and loaded; the second call captures (capture
    does not execute, on the CPU nor on CUDA) and replays; later calls only replay. Replay is bit-identical to
    eager launches and skips Python and launch overhead (Warp >= 1.19 captures on the CPU too). If capture fails
    (e.g. CUDA without a memory pool), the step stays eager and says so once.
    """

    def __init__(self, fn: Callable[[], None], scope: Callable[[], AbstractContextManager[Any]], enabled: bool) -> None:
        self._fn = fn
        self._scope = scope
        self.enabled = enabled
        self._graph: Any = None
        self._warm = False

    @property
    def active(self) -> bool:
        """Whether calls replay a captured graph."""
        return self._graph is not None

    def launch(self) -> None:
        """Run ``fn`` once, by graph replay when possible."""
        with self._scope():
            if self._graph is not None:
                wp.capture_launch(self._graph)
                return
            if self.enabled and self._warm:
                self._graph = self._capture()
                if self._graph is not None:
                    wp.capture_launch(self._graph)
                    return
            self._fn()
            self._warm = True

    def _capture(self) -> Any:
        try:
            with wp.ScopedCapture() as capture:
                self._fn()
        except Exception as e:
            logger.warning("graph capture failed (%s); running physics with eager launches", e)
            self.enabled = False
            return None
        return capture.graph

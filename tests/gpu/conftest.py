"""GPU acceptance tests (``pytest -m gpu``): real CUDA runs on ``cuda:0``, never simulated.

Every module here is marked ``gpu``; the default run deselects them (``addopts`` in ``pyproject.toml``). Where CUDA is
absent, ``pytest -m gpu`` reports each one as skipped with the reason.
"""

from __future__ import annotations

import functools
import os

import pytest


@functools.cache
def cuda_unavailable_reason() -> str | None:
    """Why these tests cannot run here, or None when a CUDA device is available."""
    import torch

    if torch.version.cuda is None:
        return f"needs a CUDA GPU: torch {torch.__version__} is built without CUDA"
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = "" if visible is None else f", CUDA_VISIBLE_DEVICES={visible!r}"
        return f"needs a CUDA GPU: none is available (torch {torch.__version__}, CUDA {torch.version.cuda}{where})"
    return None


@pytest.fixture(scope="session", autouse=True)
def _needs_cuda() -> None:
    # Session scope: it runs before any module-scoped fixture could try to train on a GPU that is not there.
    reason = cuda_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)

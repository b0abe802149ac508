"""Checkpoint files: atomic writes, validated reads, and finding the newest one of a run."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from mjfleet.errors import UsageError

FORMAT = "mjfleet-checkpoint"
"""Marker stored in every checkpoint so foreign or truncated files are refused at load."""
FORMAT_VERSION = 1
_MODEL_RE = re.compile(r"^model_(\d+)\.pt$")
_REQUIRED_KEYS = ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter")


def checkpoint_name(iteration: int) -> str:
    """File name of the checkpoint written after ``iteration`` completed iterations."""
    return f"model_{iteration}.pt"


def save_atomic(payload: dict[str, Any], path: Path) -> None:
    """Write ``payload`` with ``torch.save`` to a temporary file in the same directory, then rename it.

    A reader (or a resume after a crash) sees either the previous file set or the complete new file, never a
    partial one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "format_version": FORMAT_VERSION, **payload}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read and validate a checkpoint; anything unreadable or foreign raises :class:`UsageError`."""
    if not path.is_file():
        raise UsageError(f"checkpoint {path} does not exist")
    try:
        data = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:
        raise UsageError(f"checkpoint {path} is corrupt or truncated ({type(e).__name__})") from None
    if not isinstance(data, dict):
        raise UsageError(f"checkpoint {path} is not an mjfleet checkpoint")
    missing = [k for k in _REQUIRED_KEYS if k not in data]
    if missing:
        raise UsageError(f"checkpoint {path} is not an mjfleet/rsl_rl checkpoint (missing {', '.join(missing)})")
    return data


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of every complete checkpoint in ``run_dir``, oldest first."""
    found = []
    for p in run_dir.iterdir() if run_dir.is_dir() else []:
        m = _MODEL_RE.match(p.name)
        if m and p.is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint file as given, or the newest checkpoint of a run directory."""
    if path.is_dir():
        checkpoints = list_checkpoints(path)
        if not checkpoints:
            raise UsageError(f"run directory {path} holds no model_<iteration>.pt checkpoint")
        return checkpoints[-1][1]
    if not path.exists():
        raise UsageError(f"checkpoint or run directory {path} does not exist")
    return path

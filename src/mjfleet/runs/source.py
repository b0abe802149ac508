"""Where a checkpoint comes from: what ``--checkpoint`` / ``--resume`` may name, turned into a local file.

Accepted: a ``model_<it>.pt`` checkpoint, a run directory (its newest checkpoint), an experiment directory (its
newest run, :func:`mjfleet.rl.checkpoint.files.newest_run`), an exported ``.onnx`` policy (``play`` only), or
``wandb:<entity>/<project>/<run>[:<file>]``: a checkpoint of a W&B run logged by mjfleet.

With ``--agent.logger wandb`` rank 0 saves every checkpoint (``model_<it>.pt``, its ONNX export and JSON) and
``params/*.yaml`` into the W&B run's files (:class:`mjfleet.rl.reporting.metrics.MetricsWriter`). Here they come back:

- ``<file>`` is a file name of the run (``model_100.pt``, ``model_100.onnx``) or an iteration (``100``); without
  it, the newest ``model_<it>.pt``.
- Files are downloaded (with ``params/`` and an ONNX file's JSON) into ``<download_root>/<entity>/<project>/<run>/``,
  a directory laid out like the run directory, so ``play`` finds the settings the run trained with.
- ``MJFLEET_WANDB_DIR=<dir>`` reads runs from W&B run directories below ``<dir>`` (``offline-run-*-<run>/files``,
  as ``WANDB_MODE=offline`` writes them) instead of the W&B server: no network, no account.

Every failure is a one-line :class:`~mjfleet.errors.UsageError`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import is_onnx, load_checkpoint, newest_loadable_checkpoint, resolve_checkpoint

logger = logging.getLogger(__name__)

PREFIX = "wandb:"
LOCAL_DIR_ENV = "MJFLEET_WANDB_DIR"
"""Directory of W&B run directories to read instead of the W&B server (tests, offline runs, air-gapped hosts)."""
DOWNLOAD_DIR = ".wandb_downloads"
"""Folder under the log root that downloaded checkpoints go to."""
PARAMS = ("params/env.yaml", "params/agent.yaml", "params/run.yaml", "params/model_files.yaml")
_PART_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MODEL_RE = re.compile(r"^model_(\d+)\.pt$")
_ITERATION_RE = re.compile(r"_(\d+)\.(?:pt|onnx)$")


@dataclass(frozen=True)
class WandbRef:
    """A parsed ``wandb:`` reference."""

    entity: str
    project: str
    run: str
    file: str | None = None
    """A file name of the run, or None for its newest checkpoint."""

    @property
    def path(self) -> str:
        """``entity/project/run`` as the W&B API takes it."""
        return f"{self.entity}/{self.project}/{self.run}"


def is_wandb_ref(value: str | Path) -> bool:
    """Whether ``value`` is a ``wandb:`` reference rather than a local path."""
    return str(value).startswith(PREFIX)


def parse_ref(text: str) -> WandbRef:
    """Parse ``wandb:<entity>/<project>/<run>[:<file>]``; anything else raises :class:`UsageError`."""
    body = text[len(PREFIX) :] if text.startswith(PREFIX) else text
    run_path, _, file = body.partition(":")
    parts = run_path.split("/")
    if len(parts) != 3 or not all(_PART_RE.fullmatch(p) for p in parts):
        raise UsageError(f"{text!r} is not wandb:<entity>/<project>/<run>[:<checkpoint>]")
    if file.isdigit():
        file = f"model_{int(file)}.pt"
    if file and (file.startswith("/") or ".." in Path(file).parts or "\x00" in file):
        raise UsageError(f"{text!r}: the checkpoint must be a file name of the run, e.g. model_100.pt")
    return WandbRef(parts[0], parts[1], parts[2], file or None)


class RunFiles(Protocol):
    """The files of one W&B run, wherever they are kept."""

    def names(self) -> list[str]:
        """Every file name of the run (relative, ``/``-separated)."""
        ...

    def download(self, name: str, dest: Path) -> Path:
        """Copy file ``name`` to ``dest / name`` and return that path."""
        ...


class ApiRunFiles:
    """A run on the W&B server, through the public API (``wandb.Api().run(path)``)."""

    def __init__(self, run: Any) -> None:
        self._run = run

    def names(self) -> list[str]:
        return [f.name for f in self._run.files()]

    def download(self, name: str, dest: Path) -> Path:
        self._run.file(name).download(root=str(dest), replace=True)
        return dest / name


class LocalRunFiles:
    """A run's ``files`` directories as W&B writes them locally (offline mode, or before ``wandb sync``): one per
    start of the run, oldest first; a name in several is the newest start's file."""

    def __init__(self, *files_dirs: Path) -> None:
        self.files_dirs = files_dirs

    def _where(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for files_dir in self.files_dirs:
            found.update({p.relative_to(files_dir).as_posix(): p for p in files_dir.rglob("*") if p.is_file()})
        return found

    def names(self) -> list[str]:
        return sorted(self._where())

    def download(self, name: str, dest: Path) -> Path:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._where()[name], target)  # follows W&B's symlinks to the run directory
        return target


def open_run(ref: WandbRef) -> RunFiles:
    """The run's files: below ``$MJFLEET_WANDB_DIR`` when it is set, else on the W&B server."""
    local = os.environ.get(LOCAL_DIR_ENV)
    if local:
        return _local_run(ref, Path(local))
    try:
        import wandb

        return ApiRunFiles(wandb.Api().run(ref.path))
    except Exception as e:  # no login, no network, no such run: wandb raises several types for these
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"cannot open W&B run {ref.path}: {reason}") from None


def _local_run(ref: WandbRef, root: Path) -> LocalRunFiles:
    matches = sorted(p for p in root.rglob(f"*run-*-{ref.run}") if (p / "files").is_dir())
    if not matches:
        raise UsageError(f"no W&B run {ref.run} below {LOCAL_DIR_ENV}={root}")
    # Sorted by name: offline-run-<start time>-<id>, so the starts of one run in order.
    return LocalRunFiles(*(m / "files" for m in sorted(matches, key=lambda p: p.name)))


def fetch(text: str, download_root: Path, files: RunFiles | None = None) -> Path:
    """Download the checkpoint that ``text`` names (and the run's ``params/``) and return its local path.

    ``files`` replaces the run's storage (tests); by default :func:`open_run` picks it.
    """
    ref = parse_ref(text)
    files = files if files is not None else open_run(ref)
    try:
        names = files.names()
    except Exception as e:  # the server's listing: a network error midway
        reason = (str(e).strip() or type(e).__name__).splitlines()[0]
        raise UsageError(f"cannot list the files of W&B run {ref.path}: {reason}") from None
    name = ref.file if ref.file is not None else _newest_checkpoint(names, ref)
    if name not in names:
        checkpoints = sorted((n for n in names if _MODEL_RE.match(n) or n.endswith(".onnx")), key=_by_iteration)
        shown = ", ".join(checkpoints[-5:]) or "none"
        raise UsageError(f"W&B run {ref.path} has no file {name} (checkpoints: {shown})")
    dest = download_root / ref.entity / ref.project / ref.run
    try:
        dest.mkdir(parents=True, exist_ok=True)
        wanted = [name, *(n for n in PARAMS if n in names)]
        if name.endswith(".onnx") and f"{name}.json" in names:
            wanted.append(f"{name}.json")
        for n in wanted:
            files.download(n, dest)
    except Exception as e:  # OSError here, wandb's own errors for the server
        reason = (getattr(e, "strerror", None) or str(e) or type(e).__name__).splitlines()[0]
        raise UsageError(f"cannot download {name} of W&B run {ref.path} to {dest}: {reason}") from None
    logger.info("fetched %s of W&B run %s to %s", name, ref.path, dest)
    return dest / name


def _by_iteration(name: str) -> tuple[int, bool, str]:
    """Checkpoints oldest first (a listing's text order puts model_50 after model_300), each iteration's ``.pt``
    before its ONNX file; files without an iteration before them."""
    match = _ITERATION_RE.search(name)
    return (int(match.group(1)) if match else -1, name.endswith(".onnx"), name)


def _newest_checkpoint(names: list[str], ref: WandbRef) -> str:
    found = sorted((int(m.group(1)), n) for n in names if (m := _MODEL_RE.match(n)))
    if not found:
        raise UsageError(
            f"W&B run {ref.path} holds no model_<iteration>.pt (was it trained by mjfleet with --agent.logger wandb?)"
        )
    return found[-1][1]


def resolve_play_checkpoint(path: Path) -> Path:
    """The local file ``play`` loads: an ONNX policy as given, else a validated training checkpoint."""
    if is_onnx(path):
        if not path.is_file():
            raise UsageError(f"ONNX policy {path} does not exist")
        return path
    checkpoint = resolve_checkpoint(path)
    if checkpoint != path:
        # A run's newest: an unreadable one (a copy cut short) gives way to the one before, as for --finish.
        found = newest_loadable_checkpoint(checkpoint.parent)
        if found is not None:
            return found[0]
    load_checkpoint(checkpoint)
    return checkpoint


def local_checkpoint(text: str, log_root: Path) -> Path:
    """``--checkpoint`` as a local path: a ``wandb:`` reference is downloaded under ``<log_root>/.wandb_downloads``
    (with the run's ``params/``, so its settings are read from beside it like a local run's)."""
    if not text.strip():  # Path("") is the working directory, which then "holds no checkpoint"
        raise UsageError("--checkpoint is empty: give a checkpoint file, a run directory or a wandb: reference")
    return fetch(text, log_root / DOWNLOAD_DIR) if is_wandb_ref(text) else Path(text)

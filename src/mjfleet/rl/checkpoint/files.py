"""Checkpoint files: atomic writes, validated reads, and finding the newest run and its newest checkpoint.

Checkpoints hold only tensors and plain Python data, so they are read with ``torch.load(weights_only=True)``: a
foreign or tampered file cannot run code when it is unpickled, it is refused.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mjfleet.errors import UsageError
from mjfleet.files import write_atomic
from mjfleet.rl.config import DEFAULT_LEARNER
from mjfleet.rl.learners.registry import learner_entry, learner_names
from mjfleet.rl.learners.registry import network_state as _network_state

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

FORMAT = "mjfleet-checkpoint"
"""Marker stored in every checkpoint so foreign or truncated files are refused at load."""
FORMAT_VERSION = 1
_MODEL_RE = re.compile(r"^model_(\d+)\.pt$")
_MLP_WEIGHT_RE = re.compile(r"mlp\.(\d+)\.weight")
_DIGITS_RE = re.compile(r"(\d+)")


def is_onnx(path: Path) -> bool:
    """Whether ``path`` names an exported ONNX policy rather than a training checkpoint."""
    return path.suffix == ".onnx"


def checkpoint_name(iteration: int) -> str:
    """File name of the checkpoint written after ``iteration`` completed iterations."""
    return f"model_{iteration}.pt"


def save_atomic(payload: dict[str, Any], path: Path) -> None:
    """``torch.save`` of ``payload`` (with the format marker) through :func:`mjfleet.files.write_atomic`.

    A reader (or a resume after a crash) sees either the previous file set or the complete new file, never a
    partial one.
    """
    import torch  # here, not at module import: the CLI parses and validates without loading torch

    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "format_version": FORMAT_VERSION, **payload}
    write_atomic(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read and validate a checkpoint; anything unreadable or foreign raises :class:`UsageError`."""
    import torch

    if not _is_file(path):
        raise UsageError(f"checkpoint {path} does not exist")
    if path.suffix == ".onnx" or path.name.endswith(".onnx.json"):
        raise UsageError(
            f"{path} is an ONNX export: it holds the policy alone, no training state; name a model_<it>.pt (play runs"
            " the .onnx file itself)"
        )
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:
        if "weights only load failed" in str(e).lower() and "unsupported global" in str(e).lower():
            raise UsageError(
                f"checkpoint {path} holds Python objects other than tensors and plain data; refusing to unpickle it"
                " (not an mjfleet checkpoint)"
            ) from None
        if path.suffix != ".pt":  # torch's words about another kind of file say nothing useful
            raise UsageError(f"{path} is not a checkpoint: name a model_<it>.pt file or its run directory") from None
        raise UsageError(f"checkpoint {path} is corrupt or truncated ({type(e).__name__})") from None
    if not isinstance(data, dict):
        raise UsageError(f"checkpoint {path} is not an mjfleet checkpoint")
    learner = data.get("learner", DEFAULT_LEARNER)
    if learner not in learner_names():
        raise UsageError(f"checkpoint {path} was written by learner {learner!r}, which this mjfleet does not know")
    missing = [k for k in learner_entry(learner).checkpoint_keys if k not in data]
    if missing and "learner" in data:  # written by mjfleet for that learner, and changed since
        raise UsageError(
            f"checkpoint {path} of learner {learner} lacks {', '.join(missing)}, which its checkpoints hold (a partial"
            " or edited file?)"
        )
    if missing:
        raise UsageError(f"checkpoint {path} is not an mjfleet/rsl_rl checkpoint (missing {', '.join(missing)})")
    it = data.get("iter", 0)
    if isinstance(it, bool) or not isinstance(it, int) or it < 0:  # a run would go on from it at iteration "abc"
        raise UsageError(f"checkpoint {path}: its iteration {it!r} is not a count of iterations")
    return data


def checkpoint_learner(data: dict[str, Any]) -> str:
    """The learner that wrote a checkpoint (:func:`load_checkpoint`'s ``data``): its ``learner`` entry, rsl-rl-ppo
    for checkpoints from before there was a choice (and rsl_rl's own)."""
    return data.get("learner", DEFAULT_LEARNER)


def network_state(data: dict[str, Any], role: str) -> dict[str, Any]:
    """The saved state of a checkpoint's ``actor`` or ``critic`` network (empty where it has none)."""
    return _network_state(learner_entry(checkpoint_learner(data)), data, role)


def normalises_observations(data: dict[str, Any]) -> bool | None:
    """Whether a checkpoint's networks normalise their observations with running statistics (rsl-rl: the actor's
    ``obs_normalizer``; skrl: an observation or state preprocessor among its modules; fast-td3: its normaliser's
    statistics), None where it holds no actor
    or a learner's whose layout is not known here (a package's)."""
    fast = data.get("fast_td3")
    if isinstance(fast, dict) and checkpoint_learner(data) == "fast-td3":
        return bool(fast.get("obs_normaliser"))  # an identity's state is empty
    modules = data.get("skrl")
    if not isinstance(modules, dict) and checkpoint_learner(data) != "rsl-rl-ppo":
        return None
    actor = network_state(data, "actor")
    if not actor:
        return None
    if isinstance(modules, dict):
        return bool({"observation_preprocessor", "state_preprocessor"} & set(modules))
    return any(key.startswith("obs_normalizer.") for key in actor)


def hidden_dims(state_dict: dict[str, Any]) -> tuple[int, ...] | None:
    """Hidden layer sizes of the MLP in an actor's or critic's saved state (the widths of its ``mlp.<i>`` linear
    layers but the output), or None where it holds no such MLP."""
    layers = sorted(
        (int(m.group(1)), tuple(value.shape))
        for key, value in state_dict.items()
        if (m := _MLP_WEIGHT_RE.fullmatch(key)) is not None and len(getattr(value, "shape", ())) == 2
    )
    return tuple(shape[0] for _, shape in layers[:-1]) if layers else None


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of every complete checkpoint in ``run_dir``, oldest first.

    Only ``model_<iteration>.pt`` files count: a checkpoint being written is a hidden temporary file until its
    atomic rename, so it is never listed half-written.
    """
    found = []
    try:
        entries = list(run_dir.iterdir()) if _is_dir(run_dir) else []
    except OSError:
        entries = []
    for p in entries:
        m = _MODEL_RE.match(p.name)
        if m and _is_file(p):
            found.append((int(m.group(1)), p))
    return sorted(found)


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint file as given, the newest checkpoint of a run directory, or of the newest run
    (:func:`newest_run`) of an experiment directory (``<log_root>/<experiment>``).

    Call this *before* creating a new run directory, and hand the resolved file to every worker: a run that is
    being created (or still writing checkpoints) is then never picked up by accident.
    """
    _check_path_text(path)
    if _is_dir(path):
        checkpoints = list_checkpoints(path)
        if checkpoints:
            return checkpoints[-1][1]
        run = newest_run(path)
        checkpoints = list_checkpoints(run) if run is not None else []
        if checkpoints:
            logger.info("resuming from the newest run of %s: %s", path, checkpoints[-1][1])
            return checkpoints[-1][1]
        raise UsageError(f"run directory {path} holds no model_<iteration>.pt checkpoint")
    if not _exists(path):
        raise UsageError(f"checkpoint or run directory {path} does not exist")
    return path


def newest_run(experiment_dir: Path) -> Path | None:
    """The newest run directory directly below ``experiment_dir`` that holds a checkpoint; None if there is none.

    The one rule for "the newest run", shared by ``play`` (no ``--checkpoint``) and ``--resume <experiment dir>``.
    Newest means last in name order: runs are named ``<YYYY-MM-DD_HH-MM-SS>[_<run_name>]`` when they start, so name
    order is start order, and it is what ``ls`` shows. Modification times are not used: copying or syncing runs
    (``cp``, ``rsync``, a download) rewrites them, and a long run still writing checkpoints would count as newer than
    one started after it. Digits compare as numbers, so the suffix ``-10`` of the eleventh run started in one second
    follows ``-9``.
    """
    try:
        runs = [p for p in experiment_dir.iterdir() if _is_dir(p) and list_checkpoints(p)]
    except OSError:
        return None
    return max(runs, key=lambda p: _name_order(p.name), default=None)


def _name_order(name: str) -> list[str | int]:
    # re.split with a group alternates text and digit runs, so equal positions always hold comparable types.
    return [int(part) if i % 2 else part for i, part in enumerate(_DIGITS_RE.split(name))]


def newest_loadable_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint of ``run_dir`` that loads, with its contents; unreadable ones are skipped (logged).

    Used by automatic restarts, which must make progress rather than stop at a damaged file.
    """
    for _, path in reversed(list_checkpoints(run_dir)):
        try:
            return path, load_checkpoint(path)
        except UsageError as e:
            logger.warning("skipping checkpoint: %s", e)
    return None


def _check_path_text(path: Path) -> None:
    if "\x00" in str(path):
        raise UsageError(f"path {str(path)!r} contains a NUL character")


# pathlib's predicates raise on some errors (e.g. a name too long); for a user-given path that is "not there".
def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False

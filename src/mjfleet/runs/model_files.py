"""The MJCF files a run loaded, recorded with its settings by their text's digest: a policy is only as good as the
robot it trained on, and two files under one name (Menagerie's and a package's copy, a newer Menagerie) are not one
robot. ``play`` says when it loads other files than the run trained on."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from mjfleet.config_io import yaml_problem

logger = logging.getLogger(__name__)

FILE = Path("params") / "model_files.yaml"
"""Where in a run directory the record is (beside the run's other settings)."""


@dataclass(frozen=True)
class ModelFile:
    """One MJCF file, named by its path and told apart by its text."""

    path: str
    """Where the file was when it was read."""
    sha256: str
    """SHA-256 of its text (the files it includes and its meshes are not part of it)."""

    @classmethod
    def of(cls, path: Path) -> ModelFile:
        return cls(str(path), hashlib.sha256(path.read_bytes()).hexdigest())

    def __str__(self) -> str:
        return f"{self.path} (sha256 {self.sha256[:12]})"


def record_entry(kind: str, record: Any) -> dict[str, str]:
    """A robot's or an arm's record (a dataclass with a ``name``) as :meth:`~mjfleet.envs.config.EnvConfig.
    model_records` gives it: ``{"<kind> record '<name>'": its text}``, all of it but where the file comes from and the
    description, so that two records of one text make the same model of the same file."""
    fields = dataclasses.asdict(record)
    for key in ("source", "description"):
        fields.pop(key, None)
    return {f"{kind} record {record.name!r}": json.dumps(fields, sort_keys=True, default=str)}


def fingerprint(paths: list[Path], records: dict[str, str] | None = None) -> list[ModelFile]:
    """The files by their text, then the records (``label -> text``) the model is built from besides them."""
    texts = [ModelFile(label, hashlib.sha256(text.encode()).hexdigest()) for label, text in (records or {}).items()]
    return [*(ModelFile.of(path) for path in paths), *texts]


def record(run_dir: Path, files: list[ModelFile]) -> None:
    """Write the record once: a continuation of the run keeps what its checkpoints trained on."""
    target = run_dir / FILE
    if target.is_file() or not files:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump([asdict(f) for f in files], sort_keys=False))


def recorded(run_dir: Path) -> list[ModelFile] | None:
    """The files a run trained on, or None for a run that has no record (older runs) or one that cannot be read
    (warned: it only serves the warnings of :func:`differences`)."""
    target = run_dir / FILE
    if not target.is_file():
        return None
    try:
        return [
            ModelFile(str(entry["path"]), str(entry["sha256"])) for entry in yaml.safe_load(target.read_text()) or []
        ]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError) as e:
        problem = yaml_problem(e) if not isinstance(e, KeyError | TypeError) else "not a list of path and sha256"
        logger.warning("%s cannot be read (%s): the robot files are not compared with the run's", target, problem)
        return None


def differences(trained: list[ModelFile], loaded: list[ModelFile]) -> list[str]:
    """One line per file whose text differs from the one the policy trained on (the same text elsewhere is the
    same file)."""
    return [
        f"the policy trained on {old}, not on {new}: another text, its results may not carry over"
        for old, new in zip(trained, loaded, strict=False)
        if old.sha256 != new.sha256
    ]

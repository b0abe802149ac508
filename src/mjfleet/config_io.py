"""Rebuild config dataclasses from the YAML a run wrote, so ``play`` sees the settings a policy trained with."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def update_dataclass(instance: T, values: dict[str, Any]) -> T:
    """Copy of ``instance`` with ``values`` applied recursively; unknown keys are ignored (older runs)."""
    assert dataclasses.is_dataclass(instance) and not isinstance(instance, type)
    hints = typing.get_type_hints(type(instance))
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(instance):
        if f.name not in values:
            continue
        current, new = getattr(instance, f.name), values[f.name]
        if dataclasses.is_dataclass(current) and isinstance(new, dict):
            changes[f.name] = update_dataclass(current, new)
        elif isinstance(current, tuple) and isinstance(new, list):
            changes[f.name] = tuple(new)
        elif hints.get(f.name) is Path or isinstance(current, Path):
            changes[f.name] = None if new is None else Path(new)
        else:
            changes[f.name] = new
    return dataclasses.replace(instance, **changes)


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping, or an empty dict when the file is absent."""
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text())
    return data if isinstance(data, dict) else {}

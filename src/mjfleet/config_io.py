"""Rebuild config dataclasses from the YAML a run wrote, so ``play`` sees the settings a policy trained with.

Not dacite (it builds from class defaults, not onto the task's values) or tyro's ``from_yaml`` (its own tags only).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from mjfleet.errors import UsageError

T = TypeVar("T")


def update_dataclass(instance: T, values: Mapping[str, Any], source: object = "settings") -> T:
    """Copy of ``instance`` with ``values`` applied recursively; unknown keys are ignored (older runs).

    Nested dataclasses are updated, not rebuilt (a task's subclass stays itself); YAML lists become tuples and
    strings become paths where the field's type says so (``tuple[...] | None`` included); other values, such as
    ``Literal`` choices, are taken as written. A value its field's type does not admit (a file edited by hand) is a
    :class:`~mjfleet.errors.UsageError` naming ``source`` (the file), the setting and the type.
    """
    return _updated(instance, values, source, "")


def _updated(instance: T, values: Mapping[str, Any], source: object, prefix: str) -> T:
    assert dataclasses.is_dataclass(instance) and not isinstance(instance, type)
    hints = typing.get_type_hints(type(instance))
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(instance):
        if f.init and f.name in values:
            current, new, hint = getattr(instance, f.name), values[f.name], hints.get(f.name, Any)
            name = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(current) and isinstance(new, Mapping):
                changes[f.name] = _updated(current, new, source, f"{name}.")
                continue
            if not _fits(new, hint):
                raise UsageError(f"{source}: {name} is {new!r}, not {_described(hint)}")
            changes[f.name] = _converted(current, new, hint)
    return dataclasses.replace(instance, **changes)


def conformed(instance: T, source: str) -> T:
    """Copy of ``instance`` (a config built in Python) whose values all fit their fields' types, converted as YAML's
    are (lists for tuples, strings for paths); a value that does not fit is a :class:`~mjfleet.errors.UsageError`
    naming ``source`` (``TrainConfig``), the setting and the type."""
    assert dataclasses.is_dataclass(instance) and not isinstance(instance, type)
    hints = typing.get_type_hints(type(instance))
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(instance):
        if not f.init:
            continue
        value, hint = getattr(instance, f.name), hints.get(f.name, Any)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes[f.name] = conformed(value, f"{source}.{f.name}")
        elif not _fits(value, hint):
            raise UsageError(f"{source}.{f.name} is {value!r}, not {_described(hint)}")
        else:
            changes[f.name] = _converted(value, value, hint)
    if all(changes[name] is getattr(instance, name) for name in changes):
        return instance
    return dataclasses.replace(instance, **changes)


def _converted(current: Any, new: Any, hint: Any) -> Any:
    if isinstance(new, list) and (isinstance(current, tuple) or _admits(hint, tuple)):
        return tuple(new)
    if isinstance(new, str) and (isinstance(current, Path) or _admits(hint, Path)):
        return Path(new)
    return new


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` as YAML reads it back is one of the annotation ``hint``'s values (lists for tuples, strings
    for paths, integers for floats); an annotation not understood here admits anything."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is typing.Literal:
        return any(value == arg and type(value) is type(arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is Path:
        return isinstance(value, str | Path)
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            return False
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            return not args or all(_fits(item, args[0]) for item in value)
        return not args or (len(value) == len(args) and all(map(_fits, value, args)))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return isinstance(value, Mapping | hint)
    return True


def _described(hint: Any) -> str:
    """An annotation as a user reads it: ``float``, ``tuple[float, float] | None``, ``one of 'a', 'b'``."""
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    if typing.get_origin(hint) is typing.Union and any(typing.get_origin(a) for a in typing.get_args(hint)):
        return " or ".join(map(_described, typing.get_args(hint)))  # `Literal[...] | ...` reads badly
    if isinstance(hint, type) and not typing.get_args(hint):
        return "None" if hint is type(None) else hint.__name__
    return str(hint).replace("typing.", "").replace("pathlib.", "").replace("NoneType", "None")


def _admits(hint: Any, cls: type) -> bool:
    """Whether the annotation ``hint`` is ``cls``, a generic of it, or a union with such a member."""
    if hint is cls or typing.get_origin(hint) is cls:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_admits(arg, cls) for arg in typing.get_args(hint))
    return False


def plain(value: Any) -> Any:
    """A YAML- and JSON-safe copy of dataclass data (``dataclasses.asdict``): tuples as lists, paths as strings."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def flattened(value: Any, prefix: str) -> dict[str, Any]:
    """Nested plain data (:func:`plain`) as one mapping from dotted names (``env.rewards.effort``) to leaf values."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for name, item in value.items():
        out.update(flattened(item, f"{prefix}.{name}"))
    return out


def settings_by_name(env: Any, agent: Any) -> dict[str, Any]:
    """A run's environment and agent settings (dataclasses) by dotted name (``env.num_envs``, ``agent.seed``)."""
    return flattened(plain(dataclasses.asdict(env)), "env") | flattened(plain(dataclasses.asdict(agent)), "agent")


def flag_value(value: Any) -> str:
    """A setting's value as a flag takes it on the command line: ``64 64`` for a sequence, ``None`` for none."""
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping, or an empty dict when the file is absent; a file that cannot be read as YAML (edited by hand,
    damaged) is one line naming it (:class:`~mjfleet.errors.UsageError`)."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UsageError(f"{path} cannot be read as YAML ({yaml_problem(e)})") from None
    return data if isinstance(data, dict) else {}


def yaml_problem(error: Exception) -> str:
    """What is wrong with a YAML file, in a few words and where: ``expected ',' or ']' at line 3``."""
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    return f"{getattr(error, 'problem', None) or type(error).__name__}{where}"

"""What the documentation generators share: Markdown tables, config docstrings as Markdown, and replacing a generated
block between two markers in a checked-in file (README.md, docs/*.md).

Standard library only (mjfleet where a function says so); imported by ``scripts/cli_reference.py``,
``scripts/expect.py`` and ``scripts/task_reference.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import textwrap
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mjfleet.tasks.spec import TaskSpec

ROOT = Path(__file__).resolve().parents[1]


def begin_marker(name: str) -> str:
    return f"<!-- BEGIN GENERATED {name}: edit the generator, not this block -->"


def end_marker(name: str) -> str:
    return f"<!-- END GENERATED {name} -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``name``'s markers replaced by ``body`` (the markers stay)."""
    begin, end = begin_marker(name), end_marker(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"no block {name!r}: the text needs the lines {begin!r} and {end!r}")
    return f"{text[: start + len(begin)]}\n{body.strip()}\n{text[stop:]}"


def read_block(text: str, name: str) -> str:
    """The body of ``name``'s block in ``text`` (what :func:`replace_block` put there)."""
    begin, end = begin_marker(name), end_marker(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"no block {name!r}")
    return text[start + len(begin) : stop].strip()


def load_records(path: Path, key: str, required: Sequence[str]) -> dict[str, Any]:
    """A results file whose list ``key`` holds records that each name ``required`` and a machine its ``machines``
    describe; exits with one line naming the first record that does not."""
    results = json.loads(path.read_text())
    kind = key.removesuffix("s")  # "run 3", "table 0"
    for i, record in enumerate(results[key]):
        missing = [name for name in required if record.get(name) in (None, "", [], {})]  # a 0 is a figure
        if missing:
            raise SystemExit(f"{path}: {kind} {i} has no {', '.join(missing)}")
        if record["machine"] not in results["machines"]:
            raise SystemExit(
                f"{path}: {key} {i} names machine {record['machine']!r}, which 'machines' does not describe"
            )
    return results


def duration(seconds: float) -> str:
    """``68 s``, ``4:29``, ``1:00:02``."""
    s = round(seconds)
    if s < 120:
        return f"{s} s"
    hours, rest = divmod(s, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{s // 60}:{s % 60:02d}"


def stale_exit(paths: Sequence[Path], results: Path, script: str) -> None:
    """``render --check``: exit 1 with one line naming the files that disagree with ``results``, else return."""
    if paths:
        names = ", ".join(str(p.relative_to(ROOT)) for p in paths)
        raise SystemExit(f"{names} differ from {results.relative_to(ROOT)}: run uv run python scripts/{script} render")


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: pipes escaped, on one line."""
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip()


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A Markdown table; ``align`` gives each column's alignment (``l`` or ``r``), left by default."""
    rule = ["---:" if align[i : i + 1] == "r" else "---" for i in range(len(header))]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(cell(c) for c in line) + " |" for line in lines)


def markdown_docstring(text: str) -> str:
    """A config docstring (reStructuredText literals) as Markdown on one line."""
    text = re.sub(r"``(.+?)``", r"`\1`", text)
    text = re.sub(r":(?:class|func|data|meth|mod|attr):`~?([\w.]+)`", r"`\1`", text)
    return re.sub(r"\s+", " ", text).strip()


@cache
def _class_docstrings(cls: type) -> dict[str, str]:
    """The attribute docstrings of one class's own body: the string literal that follows each annotated field."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for node, after in zip(body.body, [*body.body[1:], None], strict=True):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[node.target.id] = inspect.cleandoc(after.value.value)
    return found


def field_docstring(cls: type, name: str) -> str:
    """The docstring of dataclass field ``name`` of ``cls``, from the class that declares it (base classes too)."""
    for klass in cls.__mro__:
        if dataclasses.is_dataclass(klass) and name in _class_docstrings(klass):
            return _class_docstrings(klass)[name]
    return ""


def builtin_tasks() -> list[TaskSpec]:
    """The tasks shipped with mjfleet, in their order (installed packages' tasks aside: the pages describe mjfleet)."""
    from mjfleet.tasks.builtin import tasks
    from mjfleet.tasks.spec import TaskSpec

    return [item for item in tasks() if isinstance(item, TaskSpec)]

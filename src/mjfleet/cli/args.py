"""What the entry points share: tyro parsing with one-line errors (a bad flag exits 2 with a single line, not a
boxed report), help without a task, and output to a reader that may stop early (``| head``)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import sys
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import tyro

from mjfleet.errors import UsageError
from mjfleet.tasks.registry import (
    BUILTIN_PACKAGE,
    all_robots,
    all_tasks,
    broken_line,
    broken_packages,
    menagerie_robot,
    package_of,
    robot_package,
)

T = TypeVar("T")


def _joined_paragraphs(text: str) -> str:
    """A field docstring's paragraphs, each on one line: tyro keeps the source's line break before a line that starts
    with a backtick, a parenthesis or a digit, and ``--help`` read as ragged short lines."""
    paragraphs = re.split(r"\n\s*\n", text)
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines() if line.strip()) for p in paragraphs)


def _field_help() -> None:
    """Have tyro take each field's docstring with its paragraphs joined (its private hook; the tyro versions
    pyproject.toml admits have it)."""
    from tyro import _docstrings

    original = _docstrings.get_field_docstring
    if getattr(original, "joins_paragraphs", False):
        return

    def joined(cls: type, field_name: str, markers: Any) -> str | None:
        text = original(cls, field_name, markers)
        return None if text is None else _joined_paragraphs(text)

    joined.joins_paragraphs = True  # type: ignore[attr-defined]
    _docstrings.get_field_docstring = joined  # type: ignore[assignment]


_field_help()
_BOX = re.compile(r"[│╭╮╰╯─━┃┏┓┗┛┡┩╇┳┻╋]+")
_ASCII_RULE = re.compile(r"-{3,}")


def parse(cls: type[T], args: list[str], prog: str, default: T | None = None, description: str | None = None) -> T:
    """``tyro.cli`` whose parse errors raise :class:`UsageError` with tyro's first message line."""
    _refuse_empty_paths(cls, args, default)
    with _usage_errors(prog, args):
        if default is None:
            return tyro.cli(cls, args=args, prog=prog, description=description)
        return tyro.cli(cls, default=default, args=args, prog=prog, description=description)


def parse_known(cls: type[T], args: list[str], prog: str) -> tuple[T, list[str]]:
    """First pass of a two-pass parse (tyro's unknown-args mode): ``cls`` from the flags it declares, and the other
    arguments, in order, for the second pass. ``-h``/``--help`` is left for the second pass, which shows the full
    help; errors are as in :func:`parse`."""
    _refuse_empty_paths(cls, args)
    with _usage_errors(prog, args):
        return tyro.cli(cls, args=args, prog=prog, return_unknown_args=True, add_help=False)


@contextlib.contextmanager
def _usage_errors(prog: str, args: list[str]) -> Iterator[None]:
    """tyro's exits as :class:`UsageError` (one line), help (exit 0) printed to stdout."""
    captured = io.StringIO()
    try:
        with reader_may_leave(), contextlib.redirect_stderr(captured):  # --help prints to stdout
            yield
    except SystemExit as e:
        if e.code in (0, None):
            write_out(captured.getvalue())
            raise
        raise UsageError(summarize_error(captured.getvalue(), args) + f" (see {prog} --help)") from None


def _refuse_empty_paths(cls: type, args: Sequence[str], default: object = None) -> None:
    """:class:`UsageError` for a path option given an empty value (``--finish=``, ``--log-root ''``): tyro reads it as
    ``Path("")``, the working directory, which then "is not a run directory" or becomes the log root unasked."""
    flags = set(_path_flags(type(default) if default is not None else cls, default, ""))
    for at, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name.replace("_", "-") not in flags:
            continue
        given = value if eq else (args[at + 1] if at + 1 < len(args) else None)
        if given is not None and not given.strip():
            raise UsageError(f"{name} is empty: give a path")


def _path_flags(cls: type, value: object, prefix: str) -> Iterator[str]:
    """The flags of ``cls``'s path fields, nested settings included (``--env.motion``): their types as declared, or,
    for nested settings, as ``value`` holds them (a task's own settings class)."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # a forward reference nothing here can resolve: no path flags known
        return
    for f in dataclasses.fields(cls):
        hint: Any = hints.get(f.name)
        flag = f"{prefix}{f.name.replace('_', '-')}"
        if hint is Path or Path in typing.get_args(hint):
            yield f"--{flag}"
            continue
        nested = getattr(value, f.name, None) if value is not None else None
        kind = type(nested) if dataclasses.is_dataclass(nested) else hint
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            yield from _path_flags(kind, nested, f"{flag}.")


def wants_help(argv: list[str]) -> bool:
    """Whether a command line without a task asks for help (``-h`` or ``--help`` anywhere in it)."""
    return any(arg in ("-h", "--help") for arg in argv)


def print_help(cls: type[T], default: T, command: str, description: str) -> NoReturn:
    """``<command> --help`` without a task: every option with ``default``'s values, then the task ids; exit 0."""
    with contextlib.suppress(SystemExit):
        parse(cls, ["--help"], f"{command} <task>", default, description)
    rows = "".join(f"  {line}\n" for line in task_table().splitlines())
    write_out(f"tasks ({command} <task> --help shows the options and defaults of one task):\n{rows}")
    raise SystemExit(0)


def task_table() -> str:
    """Every task id with its one-line description, one per line; a task of an installed package names it."""
    from mjfleet.tasks.locomotion.sources import menagerie_description

    tasks = all_tasks()
    width = max((len(t) for t in tasks), default=0)
    rows = []
    for task_id in tasks:
        package = package_of(task_id)
        origin = f" [package {package}]" if package != BUILTIN_PACKAGE else ""
        what, menagerie = tasks[task_id].description, menagerie_robot(task_id)
        if menagerie is not None:  # a package task on a Menagerie robot: how to get its files, as the built-ins say
            what = menagerie_description(menagerie, what)
        rows.append(f"{task_id:<{width}}  {what}{origin}\n")
    return "".join(rows)


def robot_table() -> str:
    """Every robot record ``--env.robot`` takes by name, one per line with its description (else its file); a record
    of an installed package names it."""
    robots = all_robots()
    width = max((len(name) for name in robots), default=0)
    rows = []
    for name, robot in robots.items():
        package = robot_package(name)
        origin = f" [package {package}]" if package != BUILTIN_PACKAGE else ""
        rows.append(f"{name:<{width}}  {robot.description or robot.source}{origin}\n")
    return "".join(rows)


def broken_package_lines() -> list[str]:
    """One line per installed package whose tasks could not be loaded."""
    return [broken_line(package) for package in broken_packages()]


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Output to stdout inside this block ends the command quietly, exit 0, if the reader stopped early (``| head``).

    What the reader wanted has been delivered; a BrokenPipeError traceback would only alarm. Python's advice:
    point stdout at /dev/null, or the interpreter reports the failed flush again at exit.
    """
    try:
        try:
            yield
        finally:
            sys.stdout.flush()  # the error surfaces here, not at exit
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):  # captured output has no file descriptor
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None


def write_out(text: str) -> None:
    """Write ``text`` to stdout (see :func:`reader_may_leave`)."""
    with reader_may_leave():
        sys.stdout.write(text)


def summarize_error(text: str, args: Sequence[str] = ()) -> str:
    """tyro's boxed error report as one line: the message, plus its suggestions or the expected form; the values
    that followed an unrecognized flag in ``args`` are not listed as options of their own.

    Read back from the text because tyro has no public structured parse error (``console_outputs=False`` drops the
    message, and its error hook is the private ``tyro._errors``); pyproject.toml allows only the tyro versions whose
    report layout tests/test_cli.py and tests/test_fuzz_cli.py checked.
    """
    sections: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        # Without a terminal the box may be drawn in ASCII: drop rules made of dashes and the side bars.
        clean = _ASCII_RULE.sub(" ", _BOX.sub(" ", line).strip().strip("|+ ")).strip()
        if clean:
            current.append(clean)
        elif current:  # a rule or the bottom edge ends a section
            sections.append(current)
            current = []
    if current:
        sections.append(current)
    # tyro titles its report ("Unrecognized options", "Value error") with the gist of the message that follows.
    if sum(len(s) for s in sections) > 1:
        sections[0] = sections[0][1:]
    sections = [s for s in sections if s]
    sections = [s for s in sections if not s[0].lower().startswith(("for full helptext", "usage:"))]
    if not sections:
        return "invalid arguments"
    message = _without_values(" ".join(sections[0]), list(args))
    for section in sections[1:]:
        head = section[0].lower()
        flags = [line.split()[0] for line in section[1:] if line.startswith("--")]
        if head.startswith("perhaps you meant") and flags:
            message += f"; did you mean {_one_of(flags[:3])}?"
        elif head.startswith("argument helptext") and flags:
            expected = next(line for line in section[1:] if line.startswith("--"))
            message += f" (expected {expected})"
    return re.sub(r"\s+", " ", message)


def _without_values(message: str, args: Sequence[str]) -> str:
    """``Unrecognized options: --flag, 10`` as ``Unrecognized option: --flag``: tyro lists the value typed after an
    unknown flag as a second unknown option."""
    match = re.fullmatch(r"Unrecognized options?: (.*)", message)
    if match is None:
        return message
    listed = match.group(1).split(", ")
    values = {
        value for flag, value in zip(args, list(args)[1:], strict=False) if flag in listed and not value.startswith("-")
    }
    unknown = [item for item in listed if item not in values] or listed
    return f"Unrecognized option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}{_hint(unknown[0], args)}"


_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off"})


def _hint(unknown: str, args: Sequence[str]) -> str:
    """Why a word a user typed is no option: a value given to an on/off flag, or a condition's words unquoted."""
    args = list(args)
    if unknown not in args:
        return ""
    at = args.index(unknown)
    flag = args[at - 1] if at > 0 else ""
    if flag.startswith("--") and unknown.lower() in _BOOLEAN_WORDS:
        group, dot, name = flag[2:].rpartition(".")
        return f" ({flag} is an on/off flag and takes no value: {flag} or --{group}{dot}no-{name})"
    if "--stop-when" in args[max(0, at - 2) : at]:
        return " (quote the condition as one word: --stop-when 'success>=0.9')"
    return ""


def _one_of(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"

"""Write docs/reference/cli.md: every option of ``train``, ``play``, ``bench`` and ``list-tasks`` with its type,
default and help, read from the configuration dataclasses the commands parse (fields, type hints, defaults and
field docstrings; no ``--help`` text, so nothing depends on the terminal's width).

    uv run python scripts/cli_reference.py           # rewrite docs/reference/cli.md
    uv run python scripts/cli_reference.py --check   # exit 1 if the checked-in page differs from what it writes now

``tests/test_docs_generated.py`` runs the check: a flag added, renamed or given another default without
regenerating the page fails the suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tyro
from docs_text import ROOT, builtin_tasks, field_docstring, markdown_docstring, table

from mjfleet.cli.bench import BenchConfig
from mjfleet.cli.play import PlayConfig
from mjfleet.envs.config import EnvConfig
from mjfleet.rl.config import AgentConfig
from mjfleet.tasks.spec import TaskSpec
from mjfleet.train.config import TrainConfig

OUT = ROOT / "docs" / "reference" / "cli.md"


@dataclasses.dataclass(frozen=True)
class Option:
    """One command-line option as the reference lists it."""

    flag: str
    """``--env.num-envs``; booleans ``--x, --no-x``."""
    kind: str
    """What it takes: ``INT``, ``FLOAT [FLOAT ...]``, ``one of a, b``, ``flag``; ``, or None`` where None is allowed."""
    default: str
    help: str


def _markers(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``hint`` without ``Annotated``, and the metadata it carried."""
    if typing.get_origin(hint) is typing.Annotated:
        inner, *meta = typing.get_args(hint)
        return inner, tuple(meta)
    return hint, ()


def _spec(meta: tuple[Any, ...]) -> tyro.constructors.PrimitiveConstructorSpec[Any] | None:
    return next((m for m in meta if isinstance(m, tyro.constructors.PrimitiveConstructorSpec)), None)


def _optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) < len(typing.get_args(hint)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True  # noqa: UP007
    return hint, False


def describe_type(hint: Any) -> str:
    """What an option of type ``hint`` takes on the command line."""
    hint, outer = _markers(hint)
    spec = _spec(outer)
    if spec is not None and spec.metavar:
        return spec.metavar.strip("{}").replace("|", ", ")
    hint, optional = _optional(hint)
    hint, inner = _markers(hint)
    meta = outer + inner
    spec = _spec(inner)
    if spec is not None and spec.metavar:
        text = spec.metavar
    elif typing.get_origin(hint) is Literal:
        text = "one of " + ", ".join(str(a) for a in typing.get_args(hint))
    elif typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis and typing.get_origin(_markers(args[0])[0]) is Literal:
            text = "one or more of " + ", ".join(str(a) for a in typing.get_args(_markers(args[0])[0]))
        elif len(args) == 2 and args[1] is Ellipsis:
            one = describe_type(args[0])
            text = f"{one} [{one} ...]"
        else:
            text = " ".join(describe_type(a) for a in args)
    elif hint is bool:
        text = "True or False" if _flag_off(meta) else "flag"
    else:
        text = {int: "INT", float: "FLOAT", str: "STR", Path: "PATH"}.get(hint, getattr(hint, "__name__", str(hint)))
    return f"{text}, or None" if optional else text


def describe_value(value: Any, hint: Any) -> str:
    """A default as it is typed on the command line."""
    _, meta = _markers(_optional(_markers(hint)[0])[0])
    spec = _spec(_markers(hint)[1]) or _spec(meta)
    if value is not None and spec is not None and spec.str_from_instance is not None:
        return " ".join(spec.str_from_instance(value))
    if isinstance(value, tuple):
        return " ".join(describe_value(v, Any) for v in value)
    if value == "":
        return "''"
    return str(value)


def _marker(conf: Any) -> Any:
    """The metadata object of one of tyro's ``tyro.conf`` markers (``Suppress``, ``FlagConversionOff``)."""
    return typing.get_args(conf[int])[1]


def _suppressed(meta: tuple[Any, ...]) -> bool:
    return _marker(tyro.conf.Suppress) in meta


def _flag_off(meta: tuple[Any, ...]) -> bool:
    return _marker(tyro.conf.FlagConversionOff) in meta


def options(obj: Any, prefix: str = "") -> Iterator[Option]:
    """Every option of the dataclass instance ``obj`` (nested dataclasses as ``--a.b``), with ``obj``'s values as
    the defaults."""
    cls = type(obj)
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        name = f"{prefix}{f.name.replace('_', '-')}"
        _, meta = _markers(hints[f.name])
        if _suppressed(meta):
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from options(value, f"{name}.")
            continue
        hint = hints[f.name]
        help_text = markdown_docstring(field_docstring(cls, f.name))
        if _markers(hint)[0] is bool and not _flag_off(meta):
            no = f"{prefix}no-{f.name.replace('_', '-')}"
            yield Option(f"--{name}, --{no}", "flag", str(value), help_text)
        else:
            yield Option(f"--{name}", describe_type(hint), describe_value(value, hint), help_text)


def options_table(rows: list[Option]) -> str:
    return table(
        ["option", "takes", "default", "what it does"],
        ([f"`{o.flag}`", o.kind, f"`{o.default}`" if o.default else "(none)", o.help] for o in rows),
    )


def differing(spec: TaskSpec) -> list[tuple[str, str, str]]:
    """``(flag, default, default on the CPU)`` of each option whose default for this task differs from its config
    class's own default (the tables above)."""
    generic = {o.flag: o.default for o in options(TrainConfig(env=type(spec.env_cfg())(), agent=AgentConfig()))}
    gpu = {o.flag: o.default for o in options(TrainConfig(env=spec.env_cfg(), agent=spec.agent_cfg()))}
    cpu_cfg = TrainConfig(env=spec.env_defaults(True), agent=spec.agent_defaults(True))
    cpu = {o.flag: o.default for o in options(cpu_cfg)}
    return [(flag, gpu[flag], cpu[flag]) for flag in gpu if gpu[flag] != generic[flag] or cpu[flag] != gpu[flag]]


def _task_section(spec: TaskSpec) -> str:
    rows = differing(spec)
    if not spec.has_cpu_defaults:
        body = table(["option", "default"], ([f"`{flag}`", f"`{gpu}`"] for flag, gpu, _ in rows))
        return f"### {spec.id}\n\n{body}\n"
    body = table(
        ["option", "default", "on the CPU"],
        ([f"`{flag}`", f"`{gpu}`", f"`{cpu}`" if cpu != gpu else "same"] for flag, gpu, cpu in rows),
    )
    note = (
        "A run on the CPU (`--gpu-ids None`, or `auto` without a GPU) takes the defaults of the last column;"
        f" `train {spec.id} --gpu-ids None --help` shows them.\n\n"
    )
    return f"### {spec.id}\n\n{note}{body}\n"


def _family_rows(config: type[EnvConfig]) -> list[Option]:
    """The ``--env.*`` options a task family's config adds to the generic ones."""
    generic = {o.flag for o in options(EnvConfig(), "env.")}
    return [o for o in options(config(), "env.") if o.flag not in generic]


def render() -> str:
    specs = builtin_tasks()
    top = [o for o in options(TrainConfig(env=EnvConfig(), agent=AgentConfig())) if not o.flag.startswith("--env.")]
    run_options = [o for o in top if not o.flag.startswith("--agent.")]
    agent_options = [o for o in top if o.flag.startswith("--agent.")]
    env_options = list(options(EnvConfig(), "env."))
    families: dict[type[EnvConfig], list[str]] = {}
    for spec in specs:
        families.setdefault(type(spec.env_cfg()), []).append(spec.id)
    family_sections = "\n".join(
        f"### `{config.__name__}`: {', '.join(ids)}\n\n{markdown_docstring(config.__doc__ or '')}\n\n"
        f"{options_table(_family_rows(config))}\n"
        for config, ids in families.items()
    )
    play_options = list(options(PlayConfig(env=EnvConfig())))
    bench_options = list(options(BenchConfig()))
    return f"""# Command-line reference

Every option of the four commands, with what it takes, its default and what it does. This page is generated by
`scripts/cli_reference.py` from the configuration classes the commands parse (`uv run python
scripts/cli_reference.py` rewrites it); a test fails when it differs from the code. On the command line,
`<command> <task> --help` prints the same options with the defaults of that task.

## list-tasks

`list-tasks` prints every task id with its one-line description. It takes no options. A task whose robot files
are not on this machine says so after its description, with the command that fetches them.

## train

`train <task> [OPTIONS]` trains `<task>`. `train --help` (without a task) prints the generic options and defaults
below, then the task ids; `train <task> --help` prints that task's options with its own defaults.

The defaults below are generic: **each task sets its own** environment and PPO defaults (the
[task defaults](#defaults-of-each-task) further down), and the environment options depend on the task's family.

### Options of every run

{options_table(run_options)}

### Environment (`--env.*`): every task

{options_table(env_options)}

### PPO and the training loop (`--agent.*`)

{options_table(agent_options)}

## Environment options of each task family

{family_sections}
## Defaults of each task

Where a task's default differs from the tables above (its family's table for `--env.*`).

{"".join(_task_section(spec) + chr(10) for spec in specs).strip()}

## play

`play <task> [OPTIONS]` evaluates a policy (the newest run of the task unless `--checkpoint` names one) and prints
one JSON line, or shows it live with `--viewer`. Its `--env.*` options are `train`'s, with the defaults of the run
that trained the checkpoint (else the task's), and `--env.num-envs` defaults to `--num-episodes`.

{options_table([o for o in play_options if not o.flag.startswith("--env.")])}

## bench

`bench <task> [OPTIONS]` measures env-steps/s of raw physics, of the full environment step and of PPO training, per
physics backend.

{options_table(bench_options)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="Write docs/reference/cli.md from the configuration classes.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the checked-in page is not what it writes")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            sys.exit(f"{OUT.relative_to(ROOT)} is out of date: run uv run python scripts/cli_reference.py")
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
